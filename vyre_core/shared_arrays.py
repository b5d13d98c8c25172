"""Arrays that cross without a copy: ``Driver.empty``, ``zeros`` and ``asarray`` give numpy
arrays over memfd segments of this process (``dataplane.Segment``), which a worker maps as
it maps the data plane's own. Passed to a call, such an array (or a contiguous view of it)
travels as a descriptor (segment, offset, count); given as an output, the worker writes
into it. Nothing is copied on the caller's side.

Lifetime, one rule each (docs/operations.md, "Arrays in shared memory"):

- An array's memory lives until the last array over it is collected; its segment's
  descriptor is closed then, or when its driver closes, but never while a request holds
  it (``Lent``: until no worker can still write it, ``machine.Release``).
- One writer at a time: a request that names memory another request holds waits, when it
  is made (within its deadline), until that one lets go, if either of them writes it (an
  output, a read_write buffer); two that only read it share it. A call cancelled or past
  its deadline holds it until its worker stops, so a later call never sees that worker's
  writes.
- An array of a closed driver, or one made before this process was forked (the child's
  copy still shares the parent's memory), stays a readable numpy array, and is refused by
  every call (``check``), with a Fix.
- A view that is not C-contiguous cannot be described by (segment, offset, count): it is
  refused too, never copied behind the caller's back.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import logging
import math
import operator
import os
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre_core.boundary.codec import DTYPES
from vyre_core.dataplane import (
    SHARE_THRESHOLD,
    Segment,
    Shared,
    map_shared,
    shared_memory_usable,
)
from vyre_core.deadline import NO_DEADLINE, Deadline
from vyre_core.errors import InvalidInputError, PoolFailedError

_log = logging.getLogger("vyre.dataplane")

PAGE = os.sysconf("SC_PAGE_SIZE")


class _Memory:
    """One segment of arrays made by a driver, mapped at ``start`` in this process."""

    def __init__(self, segment: Segment, start: int, owner: SharedArrays) -> None:
        self.segment = segment
        self.start = start
        self.end = start + segment.size
        self.owner = owner
        self.state = "open"  # open, closed (its driver closed), forked (a parent's)
        self.lent: list[Lent] = []  # held by requests that a worker may still write or read

    def close_unheld(self) -> None:
        """(Under the lock.) Close its descriptor once no request holds it."""
        if not self.lent and self.segment.fd != -1:
            self.segment.close()


class Lent:
    """A caller's array crossing by descriptor, held by one request (its ``LocalTransfer.shared``)
    until no worker can still write it: its segment stays open that long, and no other
    request writes that memory meanwhile, nor reads it where this one ``writes``."""

    def __init__(self, memory: _Memory, array: np.ndarray, offset: int, writes: bool,
                 holder: list[Any]) -> None:
        self.memory = memory
        self.array = array  # (keeps the mapping, and so the memory, alive)
        self.offset = offset
        self.writes = writes
        self.holder = holder  # (what its request holds: its own lends never wait on it)
        self.id = memory.segment.id

    def excludes(self, offset: int, nbytes: int, writes: bool, holder: list[Any]) -> bool:
        """Whether another request's lend of ``nbytes`` at ``offset`` must wait for this."""
        return (holder is not self.holder and (writes or self.writes)
                and offset < self.offset + self.array.nbytes and self.offset < offset + nbytes)

    def describe(self, dtype: np.dtype, count: int) -> Shared:
        segment = self.memory.segment
        return Shared(dtype, count, segment.id, segment.fd, segment.size, self.offset)

    def release(self) -> None:
        """No worker can write it any more."""
        with _lock:
            with contextlib.suppress(ValueError):  # (interrupted before it was recorded)
                self.memory.lent.remove(self)
            self.holder = []  # (its request's list holds it: no cycle outlives the release)
            _let_go.notify_all()
            if self.memory.state != "open":
                self.memory.close_unheld()


_lock = threading.RLock()  # (a finalizer may run inside a locked section)
_let_go = threading.Condition(_lock)  # (a lend released: lends that wait look again)
_starts: list[int] = []             # sorted: the start of every mapping
_memory: dict[int, _Memory] = {}    # by start


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _found(array: np.ndarray) -> _Memory | None:
    """(Under the lock.) The segment ``array``'s first byte lies in, if any."""
    if not _starts or array.size == 0:
        return None
    address = _address(array)
    i = bisect.bisect_right(_starts, address) - 1
    if i < 0:
        return None
    memory = _memory[_starts[i]]
    return memory if address < memory.end else None


def check(array: Any, name: str) -> None:
    """Refuse ``array`` (called ``name`` in the message) when it is an array of a closed
    driver, of the parent of this forked process, or a view of one that is not
    C-contiguous; anything else passes (ordinary arrays are copied as always)."""
    if not isinstance(array, np.ndarray) or not _starts:
        return
    with _lock:
        memory = _found(array)
        state = None if memory is None else memory.state
    if state == "closed":
        raise InvalidInputError(
            f"{name} is an array of a vyre Driver that was closed (Driver.empty, zeros "
            "or asarray)", "Copy it into an ordinary array first (np.array(x)), or make "
            "it with empty, zeros or asarray of an open Driver.")
    if state == "forked":
        raise InvalidInputError(
            f"{name} is an array a vyre Driver made before this process was forked: it "
            "still shares its memory with the parent process",
            "Copy it into an ordinary array first (np.array(x)), or make it with empty, "
            "zeros or asarray of a Driver in this process.")
    if state == "open" and not array.flags.c_contiguous:
        raise InvalidInputError(
            f"{name} is a view of an array in shared memory (Driver.empty) that is not "
            f"C-contiguous (strides {array.strides}): it cannot cross without a copy",
            "Pass a contiguous view (a slice along the first axis, a reshape), or copy it "
            "explicitly: np.ascontiguousarray(x).")


def lend_all(arrays: Sequence[tuple[np.ndarray, bool]], held: list[Any],
             deadline: Deadline = NO_DEADLINE, *, crossing: bool = True
             ) -> list[Lent | None]:
    """Each of ``arrays`` (1-D, contiguous; with whether the request ``writes`` it) held
    for one request whose list of what it holds is ``held``: a ``Lent`` where it lies in
    an open driver's memory and crosses as it is (large enough, and ``crossing``: the
    pool has shared memory), None where it is copied as any array. Where another request
    holds that memory and one of the two writes it, this first waits until it lets go
    (for every array of the call, then all are taken together: two calls that each name
    the other's memory never each hold one and wait for the other); a
    ``DispatchTimeoutError`` when ``deadline`` passes first. Each lend is in ``held``
    before the memory records it, so no interruption leaves one held by nobody."""
    if not _starts:
        return [None] * len(arrays)
    with _lock:
        while True:
            places = [_place(array) for array, _ in arrays]
            if not any(memory is not None and any(
                    o.excludes(offset, array.nbytes, writes, held) for o in memory.lent)
                    for (array, writes), (memory, offset) in zip(arrays, places, strict=True)):
                break
            left = deadline.left()
            if left == 0:
                raise deadline.expired_error(
                    "waiting for an array that an earlier call still uses (one of them "
                    "writes it)", "Give each call in flight arrays of its own where one "
                    "writes them (a cancelled call's worker writes its outputs until it "
                    "stops), or raise DispatchConfig(timeout=...).")
            _let_go.wait(left)
        lent: list[Lent | None] = []
        for (array, writes), (memory, offset) in zip(arrays, places, strict=True):
            if memory is None or not crossing or array.nbytes < SHARE_THRESHOLD:
                lent.append(None)
                continue
            one = Lent(memory, array, offset, writes, held)
            held.append(one)
            memory.lent.append(one)
            lent.append(one)
    return lent


def _place(array: np.ndarray) -> tuple[_Memory | None, int]:
    """(Under the lock.) The open memory ``array`` lies in, and where: (None, 0) for
    anything else (ordinary memory, a closed driver's, a view that is not contiguous)."""
    memory = _found(array)
    if memory is None or memory.state != "open" or not array.flags.c_contiguous \
            or _address(array) + array.nbytes > memory.end:
        return None, 0
    return memory, _address(array) - memory.start


def unaliased(inputs: Sequence[Any], into: Sequence[np.ndarray],
              own: dict[int, int]) -> list[Any]:
    """``inputs``, with a copy of each one in shared memory that a worker writing
    ``into`` could change while it reads it: every input that may share memory with an
    output target, unless it is exactly the target of its own read_write buffer
    (``own``: input index -> output index), which the backend updates in place."""
    if not _starts:
        return list(inputs)
    crossing = []
    for i, data in enumerate(inputs):
        if isinstance(data, np.ndarray) and data.nbytes >= SHARE_THRESHOLD:
            with _lock:
                shared = _found(data) is not None
            if shared and any(np.may_share_memory(data, target) and not (
                    own.get(i) == j and _address(data) == _address(target)
                    and data.nbytes == target.nbytes) for j, target in enumerate(into)):
                data = np.array(data, copy=True)
        crossing.append(data)
    return crossing


class SharedArrays:
    """The arrays one driver made in shared memory; ``close`` ends their crossing."""

    def __init__(self) -> None:
        self._made: weakref.WeakSet[_Memory] = weakref.WeakSet()
        self.closed = False

    def empty(self, shape: Any, dtype: Any, keep: object = None) -> np.ndarray:
        """A writable, C-contiguous array of ``shape`` and ``dtype`` over a segment of its
        own, zero-filled; a small one (under 64 KiB, cheaper to copy) is ordinary memory,
        and so is any when shared memory cannot be had (the data plane's fallback). The
        memory holds ``keep`` (its driver: closed once collected) while any array of it
        lives."""
        if self.closed:
            raise PoolFailedError("the driver is closed", "Create a new vyre Driver.")
        dtype = np.dtype(dtype)
        if dtype not in DTYPES.values():
            raise InvalidInputError(f"arrays of dtype {dtype} cannot cross to a worker",
                                    f"Pass a dtype of {sorted(DTYPES)}.")
        given = shape
        try:
            shape = tuple(map(operator.index, shape if isinstance(shape, tuple | list)
                              else (shape,)))
        except TypeError:
            shape = (-1,)
        if any(n < 0 for n in shape):
            raise InvalidInputError(f"shape {given!r} is not a length or a tuple of them",
                                    "Pass e.g. 1024 or (512, 512).")
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if nbytes < SHARE_THRESHOLD or not shared_memory_usable()[0]:
            return np.zeros(shape, dtype)
        try:
            segment = Segment(-(-nbytes // PAGE) * PAGE)
        except OSError as exc:  # (out of descriptors, say: the data plane's fallback)
            _fell_back(f"a {nbytes}-byte segment could not be made: {exc.strerror or exc}")
            return np.zeros(shape, dtype)
        try:
            mapping = map_shared(segment.fd, segment.size)
        except OSError as exc:
            segment.close()
            _fell_back(f"a {nbytes}-byte segment could not be mapped: {exc.strerror or exc}")
            return np.zeros(shape, dtype)
        start = ctypes.addressof(mapping)
        memory = _Memory(segment, start, self)
        with _lock:
            if self.closed:
                segment.close()
                raise PoolFailedError("the driver is closed", "Create a new vyre Driver.")
            i = bisect.bisect_left(_starts, start)
            if i < len(_starts) and _starts[i] == start:  # (an old one being collected)
                _starts.pop(i)
            _starts.insert(i, start)
            _memory[start] = memory
            self._made.add(memory)
        mapping.keep = keep  # (ctypes instances take attributes)
        weakref.finalize(mapping, _forget, memory)
        return np.frombuffer(mapping, dtype, count).reshape(shape)

    def asarray(self, data: Any, dtype: Any = None, keep: object = None) -> np.ndarray:
        """``data`` itself when it is already an open array of shared memory of the dtype
        asked; else a copy of it in a new one."""
        source = np.asarray(data, dtype)
        with _lock:
            memory = _found(source) if _starts else None
        if memory is not None and memory.state == "open" and source.flags.c_contiguous:
            return source
        array = self.empty(source.shape, source.dtype, keep)
        np.copyto(array, source, casting="no")
        return array

    def close(self) -> None:
        """The driver closed: its arrays stop crossing (every call refuses them) and their
        descriptors close, each once no request holds it; their memory stays until the
        arrays are collected."""
        with _lock:
            self.closed = True
            for memory in list(self._made):
                if memory.state == "open":
                    memory.state = "closed"
                memory.close_unheld()
            _let_go.notify_all()  # (a call waiting for one of them: it crosses no more)


_warned_at: list[float] = []  # (monotonic) when the last fallback was logged


def _fell_back(why: str) -> None:
    """An array of ``Driver.empty`` is ordinary memory: logged at most once a minute."""
    now = time.monotonic()
    if not _warned_at or now - _warned_at[0] >= 60.0:
        _warned_at[:] = [now]
        _log.warning("shared memory unavailable for an array of Driver.empty (%s); it is "
                     "ordinary memory, copied to workers (slower, same results)", why)


def _forget(memory: _Memory) -> None:
    """Its last array was collected (and no request holds it): unregister, close."""
    with _lock:
        if _memory.get(memory.start) is memory:
            del _memory[memory.start]
            _starts.remove(memory.start)
        memory.segment.close()


def _after_fork_in_child() -> None:
    """The parent's arrays are the parent's: refused here, their descriptors closed (the
    child's mappings of them stay, shared with the parent, until collected)."""
    global _lock, _let_go
    _lock = threading.RLock()  # (another thread may have held it at the fork)
    _let_go = threading.Condition(_lock)
    for memory in _memory.values():
        memory.state = "forked"
        memory.lent = []
        memory.segment.close()


os.register_at_fork(after_in_child=_after_fork_in_child)
