"""``Driver`` end to end, with real worker processes on the reference backend: exact
outputs against the in-process interpreter, input errors raised in the caller,
DispatchConfig effects through the supervisor, async dispatch, compiled pipelines,
resident buffers, thread safety and parallelism, status, lazy start, close and recycling."""

from __future__ import annotations

import threading
import time

import numpy as np
import psutil
import pytest
from kernels import spin
from waiting import wait_for, wait_running, workers

from vyre_core import RestartPolicy, Timeouts, ir
from vyre_core.config import DispatchConfig
from vyre_core.driver import Driver
from vyre_core.errors import (
    DispatchTimeoutError,
    InvalidConfigError,
    InvalidInputError,
    PoolFailedError,
    ValidationError,
)
from vyre_core.pipeline import pipeline_cache_key
from vyre_core.registry import Registry
from vyre_core.supervisor.options import PoolOptions
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy
from vyre_reference import run

u32, f32 = ir.u32, ir.f32

# -- programs ---------------------------------------------------------------------------------


def xor_u32(n: int) -> ir.Program:
    """Two outputs: ``a ^ b`` and ``(a ^ b) >> 3``."""
    k = ir.Kernel(workgroup=(64,))
    a = k.read("a", u32)
    b = k.read("b", u32)
    x = k.output("x", u32, count=n)
    s = k.output("s", u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < a.len):
        v = k.let("v", a[i] ^ b[i])
        x[i] = v
        s[i] = v >> 3
    return k.build()


def tree_reduction(size: int = 64, groups: int = 4) -> ir.Program:
    k = ir.Kernel(workgroup=(size,))
    x = k.read("x", u32)
    sums = k.output("sums", u32, count=groups)
    shared = k.workgroup_buffer("shared", u32, count=size)
    lid = k.let("lid", ir.local_id(0))
    shared[lid] = x[ir.global_id(0)]
    k.barrier()
    with k.loop("step", 0, size.bit_length() - 1) as step:
        stride = k.let("stride", ir.lit(size // 2, u32) >> step)
        with k.if_(lid < stride):
            shared[lid] = shared[lid] + shared[lid + stride]
        k.barrier()
    with k.if_(lid == 0):
        sums[ir.workgroup_id(0)] = shared[0]
    return k.build()


def histogram(bins: int = 16) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", u32)
    hist = k.output("hist", u32, count=bins)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        hist.atomic_add(x[i] % bins, 1)
    return k.build()


def grid_2d(width: int = 8, height: int = 12) -> ir.Program:
    """``out[gy * width + gx] = gx * 1000 + gy`` over a 2-D grid of (4, 4) workgroups."""
    k = ir.Kernel(workgroup=(4, 4))
    out = k.output("out", u32, count=width * height)
    gx = k.let("gx", ir.global_id(0))
    gy = k.let("gy", ir.global_id(1))
    out[gy * width + gx] = gx * 1000 + gy
    return k.build()


def local_ids(count: int = 8, workgroup: tuple[int, ...] = (4,)) -> ir.Program:
    """Writes local_id(0) and workgroup_id(0) of every invocation at its global id."""
    k = ir.Kernel(workgroup=workgroup)
    lid = k.output("lid", u32, count)
    wid = k.output("wid", u32, count)
    g = k.let("g", ir.global_id(0))
    lid[g] = ir.local_id(0)
    wid[g] = ir.workgroup_id(0)
    return k.build()


def affine(n: int) -> ir.Program:
    """``out[i] = x[i] * 3 + 1``; every buffer has a declared count (resident-friendly)."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", u32, count=n)
    out = k.output("out", u32, count=n)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i] * 3 + 1
    return k.build()


def assert_exact(outputs, expected) -> None:
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def worker_pids(driver: Driver, backend: str = "reference") -> list[int]:
    return [w["pid"] for w in driver.status()["pools"][backend]["workers"]]


def reference_driver(**options) -> Driver:
    """A Driver whose one backend is the reference (what this module is about: default
    routing would pick the cpu backend, whose compiled kernels outrun the timeouts)."""
    return Driver(Registry.discover("reference"), **options)


@pytest.fixture(scope="module")
def drv():
    with reference_driver() as driver:
        yield driver


CASES = [
    ("saxpy f32", lambda: (saxpy(1000), saxpy_inputs(1000), None)),
    ("xor u32", lambda: (xor_u32(300), [(np.arange(300, dtype=np.uint64) * 2654435761 % 2**32)
                                        .astype(np.uint32),
                                        np.arange(300, dtype=np.uint32)[::-1].copy()], None)),
    ("tree reduction", lambda: (tree_reduction(), [(np.arange(256, dtype=np.uint32) * 37 + 11)
                                                   % 1000], (4,))),
    ("histogram", lambda: (histogram(), [np.arange(1000, dtype=np.uint32) * 7 % 97], (16,))),
    ("2-D grid", lambda: (grid_2d(), [], (2, 3))),
]


# -- exact outputs ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_dispatch_matches_in_process_reference_exactly(drv, case):
    program, inputs, grid = case()
    config = DispatchConfig(grid_override=grid)
    expected = run(program, inputs, grid=grid)
    assert_exact(drv.dispatch(program, inputs, config=config), expected)
    as_bytes = [a.tobytes() for a in inputs]
    assert_exact(drv.dispatch(program, as_bytes, config=config), expected)


def test_known_values_and_output_order(drv):
    xs = (np.arange(256, dtype=np.uint32) * 37 + 11) % 1000
    sums, = drv.dispatch(tree_reduction(), [xs], config=DispatchConfig(grid_override=(4,)))
    assert sums.tolist() == xs.reshape(4, 64).sum(axis=1).tolist()
    hist, = drv.dispatch(histogram(), [np.arange(1000, dtype=np.uint32) % 16],
                         config=DispatchConfig(dispatch_elements=1000))
    assert hist.tolist() == [63] * 8 + [62] * 8
    out, = drv.dispatch(grid_2d(), [], config=DispatchConfig(grid_override=(2, 3)))
    assert out.reshape(12, 8)[5, 7] == 7 * 1000 + 5
    a, b = np.arange(10, dtype=np.uint32) * 9, np.full(10, 5, dtype=np.uint32)
    x, s = drv.dispatch(xor_u32(10), [a, b])
    assert x.tolist() == (a ^ b).tolist() and s.tolist() == ((a ^ b) >> 3).tolist()


def test_outputs_copy_is_writable(drv):
    out, = drv.dispatch(saxpy(64), saxpy_inputs(64))
    copy = out.copy()
    copy[0] = 123.0
    assert copy[0] == 123.0 and out[0] != 123.0


def test_dispatch_outputs_are_read_only_views(drv):
    """Outputs are read-only views of the received message (writing raises); a copy is
    writable."""
    out, = drv.dispatch(saxpy(64), saxpy_inputs(64))
    with pytest.raises(ValueError):
        out[0] = 1.0


# -- input errors are the caller's ----------------------------------------------------------------


def test_input_errors_raised_before_any_worker_exists():
    before = children()
    with reference_driver() as driver:
        with pytest.raises(InvalidInputError) as err:
            driver.dispatch(saxpy(8), saxpy_inputs(8)[:2])
        assert "Fix:" in str(err.value) and "x (f32), y (f32), a (f32)" in err.value.fix
        with pytest.raises(InvalidInputError):
            driver.dispatch(saxpy(8), [np.zeros(8, np.float64), *saxpy_inputs(8)[1:]])
        k = ir.Kernel(workgroup=(4,))
        out = k.output("out", u32, 4)
        out[ir.global_id(0)] = ir.lit(1.5)  # f32 into a u32 buffer
        with pytest.raises(ValidationError):
            driver.dispatch(k.build(validate=False), [])
        assert children() == before  # refused in the caller: no worker was started
        assert driver.status()["pools"]["reference"]["state"] == "not started"
        out, = driver.dispatch(saxpy(8), saxpy_inputs(8))  # the pool is usable
        assert out.tobytes() == run(saxpy(8), saxpy_inputs(8))[0].tobytes()


def test_input_errors_leave_a_running_pool_usable(drv):
    with pytest.raises(InvalidInputError):
        drv.dispatch(xor_u32(4), [np.zeros(4, np.uint32)])
    with pytest.raises(InvalidInputError):
        drv.dispatch(affine(4), [np.zeros(5, np.uint32)])  # longer than the declared count
    out, = drv.dispatch(affine(4), [np.arange(4, dtype=np.uint32)])
    assert out.tolist() == [1, 4, 7, 10]
    assert drv.status()["pools"]["reference"]["restarts"] == 0


# -- DispatchConfig through the driver ------------------------------------------------------------


def test_timeout_kills_the_dispatch_and_the_pool_recovers(vyre_stalls):
    grace = 0.5
    with reference_driver(timeouts=Timeouts(kill_grace=grace)) as driver:
        driver.dispatch(spin(1), [])
        old_pid, = worker_pids(driver)
        start = time.monotonic()
        with pytest.raises(DispatchTimeoutError) as err:
            driver.dispatch(spin(10**7), [], config=DispatchConfig(timeout=0.5, label="slow"))
        elapsed = time.monotonic() - start
        assert 0.45 <= elapsed < 0.5 + grace + 1.5 + vyre_stalls.since(start), vyre_stalls
        assert "slow" in err.value.cause and err.value.fix
        out, = driver.dispatch(spin(10), [])
        assert out.tolist() == [45]
        assert not psutil.pid_exists(old_pid) or old_pid not in children()
        worker, = driver.status()["pools"]["reference"]["workers"]
        assert worker["generation"] == 2 and worker["pid"] != old_pid


def test_timeout_and_retries_reach_the_worker_request(drv):
    drv.dispatch(spin(1), [])
    pool = drv.pools.existing("reference")
    seen = []
    call = pool.call

    def spy(request):
        seen.append(request)
        return call(request)

    pool.call = spy
    try:
        out, = drv.dispatch(spin(3), [], config=DispatchConfig(retries=0, timeout=30.0))
        drv.dispatch(spin(3), [], config=DispatchConfig(retries=4))
    finally:
        del pool.call
    assert out.tolist() == [3]
    assert [(r.call.retries, r.call.deadline.seconds) for r in seen] == [(0, 30.0), (4, None)]
    assert seen[0].call.message.config["retries"] == 0


def test_profile_returns_timing_with_label(drv):
    outputs = drv.dispatch(saxpy(256), saxpy_inputs(256),
                           config=DispatchConfig(profile=True, label="saxpy-profiled"))
    assert outputs.timing is not None
    assert outputs.timing.wall_ns > 0 and outputs.timing.label == "saxpy-profiled"
    assert drv.dispatch(saxpy(256), saxpy_inputs(256)).timing is None


def test_grid_and_workgroup_overrides_reach_the_worker(drv):
    lid, wid = drv.dispatch(local_ids(), [])
    assert lid.tolist() == [0, 1, 2, 3] * 2 and wid.tolist() == [0] * 4 + [1] * 4
    lid, wid = drv.dispatch(local_ids(), [], config=DispatchConfig(workgroup_override=(2,)))
    assert lid.tolist() == [0, 1] * 4 and wid.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    lid, wid = drv.dispatch(local_ids(), [], config=DispatchConfig(grid_override=(1,)))
    assert lid.tolist() == [0, 1, 2, 3, 0, 0, 0, 0] and wid.tolist() == [0] * 8
    lid, _ = drv.dispatch(local_ids(), [], config=DispatchConfig(workgroup_override=(3,),
                                                                 grid_override=(2,)))
    assert lid.tolist() == [0, 1, 2, 0, 1, 2, 0, 0]


# -- dispatch_async -------------------------------------------------------------------------------


def test_dispatch_async_equals_dispatch(drv):
    program, inputs = saxpy(500), saxpy_inputs(500, seed=3)
    pending = drv.dispatch_async(program, inputs)
    deadline = time.monotonic() + 10
    while not pending.is_ready():
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert_exact(pending.result(), drv.dispatch(program, inputs))


def test_several_dispatches_in_flight(drv):
    program = xor_u32(100)
    inputs = [[np.full(100, i, np.uint32), np.arange(100, dtype=np.uint32)] for i in range(10)]
    pending = [drv.dispatch_async(program, data) for data in inputs]
    for handle, data in zip(pending, inputs, strict=True):
        assert_exact(handle.result(timeout=30), run(program, data))


def test_result_timeout_does_not_cancel(drv):
    pending = drv.dispatch_async(spin(30_000, salt=1), [])
    with pytest.raises(DispatchTimeoutError) as err:
        pending.result(timeout=0.001)
    assert err.value.fix
    assert pending.result(timeout=30)[0].tolist() == run(spin(30_000, salt=1), [])[0].tolist()


# -- compiled pipelines ---------------------------------------------------------------------------


def test_compiled_pipeline_equals_dispatch(drv):
    program = saxpy(300)
    pipeline = drv.compile(program)
    assert pipeline.compile_seconds is not None and pipeline.compile_seconds >= 0
    for seed in range(4):
        inputs = saxpy_inputs(300, seed)
        assert_exact(pipeline.dispatch(inputs), drv.dispatch(program, inputs))
    version = drv.backends()[0].version
    assert pipeline.key == pipeline_cache_key(program, DispatchConfig(), "reference", version)
    worker, = drv.status()["pools"]["reference"]["workers"]
    assert pipeline.generation == worker["generation"] and pipeline.valid


def test_compiled_pipeline_with_workgroup_override(drv):
    config = DispatchConfig(workgroup_override=(2,))
    pipeline = drv.compile(local_ids(), config=config)
    version = drv.backends()[0].version
    assert pipeline.key == pipeline_cache_key(local_ids(), config, "reference", version)
    assert pipeline.key != pipeline_cache_key(local_ids(), DispatchConfig(), "reference", version)
    assert_exact(pipeline.dispatch([]), drv.dispatch(local_ids(), [], config=config))
    assert_exact(pipeline.dispatch([], DispatchConfig(workgroup_override=(2,))),
                 drv.dispatch(local_ids(), [], config=config))
    with pytest.raises(InvalidConfigError) as err:
        pipeline.dispatch([], DispatchConfig(workgroup_override=(4,)))
    assert "Compile the program again" in err.value.fix


# -- resident buffers -----------------------------------------------------------------------------


def test_resident_buffers_round_trip(drv):
    n = 100
    x = drv.allocate_resident(4 * n, backend="reference")
    out = drv.allocate_resident(4 * n, backend="reference")
    assert x.valid and out.valid and x.byte_len == 4 * n
    data = (np.arange(n, dtype=np.uint32) * 977) ^ 0x5A5A
    x.upload(data.tobytes())
    got = drv.dispatch_resident(affine(n), [x, out], config=DispatchConfig(label="resident"))
    assert got == [] and got.timing.wall_ns > 0 and got.timing.label == "resident"
    assert out.download() == (data * 3 + 1).astype(np.uint32).tobytes()
    assert x.download() == data.tobytes()
    x.upload(np.full(n, 2, np.uint32))  # numpy data uploads as well
    drv.dispatch_resident(affine(n), [x, out])
    assert out.download() == np.full(n, 7, np.uint32).tobytes()
    x.free()
    out.free()
    with pytest.raises(InvalidInputError):
        x.download()


def test_resident_buffers_of_different_workers_are_refused(drv):
    n = 8
    mine = drv.allocate_resident(4 * n, backend="reference")
    with reference_driver() as other_driver:
        theirs = other_driver.allocate_resident(4 * n, backend="reference")
        with pytest.raises(InvalidInputError) as err:
            drv.dispatch_resident(affine(n), [mine, theirs])
        assert "Fix:" in str(err.value) and err.value.fix
    with pytest.raises(InvalidInputError):
        drv.dispatch_resident(affine(n), [])
    mine.free()


def test_resident_buffers_of_two_workers_of_one_pool_are_refused():
    """Buffers are placed deterministically: the rules send work to the lowest-numbered
    idle worker, so a buffer allocated while worker 0 is busy lands on worker 1, and one
    allocated with both idle lands on worker 0. (It once counted on luck, and a sleep.)"""
    n = 8

    def both_idle() -> bool:
        ws = workers(driver, "reference")
        return len(ws) == 2 and all(w["state"] == "idle" for w in ws)

    with reference_driver(workers=2) as driver:
        driver.dispatch(spin(1), [])
        wait_for(both_idle, 30.0, "both workers started and idle")
        busy = driver.dispatch_async(spin(1_000_000), [])  # ~2 s on worker 0 ...
        assert [w["index"] for w in wait_running(driver)] == [0]
        first = driver.allocate_resident(4 * n, backend="reference")  # ... so worker 1 serves this
        busy.result(timeout=60)
        wait_for(both_idle, 30.0, "both workers idle again")
        second = driver.allocate_resident(4 * n, backend="reference")  # worker 0: the lowest idle
        assert (first.slot, second.slot) == (1, 0)
        with pytest.raises(InvalidInputError) as err:
            driver.dispatch_resident(affine(n), [first, second])
        assert err.value.fix
        x = driver.allocate_resident(4 * n, backend="reference")  # both idle: worker 0 again
        assert x.slot == second.slot
        x.upload(np.arange(n, dtype=np.uint32))
        driver.dispatch_resident(affine(n), [x, second])
        assert second.download() == (np.arange(n, dtype=np.uint32) * 3 + 1).tobytes()


# -- threads and parallelism ----------------------------------------------------------------------


def test_many_threads_get_their_own_results(drv):
    program = xor_u32(64)
    base = np.arange(64, dtype=np.uint32)
    errors: list[str] = []

    def worker(t: int) -> None:
        for i in range(50):
            key = np.full(64, t * 1000 + i, np.uint32)
            x, s = drv.dispatch(program, [base, key])
            if x.tobytes() != (base ^ key).tobytes() or s.tobytes() != ((base ^ key) >> 3) \
                    .tobytes():
                errors.append(f"thread {t} dispatch {i}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_two_workers_serve_two_dispatches_at_the_same_time():
    """Both workers hold a request at once (their progress pages say so): requests run in
    parallel across a pool's workers. (How much faster that is, is measured in benchmarks.)"""
    with reference_driver(workers=2) as driver:
        driver.dispatch(spin(1), [])
        wait_for(lambda: all(w["state"] == "idle" for w in workers(driver, "reference")),
                 30.0, "both workers started")
        program = spin(400_000)
        pending = [driver.dispatch_async(program, []) for _ in range(2)]
        both = wait_running(driver, count=2, timeout=30.0)
        assert {w["index"] for w in both} == {0, 1}
        results = [p.result(timeout=120) for p in pending]
        assert results[0][0].tobytes() == results[1][0].tobytes()
        assert all(w["served"] >= 1 for w in workers(driver, "reference"))


# -- status, routing, lazy start ------------------------------------------------------------------


def test_status_lazy_start_and_live_pids():
    before = children()
    with reference_driver() as driver:
        status = driver.status()
        assert status["closed"] is False and status["broken_plugins"] == []
        assert status["pools"]["reference"] == {"backend": "reference", "state": "not started",
                                                "workers": []}
        assert children() == before  # status starts nothing
        # routing answers what dispatch would do: a backend chosen on static claims (wgpu,
        # when installed) is probed (apart) first, and a software adapter is demoted
        assert driver.route(saxpy(4)).backend == "reference"
        assert [e.backend for e in driver.explain(saxpy(4)) if e.chosen] == ["reference"]
        driver.dispatch(saxpy(4), saxpy_inputs(4))
        pool = driver.status()["pools"]["reference"]
        assert pool["state"] == "running" and pool["restarts"] == 0
        worker, = pool["workers"]
        assert worker["pid"] in children() - before
        assert psutil.Process(worker["pid"]).is_running()
        assert worker["generation"] == 1 and worker["state"] == "idle"
        assert worker["restarts"] == 0 and worker["in_flight"] == 0
        assert worker["served"] >= 1


def test_status_in_flight(drv):
    pending = drv.dispatch_async(spin(50_000), [])
    worker, = wait_running(drv)
    assert worker["in_flight"] == 1 and worker["state"] == "busy"
    pending.result(timeout=30)
    worker, = drv.status()["pools"]["reference"]["workers"]
    assert worker["in_flight"] == 0


def test_backends_in_precedence_order(drv):
    regs = drv.backends()
    assert [r.id for r in regs] == [r.id for r in drv.registry.backends()]
    assert [r.sort_key for r in regs] == sorted(r.sort_key for r in regs)
    assert "reference" in [r.id for r in regs]
    assert set(drv.status()["pools"]) == {r.id for r in regs}
    explanation = drv.explain(histogram())
    assert [e.backend for e in explanation if e.chosen] == [drv.route(histogram()).backend]


# -- close and recycling ---------------------------------------------------------------------


def test_close_is_idempotent_and_leaves_nothing():
    before = children()
    driver = reference_driver(workers=2)
    with driver:
        driver.dispatch(saxpy(4), saxpy_inputs(4))
        pids = worker_pids(driver)
        rundir = driver.pools.rundir.path
        assert rundir.is_dir() and set(pids) <= children()
    driver.close()  # again: nothing happens
    assert driver.status()["closed"] is True
    assert not rundir.exists()
    assert children() == before
    assert not any(psutil.pid_exists(p) and p in children() for p in pids)
    with pytest.raises(PoolFailedError) as err:
        driver.dispatch(saxpy(4), saxpy_inputs(4))
    assert "Create a new vyre Driver" in err.value.fix
    with pytest.raises(PoolFailedError):
        driver.dispatch_async(saxpy(4), saxpy_inputs(4))


def test_close_fails_pending_dispatches_and_stops_busy_workers(vyre_stalls):
    before = children()
    with reference_driver(timeouts=Timeouts(kill_grace=0.5)) as driver:
        driver.dispatch(spin(1), [])
        pending = driver.dispatch_async(spin(10**6), [])
        wait_running(driver)
        start = time.monotonic()
        driver.close()
        assert time.monotonic() - start < 0.5 + 2.0 + vyre_stalls.since(start), vyre_stalls
        with pytest.raises(PoolFailedError) as err:
            pending.result(timeout=5)
        assert "closed" in err.value.cause and err.value.fix
    assert children() == before


def test_close_of_a_driver_never_started():
    with reference_driver() as driver:
        rundir = driver.pools.rundir.path
    assert not rundir.exists()
    driver.close()


def _recycled_generations(driver: Driver, dispatches: int) -> list[int]:
    """The worker generation that served each of ``dispatches`` dispatches."""
    driver.dispatch(spin(1), [])
    pool = driver.pools.existing("reference")
    seen = []
    call = pool.call
    pool.call = lambda request: seen.append(request) or call(request)
    for i in range(1, dispatches):
        out, = driver.dispatch(spin(3, i), [])
        assert out.tolist() == [i + 3]
    del pool.call
    return [1] + [r.tracking.served_by[1] for r in seen]


def test_recycle_after_restarts_workers_without_failure():
    with reference_driver(restart=RestartPolicy(recycle_after=2)) as driver:
        gens = _recycled_generations(driver, 7)
        pool = driver.status()["pools"]["reference"]
        assert pool["state"] == "running" and pool["failure"] is None
        assert pool["restarts"] == 0
        assert gens[0] == 1 and gens[-1] >= 4 and gens == sorted(gens)


def test_recycle_after_counts_requests_per_worker_generation():
    """recycle_after counts caller requests served by the current worker process only."""
    with reference_driver(restart=RestartPolicy(recycle_after=2)) as driver:
        gens = _recycled_generations(driver, 7)
    assert gens == [1, 1, 2, 2, 3, 3, 4]


def test_compile_uses_the_backends_own_compile_timeout():
    """Driver.compile takes its deadline from the backend's own PoolOptions, or the
    caller's timeout where that comes first: the request's deadline is the sooner, with
    its own seconds (a caller's 100 s were once named for a compile bounded by 7)."""
    options = {"reference": PoolOptions(timeouts=Timeouts(compile=7.0))}
    with reference_driver(backend_options=options) as driver:
        driver.dispatch(spin(1), [])
        pool = driver.pools.existing("reference")
        seen = []
        call = pool.call
        pool.call = lambda request: seen.append(request) or call(request)
        driver.compile(spin(2))
        driver.compile(spin(3), config=DispatchConfig(timeout=100.0))
        driver.compile(spin(4), config=DispatchConfig(timeout=2.0))
        assert [r.call.deadline.seconds for r in seen] == [7.0, 7.0, 2.0]


@pytest.mark.timeout(120)
def test_dispatch_routes_the_program_as_its_workgroup_override_makes_it():
    """compile applied the override before routing, dispatch did not: a z of 128 went to
    cpu (z at most 64) on the program's own workgroup, whose worker then refused it."""
    k = ir.Kernel(workgroup=(1, 1, 1))
    out = k.output("out", ir.u32, count=128)
    z = k.let("z", ir.local_id(2))
    out[z] = z * ir.u32(3)
    program = k.build()
    config = DispatchConfig(workgroup_override=(1, 1, 128), grid_override=(1, 1, 1))
    want = np.arange(128, dtype=np.uint32) * 3
    with Driver() as drv:
        assert drv.compile(program, config=config).backend == "wgpu"  # (z up to 1024)
        assert drv.dispatch(program, [], config=config)[0].tobytes() == want.tobytes()
        assert drv.dispatch_async(program, [], config=config).result(60)[0].tobytes() == \
            want.tobytes()
        served = {b: sum(w["served"] for w in p["workers"])
                  for b, p in drv.status()["pools"].items()}
        assert served.get("cpu", 0) == 0 and served["wgpu"] == 3, served
