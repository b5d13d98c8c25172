"""Sequences under faults, with real workers: a worker killed mid-sequence, a sequence past
its deadline, and a sequence whose resident buffers died with their worker."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
from kernels import spin
from waiting import wait_for, wait_running, workers

from vyre_core import DispatchConfig, Driver, SequenceBuilder, ir
from vyre_core.errors import (
    DispatchTimeoutError,
    PipelineInvalidatedError,
    WorkerCrashedError,
)

SPIN = 3000  # about 5-10 ms a step on the reference


def slow(times: int, resident: bool = False):
    """``times`` spinning steps; the last one's output comes back (or lands in a
    resident buffer)."""
    b = SequenceBuilder()
    (b.resident if resident else b.transient)("out", ir.u32, 1)
    with b.loop(times=times):
        b.step(spin(SPIN))
    return b.build(returns=[] if resident else ["out"])


def expected() -> int:
    return sum(range(SPIN)) & 0xFFFFFFFF


def in_thread(call) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


@pytest.mark.timeout(60)
def test_a_sequence_cut_off_by_a_worker_kill_is_run_again_whole():
    with Driver() as drv:
        drv.probe("reference")
        thread, outcome = in_thread(lambda: drv.dispatch(slow(100), [],
                                                         backend="reference"))
        (busy,) = wait_running(drv)
        os.kill(busy["pid"], signal.SIGKILL)
        thread.join(30)
        assert "error" not in outcome, outcome
        assert outcome["value"][0].tolist() == [expected()]
        assert workers(drv, "reference")[0]["generation"] == busy["generation"] + 1


@pytest.mark.timeout(60)
def test_a_sequence_with_resident_buffers_is_not_run_again_after_a_kill():
    """Its buffers died with the worker: the caller is told, nothing is re-run on a new
    worker with buffers it does not have."""
    with Driver() as drv:
        out = drv.allocate_resident(4, backend="reference")
        thread, outcome = in_thread(lambda: drv.dispatch(
            slow(100, resident=True), [], resident={"out": out}))
        (busy,) = wait_running(drv)
        os.kill(busy["pid"], signal.SIGKILL)
        thread.join(30)
        assert isinstance(outcome.get("error"), WorkerCrashedError), \
            outcome
        assert not out.valid
        with pytest.raises(PipelineInvalidatedError):
            drv.dispatch(slow(1, resident=True), [], resident={"out": out})


@pytest.mark.timeout(60)
def test_a_sequence_past_its_deadline_is_killed_and_the_pool_recovers(vyre_stalls):
    with Driver() as drv:
        drv.probe("reference")
        start = time.monotonic()
        with pytest.raises(DispatchTimeoutError):
            drv.dispatch(slow(2000), [], backend="reference",
                         config=DispatchConfig(timeout=0.5))
        assert time.monotonic() - start < 5.0 + vyre_stalls.since(start), vyre_stalls
        wait_for(lambda: workers(drv, "reference")[0]["state"] == "idle", 10.0,
                 "the replacement worker")
        assert drv.dispatch(slow(2), [], backend="reference")[0].tolist() == \
            [expected()]
        assert np.array_equal(drv.dispatch(slow(1), [], backend="reference")[0],
                              [expected()])
