"""``vyre_core.testing.Stalls``: what a deadline test may allow for is time its process did
not run, and only that: a call blocked past its deadline (the bug such a test guards) earns
nothing, so the test still fails."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from vyre_core.testing import Stalls


def hold_the_gil() -> float:
    """Keep every other thread of this process from running for a while (``sum`` over a
    range is one C call, which never lets the GIL go), and say for how long."""
    start = time.monotonic()
    sum(range(10**7))  # (0.1 s or more on any machine; seconds on a loaded one)
    return time.monotonic() - start


@pytest.mark.fast
def test_a_process_held_up_counts_at_least_that_long_as_a_stall() -> None:
    with Stalls() as stalls:
        start = time.monotonic()
        held = hold_the_gil()
        seen = stalls.since(start)  # (before the sampler woke: a stall under way counts)
    assert seen >= held - 0.02, (held, stalls)
    assert stalls.since(start) >= held - 0.02, (held, stalls)  # and once it was recorded


@pytest.mark.fast
def test_since_counts_only_what_came_after() -> None:
    with Stalls() as stalls:
        held = hold_the_gil()
        after = time.monotonic()
        assert stalls.since(after) <= stalls.total() - held + 0.02, (held, stalls)


@pytest.mark.fast
def test_a_call_blocked_past_its_deadline_earns_no_allowance() -> None:
    """Blocking (a lock, an event, a socket) lets the sampler run: the wait is no stall,
    so a deadline test over a call that hangs this way still fails."""
    blocked = threading.Event()
    with Stalls() as stalls:
        start = time.monotonic()
        blocked.wait(1.0)
        assert stalls.since(start) < 0.9, stalls  # (a loaded machine stalls a bit; not all)


@pytest.mark.processes
def test_a_stopped_process_counts_its_stop() -> None:
    """What the suite meets on a shared machine: the whole process not scheduled."""
    me = os.getpid()
    with Stalls() as stalls:
        start = time.monotonic()
        stopper = subprocess.Popen([sys.executable, "-c",
                                    f"import os, signal, time\nos.kill({me}, signal.SIGSTOP)\n"
                                    f"time.sleep(1.5)\nos.kill({me}, signal.SIGCONT)\n"])
        assert stopper.wait(timeout=30) == 0
        assert stalls.since(start) >= 1.4, stalls
