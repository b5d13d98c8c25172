"""Hung backends: a per-dispatch deadline kills a worker stuck in Python or in native code,
and a worker that holds the GIL (so its heartbeat thread cannot run) is detected by its
missing heartbeats even without a deadline. Real worker processes, no mocks."""

from __future__ import annotations

import time

import numpy as np
import psutil
import pytest
from waiting import stays_true, wait_running

import vyre_core
from vyre_core import DispatchConfig, Timeouts
from vyre_core.errors import DispatchTimeoutError, PoolFailedError, WorkerCrashedError

from .support import saxpy

N = 64
KILL_GRACE = 0.5
SLACK = 1.0  # scheduling, polling and process start-up slop; a stall of the whole
#              process on a loaded machine is allowed for apart (``vyre_stalls``)

pytestmark = pytest.mark.timeout(90)


def data(seed: int, n: int = N) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32),
            np.array([1.5 + seed], dtype=np.float32)]


def expected(x: np.ndarray, y: np.ndarray, a: np.ndarray) -> bytes:
    return (a[0] * x + y).astype(np.float32).tobytes()


PROGRAM = saxpy(N)


def worker_pid(drv: vyre_core.Driver) -> int:
    pid = drv.status()["pools"]["faults"]["workers"][0]["pid"]
    assert isinstance(pid, int)
    return pid


def check_dispatch_ok(drv: vyre_core.Driver, seed: int) -> None:
    inputs = data(seed)
    out = drv.dispatch(PROGRAM, inputs, backend="faults")
    assert len(out) == 1
    assert out[0].tobytes() == expected(*inputs)


def wait_gone(pid: int, create_time: float, within: float) -> bool:
    """True once ``pid`` (the process started at ``create_time``) no longer runs."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            proc = psutil.Process(pid)
            if proc.create_time() != create_time or proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("kind", ["hang_python", "hang_native"])
def test_deadline_kills_hung_worker_and_replaces_it(kind, vyre_stalls):
    timeout = 1.0
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=KILL_GRACE, heartbeat=5)) as drv:
        check_dispatch_ok(drv, 1)
        old_pid = worker_pid(drv)
        old_created = psutil.Process(old_pid).create_time()

        start = time.monotonic()
        with pytest.raises(DispatchTimeoutError) as info:
            drv.dispatch(PROGRAM, data(2), backend="faults",
                         config=DispatchConfig(label=f"fault:{kind}", timeout=timeout))
        elapsed = time.monotonic() - start
        bound = timeout + KILL_GRACE + SLACK + vyre_stalls.since(start)
        assert timeout * 0.95 <= elapsed <= bound, (elapsed, vyre_stalls)
        assert info.value.code == 1301
        assert info.value.details.get("timeout") == timeout
        assert f"fault:{kind}" in info.value.cause

        # the hung process is really gone (SIGTERM is ignored while hung: SIGKILL follows)
        assert wait_gone(old_pid, old_created, KILL_GRACE + 5), f"{kind} worker survived"

        # ... and a fresh worker serves the next dispatch correctly
        start = time.monotonic()
        check_dispatch_ok(drv, 3)
        assert time.monotonic() - start < 30
        new_pid = worker_pid(drv)
        assert new_pid != old_pid
        status = drv.status()["pools"]["faults"]
        assert status["state"] == "running"
        assert status["workers"][0]["generation"] == 2
        check_dispatch_ok(drv, 4)
        assert worker_pid(drv) == new_pid


def test_native_hang_without_deadline_is_caught_by_missing_heartbeats(vyre_stalls):
    heartbeat = 2.0
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=KILL_GRACE, heartbeat=heartbeat,
                                            heartbeat_interval=0.25)) as drv:
        check_dispatch_ok(drv, 5)
        old_pid = worker_pid(drv)
        old_created = psutil.Process(old_pid).create_time()

        start = time.monotonic()
        with pytest.raises(WorkerCrashedError) as info:
            drv.dispatch(PROGRAM, data(6), backend="faults",
                         config=DispatchConfig(label="fault:hang_native"))
        elapsed = time.monotonic() - start
        bound = heartbeat + KILL_GRACE + SLACK + vyre_stalls.since(start)
        assert heartbeat * 0.95 <= elapsed <= bound, (elapsed, vyre_stalls)
        assert info.value.code == 1302
        assert "heartbeat" in str(info.value)
        assert wait_gone(old_pid, old_created, KILL_GRACE + 5)

        check_dispatch_ok(drv, 7)
        assert worker_pid(drv) != old_pid


def test_python_hang_keeps_heartbeating_and_ends_at_its_deadline(vyre_stalls):
    """time.sleep releases the GIL: the heartbeat thread keeps beating, so the heartbeat
    check (2 s) must NOT fire; the 3 s deadline ends the dispatch instead."""
    heartbeat, timeout = 2.0, 3.0
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=KILL_GRACE, heartbeat=heartbeat,
                                            heartbeat_interval=0.25)) as drv:
        check_dispatch_ok(drv, 8)
        old_pid = worker_pid(drv)

        start = time.monotonic()
        with pytest.raises(DispatchTimeoutError) as info:
            drv.dispatch(PROGRAM, data(9), backend="faults",
                         config=DispatchConfig(label="fault:hang_python", timeout=timeout))
        elapsed = time.monotonic() - start
        assert not isinstance(info.value, WorkerCrashedError)
        assert "heartbeat" not in str(info.value)
        bound = timeout + KILL_GRACE + SLACK + vyre_stalls.since(start)
        assert timeout * 0.95 <= elapsed <= bound, (elapsed, vyre_stalls)

        check_dispatch_ok(drv, 10)
        assert worker_pid(drv) != old_pid


def test_python_hang_without_any_deadline_is_left_running(vyre_stalls):
    """Heartbeats alone never kill a worker that is alive but slow: after several heartbeat
    timeouts the dispatch is still pending, and only close() ends it."""
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=KILL_GRACE, heartbeat=1.5,
                                            heartbeat_interval=0.2)) as drv:
        check_dispatch_ok(drv, 11)
        pid = worker_pid(drv)
        pending = drv.dispatch_async(PROGRAM, data(12), backend="faults",
                                     config=DispatchConfig(label="fault:hang_python"))
        wait_running(drv, "faults")
        # two heartbeat timeouts of watching: alive and beating, so never killed
        stays_true(lambda: not pending.is_ready() and worker_pid(drv) == pid
                   and drv.status()["pools"]["faults"]["workers"][0]["state"] == "busy",
                   3.0, "the slow but live worker left running")
        start = time.monotonic()
        drv.close()
        assert time.monotonic() - start <= KILL_GRACE + SLACK + 1 + vyre_stalls.since(start)
        with pytest.raises(PoolFailedError):
            pending.result(timeout=5)
