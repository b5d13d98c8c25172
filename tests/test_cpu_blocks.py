"""The cpu backend's proven version of a lockstep kernel (vyre_cpu/blocks.py): a plain
kernel whose float-carrying loop runs once per workgroup runs, where its assumptions
hold (every index inside its buffer, no u32/i32 index arithmetic that wraps), in blocks
of lanes along the axis its accesses step on, without bounds checks or lane masks; where
one fails, in workgroups as before. Either way the bytes are the reference's: the same
programs run with lengths that keep every access inside, with ones that send some past
the end (loads of 0, dropped stores), and with an index that wraps below 0."""

from __future__ import annotations

import functools
import math
import re
import time
from typing import Any

import numpy as np
import pytest
import vyre_cpu.backend
from vyre_cpu import blocks, codegen

import vyre_core as vyre
from vyre_core import cancel, i32
from vyre_core.config import DispatchConfig
from vyre_core.ir import (
    Access,
    Assign,
    Atomic,
    AtomicOp,
    Binary,
    BinOp,
    Buffer,
    Cast,
    DType,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Program,
    Return,
    Store,
    Var,
)
from vyre_workers.backend_host import BackendHost

U32, F32 = DType.U32, DType.F32
GX, GY, GZ = (InvocationId(IdKind.GLOBAL, axis) for axis in range(3))


def _op(op: BinOp, a, b):
    return Binary(op, a, b)


def _dim(k: int):
    return Load("dims", Lit(U32, k))


def _guard(axes: int) -> If:
    """The launch guard ``vyre_core.kernels`` writes: ``return`` past ``dims``."""
    past = None
    for axis in range(axes):
        test = _op(BinOp.GE, InvocationId(IdKind.GLOBAL, axis), _dim(axis))
        past = test if past is None else _op(BinOp.LOGICAL_OR, past, test)
    return If(past, (Return(),), ())


def _acc_step(product) -> Assign:
    return Assign("acc", _op(BinOp.ADD, Var("acc"), product))


def matmul(shift: int = 0, guard: bool = True, masked: bool = False,
           extra_return: bool = False, out_count: int = 4096) -> Program:
    """``out[i * m + j] = 0.5 + sum_k a[i * n + k + shift] * b[k * m + j]`` (``dims``:
    rows, m, n): gemm's loop. ``masked``: only where ``i % 3 < 2`` (the loop under a
    branch: a mask per branch); ``extra_return``: lanes with ``j == 3`` return first."""
    i, j = Var("i"), Var("j")
    a_index = _op(BinOp.ADD, _op(BinOp.MUL, i, _dim(2)), Var("k"))
    if shift < 0:
        a_index = _op(BinOp.SUB, a_index, Lit(U32, -shift))
    elif shift:
        a_index = _op(BinOp.ADD, a_index, Lit(U32, shift))
    loop = Loop("k", Lit(U32, 0), _dim(2), (_acc_step(_op(BinOp.MUL, Load("a", a_index), Load(
        "b", _op(BinOp.ADD, _op(BinOp.MUL, Var("k"), _dim(1)), j)))),))
    if masked:
        loop = If(_op(BinOp.LT, _op(BinOp.REM, i, Lit(U32, 3)), Lit(U32, 2)), (loop,), ())
    body = [_guard(2)] if guard else []
    if extra_return:
        body.append(If(_op(BinOp.EQ, GY, Lit(U32, 3)), (Return(),), ()))
    body += [Let("i", GX), Let("j", GY), Let("acc", Lit.of(F32, 0.5)), loop,
             Store("out", _op(BinOp.ADD, _op(BinOp.MUL, i, _dim(1)), j), Var("acc"))]
    return Program((Buffer("a", 0, F32, Access.READ), Buffer("b", 1, F32, Access.READ),
                    Buffer("dims", 2, U32, Access.UNIFORM, 3),
                    Buffer("out", 3, F32, Access.OUTPUT, out_count)), (8, 8),
                   tuple(body)).check()


def gather() -> Program:
    """``out[i] = sum_j a[i * n + j] * x[j]`` (``dims``: rows, n): atax's ``A x``, the
    block's lanes across rows."""
    i = Var("i")
    return Program((Buffer("a", 0, F32, Access.READ), Buffer("x", 1, F32, Access.READ),
                    Buffer("dims", 2, U32, Access.UNIFORM, 2),
                    Buffer("out", 3, F32, Access.OUTPUT, 1024)), (64,), (
        _guard(1), Let("i", GX), Let("acc", Lit.of(F32, 0.0)),
        Loop("j", Lit(U32, 0), _dim(1), (_acc_step(_op(BinOp.MUL, Load(
            "a", _op(BinOp.ADD, _op(BinOp.MUL, i, _dim(1)), Var("j"))), Load("x", Var("j")))),)),
        Store("out", i, Var("acc")))).check()


def two_chains() -> Program:
    """mvt's loop: ``acc1 += a[i, j] * x[j]`` (lanes across rows) and ``acc2 += a[j, i] *
    x[j]`` (along rows) in one loop, ``n`` the side of ``a`` (``dims``: n)."""
    i, j, n = Var("i"), Var("j"), _dim(0)
    return Program((Buffer("a", 0, F32, Access.READ), Buffer("x", 1, F32, Access.READ),
                    Buffer("dims", 2, U32, Access.UNIFORM, 1),
                    Buffer("out", 3, F32, Access.OUTPUT, 2048)), (64,), (
        _guard(1), Let("i", GX), Let("acc1", Lit.of(F32, 1.0)), Let("acc2", Lit.of(F32, 2.0)),
        Loop("j", Lit(U32, 0), n, (
            Assign("acc1", _op(BinOp.ADD, Var("acc1"), _op(BinOp.MUL, Load(
                "a", _op(BinOp.ADD, _op(BinOp.MUL, i, n), j)), Load("x", j)))),
            Assign("acc2", _op(BinOp.ADD, Var("acc2"), _op(BinOp.MUL, Load(
                "a", _op(BinOp.ADD, _op(BinOp.MUL, j, n), i)), Load("x", j)))))),
        Store("out", i, Var("acc1")),
        Store("out", _op(BinOp.ADD, i, n), Var("acc2")))).check()


def cube() -> Program:
    """A 3-D kernel whose value reads its local and workgroup ids: ``out[(i * Y + j) * Z
    + k] = lid(1) + wid(2) + sum_t a[t * Z + k]`` (``dims``: X, Y, Z, T)."""
    start = _op(BinOp.ADD, Cast(F32, InvocationId(IdKind.LOCAL, 1)),
                Cast(F32, InvocationId(IdKind.WORKGROUP, 2)))
    index = _op(BinOp.ADD, _op(BinOp.MUL, _op(BinOp.ADD, _op(BinOp.MUL, GX, _dim(1)), GY),
                               _dim(2)), GZ)
    return Program((Buffer("a", 0, F32, Access.READ), Buffer("dims", 1, U32, Access.UNIFORM, 4),
                    Buffer("out", 2, F32, Access.OUTPUT, 2048)), (4, 4, 4), (
        _guard(3), Let("acc", start),
        Loop("t", Lit(U32, 0), _dim(3), (_acc_step(Load(
            "a", _op(BinOp.ADD, _op(BinOp.MUL, Var("t"), _dim(2)), GZ))),)),
        Store("out", index, Var("acc")))).check()


def _inputs(program: Program, dims: tuple[int, ...], lengths: dict[str, int]) -> list:
    rng = np.random.default_rng(sum(dims) + sum(lengths.values()))
    out = []
    for b in program.inputs:
        if b.name == "dims":
            out.append(np.array(dims, np.uint32))
        else:  # (small integers: sums of products are exact in f32 either way)
            out.append(rng.integers(-8, 9, lengths[b.name]).astype(np.float32) / 4)
    return out


#: (program, dims, lengths of the read buffers, grid): whether every access lies inside
#: decides which version runs.
CASES = {
    "matmul inside": (matmul(), (20, 30, 7), {"a": 140, "b": 210}, (3, 4, 1)),
    "matmul grid short of dims": (matmul(), (50, 30, 7), {"a": 350, "b": 210}, (3, 2, 1)),
    "matmul a past its end": (matmul(), (20, 30, 7), {"a": 139, "b": 210}, (3, 4, 1)),
    "matmul out past its end": (matmul(out_count=599), (20, 30, 7), {"a": 140, "b": 210},
                                (3, 4, 1)),
    "matmul index wraps below 0": (matmul(shift=-1), (20, 30, 7), {"a": 140, "b": 210},
                                   (3, 4, 1)),
    "matmul shifted inside": (matmul(shift=1), (20, 30, 7), {"a": 141, "b": 210}, (3, 4, 1)),
    "matmul without a guard": (matmul(guard=False), (24, 32, 5), {"a": 120, "b": 160},
                               (3, 4, 1)),
    "matmul masked": (matmul(masked=True), (21, 29, 6), {"a": 126, "b": 174}, (3, 4, 1)),
    "matmul with another return": (matmul(extra_return=True), (20, 30, 7),
                                   {"a": 140, "b": 210}, (3, 4, 1)),
    "matmul many blocks a row": (matmul(out_count=3 * 700), (3, 700, 4),
                                 {"a": 12, "b": 2800}, (1, 88, 1)),
    "gather": (gather(), (700, 9), {"a": 6300, "x": 9}, (11, 1, 1)),
    "gather x short": (gather(), (300, 9), {"a": 2700, "x": 8}, (5, 1, 1)),
    "cube": (cube(), (5, 6, 7, 3), {"a": 21}, (2, 2, 2)),
    "two chains": (two_chains(), (30,), {"a": 900, "x": 30}, (1, 1, 1)),
    "two chains x short": (two_chains(), (30,), {"a": 900, "x": 29}, (1, 1, 1)),
}


@pytest.fixture(scope="module")
def host():
    with BackendHost(vyre_cpu.backend) as host:
        yield host


def _block(source: str) -> str:
    return source.split("def block(")[1].split("\n\n\n")[0]


@pytest.mark.fast
def test_a_loop_kernel_in_lockstep_gets_a_version_in_blocks_without_checks_or_masks():
    block = _block(codegen.generate(matmul()).source)
    assert "load_in(" in block and "store_f32_in(" in block
    assert "load(" not in block and "store_f32(" not in block and "alive" not in block
    assert "(first + l)" in block  # (j is the lane's id, not a lane array: b[k, j] is
    assert not re.search(r"v\d+_j = np\.zeros", block)  # seen as consecutive lanes)
    assert f"- {blocks.UNROLL - 1}, {blocks.UNROLL}):" in block  # (unrolled and jammed)


@pytest.mark.fast
def test_chains_that_share_no_lane_array_run_in_lane_loops_of_their_own():
    """After unrolling, acc1's four steps in one lane loop, acc2's in another."""
    block = _block(codegen.generate(two_chains()).source)
    head = f"- {blocks.UNROLL - 1}, {blocks.UNROLL}):"
    unrolled = block.split(head)[1].split("\n        for ")[0]
    loops = unrolled.split("for l in range(count):")[1:]
    assert len(loops) == 2, block
    # (each lane array held in a variable for the lane's pass: _in_registers)
    assert [loop.count("_acc1_l = np.") for loop in loops] == [blocks.UNROLL, 0]
    assert [loop.count("_acc2_l = np.") for loop in loops] == [0, blocks.UNROLL]


@vyre.kernel(workgroup=(256,))
def _row_max(x, out, n: i32):
    """lib.max's loop along rows, a lane a row (each load a gather: unrolled and jammed)."""
    g = vyre.global_id(0)
    m = x[g * n]
    z = m - m
    for j in range(1, n):
        v = x[g * n + j]
        m = v if v > m else m
        z = z + v if v == 0 else z
    out[g] = m + z


@pytest.mark.fast
def test_a_lane_loop_reads_and_writes_each_lane_array_once_and_drops_unread_ones():
    """A maximum along rows: in its unrolled lane loop the running maximum ``m`` and the
    sum ``z`` are read once and written once (held in variables between: a store each
    pass made LLVM read the other again, and a kept value a masked store), and the
    loop's lets ``v`` are never stored (nothing reads them after). Fails before
    session 22."""
    x, out = np.zeros(256 * 64, np.float32), np.zeros(256, np.float32)
    program = _row_max.program(dim=256, args=(x, out, 64))
    block = _block(codegen.generate(program).source)
    head = f"- {blocks.UNROLL - 1}, {blocks.UNROLL}):"
    loop = block.split(head)[1].split("\n        for ")[0].split("for l in range(count):")[1]
    for name in ("m", "z"):
        assert len(re.findall(rf"v\d+_{name}\[l\]", loop)) == 2, loop
        assert len(re.findall(rf"v\d+_{name}_l = np\.float32\(", loop)) == blocks.UNROLL
    assert not re.search(r"v\d+_v_\d\[l\] =", block)


@pytest.mark.fast
@pytest.mark.parametrize("kernel", ["sum_pass", "max_pass", "dot_pass", "arg_next"])
def test_a_loop_whose_every_load_steps_one_lane_at_a_time_runs_a_pass_a_lane_loop(kernel):
    """vyre.lib's passes (each load of the chunk loop consecutive from lane to lane): one
    pass of the loop a lane loop, no unrolling (four passes of a lane's running sum in
    one lane loop were a chain of dependent vector adds: lib.sum's first pass 5.5-6.1
    ms on one thread, 2.4-2.8 ms not unrolled). Fails before session 39."""
    from vyre_core.lib import passes

    n = 1 << 18
    arrays = {"sum_pass": 2, "max_pass": 2, "dot_pass": 3, "arg_next": 4}[kernel]
    args = [np.zeros(n, np.float32) if i % 2 == 0 or kernel != "arg_next" else
            np.zeros(n, np.int32) for i in range(arrays)]
    program = getattr(passes, kernel).program(
        dim=(256, 4, 1), args=(*args, n, 1024, 1, 0, passes.BLOCK, 256, 256))
    if program.constants:  # (arg_next: argmin's order)
        program = program.specialize({"GREATER": False})
    block = _block(codegen.generate(program).source)
    assert "load_in(" in block and "(first + l)" in block  # (proven, consecutive)
    assert f"- {blocks.UNROLL - 1}, {blocks.UNROLL}):" not in block, block


@pytest.mark.fast
@pytest.mark.parametrize("program", [
    matmul(extra_return=True),  # (a lane that returns needs the masks)
    Program((Buffer("x", 0, F32, Access.READ), Buffer("n", 1, U32, Access.READ_WRITE, 1),
             Buffer("out", 2, F32, Access.OUTPUT, 64)), (32,), (  # (atomics: in order)
        Let("acc", Lit.of(F32, 0.0)),
        Loop("k", Lit(U32, 0), Lit(U32, 4), (
            _acc_step(Load("x", Var("k"))),
            Let("s", Atomic(AtomicOp.ADD, "n", Lit(U32, 0), Lit(U32, 1), None)))),
        Store("out", GX, Var("acc")))).check(),
    Program((Buffer("x", 0, F32, Access.READ),  # (a bound that differs along a block)
             Buffer("out", 1, F32, Access.OUTPUT, 64)), (32,), (
        Let("acc", Lit.of(F32, 0.0)),
        Loop("k", Lit(U32, 0), InvocationId(IdKind.WORKGROUP, 0), (
            _acc_step(Load("x", Var("k"))),)),
        Store("out", GX, Var("acc")))).check(),
], ids=["return", "atomics", "bound by workgroup id"])
def test_no_blocks_where_a_lane_returns_atomics_apply_in_order_or_a_bound_differs(program):
    source = codegen.generate(program).source
    assert "def workgroup(" in source and "def block(" not in source


def _arrays(program: Program, inputs: list) -> list[np.ndarray]:
    given = iter(inputs)
    return [np.zeros(b.count, np.float32) if b.access is Access.OUTPUT else next(given)
            for b in program.buffers]


@functools.cache
def _compiled_alone(source: str, version: str) -> dict[str, Any]:
    """``source``'s kernel with the other version's function ("block" or "workgroup") made
    to do nothing; kept, so that cases of one program compile it once."""
    from numba import njit

    @njit
    def nothing(*args: Any) -> None:
        pass

    space: dict[str, Any] = {}
    exec(compile(source.replace("cache=True", "cache=False"), f"<{version} alone>", "exec"),
         space)
    space["workgroup" if version == "block" else "block"] = nothing
    return space


@pytest.mark.parametrize("keep, case", [
    ("block", "matmul inside"), ("workgroup", "matmul a past its end"),
    ("block", "gather"), ("workgroup", "matmul index wraps below 0"),
])
def test_each_version_runs_where_it_should_and_alone_gives_the_reference_bytes(keep, case):
    """The kernel with the other version's function made to do nothing: where the
    assumptions hold, the blocks alone write the reference's bytes (and the workgroups
    alone nothing); where one fails, the workgroups alone do (and the blocks nothing)."""
    from vyre_reference import run

    program, dims, lengths, grid = CASES[case]
    inputs = _inputs(program, dims, lengths)
    want, = run(program, inputs, grid=grid)
    for version in ("block", "workgroup"):
        space = _compiled_alone(codegen.generate(program).source, version)
        arrays = _arrays(program, inputs)
        if space["kernel_serial"](*grid, cancel.words(), *arrays):  # (as the backend
            space["fallback_serial"](*grid, cancel.words(), *arrays)  # runs them)
        got = arrays[-1]
        if version == keep:
            assert got.tobytes() == want.tobytes(), (version, case)
        else:
            assert not got.any(), (version, case)


@pytest.mark.parametrize("case", CASES)
def test_the_cpu_backend_gives_the_reference_bytes_in_blocks_or_workgroups(host, case):
    from vyre_reference import run

    program, dims, lengths, grid = CASES[case]
    assert ("def block(" in codegen.generate(program).source) == ("return" not in case)
    inputs = _inputs(program, dims, lengths)
    want, = run(program, inputs, grid=grid)
    got, = host.dispatch(program, inputs, DispatchConfig(grid_override=grid))
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("name", ["gemm", "atax", "bicg", "mvt", "covariance",
                                  "correlation"])
def test_the_suites_loop_kernels_give_the_reference_bytes_past_one_block(host, name):
    """Each launch of the suite's loop kernels at a size whose rows span more than one
    block (``blocks.LANES``), on cpu and on the reference, each launch on the arrays the
    reference left (so a difference is that launch's)."""
    from vyre_benchmarks.suite import problems, vyre_kernels
    from vyre_reference import run

    problem = problems.PROBLEMS[name]
    data = problem.make(blocks.LANES + 40 if name in ("atax", "bicg", "mvt") else 70)
    seen = []

    def launch(kern, dim, *args):
        plan = kern.plan(dim, args)
        program = plan.program
        dims = (*dim, 1, 1)[:3] if isinstance(dim, tuple) else (dim, 1, 1)
        grid = tuple(math.ceil(d / w) for d, w in zip(dims, program.workgroup, strict=True))
        want = run(program, plan.inputs, grid=grid)
        got = host.dispatch(program, plan.inputs, DispatchConfig(grid_override=grid))
        assert [g.tobytes() for g in got] == [w.tobytes() for w in want], kern.__name__
        for target, value in zip(plan.out, want, strict=True):
            target[:] = value.view(target.dtype)
        plan.fill()
        seen.append("def block(" in codegen.generate(program).source)

    problem.run(vyre_kernels, launch, {k: v.copy() if isinstance(v, np.ndarray) else v
                                       for k, v in data.items()})
    assert any(seen)


def test_compiling_the_checked_version_is_not_counted_as_the_kernels_run_time(monkeypatch):
    """The first launch whose proven kernel leaves workgroups to the checked version
    compiles that version inside the launch's timed window: counted as run time, it made a
    768-invocation kernel look 1.6 ms an invocation, and the next launch compiled and ran
    the parallel version (8 s on a loaded machine) for microseconds of work. A fallback
    made to spend 0.5 s of this thread's CPU first must not show in the time recorded."""
    program, dims, lengths, grid = CASES["matmul a past its end"]
    _, inside_dims, inside_lengths, _ = CASES["matmul inside"]
    config = DispatchConfig(grid_override=grid)
    pipeline = vyre_cpu.backend.Pipeline(program, config)
    for _ in range(2):  # (a launch is timed from its second run on one thread)
        pipeline.dispatch(_inputs(program, inside_dims, inside_lengths), config)
    compiled = pipeline.compiled
    checked = compiled.fallback

    def slow_to_compile(threaded: bool) -> Any:
        until = time.thread_time() + 0.5
        while time.thread_time() < until:
            pass
        return checked(threaded)

    monkeypatch.setattr(compiled, "fallback", slow_to_compile)
    pipeline.dispatch(_inputs(program, dims, lengths), config)
    assert 0 < compiled.seconds_each * math.prod(grid) * compiled.layout.lanes < 0.25
