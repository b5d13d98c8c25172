"""A call's deadline, and the one check of seconds a caller gives.

``Deadline`` is made once per call, at the verb's entry, and carried as one value through
routing, the pools, retries and re-routing: the absolute time (``time.monotonic()``) and
the seconds the caller asked for (for messages).

The check: a NaN would never expire and would stall every deadline compared with it; a
bool is not meant as seconds; infinity means "no deadline" only where None does. Each
place that takes seconds states which of these it allows (``zero``, ``infinite``,
``most``) and gets the same wording.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from vyre_core.errors import DispatchTimeoutError, InvalidConfigError


def seconds_wrong(value: Any, *, zero: bool = False, infinite: bool = True,
                  most: float | None = None) -> str | None:
    """What is wrong with ``value`` as a number of seconds (None: nothing): a real number,
    not NaN, above 0 (``zero``: at least 0), finite unless ``infinite``, at most
    ``most``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return "is not a number of seconds"
    if value < 0 or (value == 0 and not zero):
        return f"is not a number of seconds {'>= 0' if zero else '> 0'}"
    if math.isinf(value) and not infinite:
        return "is infinite: use None for no deadline"
    if most is not None and value > most:
        return f"is more than {most:g} seconds"
    return None


def checked_seconds(value: Any, what: str, *, zero: bool = False,
                    infinite: bool = True) -> float | None:
    """``value`` as seconds to wait (None, or infinity where allowed: no deadline, capped
    at what a thread can wait for), else InvalidConfigError naming ``what``."""
    if value is None:
        return None
    wrong = seconds_wrong(value, zero=zero, infinite=infinite)
    if wrong is not None:
        raise InvalidConfigError(f"{what}={value!r} {wrong}",
                                 f"Pass e.g. {what}=30.0, or None for no deadline.")
    return None if math.isinf(value) else min(float(value), threading.TIMEOUT_MAX)


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a call must be answered: ``at`` in ``time.monotonic()`` seconds (None: never)
    and the ``seconds`` the caller asked for (None where nobody asked: messages then say
    no figure)."""

    at: float | None = None
    seconds: float | None = None

    @classmethod
    def after(cls, seconds: Any, what: str = "timeout") -> Deadline:
        """The deadline ``seconds`` from now (checked: None or infinity, none)."""
        checked = checked_seconds(seconds, what)
        return NO_DEADLINE if checked is None else cls(time.monotonic() + checked, checked)

    def left(self, now: float | None = None) -> float | None:
        """Seconds until it passes (never below 0); None when there is no deadline."""
        if self.at is None:
            return None
        return max(0.0, self.at - (time.monotonic() if now is None else now))

    def passed(self, now: float | None = None) -> bool:
        return self.at is not None and (time.monotonic() if now is None else now) >= self.at

    def bound(self, seconds: float) -> float:
        """``seconds``, or the time left where that is shorter (a wait of a step of the
        call: a start-up, a listing)."""
        left = self.left()
        return seconds if left is None else min(seconds, left)

    def within(self, seconds: float) -> Deadline:
        """This deadline, or ``seconds`` from now where that comes first (a step with its
        own bound, as a compile): the seconds of the one that holds."""
        own = time.monotonic() + seconds
        return self if self.at is not None and self.at <= own else Deadline(own, seconds)

    def expired_error(self, while_: str, fix: str) -> DispatchTimeoutError:
        """The call's answer when its deadline passed while ``while_`` (a step before any
        worker ran it: routing's probe, a listing of devices)."""
        return DispatchTimeoutError(f"the call's deadline passed while {while_}", fix)


#: A call without a deadline.
NO_DEADLINE = Deadline()
