"""Waiting in tests without sleeping blindly: poll a condition until it holds, with a
deadline, and fail with what was awaited (a flaky ``sleep`` is never the answer)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: How long a wait for something sure to come may take before the test fails: long, as a
#: loaded machine (a CI runner, two cores shared) can stall a process for seconds; a wait
#: returns as soon as its condition holds, so this costs only a failing test its time.
PATIENCE = 30.0


def wait_for(condition: Callable[[], Any], timeout: float = PATIENCE, what: str = "") -> Any:
    """The first truthy value of ``condition()``, polled every 5 ms for ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def stays_true(condition: Callable[[], Any], seconds: float, what: str = "") -> None:
    """Check that ``condition()`` holds at every poll for ``seconds`` (something that must
    not happen, e.g. a respawn, is watched for, not slept through)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert condition(), f"stopped holding: {what}"
        time.sleep(0.005)
