"""The parent's side of the data plane without a process: which free segments a pool
keeps (``dataplane.surplus``, pure: memory kept for speed is bounded and goes back once
idle, issue 37), a SegmentPool following it with real memfds, the parent's mapping (no
descriptor of its own) and a result that cannot be mapped."""

from __future__ import annotations

import errno
import os
import time

import numpy as np
import pytest

from vyre_core import dataplane
from vyre_core.dataplane import (
    RETAIN_BYTES,
    RETAIN_COUNT,
    RETAIN_IDLE,
    SegmentMaps,
    SegmentPool,
    map_shared,
    surplus,
)

pytestmark = pytest.mark.fast

MIB = 1 << 20
GIB = 1 << 30


def test_every_segment_idle_for_retain_idle_seconds_goes() -> None:
    free = [(4 * MIB, 0.0), (4 * MIB, 1.0), (4 * MIB, 2.0)]
    assert surplus(free, 2.0 + RETAIN_IDLE - 0.01) == [0, 1]
    assert surplus(free, 2.0 + RETAIN_IDLE) == [0, 1, 2]
    assert surplus(free, 0.5) == []


def test_thirty_results_of_4_mib_dropped_at_once_keep_the_newest_within_the_budget() -> None:
    free = [(4 * MIB, 10.0 + i / 100) for i in range(30)]
    kept = RETAIN_BYTES // (4 * MIB)
    assert kept <= RETAIN_COUNT
    assert surplus(free, 10.5) == list(range(30 - kept))


def test_a_read_write_round_trip_of_any_size_keeps_its_two_segments() -> None:
    assert surplus([(GIB, 1.0), (GIB, 1.0)], 1.0) == []
    assert surplus([(GIB, 1.0), (GIB, 1.1), (GIB, 1.2)], 1.2) == [0]


def test_at_most_retain_count_segments_are_kept_however_small() -> None:
    free = [(64 << 10, 1.0)] * (RETAIN_COUNT + 4)
    assert surplus(free, 1.0) == [0, 1, 2, 3]


def test_an_old_large_segment_goes_before_newer_small_ones() -> None:
    free = [(48 * MIB, 1.0), (40 * MIB, 2.0), (40 * MIB, 3.0)]  # budget: twice 48 MiB
    assert surplus(free, 3.0) == [0]


def test_the_budget_comes_from_segments_still_fresh() -> None:
    """A large segment keeps smaller ones while it is fresh, not once it is idle."""
    small = [(16 * MIB, 10.0)] * 8
    assert surplus([(GIB, 9.0), *small], 10.0) == []
    assert surplus([(GIB, 10.0 - RETAIN_IDLE), *small], 10.0) == [0, 1, 2, 3, 4]


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_pool_closes_its_idle_free_segments_when_trimmed() -> None:
    pool = SegmentPool("test")
    if not pool.enabled:
        pytest.skip("no shared memory here")
    taken = [pool.take(4 * MIB) for _ in range(3)]
    for segment in taken:
        pool.give_back(segment)
    fds = [segment.fd for segment in taken]
    assert all(map(_open, fds))
    pool.trim(time.monotonic())  # (not idle yet)
    assert all(map(_open, fds))
    pool._trim_due = 0.0
    pool.trim(time.monotonic() + RETAIN_IDLE)
    assert [segment.fd for segment in taken] == [-1, -1, -1]
    assert pool.take(4 * MIB) not in taken
    pool.close()


def test_a_mapping_holds_no_descriptor_and_outlives_it() -> None:
    fd = os.memfd_create("vyre-test", os.MFD_CLOEXEC)
    os.ftruncate(fd, 1 << 16)
    before = len(os.listdir("/proc/self/fd"))
    mapping = map_shared(fd, 1 << 16)
    assert len(os.listdir("/proc/self/fd")) == before
    os.close(fd)
    array = np.frombuffer(mapping, dtype=np.uint32)
    del mapping
    array[:] = 7  # still mapped: the array holds it
    assert int(array.sum()) == 7 * (1 << 14)


def test_a_result_that_cannot_be_mapped_is_read_into_private_memory(monkeypatch) -> None:
    """Out of address space, a result is copied (never an error) and its segment reused."""
    pool = SegmentPool("test")
    if not pool.enabled:
        pytest.skip("no shared memory here")
    segment = pool.take(1 << 16)
    data = np.arange(1 << 14, dtype=np.uint32)
    os.pwrite(segment.fd, data.tobytes(), 0)  # (what the worker wrote)

    def refused(fd: int, size: int) -> None:
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))

    monkeypatch.setattr(dataplane, "map_shared", refused)
    result = pool.result(segment, np.dtype(np.uint32), data.size)
    assert result.tobytes() == data.tobytes() and not result.flags.writeable
    assert pool.take(1 << 16) is segment  # given back at once
    pool.close()


def test_a_worker_lets_go_of_mappings_of_segments_the_parent_closed() -> None:
    """(This process plays the parent and the worker.) A closed segment's mapping goes at
    the next look; an open one stays, even once its descriptor number is reused."""
    pool = SegmentPool("test")
    if not pool.enabled:
        pytest.skip("no shared memory here")
    maps = SegmentMaps(os.getpid())
    kept, closed = pool.take(1 << 16), pool.take(1 << 16)
    dtype = np.dtype(np.uint32)
    for segment in (kept, closed):
        maps.array(segment.describe(dtype, 16), writable=True)[:] = segment.id
    held = maps.array(closed.describe(dtype, 16))
    maps.drop_closed()
    assert sorted(maps._maps) == sorted([kept.id, closed.id])
    number = closed.fd
    closed.close()
    other = os.memfd_create("vyre-data-0", os.MFD_CLOEXEC)
    if other != number:
        os.dup2(other, number)  # the closed segment's number now names another file
    maps.drop_closed()
    assert list(maps._maps) == [kept.id]
    assert held.tolist() == [closed.id] * 16  # an array of it keeps its mapping
    for fd in {number, other}:
        os.close(fd)
    pool.close()


def test_out_of_descriptors_a_new_segment_is_made_after_the_caches_let_go(monkeypatch) -> None:
    """Issue 38 row 4: EMFILE making a segment closes every pool's free segments and tries
    once more, instead of sending the array on the socket while the cache holds them."""
    pool, other = SegmentPool("test"), SegmentPool("other")
    if not pool.enabled:
        pytest.skip("no shared memory here")
    cached = [other.take(4 * MIB), pool.take(1 * MIB)]
    other.give_back(cached[0])
    pool.give_back(cached[1])
    made = dataplane.Segment
    calls = []

    def short_until_released(size: int) -> dataplane.Segment:
        calls.append(size)
        if any(segment.fd >= 0 for segment in cached):
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return made(size)

    monkeypatch.setattr(dataplane, "Segment", short_until_released)
    segment = pool.take(2 * MIB)
    assert segment is not None and calls == [2 * MIB, 2 * MIB]
    assert [s.fd for s in cached] == [-1, -1]  # both pools' caches closed
    assert dataplane.short_of_descriptors(OSError(errno.ENFILE, "x"))
    assert not dataplane.short_of_descriptors(OSError(errno.ENOMEM, "x"))
    segment.close()
    calls.clear()
    assert pool.take(2 * MIB) is not None and calls == [2 * MIB]  # (nothing held: once)
    pool.close()
    other.close()
