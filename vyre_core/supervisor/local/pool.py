"""A pool of worker processes for one backend: the I/O around ``PoolMachine``.

One thread, the pool's I/O thread, feeds the rules in ``rules/`` events and carries
out the actions they answer with; it decides nothing itself. It owns the ROUTER socket
(hellos, heartbeats), the worker processes, their lanes (``lane.py``, ``framing.py``) and
the clock. It polls the socket, an eventfd (other threads hand it work), each worker's
pidfd (a death is seen at once) and output pipe, and the lanes of requests in flight.
Workers are spawned by this thread only: the kernel's parent-death signal is tied to the
thread that forked, and this one outlives its workers.

A calling thread (``call``, ``submit``) writes its large arrays into shared memory
(``dataplane.py``), hands its request over with one append to a deque, and waits on the
request's ``Outcome``, which the I/O thread completes without ever blocking. It runs no
rule, touches no lane and holds no lock the I/O thread needs where an exception can land:
a Ctrl-C, a signal handler's exception or an async exception thrown into it ends its own
wait alone, and cancels its call (docs/operations.md, "Cancelling a call").

The pool is split by concern: this file holds the caller side, the I/O loop, status and
closing; ``transfer.py`` a request's way onto a lane and into shared memory and its reply's
way back; ``processes.py`` spawning, exits and the fork server. ``base.py`` declares what
they share.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import InvalidStateError
from typing import Any

import zmq

from vyre_core.boundary import codec
from vyre_core.boundary.messages import Heartbeat, Message
from vyre_core.dataplane import SegmentPool
from vyre_core.errors import (
    PoolFailedError,
    ProtocolError,
    VyreError,
    as_vyre_error,
    system_resource_error,
)
from vyre_core.registry import BackendRegistration
from vyre_core.spinning import Spinning
from vyre_core.supervisor import fork_server, published
from vyre_core.supervisor.fork_server import ForkServer
from vyre_core.supervisor.lane import Lane
from vyre_core.supervisor.local.base import IoState
from vyre_core.supervisor.local.processes import Processes
from vyre_core.supervisor.local.transfer import DataPath, LocalTransfer, local_transfer
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.outcome import Outcome
from vyre_core.supervisor.process import OutputHistory, WorkerProcess, ensure_descriptors
from vyre_core.supervisor.rules.actions import (
    Promote,
    Release,
    Resolve,
    Send,
    Signal,
    Spawn,
    Stop,
)
from vyre_core.supervisor.rules.constants import TICK_EVERY
from vyre_core.supervisor.rules.machine import PoolMachine
from vyre_core.supervisor.rules.requests import Request
from vyre_core.supervisor.rundir import RunDir
from vyre_core.supervisor.shell import Carrier, Spans

__all__ = ["Pool", "PoolOptions", "Request"]

_log = logging.getLogger("vyre.supervisor")
_CLOSE = object()  # the inbox marker that asks the I/O thread to close
_CANCEL = object()  # (_CANCEL, request): its caller cancelled it
#: What the I/O thread reads from one lane per round at most (it holds the pool's lock):
#: a large reply is taken a slice at a time.
IO_READ_BUDGET = 1 << 20


class Pool(DataPath, Processes):
    """One backend's workers. ``submit`` and ``call`` may be used from any thread;
    ``on_change`` is called (from the I/O thread) whenever routing must decide again."""


    #: Test seam, off (None) by default: when set on a pool, its I/O thread calls it with
    #: each poll's events (socket or fd -> mask) after the poll and before taking the lock
    #: to act on them. A test makes something happen at that known point (a kill whose
    #: exit the next poll sees) instead of guessing where the thread stands; the hook runs
    #: on the I/O thread, must not take the pool's lock, and stalls the pool while it runs.
    #: Unset, it costs one attribute test per poll, none on a calling thread's hot path.
    after_poll: Callable[[dict[Any, int]], None] | None = None

    def __init__(self, registration: BackendRegistration, rundir: RunDir, name: str,
                 options: PoolOptions, on_change: Callable[[], None], secret: bytes,
                 context: Callable[[], zmq.Context],
                 devices: tuple[int, ...] | None = None, spans: Spans | None = None) -> None:
        self.registration = registration
        self.backend = registration.id
        self.options = options
        self._rundir = rundir
        self._name = name
        self._endpoint = rundir.endpoint(name)  # short: ipc paths have a length limit
        self._publisher = published.Publisher(rundir.path / f"{name}{published.SUFFIX}",
                                              self.backend)  # for `vyre status`
        self._on_change = on_change
        self._secret = secret
        self._context_of_driver = context  # one zmq context (and I/O thread) per driver
        self._machine = PoolMachine(self.backend, options, devices)
        self._lock = threading.Lock()   # the machine: the I/O thread, and status readers
        self._spans = spans
        self._carrier = Carrier(self, self._machine, self._lock, on_change, spans)
        self._gate = threading.Lock()   # the hand-over: inbox, wake fd, I/O state
        self._io_state = IoState.NEW
        self._closing = False
        self._inbox: collections.deque[Any] = collections.deque()
        self._wake_fd = -1
        self._thread: threading.Thread | None = None
        self._io_ended = threading.Event()  # the I/O thread's last act
        self._processes: dict[int, WorkerProcess] = {}
        self._fork_server: ForkServer | None = None
        self._fork_server_fd = -1
        # when fork servers were lost: FORK_SERVER_LOSSES within the restart window, or one
        # that never became ready, and the pool starts no more (for the window; for good)
        self._fork_server_losses: collections.deque[float] = collections.deque()
        self._fork_server_broken = False
        self._parked: list[Spawn] = []             # spawns waiting for it to be ready
        self._exits_awaited: dict[WorkerProcess, float] = {}  # dead; their status due by
        self._pages: dict[int, tuple[int, int]] = {}
        self._index_of: dict[bytes, int] = {}
        self._history = [OutputHistory() for _ in self._machine.workers]
        self._segments = SegmentPool(f"pool {self.backend!r}")
        self._lanes: dict[int, Lane] = {}          # per slot: its process's lane
        self._io_lanes: dict[Lane, Request] = {}   # held by the I/O thread, for a request
        self._waiting_sends: list[Send] = []       # for the I/O thread, once a lane is free
        self._deferred: list[Any] = []             # spawns parked for the fork server
        self._spinning = Spinning(options.transport.spin)  # the I/O thread's, after a send
        self._callers_spinning = Spinning(options.transport.spin)  # a caller's, before it sleeps
        self._ticked_at = 0.0                      # the last tick of the rules
        self._sweep_at = 0.0                       # next look for cancels it was not told of
        self._endpoint_check_at = 0.0              # next look for a lost run directory
        self._endpoint_lost: str | None = None     # why it could not be made again (logged)

    # -- caller side -----------------------------------------------------------------------

    def submit(self, request: Request) -> Outcome:
        """Hand ``request`` to the I/O thread; its outcome always resolves, unless it is
        cancelled first (``Outcome.cancel``: the I/O thread is told, and the worker stops).
        Its large arrays are written into shared memory here, by the calling thread. Once
        the request is in the inbox (one append) the I/O thread owns it: an exception
        thrown into this thread after that leaves it there, and before, releases what
        was taken (or, landing between the two, leaves a segment unused until close)."""
        future = request.call.future  # (answered, the request lets go of it)
        request.transfer = LocalTransfer()  # (before the span, which notes its start there)
        self._begin_span(request)
        handed = False
        try:
            self._encode_into(request)
            future.on_cancel = lambda: self._cancel(request)
            with self._gate:
                if self._open():
                    handed = True
                    self._inbox.append(request)
                    os.eventfd_write(self._wake_fd, 1)
                    return future
            raise self._closed_error()
        except VyreError as exc:
            self._release(request)
            with contextlib.suppress(InvalidStateError):
                future.set_exception(exc)
            return future
        except BaseException:  # interrupted (Ctrl-C) while copying: nothing leaks
            if handed:
                future.cancel()
            else:
                self._release(request)
            raise

    def _cancel(self, request: Request) -> None:
        """(Any thread: the request's outcome was cancelled.) Tell the rules, through the
        I/O thread (one append, then a wake-up; missed, its sweep finds it)."""
        self._inbox.append((_CANCEL, request))
        self._wake_io()

    def _open(self) -> bool:
        """(Under the gate.) Start the pool if it is new; whether it takes work."""
        if self._io_state == IoState.NEW:
            self._start()
        return self._io_state == IoState.RUNNING

    def _closed_error(self) -> PoolFailedError:
        return PoolFailedError(f"the driver is closed; pool {self.backend!r} takes no more "
                               "work", "Create a new vyre Driver.", backend=self.backend)

    def call(self, request: Request) -> tuple[dict[str, Any], list[Any]]:
        """Run ``request`` and return its reply: submitted to the I/O thread, which sends it
        and reads the reply, then waited for (``Outcome.wait``: a look for ``spin`` seconds,
        then a sleep on this thread's eventfd). The rules guarantee the wait ends (a
        deadline, or a live worker actually running the request).

        This thread never runs the rules, never touches a lane and never holds a lock the
        I/O thread needs while an exception can land (``submit`` hands over with one
        append to a deque): whatever is thrown into it (Ctrl-C, a signal handler's
        exception, an async exception) can only end its own wait. That exception then
        cancels the call (the worker is told to stop at its next safe point) and reaches
        this caller alone."""
        future = self.submit(request)
        try:
            future.wait(None, spin=self._callers_spinning)
        except BaseException:
            future.cancel()  # (a no-op if it was answered meanwhile)
            raise
        return future.result()

    # -- status and closing ----------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """A snapshot: the rules' view, with every worker's progress page read right now."""
        with self._lock:
            now = time.monotonic()
            self._read_pages(now)
            status = self._machine.status(now)
            server = self._fork_server
            status["fork_server"] = None if server is None else {
                "pid": server.popen.pid, "state": server.state}
        for worker, history in zip(status["workers"], self._history, strict=True):
            worker["history"] = history.list()
        return status

    def begin_close(self) -> None:
        """Ask the I/O thread to fail what is pending and stop every worker (SIGTERM,
        SIGKILL after the grace); returns at once. Idempotent."""
        with self._gate:
            if self._io_state == IoState.NEW:
                self._io_state = IoState.STOPPED
            elif self._io_state == IoState.RUNNING and not self._closing:
                self._closing = True
                self._inbox.append(_CLOSE)
                os.eventfd_write(self._wake_fd, 1)

    @property
    def running(self) -> bool:
        """Whether the I/O thread still runs (workers may still be alive). Its own word,
        not ``Thread.is_alive()``: on Python 3.11 a ``join`` interrupted by Ctrl-C marks
        the thread it waited for as stopped while it still runs."""
        return self._thread is not None and not self._io_ended.is_set()

    def wait_closed(self, timeout: float | None = None) -> None:
        """Wait for the I/O thread to stop its workers and end: at most ``timeout`` (default:
        the kill grace plus 5 s)."""
        if self._thread is not None:
            grace = self.options.timeouts.kill_grace
            self._io_ended.wait(grace + 5 if timeout is None else timeout)

    def forget(self) -> None:
        """(In a forked child.) This pool is the parent's and is never used here: let go of
        the child's copies of its free shared memory, of its lanes and of its fork server's
        socket."""
        self._segments.forget()
        for lane in {*self._lanes.values(), *self._io_lanes}:
            lane.socket.close()
        if self._fork_server is not None:
            self._fork_server.forget()

    def force_stop(self) -> None:
        """Last resort when ``close`` was interrupted or timed out: SIGKILL every worker
        left and its fork server, and wait for them. Safe from any thread, any number of
        times."""
        for proc in list(self._processes.values()):
            proc.kill()
        server = self._fork_server
        if server is not None:
            server.stop()
        for proc in list(self._processes.values()):
            proc.wait_exited(5)

    # -- the I/O thread --------------------------------------------------------------------

    def _start(self) -> None:
        """Open the socket and the wake fd and start the I/O thread (under the gate). The
        OS may refuse any of them: the pool then stays new, and the next call tries again."""
        self._rundir.restore()  # (a temp cleaner may have removed it: SystemResourceError)
        try:
            ensure_descriptors()  # (libzmq aborts the process when its first thread has none)
            self._router = self._context_of_driver().socket(zmq.ROUTER)
            self._router.setsockopt(zmq.LINGER, 0)
            self._router.setsockopt(zmq.ROUTER_MANDATORY, 1)
            self._router.setsockopt(zmq.SNDHWM, 0)
            self._router.setsockopt(zmq.RCVHWM, 0)
            # Refuse oversized frames in the transport, before allocating them.
            self._router.setsockopt(zmq.MAXMSGSIZE, max(self.options.transport.max_message_bytes,
                                                        codec.MAX_HEADER_BYTES))
            self._router.bind(self._endpoint)
            self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._poller = zmq.Poller()
            self._poller.register(self._router, zmq.POLLIN)
            self._poller.register(self._wake_fd, zmq.POLLIN)
            thread = threading.Thread(target=self._run, name=f"vyre-pool-{self.backend}",
                                      daemon=True)
            thread.start()
        except (OSError, zmq.ZMQError, RuntimeError) as exc:  # RuntimeError: no new thread
            self._close_socket()
            if self._wake_fd >= 0:
                os.close(self._wake_fd)
                self._wake_fd = -1
            code = getattr(exc, "errno", None) or errno.EAGAIN
            raise system_resource_error(OSError(code, str(exc)),
                                        f"starting pool {self.backend!r}") from exc
        self._thread = thread
        self._io_state = IoState.RUNNING

    def _run(self) -> None:
        try:
            self._launch_fork_server()
            while True:
                self._carry_out()
                if self._parked and self._machine.state == "closed":
                    with self._lock:  # never started: nothing to wait for
                        for action in self._parked:
                            self._machine.spawn_dropped(action.index, action.generation)
                        self._parked.clear()
                if self._machine.stopped:
                    break
                with self._lock:  # (status readers read the machine under it too)
                    timer = self._machine.next_timer()
                    now = time.monotonic()
                    tick_at = min(self._ticked_at + TICK_EVERY,
                                  timer if timer is not None else math.inf)
                    wait = tick_at - now
                    for due in self._shell_deadlines():
                        wait = min(wait, due - now)
                events = self._poll(max(0, int(wait * 1000) + 1))
                if (hook := self.after_poll) is not None:  # (a test may unset it meanwhile)
                    hook(events)
                with self._lock:
                    now = time.monotonic()
                    if self._router in events or self._inbox:  # workers heard before work
                        self._receive(now)  # is given out: an idle worker is judged frozen
                        # by its last heartbeat, maybe waiting unread (this thread held up)
                    self._take_inbox(now, self._wake_fd in events)  # (a wake-up may be
                    # missed: a thread interrupted between its append and its write)
                    if self._fork_server is not None:
                        self._hear_fork_server(self._fork_server_fd in events, now)
                    for lane in [lane for lane in self._io_lanes if lane.fd in events]:
                        for msg in self._read_lane(lane, IO_READ_BUDGET):
                            self._machine.message(lane.identity, msg, now)
                        if lane.reader.ended or lane.broken:  # (else it polls readable)
                            with contextlib.suppress(KeyError):
                                self._poller.unregister(lane.fd)
                    for proc in list(self._processes.values()):
                        output_fd = proc.output_fd
                        if output_fd in events and not proc.read_output():
                            self._poller.unregister(output_fd)  # end of its output
                        if proc.pidfd in events:
                            self._poller.unregister(proc.pidfd)
                            self._exits_awaited[proc] = now + fork_server.ANSWER_WITHIN
                    if self._exits_awaited:
                        self._settle_exits(now)
                    if now >= self._sweep_at:
                        self._sweep_cancelled(now)
                    if now >= tick_at:  # (the rules' timers say when a tick acts)
                        self._ticked_at = now
                        self._read_pages(now)
                        self._machine.tick(now)
                if now >= self._endpoint_check_at:
                    with contextlib.suppress(PoolFailedError):  # (logged; starts fail on it)
                        self._keep_endpoint(now)
                self._segments.trim(now)  # (memory idle in free segments goes back)
                if self._publisher.due(now):
                    self._publisher.publish(now, self.status())
        except BaseException as exc:  # the I/O shell itself failed: leave nobody waiting
            _log.exception("the supervisor of pool %r crashed", self.backend)
            self._abandon(exc)
        finally:
            try:
                self._stop_all()
            finally:
                self._close_io()  # (else later calls would wait on a thread that is gone)
                self._io_ended.set()

    def _take_inbox(self, now: float, woken: bool) -> None:
        if woken:
            with contextlib.suppress(BlockingIOError):
                os.eventfd_read(self._wake_fd)
        while self._inbox:
            item = self._inbox.popleft()
            if item is _CLOSE:
                self._machine.close(now)
            elif isinstance(item, tuple):
                self._machine.cancel(item[1], now)
            elif item.done:
                pass  # (cancelled before it was handed over: answered, its memory released)
            elif item.call.future is not None and item.call.future.cancelled():
                self._machine.submit(item, now)  # (answered at once: nothing runs)
                self._machine.cancel(item, now)
            else:
                self._machine.submit(item, now)

    def _receive(self, now: float) -> None:
        for _ in range(256):
            try:
                frames = self._router.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            identity = frames[0].bytes
            heartbeat = identity.endswith(b":hb")
            if heartbeat:
                identity = identity[:-3]
            try:
                msg: Message | ProtocolError = codec.decode(
                    frames[1:], self.options.transport.max_message_bytes)
            except ProtocolError as exc:
                msg = exc
            if heartbeat and (isinstance(msg, ProtocolError)
                              or not isinstance(msg.body, Heartbeat)):
                identity = b""  # only heartbeats come from a heartbeat socket: a stranger
            elif self.options.restart.recycle_rss_bytes is not None and not heartbeat:
                self._measure(identity)
            self._machine.message(identity, msg, now)

    def _poll(self, timeout_ms: int) -> dict[Any, int]:
        """One poll of everything the I/O thread watches. Within ``spin`` of a send it
        looks busily (yielding the CPU between looks) before it sleeps: a worker's reply
        that comes within microseconds is then read without this thread's wake-up."""
        now = time.perf_counter()
        if self._spinning.on(now):
            while True:
                events = dict(self._poller.poll(0))
                now = time.perf_counter()
                if events or not self._spinning.on(now):
                    break
                os.sched_yield()
                self._spinning.yielded(now, time.perf_counter())
            if events:
                return events
        return dict(self._poller.poll(timeout_ms))

    def _sweep_cancelled(self, now: float) -> None:
        """(I/O thread, under the lock; once per tick.) Tell the rules of requests whose
        outcome was cancelled though the canceller could not say so (an exception thrown
        into it between the cancel and its hand-over)."""
        self._sweep_at = now + TICK_EVERY
        machine = self._machine
        for req in [*machine.queue, *(r for w in machine.workers
                                      for r in (*w.pinned, w.current) if r is not None)]:
            future = req.call.future
            if not req.done and future is not None and future.cancelled():
                machine.cancel(req, now)

    def _carry_out(self) -> None:
        """(I/O thread) Carry out the spawns parked for the fork server and the rules'
        actions until none are left, then tell routing and complete the outcomes the rules
        answered (outside the lock)."""
        while True:
            with self._lock:
                deferred, self._deferred = self._deferred, []
                actions = self._machine.take_actions()
                if not deferred and not actions:
                    self._let_go_of_answered_lanes()
                    break
                self._carrier.carry(deferred + actions)  # (handed over earlier: first)
        self._carrier.deliver()

    # -- the shell: what the Carrier calls, one method per kind of action ----------------

    def spawn(self, action: Spawn) -> None:
        self._spawn(action)

    def send(self, action: Send) -> None:
        self._io_send(action, self._lanes.get(action.index))

    def stop(self, action: Stop) -> None:
        proc = self._processes.get(action.index)
        if proc is not None:
            proc.page.cancel(action.request_id)

    def signal(self, action: Signal) -> None:
        proc = self._processes.get(action.index)
        if proc is not None:
            (proc.kill if action.kill else proc.terminate)()

    def promote(self, action: Promote) -> None:
        self._promote(action)

    def release(self, request: Request) -> None:
        self._release(request)

    def reply_of(self, request: Request, value: Any) -> Any:
        t = local_transfer(request)
        t.frames = t.wire = None  # (answered: what it encoded need not stay in memory)
        return self._results(request, value)

    def action_failed(self, action: Any, exc: Exception) -> None:
        """An action could not be carried out (a bug, or this process out of a resource):
        a Send counts as not sent (the rules retire that worker and send elsewhere); the pool
        goes on."""
        error = as_vyre_error(exc, f"pool {self.backend!r} carrying out {type(action).__name__}")
        _log.error("pool %r: %s", self.backend, error.cause, exc_info=exc)
        if isinstance(action, Send):
            self._machine.send_failed(action.index, action.request, error.cause,
                                      time.monotonic())

    def _abandon(self, exc: BaseException) -> None:
        """The shell failed (a bug in vyre): every waiting caller gets an error."""
        error = PoolFailedError(f"the supervisor of pool {self.backend!r} crashed: "
                                f"{type(exc).__name__}: {exc}", "Report this as a bug in vyre.",
                                backend=self.backend)
        machine = self._machine
        waiting = [r.call.future for r in (*machine.queue, *(r for w in machine.workers
                                                         for r in (*w.pinned, w.current)))
                   if r is not None]
        waiting += [future for future, _ in self._carrier.resolved]
        for future in waiting:
            if future is not None and not future.done():
                with contextlib.suppress(InvalidStateError):
                    future.set_exception(error)
        with contextlib.suppress(Exception):
            machine.close(time.monotonic())  # routing passes the pool over from now on
            # what the Carrier would have done of the answers: memory no worker can write
            # goes back now (the rest once the workers are gone, _stop_all)
            for action in machine.take_actions():
                if isinstance(action, Release) or (
                        isinstance(action, Resolve) and not action.running):
                    self._release(action.request)

    def _close_io(self) -> None:
        with self._gate:
            self._io_state = IoState.STOPPED
            if self._wake_fd >= 0:
                os.close(self._wake_fd)
                self._wake_fd = -1
            stranded = list(self._inbox)
            self._inbox.clear()
        for item in stranded:  # submitted while the thread was ending: never left waiting
            if isinstance(item, Request):
                self._release(item)
            if isinstance(item, Request) and item.call.future is not None:
                with contextlib.suppress(InvalidStateError):
                    item.call.future.set_exception(PoolFailedError(
                        f"the driver was closed while {item.label} to {self.backend!r} "
                        "was pending", "Keep the driver open until results are collected.",
                        backend=self.backend))
        self._close_socket()

    def _close_socket(self) -> None:
        with contextlib.suppress(AttributeError):
            self._router.close(linger=0)
