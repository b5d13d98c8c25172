"""Frozen workers (SIGSTOP, a stuck native thread): alive, yet neither heartbeating nor
receiving. An idle one that is sent a request is killed and the request runs elsewhere,
well before ``Timeouts.heartbeat``; an idle one left alone is replaced by itself; one that
already holds its request (its progress page says so) is given ``Timeouts.heartbeat``."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from waiting import stays_true

from vyre_core import DispatchConfig

from .support import (
    PATIENCE,
    PROGRAM,
    assert_saxpy,
    driver,
    inputs,
    pool_status,
    wait_busy,
    wait_for,
    wait_idle,
    worker,
)

DEFAULT_HEARTBEAT_TIMEOUT = 30.0


def gone(pid: int, created: float) -> bool:
    """True once the process ``pid`` started at ``created`` no longer exists."""
    try:
        proc = psutil.Process(pid)
        return proc.create_time() != created or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def stopped(pid: int) -> float:
    """SIGSTOP ``pid`` and wait until the kernel has stopped it; its start time."""
    proc = psutil.Process(pid)
    os.kill(pid, signal.SIGSTOP)
    wait_for(lambda: proc.status() == psutil.STATUS_STOPPED, PATIENCE, f"pid {pid} to stop")
    return proc.create_time()


@pytest.mark.timeout(60)
def test_request_to_a_frozen_idle_worker_runs_on_a_replacement(vyre_stalls) -> None:
    with driver(timeouts={"heartbeat": DEFAULT_HEARTBEAT_TIMEOUT}) as drv:
        data = inputs(1)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        before = wait_idle(drv)
        created = stopped(before["pid"])

        data = inputs(2)
        start = time.monotonic()
        outputs = drv.dispatch(PROGRAM, data, backend="faults", config=DispatchConfig(retries=0))
        elapsed = time.monotonic() - start
        assert_saxpy(outputs, data)
        assert elapsed < 10.0 + vyre_stalls.since(start), \
            f"took {elapsed:.1f} s: waited for the heartbeat timeout ({vyre_stalls})"

        assert wait_for(lambda: gone(before["pid"], created), PATIENCE,
                           "the frozen worker to go")
        after = worker(drv)
        assert after["pid"] not in (None, before["pid"])
        assert after["generation"] == before["generation"] + 1
        assert pool_status(drv)["restarts"] == 1


@pytest.mark.timeout(60)
def test_a_healthy_idle_worker_is_not_judged_frozen_by_heartbeats_left_unread() -> None:
    """The pool's I/O thread held up past the silence limit (a long gc.collect() in the
    caller holds the GIL; here the test holds its lock) while the worker keeps beating:
    the call that comes then reads those heartbeats before its worker is judged. It was
    judged first: "silent for 1.8 s with work waiting for it (frozen?)", killed, and its
    pipelines invalidated (a clean run of the suite at load average 6)."""
    with driver(timeouts={"heartbeat_interval": 0.1}) as drv:  # (silence limit: 0.3 s)
        data = inputs(7)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        before = wait_idle(drv)
        pool = drv.pools.existing("faults")
        with pool._lock:  # (the I/O thread waits here, the worker's heartbeats pile up)
            time.sleep(1.0)  # (what is measured: a hold-up longer than the silence limit)
            pending = drv.dispatch_async(PROGRAM, data, backend="faults")
        assert_saxpy(pending.result(PATIENCE), data)
        after = worker(drv)
        assert (after["pid"], after["generation"]) == (before["pid"], before["generation"])
        assert pool_status(drv)["restarts"] == 0


@pytest.mark.timeout(60)
def test_frozen_idle_worker_is_replaced_without_a_request() -> None:
    with driver(timeouts={"heartbeat": 2.0}) as drv:
        data = inputs(3)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        before = wait_idle(drv)
        created = stopped(before["pid"])

        after = wait_for(lambda: (w := worker(drv))["generation"] == before["generation"] + 1
                         and w["state"] == "idle" and w, 15.0, "the frozen worker's replacement")
        assert after["pid"] not in (None, before["pid"])
        assert wait_for(lambda: gone(before["pid"], created), PATIENCE,
                           "the frozen worker to go")
        assert pool_status(drv)["restarts"] == 1
        assert worker(drv)["served"] == 1  # nothing was sent to the frozen one

        data = inputs(4)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)


@pytest.mark.timeout(60)
def test_stopped_worker_holding_its_request_waits_for_heartbeat_timeout() -> None:
    # Heartbeats every 0.1 s: "frozen" (three silent heartbeats) would be 0.3 s.
    with driver(timeouts={"heartbeat_interval": 0.1, "heartbeat": 4.0}) as drv:
        data = inputs(5)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        data = inputs(6)
        pending = drv.dispatch_async(PROGRAM, data, backend="faults",
                                     config=DispatchConfig(label="fault:sleep:1.5"))
        before = wait_busy(drv)
        stopped(before["pid"])
        try:
            stays_true(lambda: (w := worker(drv))["pid"] == before["pid"]
                       and w["generation"] == before["generation"] and w["running"],
                       1.0, "the stopped worker that holds its request is kept")
            assert not pending.is_ready()
        finally:
            os.kill(before["pid"], signal.SIGCONT)
        assert_saxpy(pending.result(timeout=10.0), data)
        after = worker(drv)
        assert (after["pid"], after["generation"]) == (before["pid"], before["generation"])
        assert pool_status(drv)["restarts"] == 0
