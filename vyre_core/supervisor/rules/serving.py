"""The rules of serving calls: which idle worker gets which request, sending it,
its answer, a cancelled call's stop, lost messages, frozen and stuck workers, deadlines,
requests no worker may serve, and this process's own pauses. Every call's path runs
through here, so these rules sit in one file to be read against each other."""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterator
from typing import Any

from vyre_core.boundary.messages import (
    PROGRAM_CACHE,
    PROGRAM_NOT_HELD,
    SHARED_REFUSED,
    Adopt,
    Ping,
    TryRecover,
)
from vyre_core.errors import (
    DeviceLostError,
    MessageLostError,
    NoCapableBackendError,
    PipelineInvalidatedError,
    ProtocolError,
    VyreError,
    WorkerCrashedError,
)
from vyre_core.supervisor.rules.actions import Release, Resolve, Send
from vyre_core.supervisor.rules.constants import MAX_RESENDS, TICK_EVERY, TRANSFER_FLOOR
from vyre_core.supervisor.rules.requests import Request, _ids
from vyre_core.supervisor.rules.slots import Worker, _Rules
from vyre_core.supervisor.rules.states import (
    ANSWER,
    BUSY,
    DONE,
    IDLE,
    PASSING,
    QUEUED,
    REPLY_LOST,
    REQUEUE,
    RESOLVE,
    RUNNING,
    SCHEDULE,
    SEND,
    SENT,
    SERVING,
    STARTING,
    Event,
    WorkerState,
)


class Serving(_Rules):
    """The rules of serving calls (see the module docstring)."""

    def _eligible(self, req: Request) -> tuple[Worker, ...] | list[Worker]:
        """The serving workers on the devices ``req`` may run on."""
        if req.call.devices is None:
            return self._serving
        return [w for w in self._serving if w.device in req.call.devices]

    def _stopped(self, w: Worker, req: Request, now: float) -> None:
        """The worker's reply to the cancelled ``req`` arrived: it serves again; the
        memory it might have written is free."""
        self._move(w, ANSWER, IDLE)
        w.current, w.cancel_by, w.heard_at = None, None, now
        req.tracking.stopping = False
        for held in [r for r in w.holding if r is req]:
            w.holding.remove(held)
            self._actions.append(Release(held))
        if (why := self._recycle_reason(w)):
            self._retire(w, "planned", why, now, cause="recycled")
        self._schedule(now)

    def _may_serve(self, w: Worker, req: Request) -> bool:
        """Whether ``w`` serves ``req`` now, or may once it has started."""
        if w.state in SERVING:
            capable = req.call.capable
            return capable is None or (w.caps is not None and w.caps.identity in capable)
        return w.state in PASSING \
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
        if req.call.capable is not None and any(v.state in SERVING for v in eligible):
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

    def _schedule(self, now: float) -> None:
        """Give idle workers work: each its own pinned requests first (they can run
        nowhere else), then the queue in order, each request to the idle worker that suits
        it best (``_pick``); a request no idle worker may take waits, without holding up
        those behind it."""
        if self.state != RUNNING:
            return
        for w in self.workers:
            while w.state == IDLE and w.pinned:
                if w.pinned[0].done:
                    w.pinned.popleft()
                    continue
                if self._frozen(w, now):
                    break
                req = w.pinned.popleft()
                if req.call.generation != w.generation:
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
                if not any(v.state == IDLE for v in self._serving):
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
        fp = req.call.message.fp
        devices, capable = req.call.devices, req.call.capable
        best: Worker | None = None
        for w in self._serving:
            if w.state != IDLE or (devices is not None and w.device not in devices) \
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

    def _send(self, w: Worker, req: Request, now: float, event: Event = SCHEDULE,
              after: WorkerState = BUSY) -> None:
        """Send ``req`` to ``w``, which ``event`` moves to ``after`` (it runs ``req``)."""
        self._move_call(req, SEND, SENT)
        t = req.tracking
        t.worker, t.sent_at = w.index, now
        t.acked, t.finished_seen_at = False, None
        t.served_by = (w.index, w.generation)
        w.current = req
        self._move(w, event, after)
        fp = req.call.message.fp
        had = fp in w.held
        if fp is not None:  # it holds the program once this arrives (its cache, mirrored)
            t.program_held = had and not t.needs_program
            w.held[fp] = None
            w.held.move_to_end(fp)
            if len(w.held) > PROGRAM_CACHE:
                w.held.popitem(last=False)
        self._actions.append(Send(w.index, w.generation, w.identity, req, had,
                                  t.needs_program, t.needs_socket))

    def _check_busy(self, w: Worker, now: float) -> None:
        req = w.current
        if req is None or req.done:
            return
        t = req.tracking
        if not t.acked:
            if now - t.sent_at < self._window(req.transfer.nbytes):
                return
            w.current = None
            if w.heard_at > t.sent_at:
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
        elif t.finished_seen_at is not None:
            if now - t.finished_seen_at >= self._window(t.reply_bytes):
                w.current = None
                self._move(w, REPLY_LOST, IDLE)
                self.lost_messages += 1
                self._resolve(req, MessageLostError(
                    f"the reply to {req.label} from {w.name} of {self.backend!r} was lost on "
                    "its way: the worker answered, the answer never arrived whole",
                    "Call again; if it recurs, return less data per call (split the "
                    "dispatch) and read the worker's output in Driver.status()."))
        elif now - w.heard_at > self.options.timeouts.heartbeat:
            if not req.call.internal:
                self._resolve(req, WorkerCrashedError(
                    f"{w.name} of {self.backend!r} sent no heartbeat for "
                    f"{self.options.timeouts.heartbeat:g} s while running {req.label}",
                    "The backend is stuck holding the GIL; set DispatchConfig.timeout, or "
                    "report the hang to its authors."))
            self._retire(w, "fault", "stuck without heartbeats", now, kill=True,
                         cause="unresponsive")

    def _lost(self, req: Request, how: str, now: float,
              error: type[VyreError] = WorkerCrashedError) -> None:
        """``req`` never ran: send it again (to any worker) or, past the limit, fail it
        with ``error``."""
        if req.call.internal:
            self._resolve(req, None)
        elif req.call.slot is not None:
            self._resolve(req, error(
                f"{req.label} {how}; it is pinned to that worker, which is gone",
                PipelineInvalidatedError.default_fix))
        elif (t := req.tracking).losses >= MAX_RESENDS:
            self._resolve(req, error(
                f"{req.label} on {self.backend!r} {how}; it never reached a worker in "
                f"{t.losses + 1} tries"))
        else:
            t.losses += 1
            self._move_call(req, REQUEUE, QUEUED)
            t.worker = None
            self.queue.appendleft(req)
            self._log(logging.INFO, f"pool {self.backend!r}: {req.label} {how}; sending it "
                                    f"again (resend {t.losses} of {MAX_RESENDS})")
            self._schedule(now)

    def _finish(self, w: Worker, req: Request, result: Any, now: float) -> None:
        w.current = None
        if w.state == BUSY:  # (a stopping one answers its Shutdown: it stays)
            self._move(w, ANSWER, IDLE)
        call, t = req.call, req.tracking
        refused = result.details if isinstance(result, ProtocolError) \
            and not call.internal else {}
        if (refused.get(PROGRAM_NOT_HELD) and not t.needs_program) \
                or (refused.get(SHARED_REFUSED) and not t.needs_socket):
            # Named by fingerprint only, to a worker that does not hold the program (the
            # parent's guess was wrong); or its arrays in shared memory the worker cannot
            # open: it goes again, first in line, with its program or on the socket, under
            # a new id (the worker has answered the old one; its page says so).
            t.id = next(_ids)
            t.needs_program |= bool(refused.get(PROGRAM_NOT_HELD))
            t.needs_socket |= bool(refused.get(SHARED_REFUSED))
            self._move_call(req, REQUEUE, QUEUED)
            t.worker = None
            (w.pinned if call.slot is not None else self.queue).appendleft(req)
            self._schedule(now)
            return
        if call.internal:
            self._resolve(req, result)
            if isinstance(call.message, TryRecover):
                self._recovered(w, result, now)
            elif isinstance(call.message, Adopt):
                if isinstance(result, Exception):
                    self._retire(w, "fault", f"it could not take over the slot ({result})",
                                 now, kill=True, cause="protocol")
                self._schedule(now)
            return
        if not isinstance(call.message, Ping):
            w.served += 1
            w.served_generation += 1
        if call.message.fp is not None:
            self.metrics.program_answered(t.program_held)
        self._resolve(req, result)
        if isinstance(result, DeviceLostError):
            self._request_recovery(w, now)
        elif w.state == IDLE and (why := self._recycle_reason(w)):
            self._retire(w, "planned", why, now, cause="recycled")
        self._schedule(now)

    def _expire(self, req: Request, now: float) -> None:
        index = req.tracking.worker
        if req.tracking.state == SENT and index is not None \
                and self.workers[index].current is req:
            w = self.workers[index]
            if req.call.internal:
                self._resolve(req, None)
                # a spare that cannot even take over its slot is a fault (counted, so a
                # backend whose processes all hang there fails its pool); a recovery that
                # runs long is the device's, planned
                kind = "fault" if isinstance(req.call.message, Adopt) else "planned"
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
        self._move_call(req, RESOLVE, DONE)
        t = req.tracking
        if t.deadline_entry is not None:  # the heap keeps nothing answered alive
            t.deadline_entry[2], t.deadline_entry = None, None
            self._live_deadlines -= 1
        if req.call.internal:
            return
        running = t.worker is not None and self.workers[t.worker].current is req
        if running:  # its memory is released at the worker's exit, or when it stops
            self.workers[t.worker].holding.append(req)
        self._actions.append(Resolve(req, value, running))

    def _watch_deadline(self, req: Request) -> None:
        """Put ``req`` on the deadline heap; answered entries are dropped when they reach
        the top, and the heap is rebuilt when they outnumber the live ones."""
        at = req.call.deadline.at
        if at is None:
            return
        entry = req.tracking.deadline_entry = [at, req.tracking.id, req]
        self._live_deadlines += 1
        heapq.heappush(self._deadlines, entry)
        if len(self._deadlines) > 64 + 2 * self._live_deadlines:
            self._deadlines = [e for e in self._deadlines if e[2] is not None]
            heapq.heapify(self._deadlines)

    def _window(self, nbytes: int) -> float:
        """How long a message of ``nbytes`` may take to cross before it counts as lost."""
        return self.options.timeouts.silence_limit + nbytes / TRANSFER_FLOOR

    def _credit_own_pause(self, now: float) -> None:
        """If this process did not run for a while (the gap between ticks is far longer
        than the shell's promise), nobody could be heard meanwhile: that time is not
        anyone's silence. Deadlines still count it: they are the caller's time."""
        last, self._last_tick = self._last_tick, now
        if last is None:
            return
        gap = now - last - TICK_EVERY
        if gap <= self.options.timeouts.silence_limit:
            return
        self._log(logging.WARNING, f"pool {self.backend!r}: this process did not run for "
                                   f"{gap:.1f} s; workers' silence meanwhile is not held "
                                   "against them")
        for w in self.workers:  # what was heard after the pause stays as it is
            w.heard_at = min(now, w.heard_at + gap)
            if w.state == STARTING:
                w.startup_deadline = min(now + self.options.timeouts.startup,
                                         w.startup_deadline + gap)
            req = w.current
            if req is not None and not req.done:
                t = req.tracking
                t.sent_at = min(now, t.sent_at + gap)
                if t.finished_seen_at is not None:
                    t.finished_seen_at = min(now, t.finished_seen_at + gap)
