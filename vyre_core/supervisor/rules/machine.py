"""The rules of one worker pool, as a pure state machine.

No sockets, threads, clocks or processes here: events come in as method calls that carry
the time (a request submitted, a worker spawned or not, a message from a worker, a worker's
progress page read, a worker exited, a tick, close) and the rules answer with actions
(spawn, send, signal, resolve) that the pool's I/O thread carries out. This file is the
class the shells hold and feed; the rules themselves are its mixins, one file per concern
(starting, ending, serving, wording), so that each can be read whole: generations,
deadlines from submit, retries and poison requests, lost messages, frozen and stuck
workers, restart intensity with a cool-down, recycling, device recovery. Nothing here may
block or touch the OS.
"""

from __future__ import annotations

import collections
import heapq
from typing import Any

from vyre_core.boundary.messages import REPLIES, REPLY_OF, Failed, Heartbeat, Message, Ping
from vyre_core.contract.types import Capabilities, DeviceInfo
from vyre_core.errors import (
    DispatchCancelledError,
    InvalidInputError,
    MessageLostError,
    ProtocolError,
    VyreError,
)
from vyre_core.supervisor.metrics import PoolMetrics
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.rules import states
from vyre_core.supervisor.rules.actions import Action, Log, Promote, RoutingChanged, Signal, Stop
from vyre_core.supervisor.rules.constants import OUTPUT_IN_ERRORS
from vyre_core.supervisor.rules.ending import Ending
from vyre_core.supervisor.rules.requests import Request
from vyre_core.supervisor.rules.serving import Serving
from vyre_core.supervisor.rules.slots import Failure, Worker
from vyre_core.supervisor.rules.starting import Starting
from vyre_core.supervisor.rules.states import (
    BACKOFF,
    BUSY,
    CLOSE,
    CLOSED,
    FAILED,
    QUEUED,
    RESTING,
    RUNNING,
    SENT,
    SERVING,
    SPARE,
    STARTING,
    STOPPED,
    SUBMIT,
    CallState,
    Event,
    PoolState,
    WorkerState,
)
from vyre_core.supervisor.rules.wording import Wording


class PoolMachine(Starting, Ending, Serving, Wording):
    """The supervision rules of one backend's pool (see the module docstring)."""

    def __init__(self, backend: str, options: PoolOptions,
                 devices: tuple[int, ...] | None = None) -> None:
        self.backend = backend
        self.options = options
        self.state = PoolState.NEW
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
        self._silence = options.timeouts.silence_limit
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
        self._deadlines: list[list[Any]] = []  # [at, id, request or None], a heap
        self._live_deadlines = 0  # entries of _deadlines whose request is not answered
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
        return self.state == CLOSED and all(
            w.state in (STOPPED, BACKOFF) for w in self.workers)

    def next_timer(self) -> float | None:
        """The earliest time at which ``tick`` has something to do: the shell ticks only
        then (or ``TICK_EVERY`` after its last tick), so every event that can make work
        possible must schedule it itself."""
        while self._deadlines and self._deadlines[0][2] is None:
            heapq.heappop(self._deadlines)
        times = [self._deadlines[0][0]] if self._deadlines else []
        # Exactly the times at which tick acts: a time reported here that tick ignores
        # would make the I/O thread poll(0) in a loop.
        for w in self.workers:
            if w.state == STARTING:
                times.append(w.startup_deadline)
            elif w.state == BACKOFF and self.state == RUNNING:
                times.append(w.backoff_until)
            elif w.state in RESTING:
                times.append(w.heard_at + self.options.timeouts.heartbeat)
            if w.kill_at is not None:
                times.append(w.kill_at)
            if w.cancel_by is not None:
                times.append(w.cancel_by)
            req = w.current
            if w.state == BUSY and req is not None and not req.done:
                t = req.tracking
                if not t.acked:
                    times.append(t.sent_at + self._window(req.transfer.nbytes))
                elif t.finished_seen_at is not None:
                    times.append(t.finished_seen_at + self._window(t.reply_bytes))
                else:
                    times.append(w.heard_at + self.options.timeouts.heartbeat)
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
        fp = req.call.message.fp
        return fp is not None and all(fp in w.held for w in self._eligible(req))

    def holds(self, slot: int, generation: int) -> bool:
        """Whether worker ``slot`` is still ``generation`` and serving (handles made there
        are valid); false as soon as it is being stopped, even for recycling. Once the
        pool is closed, calls go on to the pool, whose answer says so."""
        if not 0 <= slot < self.serving:
            return False
        w = self.workers[slot]
        if self.state == CLOSED:
            return w.generation == generation
        return w.generation == generation and w.state in SERVING

    def unavailable(self, now: float) -> str | None:
        """Why routing must pass this pool over now (None: it may be used)."""
        if self.state == CLOSED:
            return "the driver is closed"
        if self.failure is not None and now < self.failure.retry_at:
            return (f"its worker pool failed ({self.failure.cause.splitlines()[0]}); next try "
                    f"in {self.failure.retry_at - now:.0f} s")
        if self.state == RUNNING and all(w.refusal is not None for w in self._serving):
            return f"its workers cannot start ({self._serving[0].refusal.cause})"
        return None

    def status(self, now: float) -> dict[str, Any]:
        state = {PoolState.NEW: "not started",
                 RUNNING: "recovering" if self.half_open else "running",
                 FAILED: "failed", CLOSED: "closed"}[self.state]
        workers = [{"index": w.index, "pid": w.pid, "generation": w.generation,
                    "state": w.state.value, "restarts": w.deaths,
                    "in_flight": int(w.current is not None and not w.current.call.internal
                                     and not w.current.done),
                    # (work its main thread holds: never the pool's own requests nor
                    # routing's probe, which a fault injected "while it runs" would miss)
                    "running": bool(w.current is not None and not w.current.call.internal
                                    and not isinstance(w.current.call.message, Ping)
                                    and w.current.tracking.acked and not w.current.done),
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
                "standby": sum(w.state == SPARE for w in self.workers),
                "failure": None if self.failure is None else self.failure.cause,
                "failure_output": (None if self.failure is None
                                   else self.failure.output[-OUTPUT_IN_ERRORS:]),
                "retry_in": (None if self.failure is None
                             else max(0.0, round(self.failure.retry_at - now, 3))),
                "metrics": self.metrics.snapshot()}

    def metrics_snapshot(self) -> dict[str, Any]:
        """``Driver.metrics()``'s entry for this pool: its counters, and the gauges that
        go with them (calls waiting, calls running, live worker processes)."""
        return {"backend": self.backend, "state": self.state.value,
                "queued": sum(not r.done for r in self.queue)
                + sum(not r.done for w in self.workers for r in w.pinned),
                "in_flight": sum(w.current is not None and not w.current.call.internal
                                 and not w.current.done for w in self.workers),
                "workers": sum(w.pid is not None for w in self.workers),
                **self.metrics.snapshot()}

    def answered(self, req: Request, value: Any, now: float) -> None:
        """(The shell, handing ``req``'s answer to its caller.) Counted in the metrics,
        with the time since it was submitted."""
        self.metrics.answered(req.call.op.value, value, now - req.tracking.submitted_at,
                              req.transfer.input_bytes)

    # -- events: callers -------------------------------------------------------------------

    def submit(self, req: Request, now: float) -> None:
        """A caller's request (or a retry re-routed here)."""
        req.tracking.submitted_at = now
        if self.state == CLOSED:
            self._resolve(req, self._closed_error(req))
            return
        if self.state == FAILED:
            if now < self.failure.retry_at:
                self._resolve(req, self._failed_error(now))
                return
            self._restart_after_cooldown(now)
        call = req.call
        if call.deadline.passed(now):
            self._resolve(req, self._timeout(req, "before it could be queued"))
            return
        if self.state == PoolState.NEW:
            self._move_pool(SUBMIT, RUNNING)
            for w in self.workers:
                self._spawn(w)
        if call.slot is None and not self._eligible(req):
            self._resolve(req, InvalidInputError(
                f"{req.label} may run only on device(s) {sorted(call.devices or ())} of "
                f"{self.backend!r}, which has workers on {self._device_names()}",
                "Route through Driver calls (they name only devices the pool has)."))
            return
        unservable = None if call.slot is not None else self._unservable(req, None)
        if unservable is not None:
            self._resolve(req, unservable)
            return
        if call.slot is not None:
            if not 0 <= call.slot < self.serving:
                self._resolve(req, InvalidInputError(
                    f"{req.label} names worker {call.slot} of {self.backend!r}, which has "
                    f"{self.serving}", "Use the handles Driver returns, unchanged."))
                return
            w = self.workers[call.slot]
            if call.generation != w.generation or w.state not in SERVING:
                self._resolve(req, self._invalidated(req, w))
                return
            w.pinned.append(req)
        else:
            self.queue.append(req)
        self._move_call(req, SUBMIT, QUEUED)
        self._watch_deadline(req)
        self._schedule(now)

    def close(self, now: float) -> None:
        """Fail everything pending and stop every worker; idempotent."""
        if self.state == CLOSED:
            return
        self._move_pool(CLOSE, CLOSED)
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
        t = req.tracking
        w = self.workers[t.worker] if t.state == SENT and t.worker is not None else None
        running = w is not None and w.current is req and w.state == BUSY
        self._resolve(req, DispatchCancelledError(
            f"{req.label} on {self.backend!r} was cancelled "
            + ("while it ran" if running else "before it ran")))
        if running:
            t.stopping = True
            w.cancel_by = now + self.options.timeouts.cancel_grace
            self._actions.append(Stop(w.index, t.id))
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
            if req is not None and not req.done \
                    and msg.details.get("request_id") == req.tracking.id:
                self._finish(w, req, msg, now)
            else:
                self.dropped_replies += 1
            return
        body = msg.body
        if isinstance(body, Heartbeat):
            return
        if msg.op not in REPLIES:
            self.rejected_messages += 1
            return
        req = w.current
        if req is None:
            self.dropped_replies += 1
            return
        t = req.tracking
        if t.stopping and w.state == BUSY and msg.id == t.id and msg.gen == w.generation:
            self._stopped(w, req, now)  # (its answer: cancelled, or finished anyway)
            return
        if req.done or w.state != BUSY or msg.gen != w.generation \
                or (msg.id != t.id and not (isinstance(body, Failed) and msg.id == 0)):
            self.dropped_replies += 1
            return
        if msg.cache is not None:
            self.metrics.cache_reported(w.index, msg.cache)
        if isinstance(body, Failed):
            result: Any = VyreError.from_dict(body.error)
        elif type(body) is not REPLY_OF[type(req.call.message)]:
            result = ProtocolError(f"{req.label} was answered with {body.kind}",
                                   "Use matching vyre versions in the parent and the "
                                   "workers.", request_id=t.id)
        else:
            result = (body, msg.arrays)
        self._finish(w, req, result, now)

    def progress(self, index: int, received: int, finished: int, now: float,
                 reply_bytes: int = 0) -> None:
        """What the worker at ``index`` wrote in its progress page: the id of the last
        request its main thread received, of the last one it answered, and that answer's
        size (the parent allows its transfer that long)."""
        w = self.workers[index]
        req = w.current
        if req is None:
            return
        t = req.tracking
        if t.stopping and w.state == BUSY and finished == t.id:
            # it answered: its reply is on its way, and must be read whole before the
            # lane carries anything else (``message`` then lets it serve again)
            w.cancel_by = max(w.cancel_by or now, now + self._window(reply_bytes))
            return
        if w.state != BUSY or req.done:
            return
        if received == t.id:
            t.acked = True
        if finished == t.id:
            t.acked = True
            t.reply_bytes = reply_bytes
            if t.finished_seen_at is None:
                t.finished_seen_at = now

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
            if req is not None:  # (answered ones let go of their request)
                self._expire(req, now)
        for w in self.workers:
            if w.kill_at is not None and now >= w.kill_at:
                w.kill_at = None
                self._actions.append(Signal(w.index, kill=True))
            if w.cancel_by is not None and now >= w.cancel_by:
                w.cancel_by = None
                self._retire(w, "planned", f"a cancelled call did not stop within "
                             f"{self.options.timeouts.cancel_grace:g} s (cancel_grace)", now,
                             kill=True, cause="cancelled")
            if w.state == STARTING and now >= w.startup_deadline:
                w.hello_error = w.hello_error or (
                    f"no hello within {self.options.timeouts.startup:g} s of starting")
                self._retire(w, "fault", "it did not start in time", now, kill=True,
                             cause="start_failed")
            elif w.state == BACKOFF and now >= w.backoff_until \
                    and self.state == RUNNING:
                self._spawn(w)
            elif w.state == BUSY:
                self._check_busy(w, now)
            elif w.state in RESTING \
                    and now - w.heard_at > self.options.timeouts.heartbeat:
                self._retire(w, "fault", f"silent for {now - w.heard_at:.1f} s while "
                             f"{w.state}", now, kill=True, cause="unresponsive")
        self._schedule(now)

    def _log(self, level: int, text: str) -> None:
        self._actions.append(Log(level, text))

    # -- moves: every change of a state, one of the rows of states.py's tables ------------

    def _move(self, w: Worker, event: Event, after: WorkerState) -> None:
        if states.CHECKING:
            states.check("worker", event, w.state, after, f"pool {self.backend!r}: {w.name}")
        w.state = after

    def _move_pool(self, event: Event, after: PoolState) -> None:
        if states.CHECKING:
            states.check("pool", event, self.state, after, f"pool {self.backend!r}")
        self.state = after

    def _move_call(self, req: Request, event: Event, after: CallState) -> None:
        if states.CHECKING:
            states.check("call", event, req.tracking.state, after,
                         f"pool {self.backend!r}: {req.label}")
        req.tracking.state = after
