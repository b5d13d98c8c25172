"""The rules of one worker pool, as a pure state machine.

No sockets, threads, clocks or processes here: events come in as method calls that carry
the time (a request submitted, a worker spawned or not, a message from a worker, a worker's
progress page read, a worker exited, a tick, close) and the rules answer with actions
(spawn, send, signal, resolve) that the pool's I/O thread carries out. Every rule of
supervision lives in this one module: generations, deadlines from submit, retries and
poison requests, lost messages, frozen and stuck workers, restart intensity with a
cool-down, recycling, device recovery. Nothing here may block or touch the OS.
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import hmac
import itertools
import logging
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from vyre_core.contract.types import Capabilities, DeviceInfo
from vyre_core.deadline import NO_DEADLINE, Deadline
from vyre_core.errors import (
    CallerError,
    DeviceLostError,
    DispatchCancelledError,
    DispatchTimeoutError,
    InvalidInputError,
    MessageLostError,
    NoCapableBackendError,
    PipelineInvalidatedError,
    PoolFailedError,
    ProtocolError,
    SystemResourceError,
    VyreError,
    WorkerCrashedError,
)
from vyre_core.protocol import PROGRAM_CACHE, PROGRAM_NOT_HELD, SHARED_REFUSED, Message, Op
from vyre_core.supervisor.metrics import PoolMetrics
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.outcome import Outcome

#: A request that never reached a worker is sent again (to a fresh or another worker) at
#: most this many times.
MAX_RESENDS = 2
#: A request that killed this many workers is a poison request: it fails alone.
POISON_KILLS = 2
#: A pool none of whose workers has ever said hello fails once every serving worker has
#: failed this many starts in a row: the first may be chance (a signal, a short moment
#: without memory), a second for every worker is the backend itself (an import error, a
#: driver it cannot load). One device that cannot start is left to the restart intensity.
START_TRIES = 2
#: The longest start-up error a pool failure's first line quotes (the rest is in details).
START_ERROR_CHARS = 300
#: The end of a worker's output that an error carries (its traceback's last frames).
OUTPUT_IN_ERRORS = 4000
#: The shell ticks at least this often (seconds). A longer gap between ticks means this
#: process itself did not run (stopped with Ctrl-Z, starved): nobody could be heard then.
TICK_EVERY = 1.0
#: The slowest transfer rate (bytes/s) a message is allowed before it counts as lost: a
#: request or reply of N bytes gets N / TRANSFER_FLOOR seconds on top of the silence limit.
TRANSFER_FLOOR = 100e6

_ids = itertools.count(1)


class Request:
    """One call to a worker: what to send, its deadline (made when the call was, kept
    across retries and re-routing), how often it may run again after a
    crash, the worker generation it is pinned to (pipelines, resident buffers), and the
    future its caller waits on. ``internal`` requests (recovery, shutdown) have no caller."""

    def __init__(self, op: Op, meta: dict[str, Any], arrays: list[Any], *,
                 deadline: Deadline = NO_DEADLINE, retries: int = 0,
                 slot: int | None = None, generation: int | None = None,
                 internal: bool = False, outputs: list[tuple[Any, int]] | None = None,
                 devices: frozenset[int] | None = None,
                 capable: frozenset[str] | None = None, into: list[Any] | None = None
                 ) -> None:
        self.id = next(_ids)
        self.op = op
        self.meta = meta
        self.arrays = arrays
        self.deadline = deadline
        self.retries = retries
        self.slot = slot
        self.generation = generation
        self.internal = internal
        self.outputs = outputs          # (dtype, count) per output, when known
        self.into = into                # per output, the caller's array to write it into
        self.devices = devices          # the devices it may run on (None: any), by routing
        # the identities of the probed capabilities a worker must have to run it (None:
        # any), by routing, for pools whose workers of one device probed unlike (on
        # unlike cluster nodes)
        self.capable = capable
        self.future: Outcome | None = Outcome()  # let go of once answered (by the shell)
        self.frames: list[Any] | None = None  # the encoded message: the shell's, opaque here
        self.nbytes = 0                       # its size, set by the shell when encoded
        self.shared: list[Any] = []           # shared memory holding its data (the shell's)
        self.out_slots: list[Any] = []        # of it, the one taken for each output, or None
        self.waker: Any = None                # the waiting caller's (the shell's)
        self.pending_send: Any = None         # (Send, lane) its caller has to carry out
        self.sent_on: Any = None              # the lane it went out on last
        self.with_program = False             # must carry its program's wire form
        self.socket_only = False              # must carry its arrays on the socket
        self.lean = False                     # encoded naming its program by fingerprint
        self.wire: Any = None                 # (meta, arrays) as encoded (the shell's)
        self.trace: Any = None                # its span's parent and start (the shell's)
        # what the rules have done with it
        self.state = "new"              # queued, sent, done
        self.worker: int | None = None
        self.sent_at = 0.0
        self.acked = False              # the worker's main thread has it (its page says so)
        self.stopping = False           # cancelled while running: its worker is told to stop
        self.finished_seen_at: float | None = None
        self.reply_bytes = 0            # the answer's size, per the worker's page
        self.watched = False            # on the deadline heap
        self.crashes = 0                # workers that died while running it
        self.losses = 0                 # sends that never reached a worker
        self.served_by: tuple[int, int] | None = None  # (worker index, generation)
        self.submitted_at = 0.0         # when the rules first had it (for its latency)
        self.program_held = False       # its last worker held its program when sent it
        self.input_bytes = 0            # its arrays' bytes as sent (the shell's, counted)

    @property
    def done(self) -> bool:
        return self.state == "done"

    @property
    def label(self) -> str:
        label = self.meta.get("label")
        return f"{self.op} {label!r}" if isinstance(label, str) and label else str(self.op)

    def renewed(self) -> Request:
        """A fresh copy (new id and future, same deadline) to send to another pool."""
        return Request(self.op, self.meta, self.arrays, deadline=self.deadline,
                       retries=self.retries, slot=self.slot,
                       generation=self.generation, internal=self.internal,
                       outputs=self.outputs, devices=self.devices, capable=self.capable,
                       into=self.into)


# -- actions: what the I/O shell must do -------------------------------------------------

@dataclass(frozen=True)
class Spawn:
    """Start a worker process for ``index`` as ``generation``; answer with ``spawned`` or
    ``spawn_failed``."""

    index: int
    generation: int


@dataclass(frozen=True)
class Send:
    """Send ``request`` to the worker at ``index`` (its ``identity``, ``generation``);
    answer ``send_failed`` when the transport refuses. ``holds_program``: the worker held
    the request's program before this send (it may be named by fingerprint alone)."""

    index: int
    generation: int
    identity: bytes
    request: Request
    holds_program: bool = False


@dataclass(frozen=True)
class Stop:
    """Ask the worker at ``index`` to stop request ``request_id`` at its next safe point
    (written into its progress page); it answers the request early, or is killed after
    ``PoolOptions.cancel_grace``."""

    index: int
    request_id: int


@dataclass(frozen=True)
class Signal:
    """SIGTERM (``kill`` False) or SIGKILL the worker process at ``index``."""

    index: int
    kill: bool


@dataclass(frozen=True)
class Resolve:
    """Complete ``request``'s future with ``value`` (a reply, or a VyreError)."""

    request: Request
    value: Any


@dataclass(frozen=True)
class Promote:
    """The spare worker process in slot ``spare`` now serves slot ``index`` (a new
    generation there): move what the shell keeps per process from one slot to the other."""

    spare: int
    index: int


@dataclass(frozen=True)
class Release:
    """No worker can touch ``request``'s shared memory any more: it may be reused. (A
    worker that was running the request when it was answered otherwise, past its
    deadline say, may still write there until it exits.)"""

    request: Request


@dataclass(frozen=True)
class RoutingChanged:
    """Capabilities or availability changed: routing decisions must be recomputed."""


@dataclass(frozen=True)
class Log:
    level: int
    text: str


Action = Spawn | Send | Stop | Signal | Resolve | Release | Promote | RoutingChanged | Log


def describe_exit(code: int | None) -> str:
    if code is None:
        return "exited (status unknown)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


# -- state -------------------------------------------------------------------------------

class Worker:
    """One worker slot as the rules see it; a slot holds one process at a time, each a
    new generation."""

    def __init__(self, index: int, device: int | None = None) -> None:
        self.index = index
        self.device = device            # the device its processes are pinned to, or None
        self.caps: Capabilities | None = None  # what its current process probed
        self.generation = 0
        # stopped, spawning, starting, idle, busy, spare (ready, in a standby slot),
        # stopping (asked to), killing, backoff
        self.state = "stopped"
        self.identity = b""
        self.proof = b""
        self.proven = False             # said hello with the driver's secret
        self.pid: int | None = None
        self.current: Request | None = None
        self.pinned: collections.deque[Request] = collections.deque()
        self.holding: list[Request] = []  # answered requests whose memory it may still write
        # the fingerprints of the programs its process holds: its cache, mirrored (LRU)
        self.held: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.heard_at = 0.0             # last message of any kind
        self.startup_deadline = 0.0
        self.kill_at: float | None = None
        self.cancel_by: float | None = None  # told to stop a cancelled call: killed after
        self.backoff_until = 0.0
        self.retire_reason = ""
        self.retire_cause: str | None = None  # its word in metrics.RESTART_REASONS
        self.spawn_failures = 0
        self.retiring: str | None = None  # None: any exit is unexpected; planned; fault
        self.deaths = 0                 # counted toward the restart intensity
        self.served = 0                 # caller requests, over every generation
        self.served_generation = 0
        self.rss: int | None = None
        self.hello_error: str | None = None  # why its latest start failed, in one line
        self.failed_starts = 0          # starts in a row that ended before a hello
        self.start_output = ""          # the traceback its failed start reported
        # why its latest start can never serve (the configuration names what the backend
        # lacks): no death is counted, and while it backs off calls fail at once with
        # this, and routing passes the pool over
        self.refusal: VyreError | None = None
        self.last_exit = ""

    @property
    def name(self) -> str:
        return f"worker {self.index} (pid {self.pid})"


@dataclass
class Failure:
    cause: str                # short: its first line names what happened
    fix: str
    output: str               # the last worker's traceback or output tail
    failed_at: float
    retry_at: float
    announced: bool = False  # routing told that the cool-down is over


class PoolMachine:
    """The supervision rules of one backend's pool (see the module docstring)."""

    def __init__(self, backend: str, options: PoolOptions,
                 devices: tuple[int, ...] | None = None) -> None:
        self.backend = backend
        self.options = options
        self.state = "new"  # new, running, failed, closed
        # the devices its workers are pinned to (None: each worker on the backend's
        # preferred device): ``devices``, else the ids the options name
        if devices is None and isinstance(options.devices, tuple):
            devices = options.devices
        self.devices = devices
        # slots 0..serving-1 serve, ``options.workers`` per device; the ``standby`` slots
        # after them hold spare processes, spread over the devices
        serving = [d for d in devices for _ in range(options.workers)] if devices \
            else [None] * options.workers
        spares = [devices[j % len(devices)] if devices else None
                  for j in range(options.standby)]
        self.workers = [Worker(i, d) for i, d in enumerate(serving + spares)]
        self.serving = len(serving)
        self._serving = tuple(self.workers[:self.serving])  # (the hot path walks them)
        self._silence = options.silence_limit
        self.queue: collections.deque[Request] = collections.deque()
        # what the serving workers of each device (None: unpinned) can all do, from what
        # each probed: kept on restarts
        self.device_capabilities: dict[int | None, Capabilities] = {}
        # per device, each distinct set of capabilities its serving workers probed (one,
        # unless they run on unlike nodes); ``varied``: some device has more than one
        self.device_variants: dict[int | None, tuple[Capabilities, ...]] = {}
        self.varied = False
        self.device_list: list[DeviceInfo] = []  # the backend's devices, as last reported
        self.failure: Failure | None = None
        self.half_open = False  # restarted after a cool-down: one death fails it again
        self.started = False    # some worker has said hello since the pool was made
        self.dropped_replies = 0      # late or stray replies from our own workers
        self.rejected_messages = 0    # messages from peers that are not our workers
        self.lost_messages = 0
        self.metrics = PoolMetrics()  # (fed by the shell too: answers, with their latency)
        self._deaths: collections.deque[float] = collections.deque()
        self._deadlines: list[tuple[float, int, Request]] = []
        self._live_deadlines = 0  # entries of _deadlines whose request is not done
        self._last_tick: float | None = None
        self._by_identity: dict[bytes, Worker] = {}
        self._former: collections.deque[bytes] = collections.deque(maxlen=64)
        self._actions: list[Action] = []

    # -- outputs ---------------------------------------------------------------------------

    def take_actions(self) -> list[Action]:
        actions, self._actions = self._actions, []
        return actions

    def take_promotions(self) -> list[Promote]:
        """The pending Promote actions alone (the rest stay): the shell moves a promoted
        process's records at once, so that the next exit it reads lands on the right slot."""
        promotions = [a for a in self._actions if isinstance(a, Promote)]
        self._actions = [a for a in self._actions if not isinstance(a, Promote)]
        return promotions

    @property
    def stopped(self) -> bool:
        """Closed, and no worker process is left."""
        return self.state == "closed" and all(
            w.state in ("stopped", "backoff") for w in self.workers)

    def next_timer(self) -> float | None:
        """The earliest time at which ``tick`` has something to do: the shell ticks only
        then (or ``TICK_EVERY`` after its last tick), so every event that can make work
        possible must schedule it itself."""
        while self._deadlines and self._deadlines[0][2].done:
            heapq.heappop(self._deadlines)
        times = [self._deadlines[0][0]] if self._deadlines else []
        # Exactly the times at which tick acts: a time reported here that tick ignores
        # would make the I/O thread poll(0) in a loop.
        for w in self.workers:
            if w.state == "starting":
                times.append(w.startup_deadline)
            elif w.state == "backoff" and self.state == "running":
                times.append(w.backoff_until)
            elif w.state in ("idle", "spare"):
                times.append(w.heard_at + self.options.heartbeat_timeout)
            if w.kill_at is not None:
                times.append(w.kill_at)
            if w.cancel_by is not None:
                times.append(w.cancel_by)
            req = w.current
            if w.state == "busy" and req is not None and not req.done:
                if not req.acked:
                    times.append(req.sent_at + self._window(req.nbytes))
                elif req.finished_seen_at is not None:
                    times.append(req.finished_seen_at + self._window(req.reply_bytes))
                else:
                    times.append(w.heard_at + self.options.heartbeat_timeout)
        if self.failure is not None and not self.failure.announced:
            times.append(self.failure.retry_at)
        return min(times) if times else None

    @property
    def capabilities(self) -> Capabilities | None:
        """What the first slot's device probed (any device's, until it has)."""
        first = self.device_capabilities.get(self.workers[0].device)
        return first if first is not None else next(iter(self.device_capabilities.values()),
                                                    None)

    @property
    def unprobed_devices(self) -> list[int | None]:
        """The devices none of whose workers has said what it can do yet (None stands
        for the unpinned workers of a pool without devices)."""
        return [d for d in (self.devices or (None,)) if d not in self.device_capabilities]

    def holds_everywhere(self, req: Request) -> bool:
        """Whether every serving worker that may run ``req`` holds its program (a guess for
        the encoder: a wrong one costs a refusal and a resend)."""
        fp = req.meta.get("fp")
        return fp is not None and all(fp in w.held for w in self._eligible(req))

    def _eligible(self, req: Request) -> tuple[Worker, ...] | list[Worker]:
        """The serving workers on the devices ``req`` may run on."""
        if req.devices is None:
            return self._serving
        return [w for w in self._serving if w.device in req.devices]

    def holds(self, slot: int, generation: int) -> bool:
        """Whether worker ``slot`` is still ``generation`` and serving (handles made there
        are valid); false as soon as it is being stopped, even for recycling. Once the
        pool is closed, calls go on to the pool, whose answer says so."""
        if not 0 <= slot < self.serving:
            return False
        w = self.workers[slot]
        if self.state == "closed":
            return w.generation == generation
        return w.generation == generation and w.state in ("idle", "busy")

    def unavailable(self, now: float) -> str | None:
        """Why routing must pass this pool over now (None: it may be used)."""
        if self.state == "closed":
            return "the driver is closed"
        if self.failure is not None and now < self.failure.retry_at:
            return (f"its worker pool failed ({self.failure.cause.splitlines()[0]}); next try "
                    f"in {self.failure.retry_at - now:.0f} s")
        if self.state == "running" and all(w.refusal is not None for w in self._serving):
            return f"its workers cannot start ({self._serving[0].refusal.cause})"
        return None

    def status(self, now: float) -> dict[str, Any]:
        state = {"new": "not started", "running": "recovering" if self.half_open else "running",
                 "failed": "failed", "closed": "closed"}[self.state]
        workers = [{"index": w.index, "pid": w.pid, "generation": w.generation,
                    "state": w.state, "restarts": w.deaths,
                    "in_flight": int(w.current is not None and not w.current.internal
                                     and not w.current.done),
                    # (work its main thread holds: never the pool's own requests nor
                    # routing's probe, which a fault injected "while it runs" would miss)
                    "running": bool(w.current is not None and not w.current.internal
                                    and w.current.op is not Op.PING
                                    and w.current.acked and not w.current.done),
                    "silent_for": round(now - w.heard_at, 3) if w.pid else None,
                    "served": w.served, "queued": sum(not r.done for r in w.pinned),
                    "spare": w.index >= self.serving, "device": w.device}
                   for w in self.workers]
        return {"backend": self.backend, "state": state,
                "queued": sum(not r.done for r in self.queue),
                "restarts": sum(w.deaths for w in self.workers),
                "dropped_replies": self.dropped_replies,
                "rejected_messages": self.rejected_messages,
                "lost_messages": self.lost_messages, "workers": workers,
                "devices": [d.to_dict() for d in self.device_list],
                "standby": sum(w.state == "spare" for w in self.workers),
                "failure": None if self.failure is None else self.failure.cause,
                "failure_output": (None if self.failure is None
                                   else self.failure.output[-OUTPUT_IN_ERRORS:]),
                "retry_in": (None if self.failure is None
                             else max(0.0, round(self.failure.retry_at - now, 3))),
                "metrics": self.metrics.snapshot()}

    def metrics_snapshot(self) -> dict[str, Any]:
        """``Driver.metrics()``'s entry for this pool: its counters, and the gauges that
        go with them (calls waiting, calls running, live worker processes)."""
        return {"backend": self.backend, "state": self.state,
                "queued": sum(not r.done for r in self.queue)
                + sum(not r.done for w in self.workers for r in w.pinned),
                "in_flight": sum(w.current is not None and not w.current.internal
                                 and not w.current.done for w in self.workers),
                "workers": sum(w.pid is not None for w in self.workers),
                **self.metrics.snapshot()}

    def answered(self, req: Request, value: Any, now: float) -> None:
        """(The shell, handing ``req``'s answer to its caller.) Counted in the metrics,
        with the time since it was submitted."""
        self.metrics.answered(req.op.value, value, now - req.submitted_at, req.input_bytes)

    # -- events: callers -------------------------------------------------------------------

    def submit(self, req: Request, now: float) -> None:
        """A caller's request (or a retry re-routed here)."""
        req.submitted_at = now
        if self.state == "closed":
            self._resolve(req, self._closed_error(req))
            return
        if self.state == "failed":
            if now < self.failure.retry_at:
                self._resolve(req, self._failed_error(now))
                return
            self._restart_after_cooldown(now)
        if req.deadline.passed(now):
            self._resolve(req, self._timeout(req, "before it could be queued"))
            return
        if self.state == "new":
            self.state = "running"
            for w in self.workers:
                self._spawn(w)
        if req.slot is None and not self._eligible(req):
            self._resolve(req, InvalidInputError(
                f"{req.label} may run only on device(s) {sorted(req.devices or ())} of "
                f"{self.backend!r}, which has workers on {self._device_names()}",
                "Route through Driver calls (they name only devices the pool has)."))
            return
        unservable = None if req.slot is not None else self._unservable(req, None)
        if unservable is not None:
            self._resolve(req, unservable)
            return
        if req.slot is not None:
            if not 0 <= req.slot < self.serving:
                self._resolve(req, InvalidInputError(
                    f"{req.label} names worker {req.slot} of {self.backend!r}, which has "
                    f"{self.serving}", "Use the handles Driver returns, unchanged."))
                return
            w = self.workers[req.slot]
            if req.generation != w.generation or w.state not in ("idle", "busy"):
                self._resolve(req, self._invalidated(req, w))
                return
            w.pinned.append(req)
        else:
            self.queue.append(req)
        req.state = "queued"
        self._watch_deadline(req)
        self._schedule(now)

    def close(self, now: float) -> None:
        """Fail everything pending and stop every worker; idempotent."""
        if self.state == "closed":
            return
        self.state = "closed"
        for req in self._pending():
            self._resolve(req, self._closed_error(req))
        for w in self.workers:
            self._retire(w, "planned", "the driver is closing", now, cause=None)

    def cancel(self, req: Request, now: float) -> None:
        """``req``'s caller cancelled it (its outcome says so already; a no-op once it is
        answered). Waiting, it is dropped. Running, it is answered as cancelled now and
        its worker is told to stop at its next safe point (``Stop``): it serves again once
        it has answered the request, or it is killed after ``cancel_grace``, a planned
        stop that spends none of the restart intensity."""
        if req.done:
            return
        w = self.workers[req.worker] if req.state == "sent" and req.worker is not None \
            else None
        running = w is not None and w.current is req and w.state == "busy"
        self._resolve(req, DispatchCancelledError(
            f"{req.label} on {self.backend!r} was cancelled "
            + ("while it ran" if running else "before it ran")))
        if running:
            req.stopping = True
            w.cancel_by = now + self.options.cancel_grace
            self._actions.append(Stop(w.index, req.id))
        self._schedule(now)

    def _stopped(self, w: Worker, req: Request, now: float) -> None:
        """The worker's reply to the cancelled ``req`` arrived: it serves again; the
        memory it might have written is free."""
        w.current, w.state, w.cancel_by, w.heard_at = None, "idle", None, now
        req.stopping = False
        for held in [r for r in w.holding if r is req]:
            w.holding.remove(held)
            self._actions.append(Release(held))
        if (why := self._recycle_reason(w)):
            self._retire(w, "planned", why, now, cause="recycled")
        self._schedule(now)

    # -- events: the shell's process work --------------------------------------------------

    def spawned(self, index: int, generation: int, identity: bytes, proof: bytes, pid: int,
                now: float) -> None:
        """The process for ``Spawn(index, generation)`` started; ``proof`` is what its hello
        must carry."""
        w = self.workers[index]
        if generation != w.generation or w.state != "spawning":
            return
        w.identity, w.proof, w.pid, w.proven = identity, proof, pid, False
        w.state, w.heard_at = "starting", now
        w.startup_deadline = now + self.options.startup_timeout
        self._by_identity[identity] = w
        if self.state in ("closed", "failed"):
            self._retire(w, "planned", "the pool stopped while it was starting", now,
                         cause=None)

    def spawn_dropped(self, index: int, generation: int) -> None:
        """The pool closed before the shell started the process for ``Spawn(index,
        generation)`` (it was waiting for its fork server): there is none to stop."""
        w = self.workers[index]
        if generation == w.generation and w.state == "spawning" and self.state == "closed":
            w.state = "stopped"

    def spawn_failed(self, index: int, generation: int, error: VyreError, now: float) -> None:
        """The OS refused to start the process (ENOSPC, EMFILE, EAGAIN...): back off and try
        again; requests that no live worker can serve fail now with the OS's error."""
        w = self.workers[index]
        if generation != w.generation or w.state != "spawning":
            return
        spare = self._ready_spare(w.device) if index < self.serving \
            and self.state == "running" else None
        if spare is not None:  # a prepared process stands by: it serves instead
            self._log(logging.WARNING, f"pool {self.backend!r}: worker {index} could not "
                                       f"start ({error.cause}); a spare takes its place")
            self._promote(spare, w, now)
            return
        self._back_off(w, error, now)

    def _back_off(self, w: Worker, error: VyreError, now: float) -> None:
        """Worker ``w`` could not start for a reason no restart cures at once (the OS
        refused a process, the configuration names what the backend lacks, no room on the
        cluster): it is tried again later, no death is counted, and requests no other
        worker may serve fail now with that reason and its Fix."""
        w.spawn_failures += 1
        w.state = "backoff"
        w.backoff_until = now + min(0.1 * 2 ** (w.spawn_failures - 1), 10.0)
        w.last_exit = f"worker {w.index} could not start: {error.cause}"
        self._log(logging.WARNING, f"pool {self.backend!r}: {w.last_exit}; trying again in "
                                   f"{w.backoff_until - now:.1f} s")
        for req in list(w.pinned):
            self._resolve(req, self._invalidated(req, w))
        self._fail_waiting(error)

    def _refuse_start(self, w: Worker, error: VyreError) -> None:
        """Worker ``w``'s start can never serve (``error`` says why): calls no other
        worker may serve fail now; it backs off once its process is gone (``exited``)."""
        w.refusal = error
        self._fail_waiting(error)

    def _may_serve(self, w: Worker, req: Request) -> bool:
        """Whether ``w`` serves ``req`` now, or may once it has started."""
        if w.state in ("idle", "busy"):
            return req.capable is None or (w.caps is not None
                                           and w.caps.identity in req.capable)
        return w.state in ("spawning", "starting", "stopping", "killing") \
            and w.refusal is None

    def _fail_waiting(self, error: VyreError | None) -> None:
        """Queued requests that no worker may serve fail now (``_unservable``)."""
        for req in self.queue:
            if not req.done and (why := self._unservable(req, error)) is not None:
                self._resolve(req, why)

    def _unservable(self, req: Request, error: VyreError | None) -> VyreError | None:
        """Why no worker may ever serve ``req`` as things stand (None: one may): routing
        kept it to workers of some capabilities and none of those remains, or its workers
        could not start (``error``, else what a backing-off worker said)."""
        eligible = self._eligible(req)
        if any(self._may_serve(v, req) for v in eligible):
            return None
        if req.capable is not None and any(v.state in ("idle", "busy") for v in eligible):
            return NoCapableBackendError(
                f"{req.label}: no worker of {self.backend!r} that can run it remains (those "
                "serving now run where the device lacks what it needs)",
                "Call again: routing then decides on the workers serving now, and falls over "
                "to another backend where none can.", backend=self.backend)
        error = error or next((v.refusal for v in eligible if v.refusal is not None), None)
        if error is None:
            return None  # (the OS refused processes: the next try may start one)
        return type(error)(f"no worker of pool {self.backend!r} could start for {req.label}: "
                           f"{error.cause}", error.fix, **error.details)

    def _forget(self, w: Worker) -> None:
        """``w``'s process is gone: a message still arriving from it is dropped."""
        self._by_identity.pop(w.identity, None)
        self._former.append(w.identity)

    def start_refused(self, index: int, generation: int, why: str, now: float) -> None:
        """The place the worker at ``index`` was started on cannot run this backend (a
        cluster node without it installed): the shell starts it elsewhere, and no death is
        counted (the backend did nothing wrong; the shell stops offering that place)."""
        w = self.workers[index]
        if generation != w.generation or w.state != "starting":
            return
        self._forget(w)
        w.state, w.pid, w.proven, w.kill_at = "stopped", None, False, None
        w.last_exit = f"{w.name} could not start there: {why}"
        self._log(logging.WARNING, f"pool {self.backend!r}: {w.last_exit}; starting it "
                                   "elsewhere")
        if self.state == "running":
            self._spawn(w)
        self._schedule(now)

    def unplaced(self, index: int, generation: int, error: VyreError, now: float) -> None:
        """The shell found the worker at ``index`` still waiting for somewhere to run (a
        cluster whose resources are all taken) as its start deadline nears: it is given up
        on without a death counted, requests no live worker can serve fail with ``error``,
        and it is tried again after a back-off."""
        w = self.workers[index]
        if generation != w.generation or w.state != "starting":
            return
        self._forget(w)  # (the shell drops the attempt: its actor holds nothing yet)
        self._actions.append(Signal(w.index, kill=True))
        self._back_off(w, error, now)  # (room may come: later calls wait for the next try)

    def exited(self, index: int, code: int | None, output: str, now: float,
               collateral: bool = False, oom_killed: bool = False) -> None:
        """The worker process at ``index`` exited with ``code`` (negative: a signal; None:
        unknown); ``output`` is the tail of what it wrote. ``collateral``: it died because
        its fork server went (which the shell bounds): not its fault, so it counts toward
        neither the restart intensity nor its request's crashes. ``oom_killed``: the
        kernel's OOM killer killed it (its memory cgroup counted the kill): the request it
        ran fails at once, never run again (it would take the same memory)."""
        w = self.workers[index]
        if w.state in ("stopped", "spawning", "backoff"):
            return
        for held in w.holding:
            self._actions.append(Release(held))
        w.holding.clear()
        self._forget(w)
        if w.refusal is not None and w.state == "starting":  # (it said why it could not)
            w.pid, w.kill_at, w.proven = None, None, False
            if self.state == "running":
                self._back_off(w, w.refusal, now)
            else:
                w.state = "stopped"
            return
        # a worker told to stop for its cancelled call dies in the caller's cancellation
        # (killed at cancel_grace it would be a planned stop): never charged
        counted = w.retiring != "planned" and not collateral and w.cancel_by is None
        died_starting = not w.proven
        self.metrics.process_gone(w.index, None if self.state == "closed" else (
            w.retire_cause if w.retiring is not None else "fork_server" if collateral
            else "start_failed" if died_starting else "crashed"))
        w.last_exit = f"{w.name} {describe_exit(code)}" + (
            " with its fork server" if collateral else "") + (
            " (the kernel's OOM killer: its memory cgroup was out of memory)"
            if oom_killed else "")
        if self.state != "closed" and (counted or collateral):  # (before its request's fate)
            self._log(logging.WARNING, f"pool {self.backend!r}: {w.last_exit}" + (
                "" if collateral or w.retiring is None else f" ({w.retiring})"))
        req, w.current = w.current, None
        w.state, w.pid, w.kill_at, w.proven = "stopped", None, None, False
        w.cancel_by = None
        if req is not None:
            req.stopping = False
        if req is not None and not req.done:
            if collateral and not req.internal and req.slot is None:
                req.state, req.worker = "queued", None  # it runs again, no crash counted
                self.queue.appendleft(req)
            else:
                self._cut_off(w, req, code, output, now, oom_killed)
        for pinned in list(w.pinned):
            self._resolve(pinned, self._invalidated(pinned, w))
        w.pinned.clear()
        if self.state == "closed":
            return
        if counted:
            w.deaths += 1
            self._deaths.append(now)
            while self._deaths and self._deaths[0] <= now - self.options.restart_window:
                self._deaths.popleft()
            if died_starting:
                w.failed_starts += 1
            if self.state == "running" and (self.half_open
                                            or len(self._deaths) > self.restart_limit
                                            or self._cannot_start()):
                self._fail_pool(w, output, now)
                return
        if self.state == "running":
            spare = self._ready_spare(w.device) if w.index < self.serving else None
            if spare is None:
                self._spawn(w)
            else:
                self._promote(spare, w, now)
        self._schedule(now)

    # -- events: messages and progress -----------------------------------------------------

    def message(self, identity: bytes, msg: Message | VyreError, now: float) -> None:
        """A message from the peer ``identity``, decoded (or the ProtocolError its bytes
        gave, or the SystemResourceError of one this process had no memory for). Peers
        that are not our proven workers are dropped and counted."""
        w = self._by_identity.get(identity)
        if w is None:
            if identity in self._former:
                self.dropped_replies += 1  # a worker that is already gone
            else:
                self.rejected_messages += 1
            return
        if not w.proven:
            self._hello(w, msg, now)
            return
        w.heard_at = now
        if isinstance(msg, VyreError):  # (undecodable, or dropped: no room for it here)
            req = w.current
            if req is not None and not req.done and msg.details.get("request_id") == req.id:
                self._finish(w, req, msg, now)
            else:
                self.dropped_replies += 1
            return
        if msg.op is Op.HEARTBEAT:
            return
        if msg.op not in (Op.REPLY, Op.ERROR):
            self.rejected_messages += 1
            return
        req = w.current
        if req is not None and req.stopping and w.state == "busy" and msg.id == req.id \
                and msg.gen == w.generation:
            self._stopped(w, req, now)  # (its answer: cancelled, or finished anyway)
            return
        if req is None or req.done or w.state != "busy" or msg.gen != w.generation \
                or (msg.id != req.id and not (msg.op is Op.ERROR and msg.id == 0)):
            self.dropped_replies += 1
            return
        result = (VyreError.from_dict(msg.meta.get("error")) if msg.op is Op.ERROR
                  else (msg.meta, msg.arrays))
        self._finish(w, req, result, now)

    def progress(self, index: int, received: int, finished: int, now: float,
                 reply_bytes: int = 0) -> None:
        """What the worker at ``index`` wrote in its progress page: the id of the last
        request its main thread received, of the last one it answered, and that answer's
        size (the parent allows its transfer that long)."""
        w = self.workers[index]
        req = w.current
        if req is not None and req.stopping and w.state == "busy" and finished == req.id:
            # it answered: its reply is on its way, and must be read whole before the
            # lane carries anything else (``message`` then lets it serve again)
            w.cancel_by = max(w.cancel_by or now, now + self._window(reply_bytes))
            return
        if w.state != "busy" or req is None or req.done:
            return
        if received == req.id:
            req.acked = True
        if finished == req.id:
            req.acked = True
            req.reply_bytes = reply_bytes
            if req.finished_seen_at is None:
                req.finished_seen_at = now

    def measured(self, index: int, rss: int) -> None:
        """The resident memory of the worker at ``index`` (for ``recycle_rss_bytes``)."""
        self.workers[index].rss = rss

    def send_failed(self, index: int, req: Request, error: str, now: float,
                    generation: int | None = None) -> None:
        """``req`` could not be sent (the worker's lane is gone, broken or stuck) to the
        worker at ``index`` as ``generation`` (the Send's). A send that failed on a process
        the slot no longer has is old news: its death was handled, and the request, sent
        on since, must not cost the slot's new process (a caller thread may send on a lane
        it took before the slot's worker died and a spare took its place)."""
        w = self.workers[index]
        if w.current is not req or req.done or (
                generation is not None and generation != w.generation):
            return
        w.current = None
        self.lost_messages += 1
        # Unreachable is how a worker that just died looks before its exit is read: a
        # fault, counted toward the restart intensity like the death it most likely is.
        self._retire(w, "fault", f"unreachable: {error}", now, kill=True,
                     cause="unresponsive")
        self._lost(req, f"could not be sent to {w.name} ({error})", now, MessageLostError)

    def tick(self, now: float) -> None:
        """Time has passed: deadlines, startup and kill timers, frozen or stuck workers,
        lost requests and replies, back-offs, and the end of a cool-down."""
        self._credit_own_pause(now)
        if self.failure is not None and not self.failure.announced \
                and now >= self.failure.retry_at:
            self.failure.announced = True
            self._actions.append(RoutingChanged())
        while self._deadlines and self._deadlines[0][0] <= now:
            req = heapq.heappop(self._deadlines)[2]
            if not req.done:
                self._expire(req, now)
        for w in self.workers:
            if w.kill_at is not None and now >= w.kill_at:
                w.kill_at = None
                self._actions.append(Signal(w.index, kill=True))
            if w.cancel_by is not None and now >= w.cancel_by:
                w.cancel_by = None
                self._retire(w, "planned", f"a cancelled call did not stop within "
                             f"{self.options.cancel_grace:g} s (cancel_grace)", now,
                             kill=True, cause="cancelled")
            if w.state == "starting" and now >= w.startup_deadline:
                w.hello_error = w.hello_error or (
                    f"no hello within {self.options.startup_timeout:g} s of starting")
                self._retire(w, "fault", "it did not start in time", now, kill=True,
                             cause="start_failed")
            elif w.state == "backoff" and now >= w.backoff_until and self.state == "running":
                self._spawn(w)
            elif w.state == "busy":
                self._check_busy(w, now)
            elif w.state in ("idle", "spare") \
                    and now - w.heard_at > self.options.heartbeat_timeout:
                self._retire(w, "fault", f"silent for {now - w.heard_at:.1f} s while "
                             f"{w.state}", now, kill=True, cause="unresponsive")
        self._schedule(now)

    # -- rules -----------------------------------------------------------------------------

    def _hello(self, w: Worker, msg: Message | VyreError, now: float) -> None:
        if isinstance(msg, VyreError) or msg.op not in (Op.HELLO, Op.HELLO_FAILED):
            self.rejected_messages += 1
            return
        proof = msg.meta.get("proof")
        if not isinstance(proof, bytes) or not hmac.compare_digest(proof, w.proof):
            self.rejected_messages += 1
            self._log(logging.WARNING, f"pool {self.backend!r}: a peer claiming to be "
                                       f"worker {w.index} failed the handshake; dropped")
            return
        if isinstance(msg.meta.get("pid"), int) and msg.meta["pid"] > 0:
            w.pid = msg.meta["pid"]  # (a Ray actor's pid is known only from its hello)
        if msg.op is Op.HELLO_FAILED:
            error = VyreError.from_dict(msg.meta.get("error"))
            tb = msg.meta.get("traceback")
            cause = " ".join(error.cause.split())
            w.hello_error = cause if len(cause) <= START_ERROR_CHARS else \
                cause[:START_ERROR_CHARS - 3] + "..."
            w.start_output = tb if isinstance(tb, str) else ""
            if isinstance(error, CallerError) and w.state == "starting":
                # the configuration asks for what the backend lacks (a device it does not
                # have): no restart cures it, so none is spent (its process exits by itself)
                self._refuse_start(w, error)
            return
        if w.state != "starting" or msg.gen != w.generation:
            self.dropped_replies += 1
            return
        try:
            caps = Capabilities.from_dict(msg.meta["capabilities"])
            devices = [DeviceInfo.from_dict(d) for d in msg.meta.get("devices") or []]
            if msg.meta.get("device") != w.device:
                raise ValueError(f"it runs on device {msg.meta.get('device')!r}, not "
                                 f"{w.device!r}")
        except Exception as exc:  # a worker we cannot route on is a worker that failed
            w.hello_error = f"its hello carried unreadable capabilities: {exc}"
            self._retire(w, "fault", "unreadable hello", now, kill=True, cause="protocol")
            return
        w.proven, w.heard_at, w.spawn_failures, w.refusal = True, now, 0, None
        w.failed_starts, self.started = 0, True
        w.state = "idle" if w.index < self.serving else "spare"
        self._log(logging.INFO, f"pool {self.backend!r}: {w.name} generation {w.generation} "
                  f"is up" + ("" if w.device is None else f" on device {w.device}")
                  + (" (a spare)" if w.state == "spare" else ""))
        self.device_list = devices or self.device_list
        w.caps = caps
        self._learned(w.device)
        if self.half_open:
            self.half_open = False
            self._deaths.clear()
            self._log(logging.INFO, f"pool {self.backend!r} is back after its cool-down")
        self._schedule(now)

    def _ready_spare(self, device: int | None) -> Worker | None:
        return next((v for v in self.workers[self.serving:]
                     if v.state == "spare" and v.device == device), None)

    def _promote(self, spare: Worker, w: Worker, now: float) -> None:
        """Slot ``w`` lost its process: the ready spare's process serves it at once, as
        its next generation (told so by an ADOPT request before anything else), and the
        spare slot starts a replacement."""
        w.generation += 1
        w.identity, w.proof, w.pid, w.proven = spare.identity, spare.proof, spare.pid, True
        w.heard_at, w.rss, w.retiring, w.retire_reason = spare.heard_at, spare.rss, None, ""
        w.kill_at, w.hello_error, w.start_output, w.served_generation = None, None, "", 0
        self._by_identity[w.identity] = w
        spare.identity, spare.pid, spare.proven, spare.state = b"", None, False, "stopped"
        w.caps, spare.caps = spare.caps, None
        w.spawn_failures, w.refusal = 0, None
        w.held.clear()  # (a spare has served nothing)
        self._actions.append(Promote(spare.index, w.index))
        self._log(logging.INFO, f"pool {self.backend!r}: spare process {w.pid} serves "
                                f"worker {w.index} as generation {w.generation}")
        req = Request(Op.ADOPT, {"generation": w.generation}, [],
                      deadline=Deadline(now + self.options.startup_timeout), internal=True)
        self._watch_deadline(req)
        self._send(w, req, now)
        self._spawn(spare)

    def _spawn(self, w: Worker) -> None:
        w.generation += 1
        w.state = "spawning"
        w.identity, w.proof, w.pid, w.proven = b"", b"", None, False
        w.current, w.kill_at, w.retiring, w.rss = None, None, None, None
        w.cancel_by = None
        w.retire_reason = ""
        w.hello_error, w.served_generation, w.caps, w.refusal = None, 0, None, None
        w.start_output = ""
        w.held.clear()  # a new process holds no program yet
        self._actions.append(Spawn(w.index, w.generation))

    def _schedule(self, now: float) -> None:
        """Give idle workers work: each its own pinned requests first (they can run
        nowhere else), then the queue in order, each request to the idle worker that suits
        it best (``_pick``); a request no idle worker may take waits, without holding up
        those behind it."""
        if self.state != "running":
            return
        for w in self.workers:
            while w.state == "idle" and w.pinned:
                if w.pinned[0].done:
                    w.pinned.popleft()
                    continue
                if self._frozen(w, now):
                    break
                req = w.pinned.popleft()
                if req.generation != w.generation:
                    self._resolve(req, self._invalidated(req, w))
                    continue
                self._send(w, req, now)
        waiting: list[Request] | None = None
        while self.queue:
            req = self.queue.popleft()
            if req.done:
                continue
            w = self._pick(req, now)
            if w is None:
                if waiting is None:
                    waiting = []
                waiting.append(req)
                if not any(v.state == "idle" for v in self._serving):
                    break
                continue
            self._send(w, req, now)
        if waiting:
            self.queue.extendleft(reversed(waiting))

    def _pick(self, req: Request, now: float) -> Worker | None:
        """The idle worker to run ``req``: on one of its devices, holding its program
        when one does (no second compile), else the lowest-numbered (its work, compiled
        programs and resident buffers stay together while one worker keeps up; work
        spreads over workers and devices as soon as it does not: busy ones are not idle).
        A worker silent too long with work waiting is retired instead."""
        fp = req.meta.get("fp")
        devices, capable = req.devices, req.capable
        best: Worker | None = None
        for w in self._serving:
            if w.state != "idle" or (devices is not None and w.device not in devices) \
                    or (capable is not None and w.caps.identity not in capable):
                continue
            if self._frozen(w, now):
                continue
            if best is None or (fp in w.held and fp not in best.held):
                best = w
        return best

    def _frozen(self, w: Worker, now: float) -> bool:
        """An idle worker silent too long to be given work is retired (frozen?)."""
        if now - w.heard_at <= self._silence:
            return False
        self._retire(w, "fault", f"silent for {now - w.heard_at:.1f} s with work waiting "
                     "for it (frozen?)", now, kill=True, cause="unresponsive")
        return True

    def _send(self, w: Worker, req: Request, now: float) -> None:
        req.state, req.worker, req.sent_at = "sent", w.index, now
        req.acked, req.finished_seen_at = False, None
        req.served_by = (w.index, w.generation)
        w.current, w.state = req, "busy"
        fp = req.meta.get("fp")
        had = fp in w.held
        if fp is not None:  # it holds the program once this arrives (its cache, mirrored)
            req.program_held = had and not req.with_program
            w.held[fp] = None
            w.held.move_to_end(fp)
            if len(w.held) > PROGRAM_CACHE:
                w.held.popitem(last=False)
        self._actions.append(Send(w.index, w.generation, w.identity, req, had))

    def _check_busy(self, w: Worker, now: float) -> None:
        req = w.current
        if req is None or req.done:
            return
        if not req.acked:
            if now - req.sent_at < self._window(req.nbytes):
                return
            w.current = None
            if w.heard_at > req.sent_at:
                # Alive, yet the request never reached its main thread (which takes each
                # request the moment it is whole): its lane no longer carries messages.
                self.lost_messages += 1
                self._retire(w, "planned", f"{req.label} never reached it: its lane "
                             "carries no messages", now, kill=True, cause="unresponsive")
                self._lost(req, f"never reached {w.name}: the worker stayed alive but never "
                           "took the message off its lane", now, MessageLostError)
            else:  # silent since before the request arrived: frozen
                self._retire(w, "fault", f"silent for {now - w.heard_at:.1f} s and never "
                             f"received {req.label} (frozen?)", now, kill=True,
                             cause="unresponsive")
                self._lost(req, f"was sent to {w.name}, which was frozen", now,
                           WorkerCrashedError)
        elif req.finished_seen_at is not None:
            if now - req.finished_seen_at >= self._window(req.reply_bytes):
                w.current, w.state = None, "idle"
                self.lost_messages += 1
                self._resolve(req, MessageLostError(
                    f"the reply to {req.label} from {w.name} of {self.backend!r} was lost on "
                    "its way: the worker answered, the answer never arrived whole",
                    "Call again; if it recurs, return less data per call (split the "
                    "dispatch) and read the worker's output in Driver.status()."))
        elif now - w.heard_at > self.options.heartbeat_timeout:
            if not req.internal:
                self._resolve(req, WorkerCrashedError(
                    f"{w.name} of {self.backend!r} sent no heartbeat for "
                    f"{self.options.heartbeat_timeout:g} s while running {req.label}",
                    "The backend is stuck holding the GIL; set DispatchConfig.timeout, or "
                    "report the hang to its authors."))
            self._retire(w, "fault", "stuck without heartbeats", now, kill=True,
                         cause="unresponsive")

    def _lost(self, req: Request, how: str, now: float,
              error: type[VyreError] = WorkerCrashedError) -> None:
        """``req`` never ran: send it again (to any worker) or, past the limit, fail it
        with ``error``."""
        if req.internal:
            self._resolve(req, None)
        elif req.slot is not None:
            self._resolve(req, error(
                f"{req.label} {how}; it is pinned to that worker, which is gone",
                PipelineInvalidatedError.default_fix))
        elif req.losses >= MAX_RESENDS:
            self._resolve(req, error(
                f"{req.label} on {self.backend!r} {how}; it never reached a worker in "
                f"{req.losses + 1} tries"))
        else:
            req.losses += 1
            req.state, req.worker = "queued", None
            self.queue.appendleft(req)
            self._log(logging.INFO, f"pool {self.backend!r}: {req.label} {how}; sending it "
                                    f"again (resend {req.losses} of {MAX_RESENDS})")
            self._schedule(now)

    def _cut_off(self, w: Worker, req: Request, code: int | None, output: str,
                 now: float, oom_killed: bool = False) -> None:
        """The worker died holding ``req``: run it again, or fail it (at once when the
        OOM killer killed the worker running it: running it again would take the same
        memory, and kill again)."""
        what = f"{w.last_exit} while serving {req.label} on {self.backend!r}"
        if req.internal:
            self._resolve(req, None)
        elif not req.acked:
            self._lost(req, f"was cut off when {w.last_exit} before receiving it", now)
        elif oom_killed:
            self._resolve(req, SystemResourceError(
                f"{what}; it is not run again, as it would need the same memory",
                "Give the workers more memory (raise the memory limit of their cgroup: "
                "memory.max / memory.limit_in_bytes, or the container's limit), or make "
                "the call need less (split the dispatch into smaller ones).",
                errno="ENOMEM", oom_killed=True, stderr=output))
        elif code == -signal.SIGABRT:
            # Device runtimes abort the process on some calls to a lost device: that is a
            # device loss, answered as one; the restart invalidates its handles.
            self._resolve(req, DeviceLostError(
                f"{what}: the device runtime aborted, treated as a lost device",
                generation=w.generation, stderr=output))
        elif req.slot is not None:
            self._resolve(req, WorkerCrashedError(what, stderr=output))
        else:
            req.crashes += 1
            if req.crashes >= POISON_KILLS:
                self._log(logging.WARNING, f"pool {self.backend!r}: {req.label} killed "
                                           f"{req.crashes} workers: failed as a poison request")
                self._resolve(req, WorkerCrashedError(
                    f"{what}; it killed {req.crashes} workers in a row, so it is a poison "
                    "request: it fails alone and the pool keeps serving", stderr=output))
            elif req.crashes > req.retries:
                self._resolve(req, WorkerCrashedError(what, stderr=output))
            else:
                req.state, req.worker = "queued", None
                self.queue.appendleft(req)
                self._log(logging.INFO, f"pool {self.backend!r}: {req.label} was cut off; "
                                        f"running it again (retry {req.crashes} of "
                                        f"{req.retries})")

    def _finish(self, w: Worker, req: Request, result: Any, now: float) -> None:
        w.current = None
        if w.state == "busy":
            w.state = "stopping" if req.op is Op.SHUTDOWN else "idle"
        refused = result.details if isinstance(result, ProtocolError) \
            and not req.internal else {}
        if (refused.get(PROGRAM_NOT_HELD) and not req.with_program) \
                or (refused.get(SHARED_REFUSED) and not req.socket_only):
            # Named by fingerprint only, to a worker that does not hold the program (the
            # parent's guess was wrong); or its arrays in shared memory the worker cannot
            # open: it goes again, first in line, with its program or on the socket, under
            # a new id (the worker has answered the old one; its page says so).
            req.id = next(_ids)
            req.with_program |= bool(refused.get(PROGRAM_NOT_HELD))
            req.socket_only |= bool(refused.get(SHARED_REFUSED))
            req.state, req.worker = "queued", None
            (w.pinned if req.slot is not None else self.queue).appendleft(req)
            self._schedule(now)
            return
        if isinstance(result, tuple) and isinstance(result[0], dict) \
                and "pipeline_cache" in result[0]:
            self.metrics.cache_reported(w.index, result[0]["pipeline_cache"])
        if req.internal:
            self._resolve(req, result)
            if req.op is Op.TRY_RECOVER:
                self._recovered(w, result, now)
            elif req.op is Op.ADOPT:
                if isinstance(result, Exception):
                    self._retire(w, "fault", f"it could not take over the slot ({result})",
                                 now, kill=True, cause="protocol")
                self._schedule(now)
            return
        if req.op is not Op.PING:
            w.served += 1
            w.served_generation += 1
        if req.meta.get("fp") is not None:
            self.metrics.program_answered(req.program_held)
        self._resolve(req, result)
        if isinstance(result, DeviceLostError):
            self._request_recovery(w, now)
        elif w.state == "idle" and (why := self._recycle_reason(w)):
            self._retire(w, "planned", why, now, cause="recycled")
        self._schedule(now)

    def _request_recovery(self, w: Worker, now: float) -> None:
        """Device lost: ask the backend to recover in place (a new generation), within
        startup_timeout (a hung recovery restarts the worker instead)."""
        req = Request(Op.TRY_RECOVER, {"generation": w.generation + 1}, [],
                      deadline=Deadline(now + self.options.startup_timeout), internal=True)
        self._watch_deadline(req)
        self._send(w, req, now)

    def _recovered(self, w: Worker, result: Any, now: float) -> None:
        if isinstance(result, Exception):
            self._retire(w, "planned", "its device could not be recovered", now,
                         cause="device_lost")
            return
        w.generation += 1
        for req in list(w.pinned):
            self._resolve(req, self._invalidated(req, w))
        w.pinned.clear()
        with contextlib.suppress(Exception):  # unreadable: keep what routing knows
            w.caps = Capabilities.from_dict(result[0]["capabilities"])
            self._learned(w.device)
        self._log(logging.INFO, f"pool {self.backend!r}: worker {w.index} recovered its "
                                f"device in place as generation {w.generation}")
        self._schedule(now)

    def _learned(self, device: int | None) -> None:
        """A worker on ``device`` probed what it can do: the device's capabilities are what
        its proven workers can all do (on a cluster they may sit on unlike nodes), kept
        until a probe differs (adapter facts included), so a restart never sends routing
        back to static claims."""
        probed = [w.caps for w in self.workers if w.device == device and w.proven
                  and w.caps is not None and w.state in ("idle", "busy", "spare")]
        if not probed:
            return
        caps = Capabilities.common(probed)
        known = self.device_capabilities.get(device)
        changed = known is None or caps.to_dict() != known.to_dict()
        if changed:
            self.device_capabilities[device] = caps
        serving = {w.caps.identity: w.caps for w in self._serving if w.device == device
                   and w.caps is not None and w.state in ("idle", "busy")}
        known_variants = self.device_variants.get(device, ())
        if serving and set(serving) != {c.identity for c in known_variants}:
            changed = True
            self.device_variants[device] = tuple(serving.values())
            self.varied = any(len(v) > 1 for v in self.device_variants.values())
            self._fail_waiting(None)
        if changed:
            self._actions.append(RoutingChanged())

    def _recycle_reason(self, w: Worker) -> str | None:
        """Why the worker is due for replacement between requests (None: it is not).
        Recycling is a planned restart: handles made in the worker become invalid."""
        opts = self.options
        if opts.recycle_after is not None and w.served_generation >= opts.recycle_after:
            return f"recycled after {w.served_generation} requests (recycle_after)"
        if opts.recycle_rss_bytes is not None and w.rss is not None \
                and w.rss > opts.recycle_rss_bytes:
            return f"recycled at {w.rss} bytes resident (recycle_rss_bytes)"
        return None

    def _expire(self, req: Request, now: float) -> None:
        if req.state == "sent" and req.worker is not None \
                and self.workers[req.worker].current is req:
            w = self.workers[req.worker]
            if req.internal:
                self._resolve(req, None)
                # a spare that cannot even take over its slot is a fault (counted, so a
                # backend whose processes all hang there fails its pool); a recovery that
                # runs long is the device's, planned
                kind = "fault" if req.op is Op.ADOPT else "planned"
                self._retire(w, kind, f"{req.label} ran past its deadline", now,
                             cause="deadline")
                return
            self._resolve(req, self._timeout(
                req, f"while running; worker {w.index} was killed"))
            self._retire(w, "planned", f"{req.label} ran past its deadline", now,
                         cause="deadline")
        else:
            error = self._timeout(req, f"waiting for a worker ({self._why_waiting(req)})")
            self._log(logging.WARNING, f"pool {self.backend!r}: {error.cause}")
            self._resolve(req, error)

    def _why_waiting(self, req: Request | None = None) -> str:
        workers = self.workers if req is None or req.devices is None else self._eligible(req)
        states = collections.Counter(w.state for w in workers)
        ahead = sum(not r.done for r in self.queue)
        parts = [f"{n} {state}" for state, n in sorted(states.items())]
        where = "" if req is None or req.devices is None else \
            f" on device(s) {sorted(req.devices)}"
        return f"workers{where}: {', '.join(parts)}; {ahead} request(s) queued"

    def _device_names(self) -> str:
        return "no device (unpinned)" if self.devices is None else \
            f"device(s) {sorted(self.devices)}"

    def _retire(self, w: Worker, kind: str, reason: str, now: float, kill: bool = False, *,
                cause: str | None) -> None:
        """Stop the worker at ``w``: ``planned`` stops (recycling, deadlines, close) do not
        count toward the restart intensity, ``fault`` stops (frozen, stuck) do. ``cause``
        is the reason's word in metrics.RESTART_REASONS (None: the driver closes)."""
        if w.state in ("stopped", "spawning", "backoff", "stopping", "killing"):
            if w.state in ("stopping", "killing") and kill and w.kill_at is not None:
                w.kill_at = now  # escalate now
            return
        w.retiring, w.retire_reason, w.retire_cause = kind, reason, cause
        if w.state in ("idle", "spare") and not kill and kind == "planned" \
                and self.state == "running":
            self._send(w, Request(Op.SHUTDOWN, {}, [], internal=True), now)
            w.state = "stopping"
        else:
            self._actions.append(Signal(w.index, kill=kill))
            w.state = "killing"
        w.kill_at = now + self.options.kill_grace
        self._log(logging.INFO if kind == "planned" else logging.WARNING,
                  f"pool {self.backend!r}: stopping {w.name}: {reason}")

    @property
    def restart_limit(self) -> int:
        """The deaths within ``restart_window`` the pool survives: ``max_restarts`` per
        worker process, spares included. OTP's intensity is per supervisor; each of our
        processes is a child, so a pool of 8 bears 8 times the deaths of a pool of one (a
        kill rate spread over its processes is then judged per process)."""
        return self.options.max_restarts * len(self.workers)

    def _cannot_start(self) -> bool:
        """No worker ever said hello, and each serving one failed START_TRIES starts."""
        return not self.started and all(v.failed_starts >= START_TRIES for v in self._serving)

    def _fail_pool(self, w: Worker, output: str, now: float) -> None:
        opts = self.options
        meanwhile = (f"Calls that name {self.backend!r} fail until the next try; omit "
                     "backend= to let routing fall over to the next capable backend.")
        if not self.started:
            last_words = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()),
                              "it wrote nothing")
            first = (f"pool {self.backend!r} failed: its workers cannot start "
                     f"({sum(v.failed_starts for v in self.workers)} tries, none said "
                     f"hello); last: {w.last_exit}: "
                     f"{w.hello_error or last_words}")
            fix = (f"Make {self.backend!r} start: it fails while importing its plugin or in "
                   "vyre_prepare (this error's details carry the worker's traceback, and "
                   f"`vyre doctor` prints it), or uninstall it. {meanwhile}")
        else:
            first = (f"pool {self.backend!r} failed: {len(self._deaths)} worker deaths "
                     + (f"in {opts.restart_window:g} s (more than "
                        f"max_restarts={opts.max_restarts}" + (
                            f" x {len(self.workers)} workers" if len(self.workers) > 1
                            else "") + ")" if not self.half_open
                        else "(it failed again right after its cool-down)")
                     + f"; last: {w.last_exit}")
            fix = ("Fix the backend (this error's details carry its last worker's output) "
                   f"or uninstall it. {meanwhile} PoolOptions.max_restarts, restart_window "
                   "and cooldown tune this.")
        self.state, self.half_open = "failed", False
        self.failure = Failure(first, fix, w.start_output or output or "(no output)", now,
                               now + opts.cooldown)
        self._log(logging.ERROR, f"{first}; next try in {opts.cooldown:g} s")
        error = self._failed_error(now)
        for req in self._pending():
            self._resolve(req, error)
        for other in self.workers:
            self._retire(other, "planned", "the pool failed", now, cause="pool_failed")
        self._actions.append(RoutingChanged())

    def _restart_after_cooldown(self, now: float) -> None:
        self.state, self.half_open, self.failure = "running", True, None
        self._deaths.clear()
        self._log(logging.INFO, f"pool {self.backend!r}: cool-down over, starting again")
        for w in self.workers:
            if w.state == "stopped":
                self._spawn(w)
        self._actions.append(RoutingChanged())

    def _pending(self) -> Iterator[Request]:
        """Every caller request not yet answered, and internal ones in flight."""
        yield from (r for r in self.queue if not r.done)
        self.queue.clear()
        for w in self.workers:
            yield from (r for r in w.pinned if not r.done)
            w.pinned.clear()
            if w.current is not None and not w.current.done:
                yield w.current

    def _resolve(self, req: Request, value: Any) -> None:
        if req.done:
            return
        req.state = "done"
        req.arrays, req.frames = [], None  # answered: its data need not stay in memory
        if req.watched:
            self._live_deadlines -= 1
        if not req.internal:
            self._actions.append(Resolve(req, value))
        if req.shared:
            w = self.workers[req.worker] if req.worker is not None else None
            if w is not None and w.current is req:
                w.holding.append(req)  # still running it: its memory is freed at its exit
            else:
                self._actions.append(Release(req))

    def _watch_deadline(self, req: Request) -> None:
        """Put ``req`` on the deadline heap; answered entries are dropped when they reach
        the top, and the heap is rebuilt when they outnumber the live ones."""
        if req.deadline.at is None:
            return
        req.watched = True
        self._live_deadlines += 1
        heapq.heappush(self._deadlines, (req.deadline.at, req.id, req))
        if len(self._deadlines) > 64 + 2 * self._live_deadlines:
            self._deadlines = [e for e in self._deadlines if not e[2].done]
            heapq.heapify(self._deadlines)

    def _window(self, nbytes: int) -> float:
        """How long a message of ``nbytes`` may take to cross before it counts as lost."""
        return self.options.silence_limit + nbytes / TRANSFER_FLOOR

    def _credit_own_pause(self, now: float) -> None:
        """If this process did not run for a while (the gap between ticks is far longer
        than the shell's promise), nobody could be heard meanwhile: that time is not
        anyone's silence. Deadlines still count it: they are the caller's time."""
        last, self._last_tick = self._last_tick, now
        if last is None:
            return
        gap = now - last - TICK_EVERY
        if gap <= self.options.silence_limit:
            return
        self._log(logging.WARNING, f"pool {self.backend!r}: this process did not run for "
                                   f"{gap:.1f} s; workers' silence meanwhile is not held "
                                   "against them")
        for w in self.workers:  # what was heard after the pause stays as it is
            w.heard_at = min(now, w.heard_at + gap)
            if w.state == "starting":
                w.startup_deadline = min(now + self.options.startup_timeout,
                                         w.startup_deadline + gap)
            req = w.current
            if req is not None and not req.done:
                req.sent_at = min(now, req.sent_at + gap)
                if req.finished_seen_at is not None:
                    req.finished_seen_at = min(now, req.finished_seen_at + gap)

    def _log(self, level: int, text: str) -> None:
        self._actions.append(Log(level, text))

    # -- errors ----------------------------------------------------------------------------

    def _timeout(self, req: Request, where: str) -> DispatchTimeoutError:
        seconds = req.deadline.seconds
        return DispatchTimeoutError(
            f"{req.label} on {self.backend!r} ran past its {seconds:g} s deadline "
            f"{where}" if seconds is not None else
            f"{req.label} on {self.backend!r} ran past its deadline {where}",
            timeout=seconds)

    def _failed_error(self, now: float) -> PoolFailedError:
        failure = self.failure
        retry_in = max(0.0, failure.retry_at - now)
        return PoolFailedError(
            f"{failure.cause}\nNext try in {retry_in:.0f} s (PoolOptions.cooldown).",
            failure.fix, backend=self.backend, retry_in=round(retry_in, 3),
            stderr=failure.output[-OUTPUT_IN_ERRORS:])

    def _closed_error(self, req: Request) -> PoolFailedError:
        return PoolFailedError(f"the driver was closed while {req.label} to "
                               f"{self.backend!r} was pending",
                               "Keep the driver open until results are collected.",
                               backend=self.backend)

    def _invalidated(self, req: Request, w: Worker) -> PipelineInvalidatedError:
        if req.generation == w.generation:
            now_is = (f"that worker is being stopped ({w.retire_reason})" if w.retire_reason
                      else f"that worker is {w.state}")
        else:
            now_is = f"that worker is now generation {w.generation}"
        return PipelineInvalidatedError(
            f"{req.label} uses a handle from worker {w.index} generation {req.generation} "
            f"of {self.backend!r}; {now_is}", generation=req.generation,
            backend=self.backend)
