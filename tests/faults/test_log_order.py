"""A real worker killed mid-call: the log says it died before it says the call runs again
(issue 37: at INFO, "sending it again" came before "killed by SIGSEGV")."""

from __future__ import annotations

import logging

import pytest

from vyre_core.config import DispatchConfig
from vyre_core.errors import WorkerCrashedError

from .support import PROGRAM, driver, inputs


@pytest.mark.timeout(60)
def test_a_segfaulting_worker_is_logged_dead_before_its_call_runs_again(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="vyre.supervisor")
    with driver(restart={"max_restarts": 5}) as drv, pytest.raises(WorkerCrashedError,
                                                                   match="poison"):
        drv.dispatch(PROGRAM, inputs(1), backend="faults",
                     config=DispatchConfig(label="fault:segfault", retries=1))
    lines = [r.getMessage() for r in caplog.records if r.name == "vyre.supervisor"]
    died = next(i for i, line in enumerate(lines) if "killed by SIGSEGV" in line)
    again = next(i for i, line in enumerate(lines) if "running it again" in line)
    assert died < again, lines
