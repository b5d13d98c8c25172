"""Worker recycling with real processes: a worker whose resident memory passes
``recycle_rss_bytes`` (the fault backend's "fault:leak:<MiB>" keeps memory for good), or
that has served ``recycle_after`` requests, is replaced between requests, and no request
fails because of it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import psutil
import pytest

import vyre_core
from vyre_core import ir
from vyre_core.config import DispatchConfig

N = 64
MAX_RESTARTS = 3


# -- helpers -----------------------------------------------------------------------------

def saxpy(n: int = N) -> ir.Program:
    """``out[i] = a * x[i] + y[i]`` (as examples/saxpy.py)."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f32)
    y = k.read("y", ir.f32)
    a = k.uniform("a", ir.f32)
    out = k.output("out", ir.f32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = a[0] * x[i] + y[i]
    return k.build()


PROGRAM = saxpy()


def inputs(seed: int, n: int = N) -> list[np.ndarray]:
    """Distinct inputs per seed, so a result delivered to the wrong caller is caught."""
    rng = np.random.default_rng(seed)
    return [rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32),
            np.array([1.5 + seed], dtype=np.float32)]


def expected(data: list[np.ndarray]) -> bytes:
    x, y, a = data
    return (a[0] * x + y).astype(np.float32).tobytes()


def assert_saxpy(outputs: Any, data: list[np.ndarray]) -> None:
    assert len(outputs) == 1
    assert outputs[0].tobytes() == expected(data)


def driver(**options: Any) -> vyre_core.Driver:
    fields = {"kill_grace": 0.5, "heartbeat_timeout": 5.0, "max_restarts": MAX_RESTARTS,
              "restart_window": 30.0}
    fields.update(options)
    return vyre_core.Driver(**fields)


def pool_status(drv: vyre_core.Driver, backend: str = "faults") -> dict[str, Any]:
    return drv.status()["pools"][backend]


def worker(drv: vyre_core.Driver, index: int = 0, backend: str = "faults") -> dict[str, Any]:
    return pool_status(drv, backend)["workers"][index]


def wait_for(condition: Callable[[], Any], timeout: float = 5.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def wait_idle(drv: vyre_core.Driver, index: int = 0, backend: str = "faults",
              timeout: float = 5.0) -> dict[str, Any]:
    return wait_for(lambda: (w := worker(drv, index, backend))["state"] == "idle" and w,
                    timeout, f"worker {index} of {backend!r} to be idle")


def wait_busy(drv: vyre_core.Driver, index: int = 0, backend: str = "faults") -> dict[str, Any]:
    return wait_for(lambda: (w := worker(drv, index, backend))["state"] == "busy" and w,
                    5.0, f"worker {index} of {backend!r} to be busy")


@pytest.fixture(autouse=True)
def _clean_fault_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VYRE_FAULTS", raising=False)
    monkeypatch.delenv("VYRE_FAULTS_PRECEDENCE", raising=False)


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
    with driver(recycle_rss_bytes=limit) as drv:
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


@pytest.mark.timeout(30)
def test_recycle_after_replaces_the_worker_after_n_requests() -> None:
    with driver(recycle_after=3) as drv:
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


@pytest.mark.timeout(40)
def test_recycle_after_counts_requests_per_generation() -> None:
    """recycle_after counts the caller requests of the current worker only, so every
    generation serves exactly that many before it is replaced."""
    generations = []
    failures: list[BaseException] = []
    with driver(recycle_after=3) as drv:
        for seed in range(1, 10):
            data = inputs(seed)
            try:
                assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
            except Exception as exc:
                failures.append(exc)
            generations.append(wait_idle(drv)["generation"])
    assert failures == []
    assert generations == [1, 1, 2, 2, 2, 3, 3, 3, 4]
