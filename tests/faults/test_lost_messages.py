"""A request the worker cannot allocate fails at once, alone; it is never waited on.

The worker here runs under ``memory_limit:64``: a frame of 128 MiB that rides its lane
cannot be allocated there. Before (ZeroMQ lanes), libzmq dropped such a message with no
error to either side and closed that connection: the call waited for the silence limit,
ended in MessageLostError and the worker was replaced. Now the worker reads the frame
through, drops it and answers at once with SystemResourceError naming the size, and it
keeps serving (same process, nothing counted lost). Through shared memory, the worker that
cannot map the segment answers with the OS's refusal.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from vyre_core import DispatchConfig
from vyre_core.errors import SystemResourceError

from .support import PROGRAM, assert_saxpy, driver, inputs, pool_status, saxpy, wait_idle

LIMIT_MIB = 64
N = 32 * 2**20  # two float32 inputs of 128 MiB each: far over what the worker may allocate
ANSWER_WITHIN = 10.0  # detection takes a few heartbeats; a hang would take forever
NEVER_REACHED = re.compile(r"never (reached|received)")


@pytest.fixture(params=["socket"])
def starved(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest):
    """A driver whose ``faults`` workers cannot allocate more than 64 MiB, already serving.
    Large arrays ride the socket (shared memory off): the transport is what drops them."""
    monkeypatch.setenv("VYRE_FAULTS", f"memory_limit:{LIMIT_MIB}")
    monkeypatch.setenv("VYRE_SHARED_MEMORY", "1" if request.param == "shared" else "0")
    with driver(timeouts={"heartbeat_interval": 0.1}) as drv:
        data = inputs(1)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        yield drv


def huge() -> tuple[object, list[np.ndarray]]:
    return saxpy(N), [np.ones(N, dtype=np.float32), np.ones(N, dtype=np.float32),
                      np.array([2.0], dtype=np.float32)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("config", [DispatchConfig(retries=0), DispatchConfig(timeout=30.0)],
                         ids=["no-timeout", "timeout"])
def test_an_unallocatable_request_fails_at_once_and_the_worker_stays(starved, config) -> None:
    drv = starved
    old_pid = wait_idle(drv)["pid"]
    program, data = huge()
    start = time.monotonic()
    with pytest.raises(SystemResourceError) as info:
        drv.dispatch(program, data, backend="faults", config=config)
    assert time.monotonic() - start < ANSWER_WITHIN
    assert re.search(rf"could not allocate the {N * 4} bytes of array [01] ", info.value.cause)
    assert "shared memory" in info.value.fix
    data = inputs(7)
    assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
    status = pool_status(drv)
    assert status["workers"][0]["pid"] == old_pid and status["lost_messages"] == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("starved", ["shared"], indirect=True)
def test_unmappable_shared_request_fails_fast_and_the_worker_stays(starved) -> None:
    """Through shared memory nothing is dropped: the worker that cannot map the segment
    answers at once with the OS's refusal, and keeps serving (no restart)."""
    drv = starved
    old_pid = wait_idle(drv)["pid"]
    program, data = huge()
    start = time.monotonic()
    with pytest.raises(SystemResourceError) as info:
        drv.dispatch(program, data, backend="faults", config=DispatchConfig(retries=0))
    assert time.monotonic() - start < ANSWER_WITHIN
    assert "ENOMEM" in info.value.cause and "shared segment" in info.value.cause
    assert "Fix:" in str(info.value)
    data = inputs(7)
    assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
    status = pool_status(drv)
    assert status["workers"][0]["pid"] == old_pid and status["lost_messages"] == 0
