"""The rules of a worker's start: spawning its process, checking its hello, backing off
when the OS, the configuration or the cluster refuses it, a standby spare taking over a
slot, and what a proven worker's probe tells routing. Apart from the rest because a start
is where a broken backend shows first, and these rules decide what that costs."""

from __future__ import annotations

import hmac
import logging

from vyre_core.boundary.messages import Adopt, Hello, HelloFailed, Message
from vyre_core.contract.types import Capabilities, DeviceInfo
from vyre_core.deadline import Deadline
from vyre_core.errors import CallerError, VyreError
from vyre_core.supervisor.rules.actions import Promote, RoutingChanged, Signal, Spawn
from vyre_core.supervisor.rules.constants import START_ERROR_CHARS
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_core.supervisor.rules.slots import Worker, _Rules
from vyre_core.supervisor.rules.states import (
    BACKOFF,
    CLOSED,
    FAILED,
    HELLO,
    IDLE,
    PROMOTE,
    PROVEN,
    RUNNING,
    SERVING,
    SPARE,
    SPAWN_DROPPED,
    SPAWN_FAILED,
    SPAWNED,
    SPAWNING,
    START,
    START_REFUSED,
    STARTING,
    STOPPED,
    UNPLACED,
    Event,
)


class Starting(_Rules):
    """The rules of a worker's start (see the module docstring)."""

    # -- events: the shell's process work --------------------------------------------------

    def spawned(self, index: int, generation: int, identity: bytes, proof: bytes, pid: int,
                now: float) -> None:
        """The process for ``Spawn(index, generation)`` started; ``proof`` is what its hello
        must carry."""
        w = self.workers[index]
        if generation != w.generation or w.state != SPAWNING:
            return
        w.identity, w.proof, w.pid, w.proven = identity, proof, pid, False
        self._move(w, SPAWNED, STARTING)
        w.heard_at = now
        w.startup_deadline = now + self.options.timeouts.startup
        self._by_identity[identity] = w
        if self.state in (CLOSED, FAILED):
            self._retire(w, "planned", "the pool stopped while it was starting", now,
                         cause=None)

    def spawn_dropped(self, index: int, generation: int) -> None:
        """The pool closed before the shell started the process for ``Spawn(index,
        generation)`` (it was waiting for its fork server): there is none to stop."""
        w = self.workers[index]
        if generation == w.generation and w.state == SPAWNING \
                and self.state == CLOSED:
            self._move(w, SPAWN_DROPPED, STOPPED)

    def spawn_failed(self, index: int, generation: int, error: VyreError, now: float) -> None:
        """The OS refused to start the process (ENOSPC, EMFILE, EAGAIN...): back off and try
        again; requests that no live worker can serve fail now with the OS's error."""
        w = self.workers[index]
        if generation != w.generation or w.state != SPAWNING:
            return
        spare = self._ready_spare(w.device) if index < self.serving \
            and self.state == RUNNING else None
        if spare is not None:  # a prepared process stands by: it serves instead
            self._log(logging.WARNING, f"pool {self.backend!r}: worker {index} could not "
                                       f"start ({error.cause}); a spare takes its place")
            self._promote(spare, w, now)
            return
        self._back_off(w, error, now, SPAWN_FAILED)

    def _back_off(self, w: Worker, error: VyreError, now: float, event: Event) -> None:
        """Worker ``w`` could not start for a reason no restart cures at once (the OS
        refused a process, the configuration names what the backend lacks, no room on the
        cluster): it is tried again later, no death is counted, and requests no other
        worker may serve fail now with that reason and its Fix."""
        w.spawn_failures += 1
        self._move(w, event, BACKOFF)
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

    def start_refused(self, index: int, generation: int, why: str, now: float) -> None:
        """The place the worker at ``index`` was started on cannot run this backend (a
        cluster node without it installed): the shell starts it elsewhere, and no death is
        counted (the backend did nothing wrong; the shell stops offering that place)."""
        w = self.workers[index]
        if generation != w.generation or w.state != STARTING:
            return
        self._forget(w)
        self._move(w, START_REFUSED, STOPPED)
        w.pid, w.proven, w.kill_at = None, False, None
        w.last_exit = f"{w.name} could not start there: {why}"
        self._log(logging.WARNING, f"pool {self.backend!r}: {w.last_exit}; starting it "
                                   "elsewhere")
        if self.state == RUNNING:
            self._spawn(w)
        self._schedule(now)

    def unplaced(self, index: int, generation: int, error: VyreError, now: float) -> None:
        """The shell found the worker at ``index`` still waiting for somewhere to run (a
        cluster whose resources are all taken) as its start deadline nears: it is given up
        on without a death counted, requests no live worker can serve fail with ``error``,
        and it is tried again after a back-off."""
        w = self.workers[index]
        if generation != w.generation or w.state != STARTING:
            return
        self._forget(w)  # (the shell drops the attempt: its actor holds nothing yet)
        self._actions.append(Signal(w.index, kill=True))
        # (room may come: later calls wait for the next try)
        self._back_off(w, error, now, UNPLACED)

    # -- rules -----------------------------------------------------------------------------

    def _hello(self, w: Worker, msg: Message | VyreError, now: float) -> None:
        hello = None if isinstance(msg, VyreError) else msg.body
        if not isinstance(hello, Hello | HelloFailed):
            self.rejected_messages += 1
            return
        if not hmac.compare_digest(hello.proof, w.proof):
            self.rejected_messages += 1
            self._log(logging.WARNING, f"pool {self.backend!r}: a peer claiming to be "
                                       f"worker {w.index} failed the handshake; dropped")
            return
        if hello.pid is not None and hello.pid > 0:
            w.pid = hello.pid  # (a Ray actor's pid is known only from its hello)
        if isinstance(hello, HelloFailed):
            error = VyreError.from_dict(hello.error)
            tb = hello.traceback
            cause = " ".join(error.cause.split())
            w.hello_error = cause if len(cause) <= START_ERROR_CHARS else \
                cause[:START_ERROR_CHARS - 3] + "..."
            w.start_output = tb if isinstance(tb, str) else ""
            if isinstance(error, CallerError) and w.state == STARTING:
                # the configuration asks for what the backend lacks (a device it does not
                # have): no restart cures it, so none is spent (its process exits by itself)
                self._refuse_start(w, error)
            return
        if w.state != STARTING or msg.gen != w.generation:
            self.dropped_replies += 1
            return
        try:
            caps = Capabilities.from_dict(hello.capabilities, f"backend {self.backend!r}",
                                          logged_only=True)  # (no warning can fail it)
            devices = [DeviceInfo.from_dict(d) for d in hello.devices]
            if hello.device != w.device:
                raise ValueError(f"it runs on device {hello.device!r}, not "
                                 f"{w.device!r}")
        except Exception as exc:  # a worker we cannot route on is a worker that failed
            w.hello_error = f"its hello carried unreadable capabilities: {exc}"
            self._retire(w, "fault", "unreadable hello", now, kill=True, cause="protocol")
            return
        w.proven, w.heard_at, w.spawn_failures, w.refusal = True, now, 0, None
        w.failed_starts, self.started = 0, True
        self._move(w, HELLO, IDLE if w.index < self.serving
                   else SPARE)
        self._log(logging.INFO, f"pool {self.backend!r}: {w.name} generation {w.generation} "
                  f"is up" + ("" if w.device is None else f" on device {w.device}")
                  + (" (a spare)" if w.state == SPARE else ""))
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
                     if v.state == SPARE and v.device == device), None)

    def _promote(self, spare: Worker, w: Worker, now: float) -> None:
        """Slot ``w`` lost its process: the ready spare's process serves it at once, as
        its next generation (told so by an ADOPT request before anything else), and the
        spare slot starts a replacement."""
        w.generation += 1
        w.identity, w.proof, w.pid, w.proven = spare.identity, spare.proof, spare.pid, True
        w.heard_at, w.rss, w.retiring, w.retire_reason = spare.heard_at, spare.rss, None, ""
        w.kill_at, w.hello_error, w.start_output, w.served_generation = None, None, "", 0
        self._by_identity[w.identity] = w
        spare.identity, spare.pid, spare.proven = b"", None, False
        self._move(spare, PROMOTE, STOPPED)
        w.caps, spare.caps = spare.caps, None
        w.spawn_failures, w.refusal = 0, None
        w.held.clear()  # (a spare has served nothing)
        self._actions.append(Promote(spare.index, w.index))
        self._log(logging.INFO, f"pool {self.backend!r}: spare process {w.pid} serves "
                                f"worker {w.index} as generation {w.generation}")
        req = Request(Call(Adopt(w.generation), [],
                           deadline=Deadline(now + self.options.timeouts.startup),
                           internal=True))
        self._watch_deadline(req)
        self._send(w, req, now, PROMOTE)
        self._spawn(spare)

    def _spawn(self, w: Worker) -> None:
        w.generation += 1
        self._move(w, START, SPAWNING)
        w.identity, w.proof, w.pid, w.proven = b"", b"", None, False
        w.current, w.kill_at, w.retiring, w.rss = None, None, None, None
        w.cancel_by = None
        w.retire_reason = ""
        w.hello_error, w.served_generation, w.caps, w.refusal = None, 0, None, None
        w.start_output = ""
        w.held.clear()  # a new process holds no program yet
        self._actions.append(Spawn(w.index, w.generation))

    def _learned(self, device: int | None) -> None:
        """A worker on ``device`` probed what it can do: the device's capabilities are what
        its proven workers can all do (on a cluster they may sit on unlike nodes), kept
        until a probe differs (adapter facts included), so a restart never sends routing
        back to static claims."""
        probed = [w.caps for w in self.workers if w.device == device and w.proven
                  and w.caps is not None and w.state in PROVEN]
        if not probed:
            return
        caps = Capabilities.common(probed)
        known = self.device_capabilities.get(device)
        changed = known is None or caps.to_dict() != known.to_dict()
        if changed:
            self.device_capabilities[device] = caps
        serving = {w.caps.identity: w.caps for w in self._serving if w.device == device
                   and w.caps is not None and w.state in SERVING}
        known_variants = self.device_variants.get(device, ())
        if serving and set(serving) != {c.identity for c in known_variants}:
            changed = True
            self.device_variants[device] = tuple(serving.values())
            self.varied = any(len(v) > 1 for v in self.device_variants.values())
            self._fail_waiting(None)
        if changed:
            self._actions.append(RoutingChanged())
