"""The cpu backend's proven version of a kernel with workgroup memory or barriers
(vyre_cpu/lockstep_proven.py): the lockstep workgroup written again with lanes in nested
loops, ids in 64 bits and accesses proven inside unchecked, run for a dispatch whose
assumptions hold, the lockstep code otherwise. Which one ran is shown by compiling the
kernel with the other one's call taken out: it gives the reference's bytes only if the
version kept ran. The tiled matmul runs on floats that round (not the example's small
integers), so a product or a sum in another order would show."""

from __future__ import annotations

import functools
import importlib
import re
import types

import numpy as np
import pytest
import vyre_cpu.backend
from vyre_cpu import codegen, lockstep_proven

from vyre_core import cancel
from vyre_core.config import DispatchConfig
from vyre_core.ir import (
    Access,
    Assign,
    Barrier,
    Binary,
    BinOp,
    Buffer,
    DType,
    IdKind,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Program,
    Store,
    Var,
)
from vyre_workers.backend_host import BackendHost

U32, F32 = DType.U32, DType.F32


@pytest.fixture(scope="module")
def host():
    with BackendHost(vyre_cpu.backend) as host:
        yield host


def _matmul_plan(host, m: int, k: int, n: int, ktile: int):
    """The tiled matmul example's launch (program as it runs, bound inputs, grid) on
    random f32 matrices, and the reference interpreter's bytes for it."""
    from vyre_reference import run

    example = importlib.import_module("vyre_examples.matmul").build(m, k, n)
    rng = np.random.default_rng(m * 10000 + k * 100 + n)
    a = rng.standard_normal(m * k).astype(np.float32)
    b = rng.standard_normal(k * n).astype(np.float32)
    inputs = [a, b, *example.inputs[2:]]
    config = example.config.replace(constants=(("KTILE", ktile),))
    plan = host.plan(example.program, inputs, config)
    want, = run(plan.program, plan.inputs, grid=plan.grid)
    return plan, want


@functools.cache
def _compiled_only(source: str, keep: str) -> types.ModuleType:
    """``source``'s module with only ``keep``'s workgroup function called; kept, so that
    the tests whose launches share a program (KTILE 16, every shape) compile it once."""
    other = "workgroup" if keep == "proven" else "workgroup_proven"
    source, count = re.subn(rf"^            {other}\(wx, wy, wz, .*\)$", "            pass",
                            source, flags=re.M)
    assert count == 2  # (the parallel kernel and its serial twin)
    module = types.ModuleType("vyre_cpu_test_kernel")
    exec(compile(source.replace("cache=True", "cache=False"), module.__name__, "exec"),
         module.__dict__)
    return module


def _run_only(plan, source: str, keep: str) -> np.ndarray:
    """The output of ``source``'s kernel with only the ``keep`` workgroup function
    ("proven" or "lockstep") left to run: the other's call is a ``pass``, so the
    workgroups it would have run write nothing."""
    module = _compiled_only(source, keep)
    storage = [b for b in plan.program.buffers if b.access is not Access.WORKGROUP]
    names = [b.name for b in plan.program.inputs]
    arrays = [np.zeros(plan.lengths[b.name], b.dtype.storage_np) if b.access is Access.OUTPUT
              else np.array(plan.inputs[names.index(b.name)]) for b in storage]
    if module.kernel_serial(*plan.grid, cancel.words(), *arrays):  # (workgroups left:
        module.fallback_serial(*plan.grid, cancel.words(), *arrays)  # as the backend does)
    return arrays[[b.name for b in storage].index("c")]


@pytest.mark.fast
def test_the_tiled_matmul_gets_a_proven_workgroup_whose_tile_loop_has_no_checks():
    """Fails on main before this change: there was no ``workgroup_proven``."""
    example = importlib.import_module("vyre_examples.matmul").build(64, 64, 64)
    host = BackendHost(vyre_cpu.backend)
    plan = host.plan(example.program, example.inputs, example.config)
    source = codegen.generate(plan.program).source
    proven = source.split("def workgroup_proven(")[1].split("\ndef workgroup(")[0]
    assert "for lx in range(ex):" in proven and "load_in(" in proven
    for checked in ("load(", "store_f32(", "add_i32(", "mul_i32(", "u32_to_i32("):
        assert checked not in proven
    assert "if proven:" in source.split("def kernel(")[1]


@pytest.mark.parametrize("ktile", [16, 1])  # (tiles of 16 as below; of depth 1)
def test_where_the_tiles_cover_the_matrices_the_proven_version_runs_with_the_reference_bytes(
        host, ktile):
    plan, want = _matmul_plan(host, 64, 48, 32, ktile)
    source = codegen.generate(plan.program).source
    assert _run_only(plan, source, "proven").tobytes() == want.tobytes()
    got, = host.dispatch(plan.program, plan.inputs, DispatchConfig(grid_override=plan.grid))
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("ktile", [16, 12])  # (passes of 8: two, and one with 4 left)
def test_the_proven_tile_loop_runs_its_passes_unrolled_in_each_lane_with_the_reference_bytes(
        host, ktile):
    """A tile's products (a loop run once per workgroup, lets and one float sum, no
    store) run ``UNROLL_WORKGROUP`` passes at a time in each lane, its ``j`` a plain
    variable of each pass: a lane's sum stays in a register across them. Before, every
    pass ran all the lanes and read and wrote each lane's sum in memory."""
    from vyre_cpu.blocks import UNROLL_WORKGROUP as times

    plan, want = _matmul_plan(host, 64, 48, 32, ktile)
    source = codegen.generate(plan.program).source
    proven = source.split("def workgroup_proven(")[1].split("\ndef workgroup(")[0]
    unrolled = proven.split(f" - {times - 1}, {times}):")[1].split("\n                for ")[0]
    lanes = unrolled.split("for lx in range(ex):")[1]
    assert lanes.count("add_f32(") == times
    assert re.search(r"v\d+_j_0 = np\.int64\(", lanes) and "_j_0[l]" not in lanes
    assert _run_only(plan, source, "proven").tobytes() == want.tobytes()


@pytest.mark.parametrize("shape", [(16, 16, 16), (17, 33, 5), (64, 40, 32)])
def test_where_an_assumption_fails_the_lockstep_code_runs_with_the_reference_bytes(host, shape):
    """A single tile of depth (a tile count below 2, which the proven loop bound
    assumes), a ragged everything, a depth of 40 in tiles of 16 (the last tile's loads
    guarded in every workgroup): the proven version alone would leave the product
    unwritten."""
    plan, want = _matmul_plan(host, *shape, 16)
    source = codegen.generate(plan.program).source
    assert not _run_only(plan, source, "proven").any()
    assert _run_only(plan, source, "lockstep").tobytes() == want.tobytes()
    got, = host.dispatch(plan.program, plan.inputs, DispatchConfig(grid_override=plan.grid))
    assert got.tobytes() == want.tobytes()


@pytest.mark.fast
def test_a_let_of_ids_is_rematerialized_unless_a_loop_variable_hides_it():
    lx = InvocationId(IdKind.LOCAL, 0)
    body = (Let("i", lx),
            Loop("j", Lit(U32, 0), Lit(U32, 4), (
                Store("out", Var("i"), Load("a", Var("i"))),
                Loop("i", Lit(U32, 0), Lit(U32, 2), (Store("out", Var("i"), Lit(F32, 0)),)),
            )),
            Barrier())
    program = Program((Buffer("a", 0, F32, Access.READ), Buffer("out", 1, F32, Access.OUTPUT, 8)),
                      (8, 1, 1), body)
    out = lockstep_proven.rematerialized(program).body
    assert not any(isinstance(s, Let) for s in out)
    first, inner = out[0].body
    assert first == Store("out", lx, Load("a", lx))
    assert inner.body == (Store("out", Var("i"), Lit(F32, 0)),)


@pytest.mark.fast
def test_a_let_assigned_again_or_of_a_variable_stays_a_variable():
    lx = InvocationId(IdKind.LOCAL, 0)
    body = (Let("i", lx), Let("k", Binary(BinOp.ADD, Var("i"), Lit(U32, 1))),
            Let("acc", lx), Assign("acc", Binary(BinOp.ADD, Var("acc"), Var("k"))),
            Store("out", lx, Var("acc")))
    program = Program((Buffer("out", 0, U32, Access.OUTPUT, 8),), (8, 1, 1), body)
    out = lockstep_proven.rematerialized(program).body
    assert [s.name for s in out if isinstance(s, Let)] == ["acc"]
    assert out[-2] == Assign("acc", Binary(BinOp.ADD, Var("acc"), Binary(BinOp.ADD, lx,
                                                                         Lit(U32, 1))))


def test_workgroups_inside_the_matrices_run_proven_and_those_at_the_ragged_edge_do_not(host):
    """50 rows in four tiles of 16: the check is made per workgroup, so the first three
    rows of tiles run the proven version and the last (rows 48 to 63, two of them real)
    the lockstep code."""
    plan, want = _matmul_plan(host, 50, 32, 48, 16)
    source = codegen.generate(plan.program).source
    proven = _run_only(plan, source, "proven").reshape(50, 48)
    lockstep = _run_only(plan, source, "lockstep").reshape(50, 48)
    want = want.reshape(50, 48)
    assert proven[:48].tobytes() == want[:48].tobytes() and not proven[48:].any()
    assert lockstep[48:].tobytes() == want[48:].tobytes() and not lockstep[:48].any()
    got, = host.dispatch(plan.program, plan.inputs, DispatchConfig(grid_override=plan.grid))
    assert got.tobytes() == want.tobytes()
