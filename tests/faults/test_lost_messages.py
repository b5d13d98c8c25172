"""A request the worker cannot allocate is lost, not waited on forever.

libzmq drops a message its receiver cannot allocate with no error to either side (and
drops that connection with it). The worker here runs under ``memory_limit:64``: it stays
alive and keeps sending heartbeats, yet never receives the request. The call must end
quickly with MessageLostError (not hang without a timeout, and not "ran past its
deadline" with one), the loss is counted, and a replacement worker serves afterwards.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from vyre_core import DispatchConfig
from vyre_core.errors import DispatchTimeoutError, MessageLostError, SystemResourceError

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
    with driver(heartbeat_interval=0.1) as drv:
        data = inputs(1)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        yield drv


def huge() -> tuple[object, list[np.ndarray]]:
    return saxpy(N), [np.ones(N, dtype=np.float32), np.ones(N, dtype=np.float32),
                      np.array([2.0], dtype=np.float32)]


def check_lost(error: Exception, elapsed: float) -> None:
    assert isinstance(error, MessageLostError), f"{type(error).__name__}: {error}"
    assert elapsed < ANSWER_WITHIN, elapsed
    assert NEVER_REACHED.search(error.cause), error.cause
    assert error.fix and "Fix:" in str(error)
    assert "ran past its deadline" not in str(error)


def check_serves_again(drv, old_pid: int) -> None:
    data = inputs(7)
    assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
    status = pool_status(drv)
    assert status["lost_messages"] >= 1
    assert status["workers"][0]["pid"] != old_pid  # its connection is gone: replaced


@pytest.mark.timeout(60)
def test_unallocatable_request_without_timeout_fails_as_lost(starved) -> None:
    drv = starved
    old_pid = wait_idle(drv)["pid"]
    program, data = huge()
    start = time.monotonic()
    with pytest.raises(Exception) as info:
        drv.dispatch(program, data, backend="faults", config=DispatchConfig(retries=0))
    check_lost(info.value, time.monotonic() - start)
    check_serves_again(drv, old_pid)


@pytest.mark.timeout(60)
def test_unallocatable_request_with_timeout_is_lost_not_late(starved) -> None:
    drv = starved
    old_pid = wait_idle(drv)["pid"]
    program, data = huge()
    timeout = 30.0
    start = time.monotonic()
    with pytest.raises(Exception) as info:
        drv.dispatch(program, data, backend="faults", config=DispatchConfig(timeout=timeout))
    elapsed = time.monotonic() - start
    assert not isinstance(info.value, DispatchTimeoutError), str(info.value)
    check_lost(info.value, elapsed)
    assert elapsed < timeout / 2
    check_serves_again(drv, old_pid)


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
