"""Device loss with real worker processes: the fault backend reports a lost device
("fault:device_lost"); the worker recovers in place through ``try_recover`` (same process,
next generation), or is restarted when the backend refuses to recover
(``VYRE_FAULTS=no_recover``). Handles from before the loss are invalidated."""

from __future__ import annotations

from typing import Any

import pytest

import vyre_core
from vyre_core.config import DispatchConfig
from vyre_core.errors import DeviceLostError, PipelineInvalidatedError

from .support import PROGRAM, assert_saxpy, driver, inputs, pool_status, wait_for, wait_idle, worker

LOST = DispatchConfig(label="fault:device_lost")


def lose_device(drv: vyre_core.Driver, via_pipeline: Any = None) -> DeviceLostError:
    with pytest.raises(DeviceLostError) as info:
        if via_pipeline is None:
            drv.dispatch(PROGRAM, inputs(99), backend="faults", config=LOST)
        else:
            via_pipeline.dispatch(inputs(99), LOST)
    return info.value


@pytest.mark.timeout(90)
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


@pytest.mark.timeout(90)
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


@pytest.mark.timeout(90)
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


@pytest.mark.timeout(90)
def test_repeated_device_loss_keeps_the_pool_running() -> None:
    with driver(restart={"max_restarts": 1}) as drv:
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
