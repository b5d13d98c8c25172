"""Waiting in tests without sleeping blindly: poll a condition until it holds, with a
deadline, and fail with what was awaited (a flaky ``sleep`` is never the answer)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

#: How long a wait for something sure to come may take before the test fails: long, as a
#: loaded machine (a CI runner, two cores shared) can stall a process for seconds; a wait
#: returns as soon as its condition holds, so this costs only a failing test its time.
PATIENCE = 30.0


def wait_for(condition: Callable[[], Any], timeout: float = PATIENCE, what: str = "") -> Any:
    """The first truthy value of ``condition()``, polled every 5 ms for ``timeout`` s. The
    condition is always asked once more after the deadline has passed: a process stopped
    across the deadline (a loaded machine) still sees what happened meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        late = time.monotonic() > deadline
        value = condition()
        if value:
            return value
        if late:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def stays_true(condition: Callable[[], Any], seconds: float, what: str = "") -> None:
    """Check that ``condition()`` holds at every poll for ``seconds`` (something that must
    not happen, e.g. a respawn, is watched for, not slept through)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert condition(), f"stopped holding: {what}"
        time.sleep(0.005)



class Stalls:
    """When this process did not run, so that a test of a deadline ("the call ends by its
    deadline, not much later") can allow exactly that much extra, neither a blind larger
    bound nor a flaky one: a shared, loaded machine can stop a process for seconds, and no
    deadline can be kept while its process is not running.

    A sampler thread wakes every ``period`` s; a wake-up later than ``floor`` s after the
    one before records the time between as a stall. A call that blocks past its deadline
    (on a lock, a socket, a queue) lets the sampler run, so it earns no allowance; only time
    the whole process was held up (or its threads kept from the GIL) does. The fixture
    ``vyre_stalls`` runs one for the test::

        start = time.monotonic()
        ...                                       # the call with a 1 s deadline
        elapsed = time.monotonic() - start
        assert elapsed <= 1.0 + SLACK + vyre_stalls.since(start), (elapsed, vyre_stalls)
    """

    def __init__(self, period: float = 0.005, floor: float = 0.05) -> None:
        self.period, self.floor = period, floor
        self._stalls: list[tuple[float, float]] = []  # (began, ended), monotonic
        self._last = self._entered = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._sample, name="vyre-stalls", daemon=True)

    def __enter__(self) -> Stalls:
        self._last = self._entered = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def since(self, start: float) -> float:
        """Seconds of stall after ``start`` (a ``time.monotonic()``), a stall still under
        way (the sampler not yet awake to record it) included."""
        with self._lock:
            now = time.monotonic()
            ongoing = [(self._last, now)] if now - self._last > self.floor else []
            return sum(max(0.0, end - max(began, start))
                       for began, end in self._stalls + ongoing)

    def total(self) -> float:
        """Seconds of stall since the ``with`` block began."""
        return self.since(self._entered)

    def _sample(self) -> None:
        while True:
            stopping = self._stop.wait(self.period)
            with self._lock:
                now = time.monotonic()
                if now - self._last > self.floor:
                    self._stalls.append((self._last, now))
                self._last = now
            if stopping:
                return

    def __repr__(self) -> str:
        longest = max((end - began for began, end in self._stalls), default=0.0)
        return f"Stalls(total={self.total():.2f} s, longest={longest:.2f} s)"
