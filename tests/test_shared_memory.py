"""The shared-memory data plane, with real workers and the real reference backend.

Large arrays (at least ``SHARE_THRESHOLD`` bytes) cross to a worker and back through
memfd segments of the parent; only descriptors travel over ZeroMQ. Every output is
compared as exact bytes with a numpy-computed expectation. Checked here: mixed large and
small buffers, results that stay valid while held (never overwritten by later dispatches),
reuse and bounded growth of segments (counted as the parent's open ``vyre-data-*``
memfds) and given back on every path (refusals, errors, close, deadlines), ``out=``, the
fallback to the socket (``VYRE_SHARED_MEMORY=0``, and real OS limits: file size, open
files, a process that is not dumpable), crashes, deadlines and the death of the parent
itself, compiled pipelines, concurrent callers, and replies naming memory that is not
their request's output slots.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
from child_process import Child, running
from waiting import PATIENCE, wait_for, wait_running, workers

import vyre_core
from vyre_core import DispatchConfig, RestartPolicy, Timeouts, Transport, ir
from vyre_core.boundary import codec
from vyre_core.boundary.messages import Dispatch, Message, Op, Ran
from vyre_core.dataplane import MAP_LIMIT, MIN_SEGMENT, SHARE_THRESHOLD, SegmentPool, Shared
from vyre_core.errors import (
    DispatchTimeoutError,
    InvalidInputError,
    LaunchLimitError,
    PoolFailedError,
    ProtocolError,
)
from vyre_core.supervisor.local.pool import Pool
from vyre_core.supervisor.local.transfer import LocalTransfer
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_core.testing import dispatch_on

pytestmark = [pytest.mark.processes]

WG = 256              # invocations per workgroup: 4 Mi elements fit one grid axis
BIG = 4 << 20         # 4 Mi u32: 16 MiB per buffer
MID = 1 << 20         # 1 Mi u32: 4 MiB per buffer, for tests that dispatch many times
SMALL = 16            # elements of the small buffers (64 bytes: ride the socket)
U32 = np.dtype(np.uint32)


# -- programs and their numpy expectations ----------------------------------------------------


def mixed(n: int) -> ir.Program:
    """Large read_write ``x`` (u32) and ``f`` (f32), a large input ``y``, a small input
    ``s`` and a uniform ``a``; a large output ``o`` and a small output ``t``."""
    k = ir.Kernel(workgroup=(WG,))
    x = k.read_write("x", ir.u32)
    f = k.read_write("f", ir.f32)
    y = k.read("y", ir.u32)
    s = k.read("s", ir.u32)
    a = k.uniform("a", ir.u32)
    o = k.output("o", ir.u32, count=n)
    t = k.output("t", ir.u32, count=SMALL)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        xi = k.let("xi", x[i])
        o[i] = xi ^ y[i] ^ s[i % s.len]
        x[i] = xi * a[0] + y[i]
        f[i] = f[i] * 0.5
    with k.if_(i < t.len):
        t[i] = s[i] + a[0]
    return k.build()


def mixed_inputs(seed: int, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 2**32, n, dtype=np.uint32), rng.random(n, dtype=np.float32),
            rng.integers(0, 2**32, n, dtype=np.uint32),
            rng.integers(0, 2**32, SMALL, dtype=np.uint32),
            np.array([rng.integers(1, 2**32) | 1], dtype=np.uint32)]


def mixed_expected(data: list[np.ndarray]) -> list[np.ndarray]:
    """Outputs in ABI order: x, f (read_write), then o, t."""
    x, f, y, s, a = data
    return [x * a[0] + y, f * np.float32(0.5), x ^ y ^ s[np.arange(len(x)) % len(s)],
            s + a[0]]


def rw(n: int) -> ir.Program:
    """``x`` read_write and ``o`` an output, both ``n`` u32; ``y`` a read-only input."""
    k = ir.Kernel(workgroup=(WG,))
    x = k.read_write("x", ir.u32)
    y = k.read("y", ir.u32)
    o = k.output("o", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        xi = k.let("xi", x[i])
        o[i] = xi ^ y[i]
        x[i] = xi * 3 + y[i]
    return k.build()


def rw_inputs(seed: int, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 2**32, n, dtype=np.uint32),
            rng.integers(0, 2**32, n, dtype=np.uint32)]


def rw_expected(data: list[np.ndarray]) -> list[np.ndarray]:
    x, y = data
    return [x * np.uint32(3) + y, x ^ y]


def spinning(n: int, with_input: bool) -> ir.Program:
    """A loop of ``iters[0]`` iterations (CPU-bound on the reference backend, about 2 us
    each), then ``o[i] = x[i] + acc`` (or ``i * 2654435761 + acc`` without input)."""
    k = ir.Kernel(workgroup=(WG,))
    iters = k.uniform("iters", ir.u32)
    x = k.read("x", ir.u32) if with_input else None
    o = k.output("o", ir.u32, count=n)
    acc = k.let("acc", ir.lit(0, ir.u32))
    with k.loop("j", 0, iters[0]) as j:
        k.assign(acc, acc + j)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < o.len):
        o[i] = (x[i] if x is not None else i * 2654435761) + acc
    return k.build()


def spin_sum(iterations: int) -> np.uint32:
    return np.uint32(iterations * (iterations - 1) // 2 % 2**32)


def spin_expected(n: int, iterations: int, x: np.ndarray | None = None) -> np.ndarray:
    base = x if x is not None else np.arange(n, dtype=np.uint32) * np.uint32(2654435761)
    return base + spin_sum(iterations)


def assert_exact(got: Any, want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for i, (array, expected) in enumerate(zip(got, want, strict=True)):
        assert isinstance(array, np.ndarray), f"output {i} is a {type(array).__name__}"
        assert array.dtype == expected.dtype, f"output {i}: {array.dtype} != {expected.dtype}"
        assert array.shape == expected.shape, f"output {i}: {array.shape} != {expected.shape}"
        assert array.tobytes() == expected.tobytes(), f"output {i} differs"


def segments() -> set[str]:
    """The shared-memory segments this process holds open: ``/memfd:vyre-data-N``."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/memfd:vyre-data-"):
            found.add(target.split(" ")[0])
    return found


def dispatch_rw(drv: vyre_core.Driver, program: ir.Program, seed: int, n: int,
                **kwargs: Any) -> tuple[Any, list[np.ndarray]]:
    data = rw_inputs(seed, n)
    return drv.dispatch(program, data, backend="reference", **kwargs), rw_expected(data)


# -- large and small buffers, exact ---------------------------------------------------------


@pytest.mark.timeout(60)
def test_large_read_write_and_output_buffers_mixed_with_small_ones_are_exact() -> None:
    program = mixed(BIG)
    before = segments()
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        for seed in range(2):
            data = mixed_inputs(seed, BIG)
            originals = [a.copy() for a in data]
            out = drv.dispatch(program, data, backend="reference")
            assert_exact(out, mixed_expected(originals))
            for given, original in zip(data, originals, strict=True):  # inputs untouched
                assert given.tobytes() == original.tobytes()
            for array in out:
                assert isinstance(array, np.ndarray) and not array.flags.writeable
                with pytest.raises(ValueError):
                    array[0] = 1
            # the large arrays went through shared memory: 3 inputs and 3 outputs
            assert len(segments() - before) >= 3
            del out


@pytest.mark.timeout(60)
def test_arrays_around_the_threshold_and_the_segment_size_are_exact() -> None:
    sizes = [SHARE_THRESHOLD // 4 - 1, SHARE_THRESHOLD // 4, MIN_SEGMENT // 4,
             MIN_SEGMENT // 4 + 1, 5 * MIN_SEGMENT // 16 + 3]
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        for seed, n in enumerate(sizes):
            out, want = dispatch_rw(drv, rw(n), seed, n)
            assert_exact(out, want)


def hashed(n: int, rounds: int) -> ir.Program:
    """``o[i]`` is an order-sensitive hash of ``x[i + j * n]`` over ``j < rounds``: every
    element of an input of ``n * rounds`` u32 reaches an output of ``n``."""
    k = ir.Kernel(workgroup=(WG,))
    x = k.read("x", ir.u32)
    o = k.output("o", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < o.len):
        acc = k.let("acc", ir.lit(0, ir.u32))
        with k.loop("j", 0, rounds) as j:
            k.assign(acc, acc * 31 + x[i + j * n])
        o[i] = acc
    return k.build()


def hashed_expected(x: np.ndarray, n: int, rounds: int) -> np.ndarray:
    acc = np.zeros(n, dtype=np.uint32)
    for j in range(rounds):
        acc = acc * np.uint32(31) + x[j * n:(j + 1) * n]
    return acc


@pytest.mark.timeout(90)
def test_an_input_too_large_to_map_in_the_parent_is_written_exactly() -> None:
    """Inputs of MAP_LIMIT bytes or more are written with pwrite, never mapped."""
    n, rounds = MID, MAP_LIMIT // (4 * MID)
    x = np.random.default_rng(3).integers(0, 2**32, n * rounds, dtype=np.uint32)
    assert x.nbytes >= MAP_LIMIT
    program = hashed(n, rounds)
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        for seed in range(2):  # the second reuses the segment the first wrote
            data = x if seed == 0 else x[::-1].copy()
            out = drv.dispatch(program, [data], backend="reference")
            assert_exact(out, [hashed_expected(data, n, rounds)])
            del out


@pytest.mark.timeout(60)
def test_more_shared_arrays_in_one_request_than_a_worker_keeps_mappings_are_exact() -> None:
    """A worker keeps 16 mappings; one request naming 24 segments still reads them all."""
    count, n = 24, SHARE_THRESHOLD // 4
    k = ir.Kernel(workgroup=(WG,))
    xs = [k.read(f"x{j}", ir.u32) for j in range(count)]
    o = k.output("o", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < o.len):
        acc = k.let("acc", ir.lit(0, ir.u32))
        for x in xs:
            k.assign(acc, acc * 31 + x[i])
        o[i] = acc
    program = k.build()
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        for seed in range(2):
            rng = np.random.default_rng(seed)
            data = [rng.integers(0, 2**32, n, dtype=np.uint32) for _ in range(count)]
            want = np.zeros(n, dtype=np.uint32)
            for x in data:
                want = want * np.uint32(31) + x
            assert_exact(drv.dispatch(program, data, backend="reference"), [want])


# -- results held stay valid ---------------------------------------------------------------


@pytest.mark.timeout(60)
def test_results_kept_alive_are_never_overwritten_by_later_dispatches() -> None:
    program = rw(MID)
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        held = [dispatch_rw(drv, program, seed, MID) for seed in range(5)]
        # Views outliving the arrays they came from hold the segment just as well.
        out, want = dispatch_rw(drv, program, 100, MID)
        tail, tail_want = out[1][1000:], want[1][1000:]
        as_i32, i32_want = out[0].view(np.int32), want[0].view(np.int32)
        raw = np.frombuffer(memoryview(out[1]), dtype=np.uint8)
        raw_want = want[1].view(np.uint8)
        del out
        gc.collect()
        for seed in range(200, 220):  # different data, results dropped: segments reused
            out, want = dispatch_rw(drv, program, seed, MID)
            assert_exact(out, want)
            del out
        gc.collect()
        for out, want in held:
            assert_exact(out, want)
        assert tail.tobytes() == tail_want.tobytes()
        assert as_i32.tobytes() == i32_want.tobytes()
        assert raw.tobytes() == raw_want.tobytes()


@pytest.mark.timeout(60)
def test_segments_are_reused_bounded_and_all_closed_with_the_driver() -> None:
    program = rw(MID)
    before = segments()

    def count() -> int:
        return len(segments() - before)

    drv = vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5))
    try:
        steady = []
        for seed in range(15):
            out, want = dispatch_rw(drv, program, seed, MID)
            assert_exact(out, want)
            del out
            steady.append(count())
        # 2 inputs and 2 outputs in flight at most: 4 segments, reused from then on (15
        # calls without reuse would make 60; one more than 4 may be made when a call's
        # segments come back just after the next call took its own: the I/O thread gives
        # them back, and the caller does not wait for that)
        assert 0 < max(steady) <= 8, steady
        assert steady[-1] == max(steady), steady

        held = [dispatch_rw(drv, program, seed, MID) for seed in range(100, 106)]
        grown = count()
        assert grown >= steady[-1] + 6 * 2 - 4, (grown, steady)  # 2 outputs held each
        del held
        gc.collect()
        after = []
        for seed in range(200, 212):
            out, want = dispatch_rw(drv, program, seed, MID)
            assert_exact(out, want)
            del out
            after.append(count())
        assert max(after) <= grown, (after, grown)  # the freed ones serve: no new ones

        kept, kept_want = dispatch_rw(drv, program, 300, MID)
    finally:
        drv.close()
    assert_exact(kept, kept_want)  # a result held across close() stays valid
    del kept
    gc.collect()
    assert segments() - before == set()


@pytest.mark.timeout(90)
def test_results_kept_then_dropped_give_their_descriptors_and_memory_back() -> None:
    """30 results of 4 MiB held, then dropped (issue 37). Each held result costs one
    descriptor, its segment's (the parent's mapping keeps none); once they are dropped, the
    free segments past the byte budget close at once and the rest once idle for
    RETAIN_IDLE s (the pool's ticks look): descriptors and RSS come back to where they
    were, and the worker lets go of its mappings of the closed segments (which kept their
    memory). Fails before this commit: 58 descriptors held, and 58 descriptors and 116 MiB
    kept after the drop until close()."""
    program, seed = spinning(MID, with_input=False), [np.array([0], np.uint32)]
    want = spin_expected(MID, 0).tobytes()
    me = psutil.Process()
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        assert drv.dispatch(program, seed, backend="reference")[0].tobytes() == want
        gc.collect()
        fds, rss = len(os.listdir("/proc/self/fd")), me.memory_info().rss
        kept = [drv.dispatch(program, seed, backend="reference") for _ in range(30)]
        assert all(out[0].tobytes() == want for out in kept)
        held = len(os.listdir("/proc/self/fd")) - fds
        assert held <= 31, f"{held} descriptors for 30 held results"  # (one reused)
        del kept
        gc.collect()
        wait_for(lambda: len(os.listdir("/proc/self/fd")) <= fds
                 and me.memory_info().rss <= rss + (16 << 20),
                 what="the dropped results' descriptors and memory to be given back")
        worker = Path(f"/proc/{workers(drv, 'reference')[0]['pid']}/maps")
        wait_for(lambda: "vyre-data" not in worker.read_text(),
                 what="the worker to unmap the segments the parent closed")
        assert drv.dispatch(program, seed, backend="reference")[0].tobytes() == want


@pytest.mark.timeout(60)
def test_a_request_refused_at_submit_gives_its_segments_back() -> None:
    """Inputs over max_message_bytes are refused after they were written into segments:
    those go back to the pool (the next refusals reuse them), nothing stays open."""
    before = segments()
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5),
                          transport=Transport(max_message_bytes=24 << 20)) as drv:
        for seed in range(5):
            with pytest.raises(InvalidInputError) as info:
                dispatch_rw(drv, rw(BIG), seed, BIG)  # 2 inputs of 16 MiB: 32 MiB
            assert "max_message_bytes" in info.value.cause
            assert len(segments() - before) <= 2
        out, want = dispatch_rw(drv, rw(MID), 9, MID)
        assert_exact(out, want)
        del out
    gc.collect()
    assert segments() - before == set()


@pytest.mark.timeout(60)
def test_a_dispatch_failing_in_its_worker_gives_its_segments_back() -> None:
    k = ir.Kernel(workgroup=(2048,))  # past the reference's 1024 invocations a workgroup
    x = k.read("x", ir.u32)
    o = k.output("o", ir.u32, count=BIG)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < o.len):
        o[i] = x[i]
    too_wide = k.build()
    x = np.arange(BIG, dtype=np.uint32)
    before = segments()
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        counts = []
        for _ in range(5):
            with pytest.raises(LaunchLimitError):  # (refused in the worker: no routing)
                dispatch_on(drv, "reference", too_wide, [x])
            counts.append(len(segments() - before))
        assert max(counts) == counts[0] <= 2, counts
        out, want = dispatch_rw(drv, rw(BIG), 4, BIG)
        assert_exact(out, want)
        del out
    gc.collect()
    assert segments() - before == set()


@pytest.mark.timeout(60)
def test_closing_the_driver_mid_dispatch_leaves_no_segment_open() -> None:
    program = spinning(BIG, with_input=True)
    x = np.arange(BIG, dtype=np.uint32)
    before = segments()
    drv = vyre_core.Driver(timeouts=Timeouts(kill_grace=5.0))
    try:
        held, want = dispatch_rw(drv, rw(MID), 1, MID)
        pending = drv.dispatch_async(program, [np.array([400_000], np.uint32), x],
                                     backend="reference")
        wait_running(drv, timeout=30.0)
    finally:
        drv.close()
    with pytest.raises(PoolFailedError):
        pending.result(timeout=10)
    assert_exact(held, want)
    del held
    gc.collect()
    assert segments() - before == set()


@pytest.mark.timeout(120)
def test_results_dropped_are_released_while_an_earlier_deadline_is_pending() -> None:
    """Dropped results of dispatches that have a deadline go back to the pool like any
    other, even while a request with an earlier deadline still runs on another worker
    (one that would run for hours: it is still pending when the checks are done, however
    slow the machine; the driver's close then ends it, without waiting out its deadline).
    Its deadline is past the test's own time limit: at 30 s a loaded run (issue 38's
    series, a CPU-bound process per core) reached it during the close, and the call was
    answered by its timeout instead of the close."""
    program = rw(MID)
    before = segments()
    with vyre_core.Driver(workers=2, timeouts=Timeouts(kill_grace=0.5)) as drv:
        out, want = dispatch_rw(drv, program, 0, MID)
        del out
        slow = drv.dispatch_async(spinning(1024, with_input=False),
                                  [np.array([0xFFFFFFFF], np.uint32)], backend="reference",
                                  config=DispatchConfig(timeout=600))
        wait_running(drv, timeout=30.0)
        pool = drv.pools.existing("reference")._segments
        counts = []
        for seed in range(1, 9):
            out, want = dispatch_rw(drv, program, seed, MID,
                                    config=DispatchConfig(timeout=3600))
            assert_exact(out, want)
            del out
            gc.collect()
            # (Every segment back in the pool: the call's input is given back by the I/O
            # thread once answered, and the result's when the last reference to it goes,
            # which that thread may hold a moment longer on a loaded machine. A segment
            # kept by a dropped result never comes back.)
            wait_for(lambda: len(pool._free) == len(segments() - before), PATIENCE,
                     "every segment back in the pool after the result was dropped")
            counts.append(len(segments() - before))
        assert not slow.is_ready(), "the earlier deadline was no longer pending: inconclusive"
        assert counts[-1] == counts[0], f"segments open after each dropped result: {counts}"
    with pytest.raises(PoolFailedError):
        slow.result(timeout=60)


# -- out= ----------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n", [BIG, SMALL], ids=["large", "small"])
def test_out_arrays_are_filled_in_place_and_returned(n: int) -> None:
    program = rw(n)
    before = segments()
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        counts = []
        for seed in range(4):
            data = rw_inputs(seed, n)
            targets = [np.full(n, 0xDEADBEEF, dtype=np.uint32), np.empty(n, dtype=np.uint32)]
            got = drv.dispatch(program, data, backend="reference", out=targets)
            assert len(got) == 2
            assert got[0] is targets[0] and got[1] is targets[1]
            assert_exact(got, rw_expected(data))
            assert all(t.flags.writeable for t in targets)  # the caller's own arrays
            counts.append(len(segments() - before))
        # out= takes a copy: the segments go back to the pool at once, and are reused
        assert max(counts) == counts[0] <= 4, counts
        # a 2-D C-contiguous array of the right size is filled as well
        data = rw_inputs(9, n)
        flat, square = np.empty(n, dtype=np.uint32), np.empty((n // 4, 4), dtype=np.uint32)
        got = drv.dispatch(program, data, backend="reference", out=(flat, square))
        assert got[0] is flat and got[1] is square
        want = rw_expected(data)
        assert flat.tobytes() == want[0].tobytes() and square.tobytes() == want[1].tobytes()


N_OUT = 4096


def _bad_outs() -> dict[str, Any]:
    good = np.empty(N_OUT, dtype=np.uint32)
    read_only = np.empty(N_OUT, dtype=np.uint32)
    read_only.flags.writeable = False
    return {
        "none": [],
        "one_too_few": [good],
        "one_too_many": [good, good.copy(), good.copy()],
        "not_a_list": good,
        "not_an_ndarray": [good, [0] * N_OUT],
        "bytearray": [bytearray(4 * N_OUT), good],
        "wrong_dtype": [good, np.empty(N_OUT, dtype=np.int32)],
        "float_dtype": [np.empty(N_OUT, dtype=np.float32), good],
        "too_small": [good, np.empty(N_OUT - 1, dtype=np.uint32)],
        "too_large": [np.empty(N_OUT + 1, dtype=np.uint32), good],
        "not_c_contiguous": [good, np.empty(2 * N_OUT, dtype=np.uint32)[::2]],
        "fortran_order": [good, np.empty((N_OUT // 4, 4), dtype=np.uint32, order="F")],
        "read_only": [good, read_only],
        "the_same_array_twice": [good, good],
        "overlapping_views": [(both := np.empty(N_OUT + 8, dtype=np.uint32))[:N_OUT],
                              both[8:]],
    }


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", list(_bad_outs()))
def test_bad_out_is_refused_with_a_fix_before_any_worker_starts(case: str) -> None:
    out = _bad_outs()[case]
    data = rw_inputs(1, N_OUT)
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        with pytest.raises(InvalidInputError) as info:
            drv.dispatch(rw(N_OUT), data, backend="reference", out=out)
        assert "Fix:" in str(info.value) and info.value.fix
        assert drv.status()["pools"]["reference"]["state"] == "not started"


# -- the socket as fallback ----------------------------------------------------------------


@pytest.mark.timeout(60)
def test_shared_memory_disabled_by_the_environment_falls_back_to_the_socket(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("VYRE_SHARED_MEMORY", "0")
    caplog.set_level(logging.WARNING, logger="vyre.dataplane")
    before = segments()
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        for seed in range(2):
            data = mixed_inputs(seed, BIG)
            out = drv.dispatch(mixed(BIG), data, backend="reference")
            assert_exact(out, mixed_expected(data))
            assert not any(a.flags.writeable for a in out)
        assert segments() - before == set()  # nothing went through shared memory
    warnings = [r for r in caplog.records
                if r.name == "vyre.dataplane" and r.levelno == logging.WARNING]
    assert warnings, "no warning that shared memory is off"
    assert any("VYRE_SHARED_MEMORY=0" in r.getMessage() for r in warnings)
    assert any("shared memory unavailable" in r.getMessage() for r in warnings)



CHILD_PRELUDE = textwrap.dedent("""
    import gc, json, logging, os, resource, signal, sys, threading, time
    import numpy as np
    import vyre_core
    from vyre_core import ir

    def report(**fields):
        print(json.dumps(fields), flush=True)

    def segments():
        found = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("/memfd:vyre-data-"):
                found.add(target.split(" ")[0])
        return sorted(found)

    def rw(n):
        k = ir.Kernel(workgroup=(256,))
        x = k.read_write("x", ir.u32)
        y = k.read("y", ir.u32)
        o = k.output("o", ir.u32, count=n)
        i = k.let("i", ir.global_id(0))
        with k.if_(i < x.len):
            xi = k.let("xi", x[i])
            o[i] = xi ^ y[i]
            x[i] = xi * 3 + y[i]
        return k.build()

    def rw_case(seed, n):
        rng = np.random.default_rng(seed)
        x = rng.integers(0, 2**32, n, dtype=np.uint32)
        y = rng.integers(0, 2**32, n, dtype=np.uint32)
        return [x, y], [(x * np.uint32(3) + y).tobytes(), (x ^ y).tobytes()]

    def exact(out, want):
        return [a.tobytes() for a in out] == want
""")


def run_child(tmp_path: Path, body: str) -> Child:
    """``body`` run after the data-plane prelude in a child Python of its own session."""
    return Child(tmp_path, CHILD_PRELUDE + textwrap.dedent(body))


FSIZE_LIMITED = """
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(name)s %(levelname)s %(message)s")
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    probe = os.memfd_create("probe", os.MFD_CLOEXEC)
    try:
        os.ftruncate(probe, 16 << 20)
        refused = None
    except OSError as exc:
        refused = exc.strerror
    finally:
        os.close(probe)
    n = 4 << 20  # 16 MiB of u32: over the limit
    with vyre_core.Driver(timeouts=vyre_core.Timeouts(kill_grace=0.5)) as drv:
        results = []
        for seed in range(2):
            data, want = rw_case(seed, n)
            out = drv.dispatch(rw(n), data, backend="reference")
            results.append(exact(out, want))
        report(refused=refused, exact=results, segments=segments())
"""


@pytest.mark.timeout(90)
def test_a_file_size_limit_makes_arrays_travel_on_the_socket_with_a_warning(
        tmp_path: Path) -> None:
    """RLIMIT_FSIZE applies to memfds: a 16 MiB segment cannot be made (EFBIG; Python
    ignores SIGXFSZ). The dispatch still gives exact bytes, over the socket, and says so."""
    child = run_child(tmp_path, FSIZE_LIMITED)
    try:
        found = child.report()
        assert child.proc.wait(timeout=30) == 0, child.stderr()[-3000:]
    finally:
        child.stop()
    if found["refused"] is None:
        pytest.skip("RLIMIT_FSIZE does not limit memfd sizes on this kernel")
    assert found["exact"] == [True, True]
    assert found["segments"] == []  # no 16 MiB segment could be made
    stderr = child.stderr()
    assert "vyre.dataplane WARNING" in stderr, stderr[-3000:]
    assert "shared memory unavailable" in stderr and "could not be made" in stderr
    assert found["refused"] in stderr  # the OS's reason is named


NOT_DUMPABLE = """
    import ctypes
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(name)s %(levelname)s %(message)s")
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    n = 4 << 20
    with vyre_core.Driver(timeouts=vyre_core.Timeouts(kill_grace=0.5)) as drv:
        data, want = rw_case(3, n)
        report(exact=exact(drv.dispatch(rw(n), data, backend="reference"), want),
               segments=segments())
"""


@pytest.mark.timeout(60)
def test_a_process_that_is_not_dumpable_sends_arrays_on_the_socket(tmp_path: Path) -> None:
    """Workers could not open its /proc/<pid>/fd: the pool never offers them segments."""
    child = run_child(tmp_path, NOT_DUMPABLE)
    try:
        found = child.report()
        assert child.proc.wait(timeout=30) == 0, child.stderr()[-3000:]
    finally:
        child.stop()
    assert found == {"exact": True, "segments": []}
    stderr = child.stderr()
    assert "shared memory unavailable" in stderr and "not dumpable" in stderr, stderr


FDS_USED_UP = """
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(name)s %(levelname)s %(message)s")

    def last(n):  # one large input, one small output
        k = ir.Kernel(workgroup=(1,))
        x = k.read("x", ir.u32)
        o = k.output("o", ir.u32, count=1)
        o[0] = x[x.len - 1]
        return k.build()

    def fill(n):  # no input, one large output
        k = ir.Kernel(workgroup=(256,))
        a = k.uniform("a", ir.u32)
        o = k.output("o", ir.u32, count=n)
        i = k.let("i", ir.global_id(0))
        with k.if_(i < o.len):
            o[i] = i * 3 + a[0]
        return k.build()

    def leave_free(count):
        # Use up every descriptor number under a new limit but ``count``.
        fillers = []
        highest = max(int(name) for name in os.listdir("/proc/self/fd"))
        while True:
            fd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
            fillers.append(fd)
            if fd > highest:
                break
        limits = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (fillers[-1] + 1, limits[1]))
        for _ in range(count):
            os.close(fillers.pop())
        return fillers, limits

    from vyre_core.errors import DispatchTimeoutError

    if CASE_WARM_ZMQ:  # a first zero-copy send: pyzmq starts its garbage collector now
        import zmq
        context = zmq.Context()
        a, b = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
        a.bind("inproc://warm")
        b.connect("inproc://warm")
        a.send(bytes(1 << 17), copy=False)
        b.recv()
        a.close(linger=0)
        b.close(linger=0)
        context.term()

    before = set(segments())
    with vyre_core.Driver(timeouts=vyre_core.Timeouts(kill_grace=0.5)) as drv:
        data, want = rw_case(0, 1 << 18)  # warm: the worker runs, 1 MiB segments exist
        warm = exact(drv.dispatch(rw(1 << 18), data, backend="reference"), want)
        n = (CASE_MIB << 20) // 4  # a size class no earlier dispatch used: a new memfd
        if CASE_OUTPUT:
            program, inputs = fill(n), [np.array([5], np.uint32)]
            want = [(np.arange(n, dtype=np.uint32) * np.uint32(3) + np.uint32(5)).tobytes()]
        else:
            x = np.arange(n, dtype=np.uint32) * np.uint32(7)
            program, inputs, want = last(n), [x], [x[-1:].tobytes()]
        from vyre_core import dataplane
        gc.collect()  # (the warm call's results give their segments back when collected)
        while dataplane.release_cached():  # (else EMFILE would close them, making room)
            gc.collect()
        fillers, limits = leave_free(CASE_FREE)
        try:
            out = drv.dispatch_async(program, inputs, backend="reference").result(timeout=20)
            outcome = "exact" if exact(out, want) else "wrong bytes"
            del out
        except DispatchTimeoutError as exc:
            outcome = "no answer within 20 s" if "result(timeout" in str(exc) else repr(exc)
        except BaseException as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        finally:
            for fd in fillers:
                os.close(fd)
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        state = drv.status()["pools"]["reference"]["state"]
        try:
            data, want = rw_case(1, 1 << 20)
            later = exact(drv.dispatch(rw(1 << 20), data, backend="reference"), want)
        except BaseException as exc:
            later = f"{type(exc).__name__}: {exc}"
    gc.collect()
    report(warm=warm, outcome=outcome, state=state, later=later,
           left_open=sorted(set(segments()) - before))
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("case", [
    pytest.param((3, 0, False, True), id="no_descriptor_for_a_segment"),
    pytest.param((3, 0, False, False), id="no_descriptor_for_a_segment_nor_the_socket_path"),
    pytest.param((5, 1, False, True), id="one_descriptor_serves_an_input_segment"),
    pytest.param((6, 1, True, True), id="one_descriptor_serves_an_output_segment"),
])
def test_a_process_out_of_file_descriptors_still_gets_its_answer(
        tmp_path: Path, case: tuple[int, int, bool, bool]) -> None:
    """EMFILE (RLIMIT_NOFILE used up) is one of the documented reasons shared memory
    cannot be had: the array then travels on the socket with a warning, "never a
    failure". With no descriptor free the segment is never made. With exactly one free,
    the memfd is made and mapped: the parent's mapping needs no descriptor of its own
    (a result that cannot be mapped, out of address space, is read into private memory:
    tests/test_segment_pool.py). The call is always answered, no memfd stays open after
    close, and the pool serves on once descriptors are back.

    The socket path itself needs no new descriptor once pyzmq's garbage collector (which
    zero-copy sends use) runs: the cases start it first, but one. Large arrays now go
    through shared memory, so the first zero-copy send of a process is the fallback's."""
    mib, free, output, warm = case
    child = run_child(tmp_path, f"CASE_MIB, CASE_FREE, CASE_OUTPUT, CASE_WARM_ZMQ = {mib}, "
                  f"{free}, {output}, {warm}\n" + textwrap.dedent(FDS_USED_UP))
    try:
        found = child.report(timeout=60)
        assert child.proc.wait(timeout=30) == 0, child.stderr()[-3000:]
    finally:
        child.stop()
    stderr = child.stderr()
    assert found["warm"] is True
    assert found["outcome"] == "exact", (found, stderr[-2000:])
    if free:  # one descriptor: the segment's, and its mapping needs none
        assert "shared memory unavailable" not in stderr, stderr[-2000:]
        assert "could not be mapped" not in stderr, stderr[-2000:]
    else:  # the array rides the socket instead
        assert "shared memory unavailable" in stderr and "Too many open files" in stderr
    assert found["state"] == "running" and found["later"] is True, (found, stderr[-2000:])
    assert found["left_open"] == [], found


# -- crashes, deadlines, the parent's death -------------------------------------------------


@pytest.mark.timeout(90)
def test_a_worker_killed_mid_dispatch_of_a_large_request_is_retried_exactly() -> None:
    program = spinning(BIG, with_input=True)
    iterations = 400_000  # about a second on the reference backend
    x = np.random.default_rng(5).integers(0, 2**32, BIG, dtype=np.uint32)
    with vyre_core.Driver(restart=RestartPolicy(max_restarts=5),
                          timeouts=Timeouts(kill_grace=0.5)) as drv:
        drv.probe("reference")  # (else the kill may land on the routing probe, not on it)
        pending = drv.dispatch_async(program, [np.array([iterations], np.uint32), x],
                                     backend="reference", config=DispatchConfig(retries=1))
        victim = wait_running(drv, timeout=30.0)[0]["pid"]
        os.kill(victim, signal.SIGKILL)
        out = pending.result(timeout=60.0)
        assert_exact(out, [spin_expected(BIG, iterations, x)])
        after = workers(drv, "reference")[0]
        assert after["pid"] != victim and after["generation"] >= 2
        # the pool serves on, exactly, reusing what the killed request held
        for seed in range(3):
            out, want = dispatch_rw(drv, rw(MID), seed, MID)
            assert_exact(out, want)


@pytest.mark.timeout(90)
def test_a_worker_past_its_deadline_never_writes_into_memory_reused_by_others() -> None:
    """The timed-out worker is SIGTERMed and finishes its request before leaving: it
    writes its large output after its caller got DispatchTimeoutError. That memory is not
    reused until it has exited, so a result taken meanwhile on the other worker (same size
    class, the segment most recently freed would be first in line) keeps its bytes."""
    program = spinning(BIG, with_input=False)
    slow_iterations = 500_000  # about a second
    with vyre_core.Driver(workers=2, timeouts=Timeouts(kill_grace=10.0)) as drv:
        for fast in (3, 4):  # both workers started, and segments of that class made
            out = drv.dispatch(program, [np.array([fast], np.uint32)], backend="reference")
            assert_exact(out, [spin_expected(BIG, fast)])
            del out
        wait_for(lambda: all(w["state"] == "idle" for w in workers(drv, "reference")),
                 30.0, "both workers idle")
        before = {w["index"]: (w["pid"], w["generation"]) for w in workers(drv, "reference")}
        with pytest.raises(DispatchTimeoutError):
            drv.dispatch(program, [np.array([slow_iterations], np.uint32)],
                         backend="reference", config=DispatchConfig(timeout=0.3))
        late = [w["index"] for w in workers(drv, "reference") if w["state"] != "idle"]
        assert len(late) == 1, workers(drv, "reference")
        meanwhile = drv.dispatch(program, [np.array([7], np.uint32)], backend="reference")
        assert_exact(meanwhile, [spin_expected(BIG, 7)])
        wait_for(lambda: (w := workers(drv, "reference")[late[0]])["pid"] is not None
                 and (w["pid"], w["generation"]) != before[late[0]],
                 30.0, "the timed-out worker to exit and be replaced")
        assert_exact(meanwhile, [spin_expected(BIG, 7)])
        for seed in range(4):  # its memory is reused now: still exact
            out = drv.dispatch(program, [np.array([seed + 10], np.uint32)],
                               backend="reference")
            assert_exact(out, [spin_expected(BIG, seed + 10)])
            del out
        assert_exact(meanwhile, [spin_expected(BIG, 7)])


PARENT_DIES = """
    drv = vyre_core.Driver(workers=2, timeouts=vyre_core.Timeouts(kill_grace=0.5))
    n = 4 << 20
    held, ok = [], []
    for seed in range(3):
        data, want = rw_case(seed, n)
        held.append(drv.dispatch(rw(n), data, backend="reference"))
        ok.append(exact(held[-1], want))

    k = ir.Kernel(workgroup=(256,))
    iters = k.uniform("iters", ir.u32)
    x = k.read("x", ir.u32)
    o = k.output("o", ir.u32, count=n)
    acc = k.let("acc", ir.lit(0, ir.u32))
    with k.loop("j", 0, iters[0]) as j:
        k.assign(acc, acc + j)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < o.len):
        o[i] = x[i] + acc
    spin = k.build()
    big = np.arange(n, dtype=np.uint32)
    threading.Thread(target=drv.dispatch, daemon=True,
                     args=(spin, [np.array([50_000_000], np.uint32), big]),
                     kwargs={"backend": "reference"}).start()
    deadline = time.monotonic() + 30
    while not any(w["running"] for w in drv.status()["pools"]["reference"]["workers"]):
        if time.monotonic() > deadline:
            raise SystemExit("the long dispatch never ran")
        time.sleep(0.01)
    pools = drv.status()["pools"]["reference"]["workers"]
    report(workers=[w["pid"] for w in pools], busy=[w["pid"] for w in pools if w["running"]],
           ok=ok, segments=segments())
    signal.pause()
"""


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.mark.timeout(90)
def test_a_parent_killed_holding_results_and_mid_dispatch_leaves_nothing_behind(
        tmp_path: Path) -> None:
    shm_before = shm_entries()
    child = run_child(tmp_path, PARENT_DIES)
    try:
        found = child.report()
        assert found["ok"] == [True, True, True]
        assert len(found["segments"]) >= 6  # 3 results of 2 large outputs, at least
        procs = [psutil.Process(pid) for pid in found["workers"]]
        child.workers += procs
        busy = found["busy"][0]
        with open(f"/proc/{busy}/maps") as maps:  # the worker maps the parent's memfds
            assert "vyre-data-" in maps.read()
        child.proc.kill()  # SIGKILL: no close, no atexit, no finalizer
        child.proc.wait(timeout=10)
        wait_for(lambda: not any(running(p) for p in procs), 15.0,
                 "the workers to follow their killed parent")
    finally:
        child.stop()
    assert shm_entries() - shm_before == set()


# -- compiled pipelines ----------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_compiled_pipelines_with_large_inputs_and_outputs_are_exact() -> None:
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        pipeline = drv.compile(rw(BIG), backend="reference")
        held = []
        for seed in range(3):
            data = rw_inputs(seed, BIG)
            out = pipeline.dispatch(data)
            assert_exact(out, rw_expected(data))
            assert not any(a.flags.writeable for a in out)
            held.append((out, rw_expected(data)))
        mixed_pipeline = drv.compile(mixed(BIG), backend="reference")
        for seed in range(2):
            data = mixed_inputs(seed, BIG)
            out = mixed_pipeline.dispatch(data)
            assert_exact(out, mixed_expected(data))
            del out
        for out, want in held:
            assert_exact(out, want)


# -- concurrent callers ---------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_four_threads_dispatching_large_buffers_on_two_workers_all_get_their_own_bytes(
) -> None:
    program = rw(MID)
    start = threading.Barrier(4)

    def caller(thread: int) -> list[tuple[Any, list[np.ndarray]]]:
        start.wait(timeout=30)
        results = []
        for round_ in range(4):
            out, want = dispatch_rw(drv, program, 1000 * thread + round_, MID)
            assert_exact(out, want)
            results.append((out, want))
        return results

    with vyre_core.Driver(workers=2, timeouts=Timeouts(kill_grace=0.5)) as drv, \
            ThreadPoolExecutor(max_workers=4) as executor:
        out, want = dispatch_rw(drv, program, 1, MID)
        assert_exact(out, want)
        wait_for(lambda: all(w["state"] == "idle" for w in workers(drv, "reference")),
                 30.0, "both workers idle")
        futures = [executor.submit(caller, thread) for thread in range(4)]
        done = [f.result(timeout=80) for f in futures]
        served = [w["served"] for w in workers(drv, "reference")]
        assert sum(served) == 17 and all(served), served  # both workers took a share
        for results in done:  # every result still intact once all are in
            for out, want in results:
                assert_exact(out, want)


# -- the shell's check of replies naming shared memory -----------------------------------------


@pytest.fixture
def shell() -> Any:
    """A pool shell (no I/O thread, no process) and a request with one large input and two
    large outputs placed in segments, as ``Pool._encode`` does; every segment is closed
    afterwards."""
    pool = Pool.__new__(Pool)  # only the data-plane half of the shell is exercised
    pool.backend = "reference"
    pool._segments = SegmentPool("pool 'reference'")
    n = MIN_SEGMENT // 4
    request = Request(Call(Dispatch("fp", b"wire form", {}), [], outputs=[(U32, n)] * 2))
    taken = [pool._segments.take(4 * n) for _ in range(4)]  # the last: another request's
    assert all(s is not None for s in taken)
    taken[0].write(np.full(n, 7, dtype=np.uint32))  # the input
    request.transfer = LocalTransfer()
    request.transfer.shared = taken[:3]
    request.transfer.out_slots = taken[1:3]
    yield pool, request, taken
    pool._segments.close()
    for segment in taken:
        segment.close()


def test_a_reply_naming_its_own_output_slots_becomes_read_only_views(shell: Any) -> None:
    pool, request, (inp, out0, out1, _) = shell
    n = MIN_SEGMENT // 4
    _, arrays = pool._results(request, (Ran(), [out0.describe(U32, n), out1.describe(U32, n)]))
    assert [a.shape for a in arrays] == [(n,), (n,)]
    assert not any(a.flags.writeable for a in arrays)
    assert request.transfer.shared == [inp]  # only the input is left for Release


@pytest.mark.parametrize("naming", ["input_as_output", "swapped_slots", "same_slot_twice",
                                    "another_requests_segment"])
def test_a_reply_naming_memory_other_than_its_output_slot_is_a_protocol_error(
        shell: Any, naming: str) -> None:
    pool, request, (inp, out0, out1, other) = shell
    n = MIN_SEGMENT // 4
    named = {"input_as_output": [inp, out1], "swapped_slots": [out1, out0],
             "same_slot_twice": [out0, out0], "another_requests_segment": [other, out1]}[naming]
    value = pool._results(request, (Ran(), [s.describe(U32, n) for s in named]))
    assert isinstance(value, ProtocolError), f"accepted: {type(value).__name__}"
    assert "does not name its output slots" in value.cause


@pytest.mark.timeout(60)
@pytest.mark.parametrize("naming", ["swapped_slots", "same_slot_twice"])
def test_a_worker_reply_naming_the_wrong_output_slots_fails_only_its_call(
        monkeypatch: pytest.MonkeyPatch, naming: str) -> None:
    """A reply as a broken or hostile worker could send it, doctored where the parent
    decodes it: the caller gets a ProtocolError at once, and the pool serves on."""
    real_decode = codec.decode
    doctored = []

    def decode(frames: Any, *args: Any, **kwargs: Any) -> Message:
        msg = real_decode(frames, *args, **kwargs)
        shared = [a for a in msg.arrays if isinstance(a, Shared)]
        if msg.op is Op.RAN and len(shared) == 2 and not doctored:
            doctored.append(msg.id)
            msg.arrays = shared[::-1] if naming == "swapped_slots" else [shared[0]] * 2
        return msg

    n = 1 << 18
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        out, want = dispatch_rw(drv, rw(n), 0, n)  # started, and shared memory in use
        assert_exact(out, want)
        monkeypatch.setattr(codec, "decode", decode)
        pending = drv.dispatch_async(rw(n), rw_inputs(1, n), backend="reference")
        try:
            outcome: Any = pending.result(timeout=8)
        except DispatchTimeoutError as exc:
            outcome = exc if "result(timeout" not in str(exc) else "no answer within 8 s"
        except Exception as exc:
            outcome = exc
        monkeypatch.setattr(codec, "decode", real_decode)
        assert doctored
        assert isinstance(outcome, ProtocolError), f"the caller got {outcome!r}"
        assert drv.status()["pools"]["reference"]["state"] == "running"
        out, want = dispatch_rw(drv, rw(n), 2, n)
        assert_exact(out, want)


# -- found by a hostile pass -----------------------------------------------------------------


def one_output(n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < out.len):
        out[i] = x[i] + 1
    return k.build()


@pytest.mark.timeout(60)
def test_a_forked_child_keeps_its_results_while_the_parent_dispatches_on() -> None:
    """Results are views of shared memory: a child forked while the parent held one must
    keep seeing its own snapshot after the parent drops it and dispatches again (the
    segment is never reused), and the child's exit leaves the parent's pool alone."""
    n = 1 << 20
    program, x = one_output(n), np.arange(n, dtype=np.uint32)
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        result = drv.dispatch(program, [x], backend="reference")[0]
        go, told = os.pipe()
        seen, said = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: wait until the parent dispatched again, then look
            try:
                os.read(go, 1)
                os.write(said, b"1" if result.tobytes() == (x + 1).tobytes() else b"0")
            finally:
                os._exit(0)
        try:
            del result
            gc.collect()
            for k in range(3):  # would reuse the dropped result's segment
                again = drv.dispatch(program, [x * (7 + k)], backend="reference")[0]
                assert again.tobytes() == (x * (7 + k) + 1).tobytes()
                del again
                gc.collect()
            os.write(told, b"x")
            assert os.read(seen, 1) == b"1", "the child's result changed under it"
        finally:
            os.waitpid(pid, 0)
            for fd in (go, told, seen, said):
                os.close(fd)


@pytest.mark.timeout(60)
def test_ctrl_c_while_large_inputs_are_copied_leaks_no_segment(tmp_path: Path) -> None:
    """A KeyboardInterrupt in the middle of copying inputs into shared memory: every
    segment is closed with the driver."""
    script = tmp_path / "interrupted.py"
    script.write_text(textwrap.dedent("""
        import gc, os, signal, threading, time, numpy as np
        from vyre_core import Driver, ir
        # Ctrl-C raises here even if the test runner was started with SIGINT ignored (a
        # background job of a non-interactive shell), which children would inherit.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        n = (16 << 20) - 256
        k = ir.Kernel(workgroup=(256,)); x = k.read_write("x", ir.u32); y = k.read("y", ir.u32)
        i = k.let("i", ir.global_id(0))
        with k.if_(i < x.len):
            x[i] = x[i] + y[i]
        program = k.build()
        d = Driver()
        d.dispatch(program, [np.ones(16, np.uint32)] * 2, backend="reference")
        xs = [np.ones(n, np.uint32), np.ones(n, np.uint32)]
        interrupted = 0
        main = threading.main_thread().ident
        for delay in (0.001, 0.005, 0.01, 0.02, 0.03, 0.05):
            # (sent to this thread once it is in the try: it interrupts the dispatch, or
            # the join after it, never a later line, nor the timer's own start)
            go = threading.Event()
            def fire(delay=delay, go=go):
                go.wait()
                time.sleep(delay)
                signal.pthread_kill(main, signal.SIGINT)
            timer = threading.Thread(target=fire)
            timer.start()
            finished = False
            try:
                go.set()
                d.dispatch(program, xs, backend="reference")
                finished = True
                timer.join()
            except KeyboardInterrupt:
                interrupted += not finished
                timer.join()
        d.close()
        gc.collect()
        left = sum("memfd:vyre-data" in os.readlink(f"/proc/self/fd/{f}")
                   for f in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{f}"))
        print(interrupted, left)
        assert interrupted, "no dispatch was interrupted"
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=50)
    assert done.returncode == 0, done.stderr[-3000:]
    interrupted, left = map(int, done.stdout.split())
    assert left == 0, f"{left} segments left open after {interrupted} interrupted dispatches"


@pytest.mark.timeout(60)
def test_results_held_past_the_open_file_limit_are_copies_not_failures(tmp_path: Path) -> None:
    """Every held large result keeps its segment open: past the open-file limit, a result
    that cannot be mapped is read into private memory instead (never an error)."""
    script = tmp_path / "many.py"
    script.write_text(textwrap.dedent("""
        import resource, numpy as np
        from vyre_core import Driver, ir
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        n = 1 << 14
        k = ir.Kernel(workgroup=(256,))
        x, o = k.read("x", ir.u32), k.output("o", ir.u32, count=n)
        i = k.let("i", ir.global_id(0))
        with k.if_(i < o.len):
            o[i] = x[i] + 1
        program = k.build()
        x = np.arange(n, dtype=np.uint32)
        held = []
        with Driver() as d:
            for j in range(300):
                held.append(d.dispatch(program, [x + j], backend="reference")[0])
            exact = all(r.tobytes() == (x + j + 1).tobytes() for j, r in enumerate(held))
        print(len(held), exact)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=50)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["300", "True"], done.stdout + done.stderr[-2000:]


@pytest.mark.timeout(60)
def test_a_process_that_becomes_undumpable_goes_on_over_the_socket(tmp_path: Path) -> None:
    """Dumpable when its pool started, then not (prctl), without CAP_SYS_PTRACE: workers
    can no longer open its segments. The request that finds out goes again with its arrays
    on the socket, and so does every later one: exact results, a warning, no error."""
    script = tmp_path / "undumpable.py"
    script.write_text(textwrap.dedent("""
        import ctypes, logging, sys, numpy as np
        from vyre_core import Driver, ir
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        n = 1 << 20
        k = ir.Kernel(workgroup=(256,))
        x, o = k.read("x", ir.u32), k.output("o", ir.u32, count=n)
        i = k.let("i", ir.global_id(0))
        with k.if_(i < o.len):
            o[i] = x[i] + 1
        program = k.build()
        x = np.arange(n, dtype=np.uint32)
        with Driver() as d:
            first = d.dispatch(program, [x], backend="reference")[0]
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
            exact = [first.tobytes() == (x + 1).tobytes()]
            for j in range(3):
                out = d.dispatch(program, [x + j], backend="reference")[0]
                exact.append(out.tobytes() == (x + j + 1).tobytes())
        print(all(exact))
    """))
    command = [sys.executable, str(script)]
    if os.geteuid() == 0:  # root could open it anyway (CAP_SYS_PTRACE): drop capabilities
        command = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True"], done.stdout + done.stderr[-3000:]
    assert "cannot open this process's shared memory" in done.stderr, done.stderr[-3000:]
