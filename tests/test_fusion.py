"""Fusing consecutive sequence steps: the legality rule names every reason two steps
cannot share a dispatch; the fused sequence gives the unfused one's bytes on every
backend, and shadow accepts a fused candidate against its unfused reference."""

from __future__ import annotations

import numpy as np
import pytest

from vyre_core import DispatchConfig, Driver, SequenceBuilder, ir
from vyre_core.errors import InvalidInputError
from vyre_core.sequence import Sequence
from vyre_core.sequence.fusion import fuse, fuse_all, why_not
from vyre_core.shadow import ShadowCase, shadow

N = 1000


def elementwise(fn, inputs=("x",), out="out", workgroup=(64,), dtype=ir.f32,
                index=None) -> ir.Program:
    """out[i] = fn(in[i], ...) guarded by the first input's length; ``index`` may read
    the inputs elsewhere (a neighbour: not fusable)."""
    k = ir.Kernel(workgroup=workgroup)
    bufs = [k.read(name, dtype) for name in inputs]
    o = k.output(out, dtype, N)
    i = k.let("i", ir.global_id())
    at = i if index is None else index(i)
    with k.if_(i < bufs[0].len):
        o[i] = fn(*[b[at] for b in bufs])
    return k.build()


def chain(*programs: ir.Program, grids=None) -> Sequence:
    """x -> t0 -> t1 -> ...: step s reads the previous buffer (x first), writes t{s}."""
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    for s, program in enumerate(programs):
        b.transient(f"t{s}", ir.f32, N)
        own = [buf.name for buf in program.inputs]
        b.step(program, {own[0]: "x" if s == 0 else f"t{s - 1}", "out": f"t{s}"},
               grid=None if grids is None else grids[s])
    return b.build(returns=[f"t{len(programs) - 1}"])


def reasons(first: ir.Program, second: ir.Program, **kw) -> list[str]:
    seq = chain(first, second, **kw)
    return why_not(*seq.items)


DOUBLE = elementwise(lambda x: x * 2.0)
PLUS = elementwise(lambda x: x + 1.0)


# -- the rule ---------------------------------------------------------------------------

@pytest.mark.fast
def test_an_elementwise_chain_fuses_into_one_step():
    seq = chain(DOUBLE, PLUS, elementwise(lambda x: x * x))
    fused = seq.fused()
    assert len(fused.items) == 1 and why_not(*seq.items[:2]) == []
    step = fused.items[0]
    assert step.bindings == ("x", "t0", "t1", "t2")
    assert step.program.check() is step.program
    assert seq.fused() is fused  # (made once)


@pytest.mark.fast
def test_nothing_to_fuse_gives_the_sequence_itself():
    seq = chain(DOUBLE, elementwise(lambda x: x, index=lambda i: i + 1))
    assert seq.fused() is seq


@pytest.mark.fast
@pytest.mark.parametrize(("second", "kw", "reason"), [
    (elementwise(lambda x: x, index=lambda i: i + 1), {},
     "the second reads t0 other than at global_id(0)"),
    (elementwise(lambda x: x, workgroup=(32,)), {}, "workgroups differ"),
    (PLUS, {"grids": [(16,), (17,)]}, "grids differ ((16, 1, 1) and (17, 1, 1))"),
    (elementwise(lambda x: x, workgroup=(8, 8)), {}, "not one-dimensional"),
])
def test_each_reason_is_named(second, kw, reason):
    found = reasons(DOUBLE, second, **kw)
    assert any(r.startswith(reason) for r in found), found


@pytest.mark.fast
def test_barriers_atomics_and_workgroup_memory_stay_apart():
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", ir.f32), k.output("out", ir.f32, N)
    shared = k.workgroup_buffer("s", ir.f32, 64)
    i = k.let("i", ir.global_id())
    shared[ir.local_id()] = x[i]
    k.barrier()
    out[i] = shared[ir.local_id()]
    found = reasons(DOUBLE, k.build())
    assert "the second uses barriers, workgroup_memory" in found


def _subgroup_max(size: int) -> ir.Program:
    k = ir.Kernel(workgroup=(64,), subgroup_size=size)
    x, out = k.read("x", ir.f32), k.output("out", ir.f32, N)
    i = k.let("i", ir.global_id())
    out[i] = k.subgroup("shuffle", x[i], ir.local_id() + 1)
    return k.build()


@pytest.mark.fast
def test_subgroup_operations_stay_apart_as_barriers_do():
    """Two steps of subgroups of 8 and 16 fused would be one program of two sizes (V034):
    found in review, fused() raised a ValidationError for a valid sequence."""
    seq = chain(_subgroup_max(8), _subgroup_max(16))
    assert "the first uses subgroups" in why_not(*seq.items)
    assert seq.fused() is seq
    assert "the second uses subgroups" in reasons(DOUBLE, _subgroup_max(8))


@pytest.mark.fast
def test_an_early_return_in_the_first_keeps_them_apart():
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", ir.f32), k.output("out", ir.f32, N)
    i = k.let("i", ir.global_id())
    with k.if_(i >= x.len):
        k.ret()
    out[i] = x[i]
    assert "the first returns early (the second half would be skipped)" in reasons(k.build(),
                                                                                  PLUS)


@pytest.mark.fast
def test_a_write_the_first_does_not_make_at_its_own_index_keeps_them_apart():
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", ir.f32), k.output("out", ir.f32, N)
    i = k.let("i", ir.global_id())
    with k.if_(i < x.len):
        out[N - 1 - i] = x[i]  # (reversed: invocation i writes another's element)
    assert "the first writes t0 other than at global_id(0)" in reasons(k.build(), PLUS)


@pytest.mark.fast
def test_a_second_that_writes_what_the_first_reads_keeps_them_apart():
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.transient("a", ir.f32, N)
    b.transient("b", ir.f32, N)
    b.step(DOUBLE, {"x": "x", "out": "a"})
    b.step(DOUBLE, {"x": "a", "out": "b"})
    b.step(DOUBLE, {"x": "b", "out": "a"})  # (ping-pong: a is read first, written second)
    seq = b.build(returns=["a"])
    assert "the second writes a, which the first uses" in why_not(*seq.items[1:])
    assert len(seq.fused().items) == 2  # (the first two fuse; the third stays apart)


@pytest.mark.fast
def test_variables_are_renamed_apart_and_loop_bodies_fuse_too():
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.transient("t0", ir.f32, N)
    b.transient("t1", ir.f32, N)
    with b.loop(times=3):
        b.step(DOUBLE, {"x": "x", "out": "t0"})
        b.step(PLUS, {"x": "t0", "out": "t1"})
    seq = b.build(returns=["t1"])
    (loop,) = fuse_all(seq.items)
    (step,) = loop.body
    names = {s.name for s in step.program.body if hasattr(s, "name")}
    assert {"i", "_f1_i"} <= names


@pytest.mark.fast
def test_fuse_keeps_the_first_buffers_access():
    seq = chain(DOUBLE, PLUS)
    step = fuse(*seq.items)
    access = {b.name: b.access for b in step.program.buffers}
    assert access == {"x": ir.Access.READ, "t0": ir.Access.OUTPUT, "t1": ir.Access.OUTPUT}


# -- through real workers ---------------------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


X = np.random.default_rng(4).standard_normal(N).astype(np.float32)


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_fused_gives_the_unfused_bytes_on_every_backend(driver, backend):
    seq = chain(DOUBLE, PLUS, elementwise(lambda t, x: t * t - x, inputs=("t", "x")))
    plain = driver.dispatch(seq, [X], backend=backend)
    fused = driver.dispatch(seq, [X], backend=backend,
                            config=DispatchConfig(fuse=True))
    assert [a.tobytes() for a in fused] == [a.tobytes() for a in plain]


def test_shadow_holds_a_fused_candidate_against_its_unfused_reference(driver):
    seq = chain(DOUBLE, PLUS)
    candidate = driver.compile(seq, backend="cpu", config=DispatchConfig(fuse=True))
    reference = driver.compile(seq, backend="reference")
    assert candidate.fingerprint == seq.fused().fingerprint() != reference.fingerprint
    report = shadow(candidate, reference, [ShadowCase("x", [X]), ShadowCase("-x", [-X])])
    assert report.ok and report.cases_run == 2
    other = driver.compile(chain(PLUS, DOUBLE), backend="cpu", config=DispatchConfig(fuse=True))
    with pytest.raises(InvalidInputError, match="they are not the same work"):
        shadow(other, reference, [ShadowCase("x", [X])])
