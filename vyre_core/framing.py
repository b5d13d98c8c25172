"""Messages on a lane: a byte stream between the pool's process and one worker.

A lane is one end of an anonymous unix socket pair, handed to the worker when it starts:
no path anybody could connect to or squat, no proof to exchange, and no broker thread on
either side, so a message costs one system call each way (ZeroMQ's ipc transport crosses
an I/O thread in each process, four thread wake-ups per round trip). A message is a
prefix, ``<u32 frame count><u64 length per frame>``, followed by its frames: the msgpack
header and the raw bytes of each array (``boundary.codec.encode``).

``StreamReader`` takes whole messages off a non-blocking stream in whatever chunks they
arrive, each frame received into memory of its own (no copy of a large frame). A frame it
cannot allocate is read and dropped, and the message is replaced by a ``Dropped``: the
stream stays framed and the request can still be answered. A prefix outside the limits
means the stream cannot be framed any more: ``BrokenStream``.
"""

from __future__ import annotations

import functools
import select
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_COUNT = struct.Struct("<I")
_LENGTH = struct.Struct("<Q")
#: How much a read asks for at a time: a small message arrives whole in one read.
CHUNK = 1 << 16
#: The longest a send waits for room at a time before it looks again.
POLL_SLICE_MS = 100


class BrokenStream(Exception):
    """The stream can no longer be framed (a bad prefix, or a message cut off mid-way)."""


@dataclass
class Dropped:
    """A message whose frame ``index`` (``nbytes`` long) could not be allocated: read and
    dropped. ``header`` is its first frame, when that one was kept."""

    header: bytes | None
    index: int
    nbytes: int


def pair() -> tuple[socket.socket, socket.socket]:
    """A new lane: (the pool's end, non-blocking; the worker's end, to hand over)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setblocking(False)
    return ours, theirs


def prefix(frames: Sequence[Any]) -> bytes:
    sizes = [f.nbytes if hasattr(f, "nbytes") else len(f) for f in frames]
    return struct.pack(f"<I{len(sizes)}Q", len(sizes), *sizes)


def send(sock: socket.socket, frames: Sequence[Any], within: float | None = None,
         cut: Callable[[], None] | None = None) -> None:
    """Write one message whole on a non-blocking ``sock``, waiting for room at most
    ``within`` seconds at a time (None: as long as it takes): a peer that takes nothing
    for that long is stuck. Raises TimeoutError, or OSError from the socket; either way
    with part of the message written, the stream is broken. ``cut`` is called when any
    other exception (a signal handler's, say) leaves part of the message written."""
    buffers: list[Any] = [prefix(frames), *frames]
    begun = False
    deadline = None
    try:
        while True:
            try:  # (no SIGPIPE: a peer that is gone is an error here, not this process's end)
                sent = sock.sendmsg(buffers, (), socket.MSG_NOSIGNAL)
            except BlockingIOError:
                sent = 0
            begun |= sent > 0
            buffers = _after(buffers, sent)
            if not buffers:
                return
            if deadline is None or sent:
                deadline = None if within is None else time.monotonic() + within
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                raise TimeoutError(f"the peer took no more of the message within {within:g} s")
            poller = select.poll()
            poller.register(sock, select.POLLOUT)
            # (in slices: a signal delivered to another thread of this process is handled
            # here only once the poll returns)
            poller.poll(POLL_SLICE_MS if wait is None else min(POLL_SLICE_MS,
                                                               max(1, int(wait * 1000))))
    except OSError:
        raise
    except BaseException:
        if begun and buffers and cut is not None:
            cut()
        raise


def _after(buffers: list[Any], sent: int) -> list[Any]:
    """What is left of ``buffers`` once ``sent`` bytes of them went out."""
    if sent == 0:
        return buffers
    for i, buffer in enumerate(buffers):
        view = memoryview(buffer).cast("B")
        if sent < len(view):
            return [view[sent:], *buffers[i + 1:]]
        sent -= len(view)
    return []


class StreamReader:
    """Whole messages off a non-blocking stream socket (see the module docstring)."""

    def __init__(self, sock: socket.socket, max_frames: int, max_bytes: int) -> None:
        self._sock = sock
        self._max_frames = max_frames
        self._max_bytes = max_bytes
        self._pending = b""           # bytes received and not yet placed in a frame
        self._lengths: tuple[int, ...] | None = None  # of the message being received
        self._frames: list[Any] = []  # its frames received so far
        self._large: np.ndarray | None = None  # its frame being received in place
        self._filled = 0
        self._skip = 0                # bytes left of a frame that could not be allocated
        self._dropped: Dropped | None = None
        self._ready: list[list[Any] | Dropped] = []
        self.ended = False            # the peer closed its end
        self._chunked = False

    def fill(self, budget: int | None = None) -> bool:
        """Receive what has arrived, without waiting (and, given a ``budget``, once about
        that many bytes came: the rest is read on the next call); whether a whole message
        (or the end of the stream) is ready. Raises BrokenStream (with ``ended`` set when
        the peer went in the middle of a message)."""
        taken = 0
        while not self.ended and (budget is None or taken < budget):
            try:
                got = self._receive()
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionResetError:
                got = 0
            except MemoryError:  # (a chunk, not a frame: what was read may be lost)
                raise BrokenStream("out of memory while receiving") from None
            taken += got
            if not got:
                self.ended = True
                if self._lengths is not None or self._pending:
                    raise BrokenStream("the stream ended in the middle of a message")
            elif got < CHUNK and self._chunked:  # (all there was: a read now would find
                break  # nothing, at the cost of a system call and an exception; the
                # caller polls before it reads again)
        return bool(self._ready) or self.ended

    def _receive(self) -> int:
        self._chunked = False  # (whether this read asked for a whole chunk)
        if self._skip:
            got = self._sock.recv_into(_scratch(), min(self._skip, CHUNK))
            self._skip -= got
            if got and not self._skip:
                self._frame_done(None)
                self._parse()  # (empty frames may follow)
        elif self._large is not None:
            got = self._sock.recv_into(memoryview(self._large)[self._filled:])
            self._filled += got
            if self._filled == len(self._large):
                self._frame_done(self._large)
                self._parse()
        else:
            chunk = self._sock.recv(CHUNK)
            got = len(chunk)
            self._chunked = True
            if got:
                self._pending = self._pending + chunk if self._pending else chunk
                self._parse()
        return got

    def messages(self, budget: int | None = None) -> list[list[Any] | Dropped]:
        """The whole messages received so far, oldest first (receiving first what has
        arrived, as ``fill``). Raises BrokenStream."""
        self.fill(budget)
        ready, self._ready = self._ready, []
        return ready

    def _parse(self) -> None:
        data, offset = self._pending, 0
        while True:
            if self._lengths is None:
                if len(data) - offset < _COUNT.size:
                    break
                (count,) = _COUNT.unpack_from(data, offset)
                if not 0 < count <= self._max_frames:
                    raise BrokenStream(f"a message of {count} frames (at most "
                                       f"{self._max_frames})")
                end = offset + _COUNT.size + count * _LENGTH.size
                if len(data) < end:
                    break
                lengths = struct.unpack_from(f"<{count}Q", data, offset + _COUNT.size)
                if sum(lengths) > self._max_bytes:
                    raise BrokenStream(f"a message of {sum(lengths)} bytes (at most "
                                       f"{self._max_bytes})")
                self._lengths, offset = lengths, end
            index = len(self._frames)
            length = self._lengths[index]
            if len(data) - offset >= length:  # here whole: the header as a view of it, an
                view = memoryview(data)[offset:offset + length]  # array copied (aligned,
                self._frame_done(view if index == 0 else bytes(view))  # not holding data)
                offset += length
                continue
            self._begin_large(length, memoryview(data)[offset:])
            offset = len(data)
            break
        self._pending = data[offset:] if offset < len(data) else b""

    def _begin_large(self, length: int, begun: memoryview) -> None:
        """Receive the rest of a frame into memory of its own, or read it through and drop
        it when there is none to be had."""
        try:
            self._large = _allocate(length)
        except MemoryError:
            header = self._frames[0] if self._frames else None
            self._dropped = self._dropped or Dropped(
                None if header is None else bytes(header), len(self._frames), length)
            self._skip = length - len(begun)
            return
        self._large[:len(begun)] = begun
        self._filled = len(begun)

    def _frame_done(self, frame: Any) -> None:
        self._large, self._filled = None, 0
        self._frames.append(frame)
        assert self._lengths is not None
        if len(self._frames) == len(self._lengths):
            self._ready.append(self._frames if self._dropped is None else self._dropped)
            self._lengths, self._frames, self._dropped = None, [], None


def _allocate(length: int) -> np.ndarray:
    """Memory of its own for a large frame (aligned; not zeroed: it is received into)."""
    return np.empty(length, dtype=np.uint8)


@functools.cache
def _scratch() -> memoryview:
    """Where the bytes of a dropped frame are read through (one per process)."""
    return memoryview(bytearray(CHUNK))
