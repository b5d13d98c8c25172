"""Objects dropped without ``close()``: closed anyway, off the dropping thread, with a
``ResourceWarning`` naming the line that made them (as asyncio and subprocess warn).

The finalizer (``weakref.finalize``, holding the closing function, never the object) runs
wherever the last reference dies: in any thread, in a garbage collection started by any
allocation, in a signal handler, perhaps while that very thread holds one of vyre's locks.
So it runs no vyre code: it puts the closing function on a ``queue.SimpleQueue`` (whose
``put`` is reentrant: made for finalizers and signal handlers) and warns. The closing runs
on the *reaper*, one daemon thread per process, started with the first watched object
(never from a finalizer), which holds no lock while it waits. This cannot deadlock: the
reaper takes an object's locks as any caller of ``close()`` does, and no code ever waits
for the reaper, so no thread holding a lock the reaper wants can be waiting on it.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path

_log = logging.getLogger("vyre.lifetime")
_PACKAGE = str(Path(__file__).resolve().parent) + os.sep


def made_at() -> tuple[str, int]:
    """The file and line of the innermost caller outside vyre_core: where a user made the
    object being constructed."""
    frame = sys._getframe(1)
    while frame.f_back is not None and (
            str(Path(frame.f_code.co_filename).resolve()).startswith(_PACKAGE)):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno


class _Reaper:
    """This process's closing thread and its queue (a forked child makes its own)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="vyre-reaper", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            close = self.queue.get()
            try:
                close()
            except Exception:  # (nobody to raise to: a dropped object's close failed)
                _log.exception("closing a dropped object failed")
            del close  # (the queue's last reference: let the object's parts go now)


_reaper: _Reaper | None = None
_starting = threading.Lock()


def _fresh_lock_in_child() -> None:  # (another thread may have held it at the fork)
    global _starting
    _starting = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_in_child)


def _current_reaper() -> _Reaper:
    global _reaper
    with _starting:
        if _reaper is None or _reaper.pid != os.getpid():
            _reaper = _Reaper()
        return _reaper


def _dropped(reaper: _Reaper, close: Callable[[], None], what: str,
             where: tuple[str, int]) -> None:
    """The finalizer: hand ``close`` to the reaper, then warn (a warning turned into an
    error must not stop the closing)."""
    reaper.queue.put(close)
    file, line = where
    warnings.warn_explicit(
        f"{what} made at {file}:{line} was garbage-collected without close(); it is "
        "closed now, in the background. Fix: call close() when done with it, or use "
        "it in a with statement.", ResourceWarning, file, line)


def watch(owner: object, close: Callable[[], None], what: str,
          where: tuple[str, int]) -> weakref.finalize:
    """Close ``owner`` with ``close`` (which must not refer to ``owner``) if it is
    collected unclosed, warning that ``what`` made at ``where`` was dropped. The caller
    detaches the result when it closes ``owner`` itself. Not run at interpreter exit."""
    finalizer = weakref.finalize(owner, _dropped, _current_reaper(), close, what, where)
    finalizer.atexit = False
    return finalizer
