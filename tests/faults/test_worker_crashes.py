"""Worker deaths with real processes: kill -9 while idle and while busy, requests that crash
their worker every time, crash loops at start-up, and late replies from a killed generation.

Every test builds its own Driver (pools start lazily, so environment variables set with
monkeypatch before the first request reach the workers) and closes it with ``with``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
import pytest
from child_process import worker_processes
from fresh_env import fresh_env
from waiting import stays_true

from vyre_core.config import DispatchConfig
from vyre_core.errors import (
    DispatchTimeoutError,
    PipelineInvalidatedError,
    PoolFailedError,
    WorkerCrashedError,
)
from vyre_core.supervisor.rules.constants import START_TRIES

from .support import (
    PROGRAM,
    N,
    assert_saxpy,
    driver,
    expected,
    inputs,
    pool_status,
    wait_busy,
    wait_for,
    wait_idle,
    worker,
)

# -- 1. kill -9 of an idle worker ----------------------------------------------------------

@pytest.mark.timeout(90)
def test_kill_idle_worker_is_replaced_and_pipelines_invalidated(vyre_stalls) -> None:
    with driver() as drv:
        data = inputs(1)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        pipeline = drv.compile(PROGRAM, backend="faults")
        assert_saxpy(pipeline.dispatch(data), data)
        before = wait_idle(drv)
        assert pipeline.valid and pipeline.generation == before["generation"]

        os.kill(before["pid"], signal.SIGKILL)
        start = time.monotonic()
        after = wait_for(lambda: (w := worker(drv))["generation"] == before["generation"] + 1
                         and w["state"] == "idle" and w, what="the replacement worker")
        assert time.monotonic() - start < 3.0 + vyre_stalls.since(start), \
            f"the death was not noticed quickly ({vyre_stalls})"
        assert after["pid"] not in (None, before["pid"])
        status = pool_status(drv)
        assert status["state"] == "running"
        assert status["restarts"] == 1  # an idle death counts toward the intensity

        assert not pipeline.valid
        with pytest.raises(PipelineInvalidatedError) as info:
            pipeline.dispatch(data)
        text = str(info.value)
        assert "Fix:" in text and "Compile the program again" in text
        assert info.value.code == 1304
        assert info.value.details["generation"] == before["generation"]

        # Driver.dispatch needs no handle: it keeps working.
        for seed in (2, 3):
            data = inputs(seed)
            assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        fresh = drv.compile(PROGRAM, backend="faults")
        assert fresh.generation == after["generation"] and fresh.valid
        data = inputs(4)
        assert_saxpy(fresh.dispatch(data), data)
        assert worker(drv)["pid"] == after["pid"]


@pytest.mark.timeout(90)
def test_kill_idle_worker_invalidates_resident_buffers() -> None:
    """The fault backend has no resident memory; the reference backend's does."""
    with driver() as drv:
        data = inputs(5)
        buffers = [drv.allocate_resident(arr.nbytes, backend="reference") for arr in data]
        out_buf = drv.allocate_resident(N * 4, backend="reference")
        for buf, arr in zip(buffers, data, strict=True):
            buf.upload(arr)
        drv.dispatch_resident(PROGRAM, [*buffers, out_buf])
        assert out_buf.download() == expected(data)
        pipeline = drv.compile(PROGRAM, backend="reference")
        before = wait_idle(drv, backend="reference")

        os.kill(before["pid"], signal.SIGKILL)
        after = wait_for(lambda: (w := worker(drv, backend="reference"))["generation"]
                         == before["generation"] + 1 and w["state"] == "idle" and w,
                         what="the replacement reference worker")
        assert after["pid"] != before["pid"]

        assert not out_buf.valid
        for call in (out_buf.download, lambda: buffers[0].upload(data[0]),
                     lambda: drv.dispatch_resident(PROGRAM, [*buffers, out_buf])):
            with pytest.raises(PipelineInvalidatedError) as info:
                call()
            assert "Fix:" in str(info.value)
        with pytest.raises(PipelineInvalidatedError, match="Compile the program again"):
            pipeline.dispatch(data)

        fresh = drv.allocate_resident(16, backend="reference")
        fresh.upload(np.arange(4, dtype=np.uint32))
        assert fresh.download() == np.arange(4, dtype=np.uint32).tobytes()
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="reference"), data)


# -- 2. kill -9 mid-dispatch --------------------------------------------------------------

@pytest.mark.timeout(90)
def test_kill_mid_dispatch_is_retried_on_a_new_worker() -> None:
    with driver() as drv:
        warm = inputs(10)
        assert_saxpy(drv.dispatch(PROGRAM, warm, backend="faults"), warm)
        data = inputs(11)
        pending = drv.dispatch_async(PROGRAM, data, backend="faults",
                                     config=DispatchConfig(label="fault:sleep:1.5"))
        busy = wait_busy(drv)
        assert busy["in_flight"] == 1
        os.kill(busy["pid"], signal.SIGKILL)
        assert_saxpy(pending.result(timeout=20), data)
        after = worker(drv)
        assert after["generation"] == busy["generation"] + 1
        assert after["pid"] != busy["pid"]
        status = pool_status(drv)
        assert status["state"] == "running"
        assert status["restarts"] == 1  # every unexpected death counts, busy or idle


@pytest.mark.timeout(90)
def test_kill_mid_dispatch_without_retries_raises_worker_crashed() -> None:
    with driver() as drv:
        warm = inputs(12)
        assert_saxpy(drv.dispatch(PROGRAM, warm, backend="faults"), warm)
        result: dict[str, Any] = {}

        def call() -> None:
            try:
                result["value"] = drv.dispatch(
                    PROGRAM, inputs(13), backend="faults",
                    config=DispatchConfig(label="fault:sleep:30", retries=0))  # (killed)
            except BaseException as exc:
                result["error"] = exc

        thread = threading.Thread(target=call)
        thread.start()
        busy = wait_busy(drv)
        os.kill(busy["pid"], signal.SIGKILL)
        thread.join(timeout=10)
        assert not thread.is_alive()
        assert "value" not in result
        error = result["error"]
        assert isinstance(error, WorkerCrashedError)
        assert error.code == 1302
        assert "SIGKILL" in str(error) and str(busy["pid"]) in str(error)
        assert "Fix:" in str(error)
        assert pool_status(drv)["state"] == "running"
        data = inputs(14)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        assert worker(drv)["generation"] == busy["generation"] + 1


@pytest.mark.timeout(90)
def test_kill_mid_dispatch_leaves_the_other_worker_alone() -> None:
    with driver(workers=2) as drv:
        warm = inputs(20)
        assert_saxpy(drv.dispatch(PROGRAM, warm, backend="faults"), warm)
        wait_idle(drv, 0)
        wait_idle(drv, 1)
        victim_data, other_data = inputs(21), inputs(22)
        victim = drv.dispatch_async(PROGRAM, victim_data, backend="faults",
                                    config=DispatchConfig(label="fault:sleep:1.5"))
        busy = wait_for(lambda: [w for w in pool_status(drv)["workers"]
                                 if w["state"] == "busy"], 5.0, "a busy worker")
        assert len(busy) == 1
        victim_worker = busy[0]
        other_index = 1 - victim_worker["index"]
        other = drv.dispatch_async(PROGRAM, other_data, backend="faults",
                                   config=DispatchConfig(label="fault:sleep:1"))
        other_before = wait_busy(drv, other_index)

        os.kill(victim_worker["pid"], signal.SIGKILL)
        assert_saxpy(other.result(timeout=20), other_data)
        assert_saxpy(victim.result(timeout=20), victim_data)

        other_after = worker(drv, other_index)
        assert other_after["pid"] == other_before["pid"]
        assert other_after["generation"] == other_before["generation"]
        replaced = worker(drv, victim_worker["index"])
        assert replaced["generation"] == victim_worker["generation"] + 1
        assert replaced["pid"] != victim_worker["pid"]
        assert pool_status(drv)["state"] == "running"


# -- 3. requests that crash their worker every time -----------------------------------------

@pytest.mark.timeout(90)
@pytest.mark.parametrize(("label", "death"), [
    ("fault:exit", "exited with status 17"),
    ("fault:segfault", "killed by SIGSEGV"),
])
def test_poison_request_fails_after_one_retry(label: str, death: str) -> None:
    max_restarts = 3
    with driver(restart={"max_restarts": max_restarts}) as drv:
        warm = inputs(30)
        assert_saxpy(drv.dispatch(PROGRAM, warm, backend="faults"), warm)
        before = wait_idle(drv)
        with pytest.raises(WorkerCrashedError) as info:
            drv.dispatch(PROGRAM, inputs(31), backend="faults", config=DispatchConfig(label=label))
        assert death in str(info.value)
        assert "Fix:" in str(info.value)
        # the first try and exactly one retry each took a worker down
        assert worker(drv)["generation"] == before["generation"] + 2
        assert pool_status(drv)["state"] == "running"
        data = inputs(32)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)

        # each poison request costs two deaths of the restart budget (3 in the window):
        # the next one fails the pool, and the pool answers at once with why and when
        status = pool_status(drv)
        assert status["state"] == "running" and status["restarts"] == 2
        with pytest.raises(WorkerCrashedError, match="poison"):
            drv.dispatch(PROGRAM, inputs(33), backend="faults",
                         config=DispatchConfig(label=label))
        status = pool_status(drv)
        assert status["state"] == "failed" and death in status["failure"]
        with pytest.raises(PoolFailedError, match="Next try in") as info:
            drv.dispatch(PROGRAM, inputs(34), backend="faults")
        assert "omit backend=" in info.value.fix


@pytest.mark.timeout(90)
def test_poison_request_fails_only_its_caller() -> None:
    with driver(workers=2) as drv:
        warm = inputs(41)
        assert_saxpy(drv.dispatch(PROGRAM, warm, backend="faults"), warm)
        wait_idle(drv, 0)
        wait_idle(drv, 1)
        data = inputs(42)
        bystander = drv.dispatch_async(PROGRAM, data, backend="faults",
                                       config=DispatchConfig(label="fault:sleep:1"))
        with pytest.raises(WorkerCrashedError, match="exited with status 17"):
            drv.dispatch(PROGRAM, inputs(43), backend="faults",
                         config=DispatchConfig(label="fault:exit"))
        assert_saxpy(bystander.result(timeout=20), data)
        assert pool_status(drv)["state"] == "running"


@pytest.mark.timeout(90)
def test_crash_once_succeeds_on_the_retry(tmp_path) -> None:
    marker = tmp_path / "crashed-once"
    with driver() as drv:
        warm = inputs(50)
        assert_saxpy(drv.dispatch(PROGRAM, warm, backend="faults"), warm)
        before = wait_idle(drv)
        data = inputs(51)
        out = drv.dispatch(PROGRAM, data, backend="faults",
                           config=DispatchConfig(label=f"fault:crash_once:{marker}"))
        assert_saxpy(out, data)
        assert marker.exists()
        after = worker(drv)
        assert after["generation"] == before["generation"] + 1
        assert after["pid"] != before["pid"]
        assert pool_status(drv)["restarts"] == 1


# -- 4. crash loop at start-up ------------------------------------------------------------

@pytest.mark.timeout(90)
@pytest.mark.parametrize(("mode", "output"), [
    ("crash_prepare", "injected failure in prepare"),
    ("crash_import", "injected crash at import"),
    ("exit_prepare", "exited with status 5"),
])
def test_a_backend_that_cannot_start_fails_its_pool_after_two_tries(
        monkeypatch: pytest.MonkeyPatch, mode: str, output: str, vyre_stalls) -> None:
    """Before: such a backend was started max_restarts + 1 times, and its error was one
    line of thousands of characters (the traceback) with a generic Fix."""
    monkeypatch.setenv("VYRE_FAULTS", mode)
    with driver(restart={"max_restarts": 5, "window": 30.0}) as drv:
        with pytest.raises(PoolFailedError) as info:
            drv.dispatch(PROGRAM, inputs(60), backend="faults")
        error = info.value
        first, second = error.cause.splitlines()
        assert "cannot start (2 tries, none said hello)" in first and output in first
        assert second.startswith("Next try in") and len(first) < 300
        assert "Make 'faults' start" in error.fix
        assert error.details.get("backend") == "faults"
        if mode != "exit_prepare":  # the worker's traceback travels with the error
            assert "Traceback" in error.details["stderr"]
            assert "vyre_faults" in error.details["stderr"]

        status = pool_status(drv)
        assert status["state"] == "failed"
        assert output in status["failure"]
        spawned = status["workers"][0]
        assert spawned["generation"] == START_TRIES  # two spawns, no more
        assert spawned["restarts"] == START_TRIES
        assert spawned["pid"] is None

        # no respawn storm: nothing new starts afterwards (the cool-down is 60 s)
        stays_true(lambda: worker_processes(backend="faults") == []
                   and pool_status(drv)["workers"][0]["generation"] == START_TRIES,
                   1.0, "no worker started during the cool-down")

        # the failed pool answers a call that names it at once, with its own error: the
        # cause, when it is tried again, and what to do meanwhile
        start = time.monotonic()
        with pytest.raises(PoolFailedError, match="Next try in") as again:
            drv.dispatch(PROGRAM, inputs(61), backend="faults")
        assert time.monotonic() - start < 1.0 + vyre_stalls.since(start), vyre_stalls
        assert output in str(again.value) and "omit backend=" in again.value.fix

        # routing skips it, and says why
        assert drv.route(PROGRAM).backend == "cpu"
        by_id = {e.backend: e for e in drv.explain(PROGRAM)}
        assert not by_id["faults"].accepted and not by_id["faults"].chosen
        assert any("pool failed" in reason for reason in by_id["faults"].reasons)
        assert by_id["cpu"].chosen


@pytest.mark.timeout(90)
def test_startup_crash_loop_routing_falls_over(monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("VYRE_FAULTS", "crash_prepare")
    monkeypatch.setenv("VYRE_FAULTS_PRECEDENCE", "1")
    caplog.set_level(logging.INFO, logger="vyre.routing")
    with driver(restart={"max_restarts": 2}) as drv:
        data = inputs(70)
        # faults routes first on its claims, is probed apart (no pool of it is started: a
        # backend routing may pass over never is), crashes, and routing falls over
        assert_saxpy(drv.dispatch(PROGRAM, data), data)
        assert any(r.name == "vyre.routing" and r.getMessage().startswith(
            "'faults' could not be probed (backend 'faults' vyre_prepare failed: "
            "RuntimeError: vyre_faults: injected failure in prepare")
            and r.getMessage().endswith("; routing passes it over") for r in caplog.records)
        assert pool_status(drv)["state"] == "not started"
        assert pool_status(drv, "cpu")["state"] == "running"
        assert drv.route(PROGRAM).backend == "cpu"
        explained = drv.explain(PROGRAM)
        assert [e.backend for e in explained][:2] == ["faults", "cpu"]
        faults, cpu = explained[0], explained[1]
        assert not faults.accepted and not faults.chosen
        assert faults.reasons[0].startswith("it could not be probed: backend 'faults' "
                                            "vyre_prepare failed")
        assert cpu.accepted and cpu.chosen
        data = inputs(71)
        assert_saxpy(drv.dispatch(PROGRAM, data), data)
        # naming it starts its pool, which crash-loops; it does not fall over, and the
        # failed pool then says why and when
        with pytest.raises(PoolFailedError):
            drv.dispatch(PROGRAM, data, backend="faults")
        assert pool_status(drv)["state"] == "failed"
        with pytest.raises(PoolFailedError, match="Next try in"):
            drv.dispatch(PROGRAM, data, backend="faults")


# -- 6. late replies from a killed generation ------------------------------------------------

@pytest.mark.timeout(90)
def test_late_reply_from_a_killed_worker_is_dropped() -> None:
    """SIGSTOP the busy worker so its deadline passes and the parent sends SIGTERM (held
    while stopped); SIGCONT lets it finish the dispatch and send its reply before the
    SIGKILL of kill_grace. That reply belongs to a request that already failed."""
    with driver(timeouts={"kill_grace": 3.0, "heartbeat": 10.0}) as drv:
        warm = inputs(80)
        assert_saxpy(drv.dispatch(PROGRAM, warm, backend="faults"), warm)
        late_data = inputs(81)
        pending = drv.dispatch_async(PROGRAM, late_data, backend="faults",
                                     config=DispatchConfig(label="fault:sleep:1", timeout=0.5))
        busy = wait_busy(drv)  # its main thread has the request (its progress page)
        pid = busy["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(DispatchTimeoutError) as info:
                pending.result(timeout=10)
            assert info.value.details["timeout"] == 0.5
            assert worker(drv)["state"] == "killing"
        finally:
            os.kill(pid, signal.SIGCONT)
        # the worker finishes its sleep, replies, honours the SIGTERM and exits
        wait_for(lambda: worker(drv)["pid"] != pid, what="the stopped worker to go")
        status = pool_status(drv)
        assert status["dropped_replies"] >= 1
        assert status["restarts"] == 0

        # the timed-out caller keeps its error; no second result ever arrives
        with pytest.raises(DispatchTimeoutError):
            pending.result(timeout=0)
        # later callers each get their own result, never the late one
        for seed in (82, 83, 84):
            data = inputs(seed)
            out = drv.dispatch(PROGRAM, data, backend="faults")
            assert_saxpy(out, data)
            assert out[0].tobytes() != expected(late_data)
        assert worker(drv)["generation"] == busy["generation"] + 1


# -- bugs --------------------------------------------------------------------------------

@pytest.mark.timeout(90)
def test_compile_falls_over_after_pool_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Driver.compile falls over to the next capable backend when the routed pool fails,
    like Driver.dispatch, and the handle is pinned to the worker that compiled it."""
    monkeypatch.setenv("VYRE_FAULTS", "crash_prepare")
    monkeypatch.setenv("VYRE_FAULTS_PRECEDENCE", "1")
    with driver(restart={"max_restarts": 1}) as drv:
        pipeline = drv.compile(PROGRAM)
        assert pipeline.backend == "cpu"
        data = inputs(90)
        assert_saxpy(pipeline.dispatch(data), data)


@pytest.mark.timeout(120)
def test_doctor_prints_the_traceback_of_a_backend_that_cannot_start(tmp_path) -> None:
    """Found in review: the Fix of a pool that cannot start sent users to `vyre doctor`
    for the worker's traceback, which doctor did not show."""
    env = fresh_env(VYRE_FAULTS="crash_prepare", VYRE_LOAD_PLUGINS="faults", COLUMNS="400")
    proc = subprocess.run([sys.executable, "-m", "vyre_core.cli", "doctor"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=110)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "backend 'faults' cannot start" in proc.stdout, proc.stdout
    assert "faults's worker failed to start; it wrote:" in proc.stderr, proc.stderr
    assert "Traceback" in proc.stderr and "injected failure in prepare" in proc.stderr
    probed = subprocess.run([sys.executable, "-m", "vyre_core.cli", "backends", "--probe",
                             "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=110)
    row, = (r for r in json.loads(probed.stdout) if r["status"] != "disabled")
    assert row["status"] == "failed to start" and "Traceback" in row["traceback"]
