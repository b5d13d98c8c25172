"""Sequences through real worker processes: one request runs every step, the handle of a
compiled sequence is pinned to its worker generation, resident buffers take part, shadow
compares a whole sequence, and every bad run is refused before any work."""

from __future__ import annotations

import os
import re
import signal

import numpy as np
import pytest
from waiting import wait_for, workers

import vyre_core as vyre
from vyre_core import CompiledPipeline, DispatchConfig, Driver, SequenceBuilder, ir
from vyre_core.conformance.cases_sequences import double_in_place
from vyre_core.contract.types import LoopRun
from vyre_core.errors import (
    InvalidInputError,
    InvalidSequenceError,
    LaunchLimitError,
    NoCapableBackendError,
    PipelineInvalidatedError,
    UnsupportedFeatureError,
)
from vyre_core.shadow import ShadowCase, shadow

N = 1000


def affine(a: float, b: float) -> ir.Program:
    """out[i] = x[i] * a + b over f32."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f32)
    out = k.output("out", ir.f32, count=N)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] * a + b
    return k.build()


def accumulate() -> ir.Program:
    """acc[i] += x[i] over f32 (read_write)."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f32)
    acc = k.read_write("acc", ir.f32)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        acc[i] = acc[i] + x[i]
    return k.build()


def chain(times: int = 4):
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.transient("t", ir.f32, N)
    b.transient("u", ir.f32, N)
    b.step(affine(0.5, 1.0), {"out": "t"})
    with b.loop(times=times):
        b.step(affine(2.0, -1.0), {"x": "t", "out": "u"})
        b.step(affine(0.5, 0.25), {"x": "u", "out": "t"})
    return b.build(returns=["t", "u"])


def chain_in_numpy(x: np.ndarray, times: int = 4) -> tuple[np.ndarray, np.ndarray]:
    f = np.float32
    t = x * f(0.5) + f(1.0)
    u = t
    for _ in range(times):
        u = t * f(2.0) + f(-1.0)
        t = u * f(0.5) + f(0.25)
    return t, u


X = np.random.default_rng(7).standard_normal(N).astype(np.float32)


@pytest.fixture(scope="module")
def drv():
    with Driver() as driver:
        yield driver


@pytest.mark.parametrize("backend", ["reference", "wgpu"])
def test_a_chain_runs_in_one_request_with_the_bytes_numpy_gives(drv, backend):
    drv.probe(backend)
    served = sum(w["served"] for w in workers(drv, backend))
    out = drv.dispatch(chain(), [X], backend=backend)
    t, u = out
    want_t, want_u = chain_in_numpy(X)
    assert t.tobytes() == want_t.tobytes() and u.tobytes() == want_u.tobytes()
    assert sum(w["served"] for w in workers(drv, backend)) == served + 1  # one request
    assert out.loops == [LoopRun(4, True)]


def test_routing_picks_a_backend_for_the_whole_sequence_and_refusals_name_steps(drv):
    assert drv.route(chain()).backend == "cpu"  # (before the reference; lavapipe demoted)
    limit = drv.probe("wgpu").max_workgroup_memory_bytes
    k = ir.Kernel(workgroup=(64,))
    out = k.output("out", ir.f32, count=N)
    shared = k.workgroup_buffer("shared", ir.f32, count=limit // 2)  # twice the limit
    shared[ir.local_id(0)] = ir.f32(1.0)
    out[0] = shared[0]
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.transient("t", ir.f32, N)
    b.step(affine(1.0, 0.0), {"out": "t"})
    b.step(k.build(), {"out": "t"}, grid=1)
    seq = b.build(returns=["t"])
    with pytest.raises(NoCapableBackendError, match=rf"step 1: workgroup memory is "
                                                    rf"{limit * 2} bytes, the limit is {limit}"):
        drv.dispatch(seq, [X], backend="wgpu")
    assert drv.dispatch(seq, [X])[0][:2].tolist() == [1.0, 0.0]  # on the cpu


def test_a_compiled_sequence_reruns_in_its_worker_and_is_invalidated_by_a_restart(drv):
    seq = chain(2)
    compiled = drv.compile(seq, backend="reference")
    assert compiled.valid and compiled.backend == "reference"
    for seed in (1, 2):
        x = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
        t, u = compiled.dispatch([x])
        assert (t.tobytes(), u.tobytes()) == tuple(a.tobytes() for a in chain_in_numpy(x, 2))
    before = workers(drv, "reference")[0]
    os.kill(before["pid"], signal.SIGKILL)
    wait_for(lambda: workers(drv, "reference")[0]["generation"] > before["generation"]
             and workers(drv, "reference")[0]["state"] == "idle", 10.0, "a new worker")
    assert not compiled.valid
    with pytest.raises(PipelineInvalidatedError, match="Compile the sequence again"):
        compiled.dispatch([X])
    fresh = drv.compile(seq, backend="reference")
    assert fresh.dispatch([X])[0].tobytes() == chain_in_numpy(X, 2)[0].tobytes()


def test_resident_buffers_stay_in_the_worker_across_runs(drv):
    """acc += x three times in one run, twice: the resident keeps what each run wrote."""
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.resident("acc", ir.f32, N)
    with b.loop(times=3):
        b.step(accumulate())
    seq = b.build()
    acc = drv.allocate_resident(N * 4, backend="reference")
    acc.upload(np.ones(N, np.float32))
    for _ in range(2):
        assert list(drv.dispatch(seq, [X], resident={"acc": acc})) == []
    want = np.ones(N, np.float32)
    for _ in range(6):
        want = want + X
    assert acc.download() == want.tobytes()
    compiled = drv.compile(seq, backend="reference")
    compiled.dispatch([X], resident={"acc": acc})
    assert acc.download() == (want + X + X + X).tobytes()


def two_residents():
    """acc += x, then other += x: a sequence of two resident buffers."""
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.resident("acc", ir.f32, N)
    b.resident("other", ir.f32, N)
    b.step(accumulate())
    b.step(accumulate(), {"acc": "other"})
    return b.build()


def test_bad_resident_bindings_are_refused_before_any_work(drv):
    seq = two_residents()
    right = drv.allocate_resident(N * 4, backend="reference")
    small = drv.allocate_resident(N * 4 - 4, backend="reference")
    right.upload(np.zeros(N, np.float32))
    served = sum(w["served"] for w in workers(drv, "reference"))
    cases = [
        ({"acc": right}, "resident buffers are \\['acc', 'other'\\], resident= names \\['acc'\\]"),
        ({"acc": right, "other": small}, "'other' holds 3996 bytes, the sequence declares 4000"),
        ({"acc": right, "other": np.zeros(N, np.float32)}, "'other' is a ndarray"),
    ]
    for resident, match in cases:
        with pytest.raises(InvalidSequenceError, match=match) as err:
            drv.dispatch(seq, [X], resident=resident)
        assert "\nFix: " in str(err.value)
    assert sum(w["served"] for w in workers(drv, "reference")) == served
    other = drv.allocate_resident(N * 4, near=right)
    with pytest.raises(InvalidSequenceError, match="backend='wgpu', but the resident"):
        drv.dispatch(seq, [X], resident={"acc": right, "other": other},
                     backend="wgpu")


def test_buffers_allocated_near_another_share_its_worker_and_names_need_their_own():
    with Driver(workers=2) as driver:
        first = driver.allocate_resident(N * 4, backend="reference")
        others = [driver.allocate_resident(N * 4, near=first) for _ in range(4)]
        assert {(b.slot, b.generation) for b in others} == {(first.slot, first.generation)}
        seq = two_residents()
        for buf in (first, others[0]):
            buf.upload(np.zeros(N, np.float32))
        driver.dispatch(seq, [X], resident={"acc": first, "other": others[0]})
        assert first.download() == others[0].download() == X.tobytes()
        with pytest.raises(InvalidSequenceError, match="bound to two resident names"):
            driver.dispatch(seq, [X], resident={"acc": first, "other": first})
        with pytest.raises(Exception, match="near= lives in 'reference'"):
            driver.allocate_resident(4, backend="wgpu", near=first)
        with pytest.raises(Exception, match="needs backend= or near="):
            driver.allocate_resident(4)



def test_every_path_refuses_resident_buffers_of_two_workers_with_one_error(drv):
    """A sequence, its compiled handle, a dispatch and a launch on resident buffers: one
    check (``one_worker``), one cause and one Fix, before any work; the error's class is
    the one each path raises for its other refusals."""
    @vyre.kernel
    def add_into(x: vyre.Array[vyre.f32], y: vyre.Array[vyre.f32]):
        y[vyre.global_id(0)] = y[vyre.global_id(0)] + x[vyre.global_id(0)]

    seq = two_residents()
    acc = drv.allocate_resident(N * 4, backend="reference")
    elsewhere = drv.allocate_resident(N * 4, backend="wgpu")
    beside = drv.allocate_resident(N * 4, near=elsewhere)
    compiled = drv.compile(seq, backend="reference")
    paths = {
        "dispatch_sequence": lambda: drv.dispatch(
            seq, [X], resident={"acc": acc, "other": elsewhere}),
        "a compiled sequence": lambda: compiled.dispatch(
            [X], resident={"acc": elsewhere, "other": beside}),
        "dispatch_resident": lambda: drv.dispatch_resident(affine(1.0, 0.0), [acc, elsewhere]),
        "launch": lambda: drv.launch(add_into, (acc, elsewhere), dim=N),
        "launch_async": lambda: drv.launch_async(add_into, (acc, elsewhere), dim=N),
    }
    refusals = {}
    for name, path in paths.items():  # (a sequence's refusals are InvalidSequenceError)
        expected = InvalidSequenceError if "sequence" in name else InvalidInputError
        with pytest.raises(expected) as err:
            path()
        refusals[name] = (err.value.cause.split(":")[0], err.value.fix)
    assert set(refusals.values()) == {(
        "resident buffers must share one worker",
        "Allocate them in one worker: drv.allocate_resident(nbytes, near=first_buffer) "
        "(a compiled sequence's: near a buffer of the worker it was compiled in).")}, refusals

def test_compile_takes_a_program_or_a_sequence_and_refuses_anything_else(drv):
    assert isinstance(drv.compile(affine(1.0, 0.0)), CompiledPipeline)
    with pytest.raises(InvalidInputError, match="expected a Program, got 'affine'") as e:
        drv.compile("affine")
    assert "not names" in e.value.fix


def test_resident_buffers_of_two_workers_or_an_old_generation_are_refused(drv):
    seq = two_residents()
    acc = drv.allocate_resident(N * 4, backend="reference")
    same = drv.allocate_resident(N * 4, backend="reference")
    elsewhere = drv.allocate_resident(N * 4, backend="wgpu")
    with pytest.raises(InvalidSequenceError, match="resident buffers must share one worker"):
        drv.dispatch(seq, [X], resident={"acc": acc, "other": elsewhere})
    pid = next(w["pid"] for w in workers(drv, "reference") if w["index"] == acc.slot)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not acc.valid, 10.0, "the generation to end")
    with pytest.raises(PipelineInvalidatedError, match="Allocate the buffer again"):
        drv.dispatch(seq, [X], resident={"acc": acc, "other": same})
    wait_for(lambda: workers(drv, "reference")[0]["state"] == "idle", 10.0, "a new worker")


def test_bad_inputs_and_configs_are_refused_before_any_work(drv):
    seq = chain()
    with pytest.raises(InvalidSequenceError, match=r"takes 1 input\(s\), got 0"):
        drv.dispatch(seq, [])
    with pytest.raises(LaunchLimitError, match="would return 8000 bytes"):
        drv.dispatch(seq, [X], config=DispatchConfig(max_output_bytes=4000))


def test_shadow_compares_a_whole_sequence_against_the_reference(drv):
    seq = chain(3)
    candidate = drv.compile(seq, backend="wgpu")
    reference = drv.compile(seq, backend="reference")
    cases = [ShadowCase(f"seed {s}", [np.random.default_rng(s).standard_normal(N)
                                      .astype(np.float32)]) for s in range(3)]
    report = shadow(candidate, reference, cases, ulp_budget=0)
    assert report.ok and report.cases_run == 3, str(report)
    other = chain(2)
    with pytest.raises(Exception, match="not the same work"):
        shadow(drv.compile(other, backend="reference"), reference, cases)


def test_a_step_the_backend_cannot_fit_is_refused_naming_the_step(drv):
    big = ir.Kernel(workgroup=(64,))
    out = big.output("out", ir.f32, count=N)
    out[0] = ir.f32(1.0)
    b = SequenceBuilder()
    b.transient("out", ir.f32, N)
    b.step(big.build(), grid=(2**26 + 1,))  # 64 more invocations than a u32 id numbers
    with pytest.raises(LaunchLimitError, match="step 0: backend 'reference': grid axis x"):
        drv.dispatch(b.build(returns=["out"]), [], backend="reference")


def _rem_f64(n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", ir.f64), k.output("out", ir.f64, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = (x[i] * 7.0) % (x[i] + 1.0)
    return k.build()


def test_a_sequence_a_named_backend_refuses_gets_a_fix_naming_the_backends_that_run_it(drv):
    """wgpu refuses f64 ``rem`` at compile (an exact fmod needs 64-bit integers); its own
    Fix could only say "the reference". The refusal names every backend whose claims
    accept each step (fails on main before this commit: "Route the program to the
    reference backend.")."""
    b = SequenceBuilder()
    b.input("x", ir.f64, 8)
    b.transient("t", ir.f64, 8)
    b.step(_rem_f64(8), {"out": "t"})
    seq = b.build(returns=["t"])
    with pytest.raises(UnsupportedFeatureError, match="rem on f64") as err:
        drv.dispatch(seq, [np.full(8, 3.0)], backend="wgpu")
    assert "Name cpu or reference as the backend" in err.value.fix
    assert drv.dispatch(seq, [np.full(8, 3.0)])[0].tolist() == [1.0] * 8


def test_a_sequence_whose_step_wgpu_is_not_offered_names_the_backends_that_run_it(drv):
    """The math library's f64 functions use 64-bit integers, which WGSL lacks: routing
    does not offer wgpu such a step, and a caller who names wgpu is told which run it."""
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", ir.f64), k.output("out", ir.f64, count=8)
    out[ir.global_id(0)] = ir.sin(x[ir.global_id(0)])
    b = SequenceBuilder()
    b.input("x", ir.f64, 8)
    b.transient("t", ir.f64, 8)
    b.step(k.build(), {"out": "t"})
    seq = b.build(returns=["t"])
    with pytest.raises(NoCapableBackendError, match="uses ops not supported") as err:
        drv.dispatch(seq, [np.ones(8)], backend="wgpu")
    assert "cpu and reference can run all of it" in err.value.fix
    assert drv.dispatch(seq, [np.ones(8)])[0].tobytes() == np.sin(np.ones(8)).tobytes()


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_an_input_updated_in_place_comes_back_and_the_callers_array_is_not_written(drv,
                                                                                 backend):
    """Large enough to travel through shared memory (fails on main before this commit:
    E1003 "step 0 writes input 'x'"). With out= the caller asks for it in place."""
    n = 1 << 16
    x = np.arange(n, dtype=np.uint32)
    b = SequenceBuilder()
    b.input("x", ir.u32, n)
    with b.loop(times=2):
        b.step(double_in_place())
    seq = b.build(returns=["x"])
    before = x.copy()
    out = drv.dispatch(seq, [x], backend=backend)
    assert out[0].tobytes() == ((x * 2 + 1) * 2 + 1).tobytes()
    assert x.tobytes() == before.tobytes()
    into = drv.dispatch(seq, [x], backend=backend, out=[x])
    assert into[0] is x and x.tobytes() == ((before * 2 + 1) * 2 + 1).tobytes()
    assert into.loops == [LoopRun(2, True)]
    with pytest.raises(InvalidInputError, match="out= array for 'x' has dtype float32"):
        drv.dispatch(seq, [x], backend=backend, out=[np.zeros(n, np.float32)])


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_a_compiled_sequence_writes_its_returns_into_out(drv, backend):
    """``out=`` on a compiled sequence's dispatch, as on ``dispatch_sequence`` (fails on
    main before this commit: TypeError, no such keyword): the returns land in the
    caller's arrays, which are returned; the inputs are unchanged unless named there; a
    wrong ``out=`` is refused before any work."""
    compiled = drv.compile(chain(2), backend=backend)
    x = np.random.default_rng(35).standard_normal(N).astype(np.float32)
    before = x.copy()
    t, u = np.full(N, 7, np.float32), np.full((10, N // 10), 7, np.float32)
    got = compiled.dispatch([x], out=[t, u])
    assert got[0] is t and got[1] is u and list(got.loops) == [LoopRun(2, True)]
    assert (t.tobytes(), u.tobytes()) == tuple(a.tobytes() for a in chain_in_numpy(x, 2))
    assert x.tobytes() == before.tobytes()
    for out, refusal in (([t], "out= needs 2 array(s) (outputs ['t', 'u']), got 1"),
                         ([t, t], "share memory"),
                         ([t, np.zeros(N, np.float64)], "'u' has dtype float64"),
                         ([t, u[:, ::2]], "'u' has 500 elements")):
        with pytest.raises(InvalidInputError, match=re.escape(refusal)) as info:
            compiled.dispatch([before], out=out)
        assert info.value.fix
    assert (t.tobytes(), u.tobytes()) == tuple(a.tobytes() for a in chain_in_numpy(x, 2))

    n = 1 << 16
    b = SequenceBuilder()
    b.input("x", ir.u32, n)
    with b.loop(times=2):
        b.step(double_in_place())
    in_place = drv.compile(b.build(returns=["x"]), backend=backend)
    x = np.arange(n, dtype=np.uint32)
    into = in_place.dispatch([x], out=[x])  # the caller asks for its input in place
    assert into[0] is x and x.tobytes() == ((np.arange(n, dtype=np.uint32) * 2 + 1) * 2
                                            + 1).tobytes()
