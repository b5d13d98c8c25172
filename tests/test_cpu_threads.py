"""The cpu backend's threads (issue 39, steady under load): a small launch runs on the
calling thread and never enters numba's parallel region, whose join waits for every
thread (a descheduled one costs a scheduler tick on a busy machine); a large one runs on
the parallel kernel with the same bytes; the thread count is a setting, checked with a
Fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import vyre_cpu.backend
from vyre_cpu import threads

from vyre_core import Driver
from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidConfigError
from vyre_core.supervisor.options import THREADS_ENV, PoolOptions
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy
from vyre_reference import run
from vyre_workers.backend_host import BackendHost


@pytest.mark.fast
def test_the_thread_count_defaults_to_the_cores_this_process_may_use():
    assert threads.configured({}) == len(os.sched_getaffinity(0))
    assert threads.configured({threads.ENV: "3"}) == 3
    assert threads.configured({threads.ENV: " 2 ", THREADS_ENV: ""}) == 2


@pytest.mark.fast
def test_the_pool_option_wins_over_the_environment():
    assert threads.configured({threads.ENV: "3", THREADS_ENV: "1"}) == 1


@pytest.mark.fast
@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", "2000", "two"])
def test_a_bad_thread_count_is_refused_with_a_fix(value):
    with pytest.raises(InvalidConfigError) as caught:
        threads.configured({threads.ENV: value})
    assert threads.ENV in caught.value.cause and repr(value) in caught.value.cause
    assert "whole number from 1 to" in caught.value.fix


@pytest.mark.fast
@pytest.mark.parametrize("value", [0, -2, True, 2.0, "2", threads.MAX_THREADS + 1])
def test_pool_options_refuse_a_bad_thread_count(value):
    with pytest.raises(InvalidConfigError, match="threads"):
        PoolOptions(threads=value)


@pytest.mark.fast
def test_only_a_large_launch_of_many_workgroups_on_many_threads_is_parallel():
    big = threads.PARALLEL_WORK
    assert not threads.parallel_worth(1, big, False, 8)        # one workgroup
    assert not threads.parallel_worth(big // 64, 64, False, 1)  # one thread
    assert not threads.parallel_worth(16, 64, False, 8)        # little work
    assert threads.parallel_worth(big // 64, 64, False, 2)
    assert threads.parallel_worth(big // 64 // threads.LOOP_WEIGHT, 64, True, 2)


@pytest.mark.fast
def test_a_launch_of_long_loops_is_parallel_once_one_thread_was_measured_slow():
    """The count cannot see a loop's trip count: a sort's 64 workgroups of 4096-element
    walks counted as 65536 invocations. Measured on one thread at 2 us an invocation,
    they go parallel; a measurement of a short launch changes nothing, and neither one
    workgroup nor one thread is ever parallel."""
    seconds_each = 2e-6
    assert not threads.parallel_worth(64, 64, True, 2)
    assert threads.parallel_worth(64, 64, True, 2, seconds_each)
    assert not threads.parallel_worth(4, 64, True, 2, seconds_each)  # (0.5 ms of work)
    assert not threads.parallel_worth(1, 64 * 64, True, 8, seconds_each)
    assert not threads.parallel_worth(64, 64, True, 1, seconds_each)
    assert threads.worth_measuring(64, True, 2)
    assert not threads.worth_measuring(64, False, 2)  # (the count is the work)
    assert not threads.worth_measuring(1, True, 2)
    assert not threads.worth_measuring(64, True, 1)


_TINY_SCRIPT = """
import json, numba, vyre_cpu.backend, vyre_cpu.threads
from vyre_core.config import DispatchConfig
from vyre_examples.saxpy import inputs, program
from vyre_workers.backend_host import BackendHost
host = BackendHost(vyre_cpu.backend)
host.prepare()
for _ in range(3):
    host.dispatch(program(64, 64), inputs(64, 1), DispatchConfig())
def layer():
    try:
        return numba.threading_layer()
    except ValueError:
        return None
small = layer()
vyre_cpu.threads.PARALLEL_WORK = 1024  # (this launch then runs on threads)
vyre_cpu.backend._threads = lambda: 2
host.dispatch(program(1 << 14, 64), inputs(1 << 14, 1), DispatchConfig())
print(json.dumps({"small": small, "large": layer()}))
"""


@pytest.mark.processes
def test_a_small_launch_enters_no_parallel_region_and_a_large_one_no_openmp(tmp_path):
    """numba starts its threading layer at the first parallel region: after small
    dispatches it has none, and a large one starts TBB or workqueue, whose idle threads
    sleep (fails on main before issue 39: every launch entered one, on OpenMP here)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_THREADING")}
    env["VYRE_CPU_CACHE_DIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", _TINY_SCRIPT], capture_output=True,
                          text=True, env=env, timeout=300, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["small"] is None and found["large"] in ("tbb", "workqueue")


def test_a_large_launch_runs_the_parallel_kernel_with_the_reference_bytes(monkeypatch):
    monkeypatch.setattr(threads, "PARALLEL_WORK", 1024)
    monkeypatch.setattr(vyre_cpu.backend, "_threads", lambda: 2)
    host = BackendHost(vyre_cpu.backend)
    host.prepare()
    program, data = saxpy(1 << 14, 64), saxpy_inputs(1 << 14, 7)
    config = DispatchConfig()
    got, = host.dispatch(program, data, config)
    want, = run(program, data)
    assert got.tobytes() == want.tobytes()
    pipeline = vyre_cpu.backend.Pipeline(host.plan(program, data, config).program, config)
    assert pipeline.compiled.parallel() is not None  # (compiled by the launch above)
    small, = host.dispatch(program, data, DispatchConfig(grid_override=(1, 1, 1)))
    assert small.tobytes() == run(program, data, grid=(1, 1, 1))[0].tobytes()


def test_a_launch_measured_slow_on_one_thread_runs_on_threads_after(monkeypatch):
    """A launch of long loops the count keeps on one thread is timed (from its second
    run: the first pays numba's first call); once its CPU time passes
    ``PARALLEL_SECONDS`` (made tiny here), the next launch of it enters the parallel
    region, with the reference's bytes every time."""
    import numpy as np

    from vyre_core.lib import passes

    entered = []
    monkeypatch.setattr(threads, "PARALLEL_SECONDS", 1e-12)
    monkeypatch.setattr(vyre_cpu.backend, "_threads", lambda: 2)
    monkeypatch.setattr(vyre_cpu.backend, "_use_threads", entered.append)
    host = BackendHost(vyre_cpu.backend)
    host.prepare()
    x = np.random.default_rng(3).standard_normal(1024 * 64).astype(np.float32)
    # (one block of 1,024 partials: 4 workgroups of 256, each partial a walk of 64)
    args = (x, np.zeros(1024, np.float32), x.size, 1024, 1, 0, x.size, 1024, 64)
    plan = passes.sum_pass.plan((1024, 1, 1), args)
    want, = run(plan.program, plan.inputs)
    config = DispatchConfig()
    assert not threads.parallel_worth(4, passes.WORKGROUP, True, 2)  # (counted: one)
    for launch in range(3):
        got, = host.dispatch(plan.program, plan.inputs, config)
        assert got.tobytes() == want.tobytes()
        # (the first not timed: it pays numba's first call; the second timed on one
        # thread; the third on 2)
        assert entered == [2] * (launch == 2)


@pytest.mark.processes
def test_a_worker_takes_its_thread_count_from_the_pool_option():
    with Driver(backend_options={"cpu": PoolOptions(threads=1)}) as drv:
        assert drv.probe("cpu").extra["threads"] == 1


@pytest.mark.processes
def test_a_bad_thread_count_stops_the_worker_with_its_reason(monkeypatch):
    monkeypatch.setenv(threads.ENV, "zero")
    with Driver() as drv, pytest.raises(InvalidConfigError) as caught:
        drv.dispatch(saxpy(64, 64), saxpy_inputs(64, 1), backend="cpu")
    assert f"{threads.ENV}='zero'" in caught.value.cause
    assert "whole number from 1 to" in caught.value.fix
