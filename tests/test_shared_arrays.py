"""Arrays that cross without a copy (``Driver.empty``, ``zeros``, ``asarray``), with real
workers on the reference, cpu and wgpu backends: exact bytes against the same calls on
ordinary arrays; the claim itself (a request carries descriptors and no array bytes, the
pool takes no segment of its own, the worker writes straight into the caller's memory);
views at an offset; in-place updates that never let a worker read what it is writing; and
the lifetime rules: no descriptor left once the arrays are dropped, none freed while a
worker may still write it, a worker killed mid-call, the driver closed, a fork."""

from __future__ import annotations

import gc
import os
import signal
import threading
import warnings
import weakref

import numpy as np
import pytest
from kernels import saxpy
from test_shared_memory import one_output, segments
from waiting import PATIENCE, wait_for, wait_running, workers

import vyre_core as vyre
from vyre_core import DispatchConfig, Timeouts, ir, shared_arrays
from vyre_core.dataplane import SHARE_THRESHOLD
from vyre_core.deadline import Deadline
from vyre_core.errors import DispatchTimeoutError, InvalidInputError, PoolFailedError
from vyre_core.sequence import SequenceBuilder
from vyre_core.supervisor.local.pool import Pool

pytestmark = [pytest.mark.processes]

BACKENDS = ["reference", "cpu", "wgpu"]
N = 1 << 16  # 256 KiB of u32 or f32: in shared memory


@pytest.fixture(scope="module")
def drv():
    with vyre.Driver() as d:
        yield d


def rw(n: int) -> ir.Program:
    """``x`` read_write, ``y`` read, ``o`` an output of ``n`` u32."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read_write("x", ir.u32)
    y = k.read("y", ir.u32)
    o = k.output("o", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        xi = k.let("xi", x[i])
        o[i] = xi ^ y[i]
        x[i] = xi * 3 + y[i]
    return k.build()


def reverse(n: int) -> ir.Program:
    """``o[i] = x[n - 1 - i]``: wrong if ``x`` changed while ``o`` is written over it."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    o = k.output("o", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < o.len):
        o[i] = x[x.len - 1 - i]
    return k.build()


def lend(array: np.ndarray, holder: list, *, writes: bool = False,
         deadline: Deadline | None = None) -> shared_arrays.Lent | None:
    """One array of a request that holds ``holder`` (``shared_arrays.lend_all``)."""
    return shared_arrays.lend_all([(array, writes)], holder,
                                  deadline or Deadline.after(None))[0]


def write_then_spin(n: int, iterations: int) -> ir.Program:
    """One invocation: ``o[0] = 7``, then a loop of ``iterations`` (o[1] its sum)."""
    k = ir.Kernel(workgroup=(1,))
    o = k.output("o", ir.u32, count=n)
    o[0] = ir.lit(7, ir.u32)
    acc = k.let("acc", ir.lit(0, ir.u32))
    with k.loop("j", 0, iterations) as j:
        k.assign(acc, acc + j)
    o[1] = acc
    return k.build()


def case(seed: int, n: int = N) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 2**32, n, dtype=np.uint32),
            rng.integers(0, 2**32, n, dtype=np.uint32))


def exact(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@pytest.fixture
def lane_bytes(monkeypatch):
    """The bytes of every request encoded for a lane, in order (header and frames)."""
    sent: list[int] = []
    encode = Pool._encode_into

    def counting(self, request):
        encode(self, request)
        sent.append(request.transfer.nbytes)

    monkeypatch.setattr(Pool, "_encode_into", counting)
    return sent


# -- exact bytes, and the claim ---------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dispatch_on_shared_arrays_is_exact_and_carries_no_array_bytes(
        drv, backend, lane_bytes) -> None:
    """x (read_write) updated in place, y read, o written into the caller's array: the
    same bytes as the call on ordinary arrays, and the request only a header."""
    x0, y0 = case(1)
    want_x, want_o = drv.dispatch(rw(N), [x0, y0], backend=backend)
    x, y, o = drv.asarray(x0), drv.asarray(y0), drv.empty(N, np.uint32)
    before = segments()
    lane_bytes.clear()
    got = drv.dispatch(rw(N), [x, y], backend=backend, out=[x, o])  # (outputs: x, then o)
    assert np.shares_memory(got[0], x) and np.shares_memory(got[1], o)
    exact(o, want_o)
    exact(x, want_x)
    exact(y, y0)
    assert len(lane_bytes) == 1 and lane_bytes[0] < 4096, lane_bytes  # descriptors only
    assert segments() <= before  # the pool took no segment of its own (its cached ones
    # may close meanwhile: idle ones are closed after a few seconds)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_launch_writes_shared_arrays_in_place_exactly(drv, backend, lane_bytes) -> None:
    rng = np.random.default_rng(2)
    x0, y0 = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
    want = np.empty(N, np.float32)
    drv.launch(saxpy, (np.float32(1.5), x0, y0, want), dim=N, backend=backend)
    x, y, out = drv.asarray(x0), drv.asarray(y0), drv.zeros((N // 256, 256), np.float32)
    lane_bytes.clear()
    drv.launch(saxpy, (np.float32(1.5), x, y, out.reshape(-1)), dim=N, backend=backend)
    exact(out.reshape(-1), want)
    assert max(lane_bytes) < 4096, lane_bytes
    out[:] = 0
    pending = drv.launch_async(saxpy, (np.float32(1.5), x, y, out.reshape(-1)), dim=N,
                               backend=backend)
    pending.result()
    exact(out.reshape(-1), want)
    assert max(lane_bytes) < 4096, lane_bytes


@pytest.mark.timeout(240)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sequence_returns_into_shared_arrays_exactly(drv, backend, lane_bytes) -> None:
    """A sequence's return written into a shared array; its input, the same array (an
    update in place), is copied on its way in, so no step reads what the run writes."""
    b = SequenceBuilder()
    b.input("x", ir.u32, N)
    b.transient("t", ir.u32, N)
    b.step(reverse(N), {"x": "x", "o": "t"})
    seq = b.build(returns=["t"])
    x0, _ = case(3)
    want, = drv.dispatch(seq, [x0], backend=backend)
    x = drv.asarray(x0)
    drv.dispatch(seq, [x], backend=backend, out=[x])
    exact(x, want)
    exact(want, x0[::-1].copy())


# -- views, aliasing, other drivers ------------------------------------------------------------


@pytest.mark.timeout(120)
def test_contiguous_views_at_an_offset_cross_as_descriptors_exactly(drv, lane_bytes) -> None:
    base = drv.asarray(np.arange(3 * N, dtype=np.uint32))
    x, y, o = base[N:2 * N], base[2 * N:], drv.zeros((2, N), np.uint32)[1]
    x_before, y_before = x.copy(), y.copy()
    want_o = x_before ^ y_before
    lane_bytes.clear()
    drv.dispatch(rw(N), [x, y], backend="reference", out=[x, o])
    exact(o, want_o)
    exact(x, x_before * np.uint32(3) + y_before)
    exact(base[:N], np.arange(N, dtype=np.uint32))  # around the views: untouched
    assert lane_bytes[0] < 4096
    small = base[:16]  # under 64 KiB: rides the lane, as any small array
    assert drv.dispatch(one_output(16), [small], backend="reference")[0].tolist() == \
        list(range(1, 17))


def test_non_contiguous_views_are_refused_with_a_fix(drv) -> None:
    a = drv.empty((256, 256), np.uint32)
    for view in (a.reshape(-1)[::-1], a[:, 1], a.T, a[::2]):
        with pytest.raises(InvalidInputError, match="not C-contiguous") as err:
            drv.dispatch(one_output(view.size), [view], backend="reference")
        assert "np.ascontiguousarray" in err.value.fix
    with pytest.raises(InvalidInputError, match="not C-contiguous"):
        drv.launch(saxpy, (np.float32(1), drv.empty((256, 256), np.float32)[:, 0],
                                np.zeros(256, np.float32), np.zeros(256, np.float32)), dim=256)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_an_input_written_through_another_output_is_copied_not_read_while_written(
        drv, backend) -> None:
    """``o`` written over ``x``'s own memory: the worker must read x as it was."""
    x0, _ = case(4)
    x = drv.asarray(x0)
    got, = drv.dispatch(reverse(N), [x], backend=backend, out=[x])
    exact(got, x0[::-1].copy())
    exact(x, x0[::-1].copy())


@pytest.mark.timeout(120)
def test_an_array_of_one_driver_crosses_without_a_copy_with_another(drv, lane_bytes) -> None:
    x0, y0 = case(5)
    x = drv.asarray(x0)
    with vyre.Driver() as other:
        lane_bytes.clear()
        x_after, o = other.dispatch(rw(N), [x, drv.asarray(y0)], backend="reference")
        assert lane_bytes[0] < 4096
        exact(o, x0 ^ y0)
        exact(x_after, x0 * np.uint32(3) + y0)
    exact(x, x0)  # an input without out=: never written


# -- lifetimes ----------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_dropped_arrays_close_their_descriptors(drv) -> None:
    """Found failing: run alone, the pool's own segment (made at its first dispatch) was
    counted as one the arrays left open; in the whole suite, the last request's
    reference (on the pool's thread) outlived the caller's ``del`` by a moment. A
    dispatch first, and the close waited for with a deadline, as the tests below do."""
    drv.dispatch(one_output(N), [drv.empty(N, np.uint32)], backend="reference")
    gc.collect()
    before = segments()
    arrays = [drv.empty(N, np.uint32) for _ in range(4)]
    views = [a[8:] for a in arrays]
    mine = segments() - before  # (the pool's own cached segments may close meanwhile)
    assert len(mine) == 4
    for a in arrays:
        drv.dispatch(one_output(N), [a], backend="reference", out=[a])
    del arrays
    gc.collect()
    assert mine <= segments()  # the views keep them
    del views, a
    wait_for(lambda: gc.collect() >= 0 and not (mine & segments()), PATIENCE,
             "the dropped arrays' segments closed")
    small = drv.empty(16, np.uint32)  # under 64 KiB: ordinary memory, no segment
    assert segments() <= before and small.flags.writeable and small.sum() == 0


@pytest.mark.timeout(120)
def test_a_closed_drivers_arrays_stay_readable_and_every_call_refuses_them() -> None:
    before = segments()
    with vyre.Driver() as d:
        a = d.asarray(np.arange(N, dtype=np.uint32))
        d.dispatch(one_output(N), [a], backend="reference", out=[a])
    assert segments() <= before  # descriptors closed with the driver
    exact(a, np.arange(1, N + 1, dtype=np.uint32))  # the memory stays until collected
    a[0] = 5
    with vyre.Driver() as other:
        for call in (lambda: other.dispatch(one_output(N), [a], backend="reference"),
                     lambda: other.dispatch(one_output(N), [np.zeros(N, np.uint32)],
                                            backend="reference", out=[a]),
                     lambda: other.launch(saxpy, (np.float32(1), np.zeros(N, np.float32),
                                                     np.zeros(N, np.float32), a.view(
                                                         np.float32)), dim=N)):
            with pytest.raises(InvalidInputError, match="closed") as err:
                call()
            assert "np.array(x)" in err.value.fix
        assert other.dispatch(one_output(N), [np.array(a)], backend="reference")[0][0] == 6
    with pytest.raises(PoolFailedError, match="closed"):
        d.empty(N, np.uint32)


def holds_in_a_forked_child(check, what: str) -> None:
    """``check()`` (true or false; raising is false) run in a child forked now, its answer
    read here through a pipe."""
    said, told = os.pipe()
    pid = os.fork()
    if pid == 0:
        held = False
        try:
            held = bool(check())
        finally:
            os.write(told, bytes([0 if held else 1]))
            os._exit(0)
    try:
        assert os.read(said, 1) == b"\x00", what
    finally:
        os.waitpid(pid, 0)
        os.close(said)
        os.close(told)


@pytest.mark.timeout(60)
def test_a_forked_childs_own_arrays_wait_for_their_writers_as_the_parents_do() -> None:
    """After a fork the module's lock is new; the condition lends wait on is too (else a
    wait in the child raised RuntimeError: a condition over the parent's old lock)."""
    def waits() -> bool:
        a = shared_arrays.SharedArrays().empty(N, np.uint32)
        assert lend(a, [], writes=True) is not None
        with pytest.raises(DispatchTimeoutError):
            lend(a, [], deadline=Deadline.after(0.01))
        return True

    holds_in_a_forked_child(waits, "the child's wait did not end in its deadline")


@pytest.mark.timeout(120)
def test_a_forked_child_refuses_the_parents_arrays_and_closes_their_descriptors(drv) -> None:
    a = drv.asarray(np.arange(N, dtype=np.uint32))
    mine = segments()

    def refused() -> bool:
        with pytest.raises(InvalidInputError) as exc:
            drv.dispatch(one_output(N), [a], backend="reference")
        return ("forked" in exc.value.cause and "np.array(x)" in exc.value.fix
                and not (segments() & mine) and a[1] == 1)

    holds_in_a_forked_child(refused, "the child did not refuse the parent's array")
    got, = drv.dispatch(one_output(N), [a], backend="reference")  # the parent's: unchanged
    exact(got, np.arange(1, N + 1, dtype=np.uint32))


@pytest.mark.timeout(120)
def test_the_worker_writes_straight_into_the_callers_array_and_it_survives_a_kill() -> None:
    """Seen mid-call: the output's first element is the caller's before the reply. The
    worker is then killed: the array stays valid, and the next call fills it exactly."""
    with vyre.Driver(timeouts=Timeouts(kill_grace=0.5)) as d:
        o = d.empty(N, np.uint32)
        done = threading.Event()
        failed: list[BaseException] = []

        def call() -> None:
            try:
                d.dispatch(write_then_spin(N, 50_000_000), [], backend="reference", out=[o],
                           config=DispatchConfig(retries=0))
            except BaseException as exc:
                failed.append(exc)
            done.set()

        threading.Thread(target=call, daemon=True).start()
        busy = wait_running(d, "reference")[0]
        wait_for(lambda: o[0] == 7, PATIENCE, "the worker's write in the caller's memory")
        assert not done.is_set()
        os.kill(busy["pid"], signal.SIGKILL)
        assert done.wait(PATIENCE) and failed
        o[:] = 1  # still the caller's: valid, writable
        d.dispatch(one_output(N), [np.arange(N, dtype=np.uint32)], backend="reference", out=[o])
        exact(o, np.arange(1, N + 1, dtype=np.uint32))


@pytest.mark.timeout(120)
def test_a_cancelled_calls_array_is_not_written_by_a_later_call_while_its_worker_may() -> None:
    """cancel() answers at once, but the worker may write the array until it stops (here:
    frozen, till the supervisor replaces it). A later call naming that array waits for
    that, within its deadline; before, it ran on the other worker and the cancelled
    call's late writes could land in its answered result."""
    with vyre.Driver(workers=2, timeouts=Timeouts(cancel_grace=30, heartbeat=30)) as d:
        d.dispatch(one_output(16), [np.zeros(16, np.uint32)], backend="reference")
        o = d.empty(N, np.uint32)
        x = np.arange(N, dtype=np.uint32)
        cancelled = d.dispatch_async(write_then_spin(N, 10**9), backend="reference", out=[o],
                                     config=DispatchConfig(retries=0))
        busy = wait_running(d, "reference")[0]
        wait_for(lambda: o[0] == 7, PATIENCE, "the worker's write in the caller's memory")
        os.kill(busy["pid"], signal.SIGSTOP)
        try:
            assert cancelled.cancel()
            with pytest.raises(DispatchTimeoutError, match="waiting for an array that an "
                               "earlier call still uses") as waited:
                d.dispatch(one_output(N), [x], backend="reference", out=[o],
                           config=DispatchConfig(timeout=0.5))
            assert "arrays of its own" in waited.value.fix
            other = d.empty(N, np.uint32)  # (an array of its own: at once)
            d.dispatch(one_output(N), [x], backend="reference", out=[other])
            exact(other, x + 1)
        finally:
            os.kill(busy["pid"], signal.SIGCONT)  # (it stops at its next safe point)
        d.dispatch(one_output(N), [x], backend="reference", out=[o],
                   config=DispatchConfig(timeout=PATIENCE))  # (once that worker stopped)
        exact(o, x + 1)


@pytest.mark.timeout(120)
def test_a_pool_whose_supervisor_fails_lets_go_of_the_arrays_its_calls_held(monkeypatch):
    """The pool's I/O thread raising (a bug in vyre): its callers get PoolFailedError, its
    workers are gone, and the arrays its calls named are free: a call elsewhere that
    names one runs at once (before, it waited for a release that never came)."""
    with vyre.Driver(workers=1) as d:
        d.dispatch(one_output(16), [np.zeros(16, np.uint32)], backend="reference")
        o = d.empty(N, np.uint32)
        x = np.arange(N, dtype=np.uint32)
        running = d.dispatch_async(write_then_spin(16, 10**9), backend="reference")
        wait_running(d, "reference")
        queued = d.dispatch_async(one_output(N), [x], backend="reference", out=[o])

        def failing(now):
            raise RuntimeError("a bug in the supervisor")

        monkeypatch.setattr(d.pools.open("reference"), "_read_pages", failing)  # (this one)
        for call in (running, queued):
            with pytest.raises(PoolFailedError, match="crashed"):
                call.result(PATIENCE)
        monkeypatch.undo()
        d.dispatch(one_output(N), [x], backend="cpu", out=[o], config=DispatchConfig(timeout=5))
        exact(o, x + 1)


@pytest.mark.timeout(120)
def test_an_array_dropped_while_a_late_worker_may_write_it_stays_open_until_it_exits() -> None:
    """Past its deadline the worker is SIGTERMed and finishes first: its output segment,
    the caller's array dropped meanwhile, is closed only once that worker exited."""
    with vyre.Driver(timeouts=Timeouts(kill_grace=10.0)) as d:
        d.dispatch(one_output(16), [np.zeros(16, np.uint32)], backend="reference")  # started
        before = segments()
        o = d.empty(N, np.uint32)
        mine = segments() - before
        with pytest.raises(DispatchTimeoutError):
            # (200,000 passes: 3.4 s on the reference on a busy machine, well past the
            # 0.3 s deadline and within the 10 s grace; 1,500,000 took the whole grace)
            d.dispatch(write_then_spin(N, 200_000), [], backend="reference", out=[o],
                       config=DispatchConfig(timeout=0.3))
        late = [w for w in workers(d, "reference") if w["state"] != "idle"]
        assert len(late) == 1, workers(d, "reference")
        del o
        gc.collect()
        assert mine <= segments(), "freed while a worker may still write it"
        # (the call's frames, kept by its exception's traceback, and the request make a
        # cycle with the array: it goes at a garbage collection once the worker exited)
        wait_for(lambda: gc.collect() >= 0 and not (mine & segments()), 60.0,
                 "the segment closed after the exit")


# -- pure rules ----------------------------------------------------------------------------------


@pytest.mark.fast
def test_unaliased_copies_only_shared_inputs_a_worker_could_see_change() -> None:
    arrays = shared_arrays.SharedArrays()
    try:
        a = arrays.empty(N, np.uint32)
        b = arrays.empty(N, np.uint32)
        plain = np.zeros(N, np.uint32)
        same = shared_arrays.unaliased([a, b, plain], [a], {0: 0})
        assert same[0] is a and same[1] is b and same[2] is plain  # a: its own rw buffer
        other = shared_arrays.unaliased([a, b], [a], {1: 0})  # a read, written as output 0
        assert other[0] is not a and not np.shares_memory(other[0], a) and other[1] is b
        part = shared_arrays.unaliased([a], [a[1:]], {0: 0})  # overlapping, not identical
        assert not np.shares_memory(part[0], a)
    finally:
        arrays.close()


@pytest.mark.fast
def test_a_lent_array_keeps_its_descriptor_open_past_its_drivers_close() -> None:
    arrays = shared_arrays.SharedArrays()
    a = arrays.empty(N, np.uint32)
    lent = lend(a[4:], [])
    assert lent is not None and lent.offset == 16
    shared = lent.describe(np.dtype(np.uint32), N - 4)
    assert (shared.offset, shared.end) == (16, N * 4)
    arrays.close()
    assert lend(a, []) is None  # closed: crosses no more
    os.fstat(shared.fd)  # still open: a worker may still write it
    lent.release()
    with pytest.raises(OSError):
        os.fstat(shared.fd)


@pytest.mark.fast
def test_a_lend_that_writes_waits_for_other_requests_over_that_memory_and_readers_share() -> None:
    """One writer at a time, readers together: a request that names memory another one
    holds waits until that one lets go (its worker can no longer write it) where either
    writes it; a request's own lends never wait on each other; a deadline bounds it."""
    arrays = shared_arrays.SharedArrays()
    try:
        a = arrays.empty(N, np.uint32)
        first, second = [], []
        reading = lend(a, first)
        other = lend(a[8:], second)
        assert other is not None  # (readers share)
        other.release()
        own = lend(a, first, writes=True)  # (its own read: a read_write buffer)
        assert own is not None and own.writes
        with pytest.raises(DispatchTimeoutError, match="waiting for an array that an "
                           "earlier call still uses") as late:
            lend(a[:N // 4], second, writes=True, deadline=Deadline.after(0.05))
        assert "arrays of its own" in late.value.fix
        got: list = []
        waiter = threading.Thread(target=lambda: got.append(
            lend(a[:N // 4], second, writes=True, deadline=Deadline.after(30))))
        waiter.start()
        reading.release()
        assert not got  # (the first still holds it, writing: it cannot have gone on)
        own.release()
        waiter.join(30)
        assert got and got[0] is not None and got[0].writes
        with pytest.raises(DispatchTimeoutError):  # (now the second writes: a reader waits)
            lend(a, first, deadline=Deadline.after(0.05))
        assert lend(a[N // 2:], first) is not None  # (beyond it: no wait)
    finally:
        arrays.close()


@pytest.mark.fast
def test_two_calls_each_naming_the_others_memory_never_hold_one_and_wait_for_the_other(
        ) -> None:
    """dispatch(p, [A], out=[B]) beside dispatch(p, [B], out=[A]): a call's arrays are
    waited for and taken together, so the second waits for the first whole (before, each
    could hold its input and wait for its output, held by the other: for ever)."""
    arrays = shared_arrays.SharedArrays()
    try:
        a, b = arrays.empty(N, np.uint32), arrays.empty(N, np.uint32)
        first, second = [], []
        taken = shared_arrays.lend_all([(a, False), (b, True)], first)
        assert all(taken) and first == taken
        with pytest.raises(DispatchTimeoutError, match="still uses"):
            shared_arrays.lend_all([(b, False), (a, True)], second, Deadline.after(0.05))
        assert second == []  # (nothing taken while it waited)
        for lent in taken:
            lent.release()
        assert all(shared_arrays.lend_all([(b, False), (a, True)], second))
        small = a[:4]  # (copied, not lent: yet it waits for a writer of that memory too)
        with pytest.raises(DispatchTimeoutError):
            shared_arrays.lend_all([(small, False)], first, Deadline.after(0.05))
        assert shared_arrays.lend_all([(b, False)], [], crossing=False) == [None]  # (no
        # shared memory in the pool: copied, after the same wait, none here: readers share)
    finally:
        arrays.close()


@pytest.mark.fast
def test_small_arrays_and_ordinary_ones_are_not_lent() -> None:
    arrays = shared_arrays.SharedArrays()
    try:
        assert lend(np.zeros(N, np.uint32), []) is None
        small = arrays.empty(SHARE_THRESHOLD // 8, np.uint32)
        assert lend(small, []) is None
        with pytest.raises(InvalidInputError, match="cannot cross"):
            arrays.empty(4, np.bool_)
    finally:
        arrays.close()


@pytest.mark.fast
def test_without_a_segment_an_array_is_ordinary_memory_with_a_warning(monkeypatch,
                                                                       caplog) -> None:
    def refused(size: int) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(shared_arrays, "Segment", refused)
    monkeypatch.setattr(shared_arrays, "_warned_at", [])
    arrays = shared_arrays.SharedArrays()
    with caplog.at_level("WARNING", logger="vyre.dataplane"):
        a = arrays.empty((4, N), np.float32)
    assert a.shape == (4, N) and a.flags.writeable and not a.any()
    assert lend(a.reshape(-1), []) is None  # copied like any array
    assert "Too many open files" in caplog.text and "ordinary memory" in caplog.text


@pytest.mark.fast
@pytest.mark.parametrize("shape", [-1, 2.5, (3, -2), "x"])
def test_a_shape_that_is_not_lengths_is_refused_with_a_fix(shape) -> None:
    with pytest.raises(InvalidInputError, match="not a length") as err:
        shared_arrays.SharedArrays().empty(shape, np.uint32)
    assert "1024" in err.value.fix


@pytest.mark.timeout(120)
def test_an_array_keeps_its_driver_alive_and_open(drv) -> None:
    """``vyre.Driver().asarray(x)``: the driver nobody else holds is not closed (which
    would refuse the array) while the array lives; it is once the array is collected."""
    before = segments()
    made = vyre.Driver()
    kept = weakref.ref(made)
    a = made.asarray(np.arange(N, dtype=np.uint32))
    mine = segments() - before
    del made
    gc.collect()
    assert kept() is not None
    got, = drv.dispatch(one_output(N), [a], backend="reference")
    exact(got, np.arange(1, N + 1, dtype=np.uint32))
    with warnings.catch_warnings(record=True):  # (the dropped driver's ResourceWarning)
        warnings.simplefilter("always")
        del a, got
        gc.collect()
        assert kept() is None
    assert mine
    wait_for(lambda: not (mine & segments()), PATIENCE, "the array's segment closed")
