"""The hot path's two pieces of I/O: a worker's lane and a calling thread's waker.

A *lane* is the pool's end of the socket pair requests to one worker process travel on
(``framing.py``). The pool's I/O thread sends each request on it and reads the reply
(no calling thread ever does: an exception thrown into one could cut a message in two).
Taking and giving a lane goes through a mutex. A lane whose worker exited is closed by
whoever gives it back last.

A *waker* is an eventfd per waiting thread: whoever completes an outcome that thread
waits on writes it (``outcome.py``); the thread sleeps in ``poll`` on it.
"""

from __future__ import annotations

import _signal
import contextlib
import os
import select
import signal
import socket
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from vyre_core.errors import system_resource_error
from vyre_core.framing import StreamReader


class Lane:
    """One worker process's request socket in the parent (see the module docstring)."""

    def __init__(self, sock: socket.socket, identity: bytes, reader: StreamReader) -> None:
        self.socket = sock
        self.fd = sock.fileno()   # (kept: polled by number, also after the close)
        self.identity = identity  # the worker's, as the rules know it
        self.reader = reader
        self.broken = False       # a message was cut off on it: it carries no more
        self._cond = threading.Condition(threading.Lock())
        self._busy = False
        self._doomed = False
        self.closed = False
        self.on_free: Callable[[], None] | None = None  # told once, when it is given back

    def take(self, timeout: float | None = None) -> bool:
        """Hold the lane; waits while another thread gives it back (False: closed, or
        still held after ``timeout`` seconds)."""
        with self._cond:
            if not self._cond.wait_for(lambda: not self._busy or self.closed, timeout):
                return False
            if self.closed:
                return False
            self._busy = True
            return True

    def give(self) -> None:
        """Let go of the lane (closing it if its worker is gone)."""
        with self._cond:
            self._busy = False
            if self._doomed and not self.closed:
                self._close()
            self._cond.notify_all()
            notify, self.on_free = self.on_free, None  # (once: whoever waited takes it)
        if notify is not None:
            notify()

    @property
    def doomed(self) -> bool:
        return self._doomed

    def doom(self) -> None:
        """Its worker exited: close now if nobody holds it, else when given back."""
        with self._cond:
            self._doomed = True
            if not self._busy and not self.closed:
                self._close()
            self._cond.notify_all()

    def _close(self) -> None:
        self.closed = True
        self.socket.close()  # (the worker reads the end of its stream)


class Waker:
    """A waiting thread's eventfd: written by whoever completes what it waits on."""

    def __init__(self) -> None:
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        weakref.finalize(self, os.close, self.fd)
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        self._poller = poller

    def poll(self, timeout_ms: int) -> None:
        """Sleep until woken or ``timeout_ms`` passed, and take the wake-up (the caller
        looks again at what it waits on either way)."""
        if self._poller.poll(timeout_ms):
            self.clear()

    def wake(self) -> None:
        with contextlib.suppress(OSError):  # (closed: its thread is gone)
            os.eventfd_write(self.fd, 1)

    def clear(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.eventfd_read(self.fd)


_local = threading.local()
_SIGINT = int(signal.SIGINT)


def interrupts_deferred() -> contextlib.AbstractContextManager[None]:
    """On the main thread, a SIGINT that arrives inside the block is handled when it ends,
    by whatever Python handler was set (Python's default raises KeyboardInterrupt; a
    program's own may raise anything): a lane taken must be recorded as held, and a
    message begun must go out, or be read, whole. Elsewhere (other threads, no Python
    handler): as is (one shared empty block: the I/O threads enter this on every pass)."""
    if threading.current_thread() is not threading.main_thread():
        return _AS_IS
    return _deferred()


_AS_IS = contextlib.nullcontext()


@contextlib.contextmanager
def _deferred() -> Iterator[None]:
    # (``_signal``: the C functions ``signal`` wraps; its enum conversions cost 10x more,
    # twice per call on the hot path)
    handler = _signal.getsignal(_SIGINT)
    if not callable(handler):  # ignored, the default action, or set outside Python
        yield
        return
    caught: list[Any] = []
    _signal.signal(_SIGINT, lambda signum, frame: caught.append(frame))
    try:
        yield
    finally:
        _signal.signal(_SIGINT, handler)
    if caught:
        handler(_SIGINT, caught[0])


def waker() -> Waker:
    """This thread's waker (made on first use, closed when the thread's locals go).
    Raises SystemResourceError when the OS has no descriptor for it."""
    found = getattr(_local, "waker", None)
    if found is None:
        try:
            found = _local.waker = Waker()
        except OSError as exc:
            raise system_resource_error(exc, "making this thread's waker (an eventfd)") \
                from exc
    return found


def _forget_in_child() -> None:
    _local.__dict__.pop("waker", None)  # the parent's eventfd: never shared with a child


os.register_at_fork(after_in_child=_forget_in_child)
