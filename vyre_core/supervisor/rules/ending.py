"""The rules of a worker's end: its exit and the fate of the call it held, planned and
faulty stops, the restart intensity that fails the pool and the cool-down after it,
recycling and device recovery. Together because whether a death counts, and what it
costs, must be decided in one place."""

from __future__ import annotations

import contextlib
import logging
import signal
from typing import Any

from vyre_core.boundary.messages import Shutdown, TryRecover
from vyre_core.contract.types import Capabilities
from vyre_core.deadline import Deadline
from vyre_core.errors import DeviceLostError, SystemResourceError, WorkerCrashedError
from vyre_core.supervisor.rules.actions import Release, RoutingChanged, Signal, describe_exit
from vyre_core.supervisor.rules.constants import POISON_KILLS, START_TRIES
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_core.supervisor.rules.slots import Failure, Worker, _Rules
from vyre_core.supervisor.rules.states import (
    CLOSED,
    COOLDOWN_OVER,
    ENDING,
    EXITED,
    FAIL,
    FAILED,
    KILLING,
    NO_PROCESS,
    NOTHING_TO_STOP,
    QUEUED,
    RECOVER,
    REQUEUE,
    RESTING,
    RETIRE,
    RUNNING,
    STARTING,
    STOPPED,
    STOPPING,
)


class Ending(_Rules):
    """The rules of a worker's end (see the module docstring)."""

    def _forget(self, w: Worker) -> None:
        """``w``'s process is gone: a message still arriving from it is dropped."""
        self._by_identity.pop(w.identity, None)
        self._former.append(w.identity)

    def exited(self, index: int, code: int | None, output: str, now: float,
               collateral: bool = False, oom_killed: bool = False) -> None:
        """The worker process at ``index`` exited with ``code`` (negative: a signal; None:
        unknown); ``output`` is the tail of what it wrote. ``collateral``: it died because
        its fork server went (which the shell bounds): not its fault, so it counts toward
        neither the restart intensity nor its request's crashes. ``oom_killed``: the
        kernel's OOM killer killed it (its memory cgroup counted the kill): the request it
        ran fails at once, never run again (it would take the same memory)."""
        w = self.workers[index]
        if w.state in NO_PROCESS:
            return
        for held in w.holding:
            self._actions.append(Release(held))
        w.holding.clear()
        self._forget(w)
        if w.refusal is not None and w.state == STARTING:  # (it said why it could not)
            w.pid, w.kill_at, w.proven = None, None, False
            if self.state == RUNNING:
                self._back_off(w, w.refusal, now, EXITED)
            else:
                self._move(w, EXITED, STOPPED)
            return
        # a worker told to stop for its cancelled call dies in the caller's cancellation
        # (killed at cancel_grace it would be a planned stop): never charged
        counted = w.retiring != "planned" and not collateral and w.cancel_by is None
        died_starting = not w.proven
        self.metrics.process_gone(w.index, None if self.state == CLOSED else (
            w.retire_cause if w.retiring is not None else "fork_server" if collateral
            else "start_failed" if died_starting else "crashed"))
        w.last_exit = f"{w.name} {describe_exit(code)}" + (
            " with its fork server" if collateral else "") + (
            " (the kernel's OOM killer: its memory cgroup was out of memory)"
            if oom_killed else "")
        # (said before its request's fate)
        if self.state != CLOSED and (counted or collateral):
            self._log(logging.WARNING, f"pool {self.backend!r}: {w.last_exit}" + (
                "" if collateral or w.retiring is None else f" ({w.retiring})"))
        req, w.current = w.current, None
        self._move(w, EXITED, STOPPED)
        w.pid, w.kill_at, w.proven = None, None, False
        w.cancel_by = None
        if req is not None:
            req.tracking.stopping = False
        if req is not None and not req.done:
            if collateral and not req.call.internal and req.call.slot is None:
                # it runs again, no crash counted
                self._move_call(req, REQUEUE, QUEUED)
                req.tracking.worker = None
                self.queue.appendleft(req)
            else:
                self._cut_off(w, req, code, output, now, oom_killed)
        for pinned in list(w.pinned):
            self._resolve(pinned, self._invalidated(pinned, w))
        w.pinned.clear()
        if self.state == CLOSED:
            return
        if counted:
            w.deaths += 1
            self._deaths.append(now)
            while self._deaths and self._deaths[0] <= now - self.options.restart.window:
                self._deaths.popleft()
            if died_starting:
                w.failed_starts += 1
            if self.state == RUNNING and (self.half_open
                                            or len(self._deaths) > self.restart_limit
                                            or self._cannot_start()):
                self._fail_pool(w, output, now)
                return
        if self.state == RUNNING:
            spare = self._ready_spare(w.device) if w.index < self.serving else None
            if spare is None:
                self._spawn(w)
            else:
                self._promote(spare, w, now)
        self._schedule(now)

    def _cut_off(self, w: Worker, req: Request, code: int | None, output: str,
                 now: float, oom_killed: bool = False) -> None:
        """The worker died holding ``req``: run it again, or fail it (at once when the
        OOM killer killed the worker running it: running it again would take the same
        memory, and kill again)."""
        what = f"{w.last_exit} while serving {req.label} on {self.backend!r}"
        if req.call.internal:
            self._resolve(req, None)
        elif not req.tracking.acked:
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
        elif req.call.slot is not None:
            self._resolve(req, WorkerCrashedError(what, stderr=output))
        else:
            t = req.tracking
            t.crashes += 1
            if t.crashes >= POISON_KILLS:
                self._log(logging.WARNING, f"pool {self.backend!r}: {req.label} killed "
                                           f"{t.crashes} workers: failed as a poison request")
                self._resolve(req, WorkerCrashedError(
                    f"{what}; it killed {t.crashes} workers in a row, so it is a poison "
                    "request: it fails alone and the pool keeps serving", stderr=output))
            elif t.crashes > req.call.retries:
                self._resolve(req, WorkerCrashedError(what, stderr=output))
            else:
                self._move_call(req, REQUEUE, QUEUED)
                t.worker = None
                self.queue.appendleft(req)
                self._log(logging.INFO, f"pool {self.backend!r}: {req.label} was cut off; "
                                        f"running it again (retry {t.crashes} of "
                                        f"{req.call.retries})")

    def _request_recovery(self, w: Worker, now: float) -> None:
        """Device lost: ask the backend to recover in place (a new generation), within
        Timeouts.startup (a hung recovery restarts the worker instead)."""
        req = Request(Call(TryRecover(w.generation + 1), [],
                           deadline=Deadline(now + self.options.timeouts.startup),
                           internal=True))
        self._watch_deadline(req)
        self._send(w, req, now, RECOVER)

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
            w.caps = Capabilities.from_dict(result[0].capabilities, f"backend {self.backend!r}",
                                            logged_only=True)
            self._learned(w.device)
        self._log(logging.INFO, f"pool {self.backend!r}: worker {w.index} recovered its "
                                f"device in place as generation {w.generation}")
        self._schedule(now)

    def _recycle_reason(self, w: Worker) -> str | None:
        """Why the worker is due for replacement between requests (None: it is not).
        Recycling is a planned restart: handles made in the worker become invalid."""
        policy = self.options.restart
        if policy.recycle_after is not None and w.served_generation >= policy.recycle_after:
            return f"recycled after {w.served_generation} requests (recycle_after)"
        if policy.recycle_rss_bytes is not None and w.rss is not None \
                and w.rss > policy.recycle_rss_bytes:
            return f"recycled at {w.rss} bytes resident (recycle_rss_bytes)"
        return None

    def _retire(self, w: Worker, kind: str, reason: str, now: float, kill: bool = False, *,
                cause: str | None) -> None:
        """Stop the worker at ``w``: ``planned`` stops (recycling, deadlines, close) do not
        count toward the restart intensity, ``fault`` stops (frozen, stuck) do. ``cause``
        is the reason's word in metrics.RESTART_REASONS (None: the driver closes)."""
        if w.state in NOTHING_TO_STOP:
            if w.state in ENDING and kill and w.kill_at is not None:
                w.kill_at = now  # escalate now
            return
        w.retiring, w.retire_reason, w.retire_cause = kind, reason, cause
        if w.state in RESTING and not kill and kind == "planned" \
                and self.state == RUNNING:
            self._send(w, Request(Call(Shutdown(), [], internal=True)), now, RETIRE,
                       STOPPING)
        else:
            self._actions.append(Signal(w.index, kill=kill))
            self._move(w, RETIRE, KILLING)
        w.kill_at = now + self.options.timeouts.kill_grace
        self._log(logging.INFO if kind == "planned" else logging.WARNING,
                  f"pool {self.backend!r}: stopping {w.name}: {reason}")

    @property
    def restart_limit(self) -> int:
        """The deaths within ``RestartPolicy.window`` the pool survives: ``max_restarts`` per
        worker process, spares included. OTP's intensity is per supervisor; each of our
        processes is a child, so a pool of 8 bears 8 times the deaths of a pool of one (a
        kill rate spread over its processes is then judged per process)."""
        return self.options.restart.max_restarts * len(self.workers)

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
                     + (f"in {opts.restart.window:g} s (more than "
                        f"max_restarts={opts.restart.max_restarts}" + (
                            f" x {len(self.workers)} workers" if len(self.workers) > 1
                            else "") + ")" if not self.half_open
                        else "(it failed again right after its cool-down)")
                     + f"; last: {w.last_exit}")
            fix = ("Fix the backend (this error's details carry its last worker's output) "
                   f"or uninstall it. {meanwhile} RestartPolicy.cooldown, max_restarts and "
                   "window (PoolOptions.restart) tune this.")
        self._move_pool(FAIL, FAILED)
        self.half_open = False
        self.failure = Failure(first, fix, w.start_output or output or "(no output)", now,
                               now + opts.restart.cooldown)
        self._log(logging.ERROR, f"{first}; next try in {opts.restart.cooldown:g} s")
        error = self._failed_error(now)
        for req in self._pending():
            self._resolve(req, error)
        for other in self.workers:
            self._retire(other, "planned", "the pool failed", now, cause="pool_failed")
        self._actions.append(RoutingChanged())

    def _restart_after_cooldown(self, now: float) -> None:
        self._move_pool(COOLDOWN_OVER, RUNNING)
        self.half_open, self.failure = True, None
        self._deaths.clear()
        self._log(logging.INFO, f"pool {self.backend!r}: cool-down over, starting again")
        for w in self.workers:
            if w.state == STOPPED:
                self._spawn(w)
        self._actions.append(RoutingChanged())
