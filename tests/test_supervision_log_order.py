"""The supervisor's log tells a worker's death before what becomes of the request it held
(issue 37: "sending it again" came before "killed by SIGSEGV"). The rule on the pure state
machine here; with a real killed worker in tests/faults/test_log_order.py."""

from __future__ import annotations

import logging
import signal

import pytest
from supervision_harness import Shell

pytestmark = pytest.mark.fast


def texts(shell: Shell) -> list[str]:
    return [log.text for log in shell.logs if log.level >= logging.INFO]


def first(lines: list[str], part: str) -> int:
    return next(i for i, line in enumerate(lines) if part in line)


def test_a_death_is_logged_before_its_running_request_is_run_again() -> None:
    shell = Shell(restart={"max_restarts": 10})
    shell.submit(retries=1)
    shell.receive(0)
    shell.die(0, -signal.SIGSEGV)
    lines = texts(shell)
    assert first(lines, "killed by SIGSEGV") < first(lines, "running it again"), lines


def test_a_death_is_logged_before_a_request_it_never_received_is_sent_again() -> None:
    shell = Shell(restart={"max_restarts": 10})
    shell.submit(retries=0)
    shell.die(0, -signal.SIGSEGV)  # (before its main thread took the request)
    lines = texts(shell)
    assert first(lines, "killed by SIGSEGV") < first(lines, "sending it again"), lines
