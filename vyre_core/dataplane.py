"""The data plane: arrays cross to a worker and back through shared memory, and only a
descriptor of each travels on the worker's lane (``framing.py``).

The parent owns every *segment*: a memfd (so nothing is ever left in ``/dev/shm``, even
after SIGKILL), allocated in full when made (``posix_fallocate``: a full tmpfs or a memory
limit is an error here, never a SIGBUS later), and reused across dispatches from a free
list by size class, within bounds that give idle memory back (``surplus``). A calling
thread writes each large input into a segment of its own (one copy), and takes a segment
for each large output, which the backend writes in place through the contract's
dispatch-into path. The caller then gets a read-only numpy view of
that segment: the segment goes back to the free list when the last view of it is garbage
collected, so a later dispatch never overwrites a result someone still holds.

A worker maps a segment the first time a request names it, through
``/proc/<parent>/fd/<fd>``, and keeps a bounded number of mappings. When shared memory
cannot be had (no memfd, a limit on open files or file size, the memory is full) the array
travels on the socket as before, with a logged warning: never a failure.

Which side may touch a segment when is a supervision rule (``machine.Release``): a request's
segments go back to the free list only once no worker can still write them.
"""

from __future__ import annotations

import collections
import ctypes
import errno
import itertools
import logging
import mmap
import os
import sys
import threading
import time
import weakref
from dataclasses import dataclass

import numpy as np

from vyre_core import memory
from vyre_core.errors import ProtocolError, SystemResourceError, system_resource_error

_log = logging.getLogger("vyre.dataplane")

#: Arrays at least this large travel through shared memory; smaller ones ride the socket.
SHARE_THRESHOLD = 1 << 16
#: Up to this size segments come in steps of 64 KiB; above it, in classes at most 25% above
#: the request.
MIN_SEGMENT = 1 << 20
#: Free segments a pool keeps for reuse (``surplus``): none unused for RETAIN_IDLE
#: seconds; of the others, the most recently freed, at most RETAIN_COUNT of them (each
#: holds a file descriptor) and at most RETAIN_BYTES, or twice the largest of them when
#: that is more (a read_write round trip of N bytes needs two segments of N).
RETAIN_BYTES = 64 << 20
RETAIN_COUNT = 16
RETAIN_IDLE = 5.0
#: Inputs at least this large are written with pwrite, never mapped in the parent: a 1 GiB
#: input must not add 1 GiB to the caller's resident memory (smaller ones are copied
#: through a mapping, which is three times faster).
MAP_LIMIT = 1 << 28
#: Mappings a worker keeps (least recently used dropped first), and their bytes (or twice
#: the newest mapping when that is more).
WORKER_MAPS = 16
WORKER_MAP_BYTES = 1 << 30
#: After closing its cached segments for room, how long a calling thread waits at most for
#: the memory to come back (workers unmap closed segments after each heartbeat).
RELEASE_WAIT = 1.0
_WARN_EVERY = 60.0  # seconds between two warnings that shared memory is unavailable
_PR_GET_DUMPABLE = 3


@dataclass(frozen=True)
class Shared:
    """An array that lives in a parent's segment: what crosses the socket instead of it."""

    dtype: np.dtype
    count: int
    segment: int  # the segment's id: never reused while the parent runs
    fd: int       # the parent's file descriptor of the segment
    size: int     # the segment's size in bytes
    offset: int = 0  # where the array starts in the segment (a view of a caller's array)

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    @property
    def end(self) -> int:
        """Where the array ends in the segment: at most its size."""
        return self.offset + self.nbytes


def surplus(free: list[tuple[int, float]], now: float, cap: int | None = None) -> list[int]:
    """Which free segments to close, given each one's (size, when it was freed), oldest
    first: their indices. Memory kept for speed is bounded in size and returned when idle:
    every segment freed RETAIN_IDLE seconds ago or earlier goes; of the rest, the newest
    are kept within RETAIN_COUNT and the byte budget, and the older ones go. ``cap``: the
    most the memory budget lets them hold (``memory.cache_bound``), below all else."""
    fresh = [i for i, (_, freed) in enumerate(free) if now - freed < RETAIN_IDLE]
    budget = max([RETAIN_BYTES, *(2 * free[i][0] for i in fresh)])
    if cap is not None:
        budget = min(budget, cap)
    kept: set[int] = set()
    held = 0
    for i in reversed(fresh):
        if len(kept) < RETAIN_COUNT and held + free[i][0] <= budget:
            kept.add(i)
            held += free[i][0]
    return [i for i in range(len(free)) if i not in kept]


def size_class(nbytes: int) -> int:
    """The segment size that serves ``nbytes``: a multiple of 64 KiB up to 1 MiB, then of
    a quarter of its power of two (at most 25% unused)."""
    step = SHARE_THRESHOLD if nbytes <= MIN_SEGMENT else 1 << max(20, nbytes.bit_length() - 3)
    return max(SHARE_THRESHOLD, -(-nbytes // step) * step)


_segment_ids = itertools.count(1)


def _memfd_name(segment: int) -> str:
    return f"vyre-data-{segment}"


_libc = ctypes.CDLL(None, use_errno=True)  # (this module's own function prototypes)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value

#: A shared mapping: numpy arrays over it keep it mapped, and it is unmapped when the last
#: one is collected.
Mapping = ctypes.Array


def map_shared(fd: int, size: int) -> Mapping:
    """``size`` bytes of ``fd`` mapped shared and read-write (populated now). Unlike
    ``mmap.mmap``, which keeps a duplicate of the descriptor, it holds none: the caller's
    descriptor may be closed at once, and a segment costs one descriptor, not two."""
    address = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE,
                         mmap.MAP_SHARED | mmap.MAP_POPULATE, fd, 0)
    if address in (None, _MAP_FAILED):
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    mapping = (ctypes.c_ubyte * size).from_address(address)
    weakref.finalize(mapping, _libc.munmap, address, size)
    return mapping


class Segment:
    """One memfd of the parent, mapped in the parent only when a result is read from it."""

    def __init__(self, size: int) -> None:
        self.id = next(_segment_ids)
        self.size = size
        self.fd = os.memfd_create(_memfd_name(self.id), os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            os.posix_fallocate(self.fd, 0, size)  # the memory now, or an error now
        except BaseException:
            os.close(self.fd)
            raise
        self._map: Mapping | None = None
        self.reusable = True  # False once a forked child may hold views of it
        self.freed_at = 0.0   # (monotonic) when it last went back to the free list
        self._closer = weakref.finalize(self, os.close, self.fd)  # (if dropped unclosed)

    def describe(self, dtype: np.dtype, count: int) -> Shared:
        return Shared(dtype, count, self.id, self.fd, self.size)

    def write(self, array: np.ndarray) -> None:
        """Copy ``array`` (1-D, contiguous) to the start of the segment."""
        if array.nbytes >= MAP_LIMIT and self._map is None:
            view = memoryview(array).cast("B")
            done = 0
            while done < len(view):
                done += os.pwrite(self.fd, view[done:done + (1 << 30)], done)
            return
        target = np.frombuffer(self._mapping(), dtype=array.dtype, count=array.shape[0])
        np.copyto(target, array, casting="no")

    def view(self, dtype: np.dtype, count: int) -> np.ndarray:
        """A read-only array over the start of the segment (no copy)."""
        array = np.frombuffer(self._mapping(), dtype=dtype, count=count)
        array.flags.writeable = False
        return array

    def _mapping(self) -> Mapping:
        if self._map is None:
            self._map = map_shared(self.fd, self.size)
        return self._map

    def read_into(self, target: np.ndarray) -> None:
        """Copy the start of the segment into ``target`` without mapping it here."""
        view = memoryview(target).cast("B")
        done = 0
        while done < len(view):
            done += os.preadv(self.fd, [view[done:done + (1 << 30)]], done)

    def close(self) -> None:
        """Give the memory back once nobody maps it (views keep their mapping alive)."""
        self._map = None
        self._closer()
        self.fd = -1


class SegmentPool:
    """The segments of one worker pool: taken by calling threads, given back by the pool's
    rules or by the garbage collector (any thread)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.RLock()  # a finalizer may run inside a locked section
        self._free: list[Segment] = []  # the least recently freed first
        self._trim_due = 0.0
        self._closed = False
        self._lent: set[Segment] = set()  # held by result arrays
        _POOLS.add(self)
        self._warned_at: float | None = None
        self.enabled, why = shared_memory_usable()
        if not self.enabled:
            self._warn(why)
        self._group = memory.memory_cgroup() if self.enabled else None
        self._cap: int | None = None  # what the budget lets free segments hold, last seen
        self._making = threading.Lock()  # new segments are decided on and made one by one

    def take(self, nbytes: int, held: bool = False) -> Segment | None:
        """A segment of at least ``nbytes``, or None (the array then rides the socket).
        A new one is made only within the memory budget (``memory.plan``): cached free
        segments are closed first to make room; an input (``held``: its data is in this
        process already) that still does not fit rides the socket; an output raises
        SystemResourceError, before anything is allocated."""
        size = size_class(nbytes)
        with self._lock:
            if not self.enabled or self._closed:
                return None
            for i in range(len(self._free) - 1, -1, -1):  # the most recently freed first
                if self._free[i].size == size:
                    return self._free.pop(i)
        with self._making:  # (one decision at a time: each sees the segments made before)
            return self._make(size, held)

    def _make(self, size: int, held: bool) -> Segment | None:
        decided, facts = self._budget(size, held)
        if decided is memory.Plan.SOCKET:
            self._warn(f"a {size}-byte segment does not fit the memory budget "
                       f"({memory.describe(facts)})")
            return None
        if decided is memory.Plan.REFUSE:
            raise SystemResourceError(
                f"{self.name}: a {size}-byte output does not fit the memory this process may "
                f"use ({memory.describe(facts)}); it was refused before allocating, so the "
                "kernel's OOM killer has nothing to kill",
                "Return less data per call (split the dispatch, or write into an array of "
                "drv.empty with out=), drop results you no longer need, or raise the memory "
                "limit (the cgroup's memory.max / memory.limit_in_bytes, the container's "
                "limit, ulimit -v).", errno="ENOMEM", nbytes=size)
        for retry in (False, True):
            try:
                return Segment(size)
            except OSError as exc:
                if retry or not short_of_descriptors(exc) or not release_cached():
                    self._warn(f"a {size}-byte segment could not be made: "
                               f"{exc.strerror or exc}")
                    return None
        return None  # (unreached)

    def _budget(self, size: int, held: bool) -> tuple[memory.Plan, memory.MemoryFacts]:
        """What the memory budget says of a new ``size``-byte segment (closing the cached
        ones and waiting a moment for their memory when that makes room)."""
        facts = memory.read_facts(self._group)
        self._cap = memory.cache_bound(facts)
        with self._lock:
            cached = sum(s.size for s in self._free)
        decided = memory.plan(facts, size, cached, held)
        if decided is not memory.Plan.RELEASE:
            return decided, facts
        self.release()
        deadline = time.monotonic() + RELEASE_WAIT
        while True:  # (workers unmap closed segments after a heartbeat: then it is back)
            facts = memory.read_facts(self._group)
            decided = memory.plan(facts, size, 0, held)
            if decided is memory.Plan.SHARE or time.monotonic() >= deadline:
                return decided, facts
            time.sleep(0.02)

    def place(self, array: np.ndarray) -> Segment | None:
        """A segment holding a copy of ``array``, or None (it then rides the socket)."""
        segment = self.take(array.nbytes, held=True)
        if segment is not None:
            try:
                segment.write(array)
            except OSError as exc:  # the parent's own mapping refused (address space)
                segment.close()
                self._warn(f"a {segment.size}-byte segment could not be written: "
                           f"{exc.strerror or exc}")
                return None
            except BaseException:  # interrupted (Ctrl-C) while copying: nothing leaks
                self.give_back(segment)
                raise
        return segment

    def refused(self) -> None:
        """A worker cannot open this process's segments (it became undumpable, say): from
        now on arrays ride the socket."""
        with self._lock:
            was, self.enabled = self.enabled, False
        if was:
            self._warn("a worker cannot open this process's shared memory")

    def give_back(self, segment: Segment) -> None:
        """``segment`` is free again: keep it for reuse within the limits (``surplus``),
        closing whatever they leave out."""
        now = time.monotonic()
        with self._lock:
            self._lent.discard(segment)
            if self._closed or not segment.reusable:
                closing = [segment]
            else:
                segment.freed_at = now
                self._free.append(segment)
                closing = self._take_surplus(now)
        for old in closing:
            old.close()

    def trim(self, now: float) -> None:
        """Close the free segments idle for too long. The pool's I/O thread calls this
        each time it wakes: it looks at most once a second."""
        if now < self._trim_due:
            return
        self._trim_due = now + 1.0
        if self._free:  # (the budget's bound may have moved: a limit changed)
            self._cap = memory.cache_bound(memory.read_facts(self._group))
        with self._lock:
            closing = self._take_surplus(now)
        for old in closing:
            old.close()

    def _take_surplus(self, now: float) -> list[Segment]:
        """(Under the lock.) Take the segments ``surplus`` leaves out of the free list."""
        drop = surplus([(s.size, s.freed_at) for s in self._free], now, self._cap)
        if not drop:
            return []
        closing = [self._free[i] for i in drop]
        gone = set(drop)
        self._free = [s for i, s in enumerate(self._free) if i not in gone]
        return closing

    def result(self, segment: Segment, dtype: np.dtype, count: int) -> np.ndarray:
        """A read-only array of ``segment``'s data handed to a caller: a view whose
        segment comes back here when the last array derived from it is collected; or,
        when this process cannot map it (out of file descriptors or address space), a
        private copy read without mapping, and the segment comes back at once."""
        try:
            array = segment.view(dtype, count)
        except OSError as exc:
            self._warn(f"a result could not be mapped ({exc.strerror or exc}); it is copied")
            try:
                array = np.empty(count, dtype=dtype)
            except MemoryError:  # nor allocated: this process's memory, not the message
                self.give_back(segment)
                raise SystemResourceError(
                    f"{self.name}: this process could not map nor allocate a "
                    f"{count * dtype.itemsize}-byte result ({exc.strerror or exc}: out of "
                    "address space or memory)",
                    "Return less data per call (split the dispatch), drop results you no "
                    "longer need, or raise this process's limit (ulimit -v, the cgroup's "
                    "memory limit).", errno="ENOMEM") from None
            segment.read_into(array)
            array.flags.writeable = False
            self.give_back(segment)
            return array
        with self._lock:
            self._lent.add(segment)
        weakref.finalize(array, self.give_back, segment)
        return array

    def forked(self) -> None:
        """(In the parent, after a fork.) The child may hold views of every segment lent
        now: none of them is reused, so the child's copies never change under it."""
        with self._lock:
            for segment in self._lent:
                segment.reusable = False

    def forget(self) -> None:
        """(In a forked child.) This pool is the parent's: close the child's copies of its
        free segments' descriptors, so the child does not keep their memory alive."""
        with self._lock:
            free, self._free = self._free, []
            self._closed = True
        for segment in free:
            segment.close()

    def release(self) -> int:
        """Close every free segment now (descriptors or memory ran short), and say how
        many; the pool goes on caching."""
        with self._lock:
            free, self._free = self._free, []
        for segment in free:
            segment.close()
        return len(free)

    def close(self) -> None:
        """Close every free segment; segments still held come back (and close) later."""
        with self._lock:
            self._closed = True
        self.release()

    def _warn(self, why: str) -> None:
        now = time.monotonic()
        with self._lock:
            if self._warned_at is not None and now - self._warned_at < _WARN_EVERY:
                return
            self._warned_at = now
        _log.warning("%s: shared memory unavailable (%s); arrays travel on the socket "
                     "(slower, same results)", self.name, why)


_POOLS: weakref.WeakSet[SegmentPool] = weakref.WeakSet()


def short_of_descriptors(exc: BaseException) -> bool:
    """Whether ``exc`` says this process (EMFILE) or the system (ENFILE) is out of file
    descriptors."""
    return getattr(exc, "errno", None) in (errno.EMFILE, errno.ENFILE)


def release_cached() -> int:
    """Close the free segments of every pool in this process (descriptors are the
    process's: a restart or a new segment needs them more than a cache does) and say
    how many were closed: 0 means releasing cannot help."""
    return sum(pool.release() for pool in list(_POOLS))


def _after_fork_in_parent() -> None:
    for pool in list(_POOLS):
        pool.forked()


os.register_at_fork(after_in_parent=_after_fork_in_parent)


def shared_memory_usable() -> tuple[bool, str]:
    """Whether workers will be able to map this process's segments: memfd exists, and
    ``/proc/<pid>/fd`` of this process opens (procfs mounted, this process dumpable)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "memfd_create"):
        return False, "no memfd on this platform"
    if os.environ.get("VYRE_SHARED_MEMORY", "1") == "0":
        return False, "VYRE_SHARED_MEMORY=0"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) != 1:
            return False, "this process is not dumpable, so workers cannot open its memory"
        fd = os.memfd_create("vyre-probe", os.MFD_CLOEXEC)
        try:
            os.close(os.open(f"/proc/{os.getpid()}/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC))
        finally:
            os.close(fd)
    except OSError as exc:
        return False, f"/proc/<pid>/fd cannot be opened: {exc.strerror or exc}"
    return True, ""


# -- the worker's side ----------------------------------------------------------------------


class SegmentMaps:
    """A worker's mappings of its parent's segments, by segment id (bounded, LRU). The
    main thread maps; the heartbeat thread lets go of segments the parent has closed."""

    def __init__(self, parent_pid: int, limit: int = WORKER_MAPS) -> None:
        self.parent_pid = parent_pid
        self.limit = limit
        self._maps: collections.OrderedDict[int, Mapping] = collections.OrderedDict()
        self._fds: dict[int, int] = {}  # segment id -> its descriptor in the parent
        self._lock = threading.Lock()

    def drop_closed(self) -> None:
        """Let go of the mappings of segments the parent has closed (its descriptor gone,
        or now another file's): their memory goes back to the system once no array of
        them is left, instead of staying mapped here until newer ones push them out. A
        few readlinks; skipped while the main thread is mapping."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            named = list(self._fds.items())
        finally:
            self._lock.release()
        closed = [segment for segment, fd in named if not self._open_in_parent(segment, fd)]
        if closed and self._lock.acquire(blocking=False):  # (else: at the next beat)
            try:  # (a segment the parent closed is never named again)
                for segment in closed:
                    self._maps.pop(segment, None)
                    self._fds.pop(segment, None)
            finally:
                self._lock.release()

    def _open_in_parent(self, segment: int, fd: int) -> bool:
        try:
            target = os.readlink(f"/proc/{self.parent_pid}/fd/{fd}")
        except FileNotFoundError:
            return False
        except OSError:  # cannot tell: keep it
            return True
        return target.split(" ")[0] == f"/memfd:{_memfd_name(segment)}"

    def array(self, shared: Shared, writable: bool = False) -> np.ndarray:
        """The array ``shared`` describes, over this worker's mapping (no copy)."""
        if shared.end > shared.size or shared.offset % shared.dtype.itemsize:
            raise ProtocolError(f"a shared array of {shared.nbytes} bytes at offset "
                                f"{shared.offset} does not fit its {shared.size}-byte "
                                "segment, or is not aligned",
                                "Use matching vyre versions in the parent and the workers.")
        with self._lock:
            mapping = self._mapping(shared)
        array = np.frombuffer(mapping, dtype=shared.dtype, count=shared.count,
                              offset=shared.offset)
        if not writable:
            array.flags.writeable = False
        return array

    def _mapping(self, shared: Shared) -> Mapping:
        found = self._maps.get(shared.segment)
        if found is not None and len(found) == shared.size:
            self._maps.move_to_end(shared.segment)
            return found
        try:
            fd = os.open(f"/proc/{self.parent_pid}/fd/{shared.fd}", os.O_RDWR | os.O_CLOEXEC)
        except OSError as exc:  # the parent asks again, its arrays on the socket
            raise ProtocolError(f"shared segment {shared.segment} cannot be opened: "
                                f"{exc.strerror or exc}",
                                "Let workers open the parent's /proc/<pid>/fd (procfs "
                                "mounted, the parent dumpable), or set "
                                "VYRE_SHARED_MEMORY=0.", shared_refused=True) from None
        try:
            if os.fstat(fd).st_size != shared.size:
                raise ProtocolError(f"shared segment {shared.segment} is not the "
                                    f"{shared.size}-byte segment the request names",
                                    "Use matching vyre versions in the parent and the "
                                    "workers.")
            mapping = map_shared(fd, shared.size)
        except OSError as exc:  # out of address space or memory: the worker's resources
            raise system_resource_error(exc, f"mapping a {shared.size}-byte shared segment "
                                             "in the worker") from None
        finally:
            os.close(fd)
        self._maps[shared.segment] = mapping
        self._fds[shared.segment] = shared.fd
        # Bounded by count and by bytes (the newest mapping always stays); segments the
        # parent closed go sooner, at the heartbeat thread's next look (drop_closed).
        allowed = max(WORKER_MAP_BYTES, 2 * shared.size)
        while len(self._maps) > 1 and (len(self._maps) > self.limit or sum(
                len(m) for m in self._maps.values()) > allowed):
            dropped, _ = self._maps.popitem(last=False)  # unmapped once no array of it is left
            self._fds.pop(dropped, None)
        return mapping
