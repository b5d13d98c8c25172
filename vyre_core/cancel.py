"""Cancellation points: how the call a worker runs learns that its caller cancelled it.

The parent writes the id of a cancelled request into the worker's progress page
(``boundary.progress.ProgressPage``); the worker host installs that page here when it starts. A
backend stops at its next safe point (a loop's back-edge, a step boundary) by calling
``check()``, which raises ``DispatchCancelledError`` once the request being run was
cancelled, or, in compiled code, by reading ``words()``: the request is cancelled when
``words[0] == words[3]``. Outside a worker (a backend called in-process) nothing is ever
cancelled. A backend that never checks is stopped by the kill after
``Timeouts.cancel_grace`` instead; the hook contract is unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre_core.errors import DispatchCancelledError

_NEVER = np.array([1, 0, 0, 0], dtype=np.uint64)  # words[0] != words[3]: never cancelled
_page: Any = None
_words: np.ndarray = _NEVER


def install(page: Any) -> None:
    """(The worker host, once.) Take stop requests from ``page``."""
    global _page, _words
    _page = page
    _words = np.frombuffer(page.words(), dtype=np.uint64)


def requested() -> bool:
    """Whether the call being run was cancelled (a load and a compare)."""
    return _page is not None and _page.stop_requested()


def check() -> None:
    """Raise ``DispatchCancelledError`` if the call being run was cancelled."""
    if _page is not None and _page.stop_requested():
        raise DispatchCancelledError("the call was cancelled by its caller while it ran; "
                                     "the worker stopped at a safe point")


def words() -> np.ndarray:
    """The progress page's four u64 words (cancelled when ``words[0] == words[3]``), for
    compiled code to read at its safe points; never cancelled outside a worker."""
    return _words
