"""A call's outcome: a future whose completion can never block.

``concurrent.futures.Future`` guards its state with a ``threading.Condition``, whose
``__enter__``/``__exit__`` are Python code: an exception thrown into a thread that waits
on one (a signal handler's, ``sys.exit`` from a handler, an async exception) can land
between the acquire and the release and leave the lock held for good, and the pool's I/O
thread then blocks for good completing that future. An ``Outcome`` holds no lock at all:

- it is claimed once, by whoever completes or cancels it first: ``next()`` of an
  ``itertools.count`` is one C call, so exactly one claimant sees 0 (a cancel racing the
  reply has exactly one outcome);
- the winner stores the value, then sets ``_done`` (one attribute store), then wakes the
  waiters' eventfds (``lane.Waker``: a non-blocking write) and runs the callbacks;
- a waiter adds its thread's waker, then looks at ``_done``: either the completer sees
  the waker or the waiter sees ``_done`` (the GIL orders both).

An exception that lands anywhere in a waiter leaves at most a stale waker in the list
(a spurious wake-up later); nothing a completer needs is ever held by another thread.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from vyre_core.errors import DispatchCancelledError
from vyre_core.spinning import Spinning
from vyre_core.supervisor.lane import waker

__all__ = ["InvalidStateError", "Outcome", "wait_first"]

_log = logging.getLogger("vyre.supervisor")
_PENDING, _RESULT, _EXCEPTION, _CANCELLED = range(4)


class Outcome:
    """The ``concurrent.futures.Future`` methods vyre uses, lock-free (module docstring).
    ``on_cancel``, when set by whoever runs the call, is told (once, in the cancelling
    thread) that the outcome was cancelled, so the work can be stopped."""

    __slots__ = ("__weakref__", "_callbacks", "_claims", "_done", "_state", "_value",
                 "_waiters", "on_cancel")

    def __init__(self) -> None:
        self._claims = itertools.count()
        self._state = _PENDING
        self._value: Any = None
        self._done = False
        self._waiters: list[Any] = []
        self._callbacks: list[tuple[itertools.count, Callable[[Outcome], Any]]] = []
        self.on_cancel: Callable[[], Any] | None = None

    # -- completing ------------------------------------------------------------------------

    def _complete(self, state: int, value: Any) -> bool:
        if next(self._claims):
            return False
        self._value, self._state = value, state
        self._done = True
        if state != _CANCELLED:  # (never called now: let go of the call it would cancel)
            self.on_cancel = None
        for woken in list(self._waiters):
            woken.wake()
        # (these run now and are let go of, with all their closures hold: the call's
        # reply among them, else kept till a garbage collection; one added from now on
        # runs at once)
        callbacks, self._callbacks = self._callbacks, []
        for claim, callback in callbacks:
            self._run(claim, callback)
        return True

    def set_result(self, value: Any) -> None:
        if not self._complete(_RESULT, value):
            raise InvalidStateError("the outcome is already complete")

    def set_exception(self, exc: BaseException) -> None:
        if not self._complete(_EXCEPTION, exc):
            raise InvalidStateError("the outcome is already complete")

    def cancel(self) -> bool:
        """Cancel it unless it is complete (False then: a no-op). Safe from any thread,
        any number of times; the call's runner is told through ``on_cancel``."""
        if not self._complete(_CANCELLED, None):
            return False
        hook, self.on_cancel = self.on_cancel, None
        if hook is not None:
            hook()
        return True

    def add_done_callback(self, callback: Callable[[Outcome], Any]) -> None:
        """``callback(self)`` once complete: at once in this thread if it is, else in the
        completing thread. Each runs exactly once."""
        entry = (itertools.count(), callback)
        if self._done:  # (complete: run it, keep nothing)
            self._run(*entry)
            return
        self._callbacks.append(entry)
        if self._done:  # (completed meanwhile: whichever of the two comes first runs it)
            self._run(*entry)

    def _run(self, claim: itertools.count, callback: Callable[[Outcome], Any]) -> None:
        if next(claim):
            return
        try:
            callback(self)
        except Exception:
            _log.exception("a callback of a vyre call's outcome raised")

    # -- reading ---------------------------------------------------------------------------

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return self._done and self._state == _CANCELLED

    def running(self) -> bool:
        return not self._done

    def wait(self, timeout: float | None = None, spin: Spinning | None = None) -> bool:
        """Wait until complete, at most ``timeout`` seconds (None: no limit); whether it
        is. First looks busily while ``spin`` allows (yielding the CPU): a reply that comes
        within microseconds is then taken without a thread's wake-up."""
        if self._done:
            return True
        if spin is not None:
            now = time.perf_counter()
            spin.start(now)
            while not self._done and spin.on(now):
                os.sched_yield()
                spin.yielded(now, now := time.perf_counter())
            if self._done:
                return True
        own = waker()
        self._waiters.append(own)
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self._done:
                if deadline is None:
                    ms = 1000
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    ms = max(1, int(min(1000.0, remaining * 1000)) + 1)
                own.poll(ms)
            return True
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(own)

    def result(self, timeout: float | None = None) -> Any:
        if not self.wait(timeout):
            raise FutureTimeout()
        if self._state == _CANCELLED:
            raise _cancelled()
        if self._state == _EXCEPTION:
            raise self._value
        return self._value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self.wait(timeout):
            raise FutureTimeout()
        if self._state == _CANCELLED:
            raise _cancelled()
        return self._value if self._state == _EXCEPTION else None


def _cancelled() -> DispatchCancelledError:
    return DispatchCancelledError("the call was cancelled (by cancel(), or by an exception "
                                  "in the thread that waited for it) before it finished")


def wait_first(outcomes: set[Outcome], timeout: float | None = None,
               every: bool = False) -> tuple[set[Outcome], set[Outcome]]:
    """(done, not done) once one of ``outcomes`` is complete (``every``: all of them), or
    ``timeout`` seconds passed: ``concurrent.futures.wait`` for outcomes."""
    own = waker()
    for outcome in outcomes:
        outcome._waiters.append(own)
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            done = {o for o in outcomes if o._done}
            if (len(done) == len(outcomes)) if every else done:
                break
            ms = 1000 if deadline is None else \
                int(min(1000.0, (deadline - time.monotonic()) * 1000)) + 1
            if ms <= 0:
                break
            own.poll(ms)
        return done, outcomes - done
    finally:
        for outcome in outcomes:
            with contextlib.suppress(ValueError):
                outcome._waiters.remove(own)
