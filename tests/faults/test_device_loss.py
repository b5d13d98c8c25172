"""Device loss with real worker processes: the fault backend reports a lost device
("fault:device_lost"); the worker recovers in place through ``try_recover`` (same process,
next generation), or is restarted when the backend refuses to recover
(``VYRE_FAULTS=no_recover``). Handles from before the loss are invalidated."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import vyre_core
from vyre_core import ir
from vyre_core.config import DispatchConfig
from vyre_core.errors import DeviceLostError, PipelineInvalidatedError

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


LOST = DispatchConfig(label="fault:device_lost")


def lose_device(drv: vyre_core.Driver, via_pipeline: Any = None) -> DeviceLostError:
    with pytest.raises(DeviceLostError) as info:
        if via_pipeline is None:
            drv.dispatch(PROGRAM, inputs(99), backend="faults", config=LOST)
        else:
            via_pipeline.dispatch(inputs(99), LOST)
    return info.value


@pytest.mark.timeout(30)
def test_device_lost_recovers_in_place() -> None:
    with driver() as drv:
        data = inputs(1)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        pipeline = drv.compile(PROGRAM, backend="faults")
        assert_saxpy(pipeline.dispatch(data), data)
        before = wait_idle(drv)

        error = lose_device(drv)
        assert error.code == 1202
        assert error.details["generation"] == before["generation"]
        assert f"generation {before['generation']}" in str(error)
        assert "Fix:" in str(error)
        # right away, before recovery may have finished, the old handle is refused
        with pytest.raises(PipelineInvalidatedError, match="Fix:"):
            pipeline.dispatch(data)

        after = wait_for(lambda: (w := worker(drv))["generation"] == before["generation"] + 1
                         and w["state"] == "idle" and w, 5.0, "recovery in place")
        assert after["pid"] == before["pid"]  # the same process: try_recover, no restart
        status = pool_status(drv)
        assert status["state"] == "running" and status["restarts"] == 0

        assert not pipeline.valid
        with pytest.raises(PipelineInvalidatedError) as info:
            pipeline.dispatch(data)
        assert "Compile the program again" in str(info.value)
        assert info.value.details["generation"] == before["generation"]

        for seed in (2, 3):
            data = inputs(seed)
            assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        fresh = drv.compile(PROGRAM, backend="faults")
        assert fresh.generation == after["generation"]
        assert_saxpy(fresh.dispatch(data), data)
        assert worker(drv)["pid"] == before["pid"]


@pytest.mark.timeout(30)
def test_device_lost_in_a_compiled_pipeline_recovers_in_place() -> None:
    with driver() as drv:
        pipeline = drv.compile(PROGRAM, backend="faults")
        before = wait_idle(drv)
        error = lose_device(drv, via_pipeline=pipeline)
        assert error.details["generation"] == before["generation"]
        after = wait_for(lambda: (w := worker(drv))["generation"] == before["generation"] + 1
                         and w["state"] == "idle" and w, 5.0, "recovery in place")
        assert after["pid"] == before["pid"]
        with pytest.raises(PipelineInvalidatedError):
            pipeline.dispatch(inputs(4))
        data = inputs(5)
        assert_saxpy(drv.compile(PROGRAM, backend="faults").dispatch(data), data)


@pytest.mark.timeout(30)
def test_device_lost_without_recovery_restarts_the_worker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VYRE_FAULTS", "no_recover")
    with driver() as drv:
        data = inputs(6)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        pipeline = drv.compile(PROGRAM, backend="faults")
        before = wait_idle(drv)

        error = lose_device(drv)
        assert error.details["generation"] == before["generation"]
        after = wait_for(lambda: (w := worker(drv))["pid"] not in (None, before["pid"])
                         and w["state"] == "idle" and w, 8.0, "a restarted worker")
        assert after["generation"] > before["generation"]
        status = pool_status(drv)
        assert status["state"] == "running"
        assert status["restarts"] == 0  # a planned restart, not the worker's fault

        with pytest.raises(PipelineInvalidatedError):
            pipeline.dispatch(data)
        for seed in (7, 8):
            data = inputs(seed)
            assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        assert worker(drv)["pid"] == after["pid"]


@pytest.mark.timeout(40)
def test_repeated_device_loss_keeps_the_pool_running() -> None:
    with driver(max_restarts=1) as drv:
        warm = inputs(9)
        assert_saxpy(drv.dispatch(PROGRAM, warm, backend="faults"), warm)
        first = None
        for round_ in range(4):
            before = wait_idle(drv)
            first = first or before["pid"]
            error = lose_device(drv)
            assert error.details["generation"] == before["generation"]
            data = inputs(10 + round_)
            assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
            assert worker(drv)["generation"] == before["generation"] + 1
        assert worker(drv)["pid"] == first
        status = pool_status(drv)
        assert status["state"] == "running" and status["restarts"] == 0
