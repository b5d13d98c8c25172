"""Worker recycling with real processes: a worker whose resident memory passes
``recycle_rss_bytes`` (the fault backend's "fault:leak:<MiB>" keeps memory for good), or
that has served ``recycle_after`` requests, is replaced between requests, and no request
fails because of it."""

from __future__ import annotations

import psutil
import pytest

from vyre_core.config import DispatchConfig

from .support import PROGRAM, assert_saxpy, driver, inputs, pool_status, wait_idle, worker

MIB = 2**20
LEAK_MIB = 40


def rss_of(pid: int | None) -> int | None:
    try:
        return psutil.Process(pid).memory_info().rss if pid else None
    except psutil.Error:
        return None


def fresh_worker_rss() -> int:
    """Resident memory of a fault worker that has served one small dispatch."""
    with driver() as drv:
        data = inputs(0)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        rss = rss_of(wait_idle(drv)["pid"])
    assert rss is not None
    return rss


@pytest.mark.timeout(60)
def test_rss_recycling_replaces_a_leaking_worker() -> None:
    limit = fresh_worker_rss() + 150 * MIB
    leak = DispatchConfig(label=f"fault:leak:{LEAK_MIB}")
    failures: list[BaseException] = []
    pids: list[int] = []
    peak = 0
    with driver(restart={"recycle_rss_bytes": limit}) as drv:
        for seed in range(1, 13):
            data = inputs(seed)
            try:
                assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults", config=leak), data)
            except Exception as exc:  # counted: every dispatch must succeed
                failures.append(exc)
            live = worker(drv)
            rss = rss_of(live["pid"])
            if rss is not None:
                peak = max(peak, rss)
            if live["pid"] is not None and live["pid"] not in pids:
                pids.append(live["pid"])
        final = wait_idle(drv)
        status = pool_status(drv)
    assert failures == []
    assert final["generation"] >= 2, "the leaking worker was never recycled"
    assert len(pids) >= 2
    assert peak < limit + LEAK_MIB * MIB, f"peak {peak / MIB:.0f} MiB, limit {limit / MIB:.0f}"
    assert status["state"] == "running"
    assert status["restarts"] == 0  # recycling is planned, not a crash


@pytest.mark.timeout(90)
def test_recycle_after_replaces_the_worker_after_n_requests() -> None:
    with driver(restart={"recycle_after": 3}) as drv:
        first = None
        for seed in range(1, 4):
            data = inputs(seed)
            assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
            if first is None:
                first = worker(drv)
                assert first["generation"] == 1
            if seed < 3:
                assert worker(drv)["pid"] == first["pid"]
        replaced = wait_idle(drv)
        assert replaced["generation"] == 2
        assert replaced["pid"] != first["pid"]
        data = inputs(4)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        assert worker(drv)["pid"] == replaced["pid"]
        assert pool_status(drv)["restarts"] == 0


@pytest.mark.timeout(90)
def test_recycle_after_counts_requests_per_generation() -> None:
    """recycle_after counts the caller requests of the current worker only, so every
    generation serves exactly that many before it is replaced."""
    generations = []
    failures: list[BaseException] = []
    with driver(restart={"recycle_after": 3}) as drv:
        for seed in range(1, 10):
            data = inputs(seed)
            try:
                assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
            except Exception as exc:
                failures.append(exc)
            generations.append(wait_idle(drv)["generation"])
    assert failures == []
    assert generations == [1, 1, 2, 2, 2, 3, 3, 3, 4]
