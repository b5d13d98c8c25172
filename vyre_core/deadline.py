"""Seconds a caller gives (a call's timeout, a pool's grace periods): the one check.

A NaN would never expire and would stall every deadline compared with it; a bool is
not meant as seconds; infinity means "no deadline" only where None does. Each place
that takes seconds states which of these it allows (``zero``, ``infinite``, ``most``)
and gets the same wording.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from vyre_core.errors import InvalidConfigError


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
