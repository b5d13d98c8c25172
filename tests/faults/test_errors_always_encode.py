"""A backend error whose details hold numpy scalars and arbitrary objects still reaches
the caller as itself: the worker encodes the details as plain data (numbers as Python
numbers, unknown objects as their repr) instead of dying while it encodes the reply, and
the same worker process goes on serving."""

from __future__ import annotations

import pytest

from vyre_core import DispatchConfig
from vyre_core.errors import DispatchError

from .support import PROGRAM, assert_saxpy, driver, inputs, pool_status, wait_idle, worker

INJECTED = "vyre_faults: an error with numpy details (injected)"


@pytest.mark.timeout(60)
def test_numpy_details_reach_the_caller_and_the_worker_survives() -> None:
    with driver() as drv:
        first = inputs(1)
        assert_saxpy(drv.dispatch(PROGRAM, first, backend="faults"), first)
        before = wait_idle(drv)

        with pytest.raises(DispatchError) as caught:
            drv.dispatch(PROGRAM, inputs(2), backend="faults",
                         config=DispatchConfig(label="fault:numpy_error"))
        error = caught.value
        assert type(error) is DispatchError and error.code == 1204
        assert str(error).startswith("[E1204] ")
        assert INJECTED in error.cause, error.cause
        details = error.details
        assert details["count"] == 7 and type(details["count"]) is int, details
        assert details["ratio"] == 0.5 and type(details["ratio"]) is float, details
        assert details["flag"] is True, details
        assert isinstance(details["where"], str), details
        assert details["where"].startswith("<object object at 0x"), details

        # the very same process and generation serves the next dispatch, exactly
        after = wait_idle(drv)
        assert (after["pid"], after["generation"]) == (before["pid"], before["generation"])
        again = inputs(3)
        assert_saxpy(drv.dispatch(PROGRAM, again, backend="faults"), again)
        final = worker(drv)
        assert (final["pid"], final["generation"]) == (before["pid"], before["generation"])
        assert final["restarts"] == 0
        assert pool_status(drv)["restarts"] == 0
        assert pool_status(drv)["failure"] is None
