"""A pool of one backend's workers as Ray actors: the same rules (``supervisor/rules/``)
as a local pool, with Ray as the transport. Ray places each actor on a node (requesting
``PoolOptions.gpus_per_worker`` GPUs), carries arrays through its object store (outputs
come back as zero-copy read-only arrays) and says when an actor dies (killed, crashed, or
its node gone); the rules then restart it as a new generation, retry what it was running,
and keep deadlines and restart intensity as for worker processes.

One thread per pool carries out what only it does (hellos, heartbeats, replies to requests
nobody waits on, ticks); a caller's own request is sent and its reply taken by the
caller's thread, so a call costs one Ray actor call and a little bookkeeping. Where an
actor goes is ``placement.py``'s, a mixin of ``RayPool``."""

from __future__ import annotations

import contextlib
import enum
import logging
import secrets
import threading
import time
from pathlib import Path
from typing import Any, cast

from vyre_core.boundary import codec
from vyre_core.boundary.messages import Heartbeat, Hello, HelloFailed, Message, Shutdown
from vyre_core.cluster.connect import RayCluster
from vyre_core.cluster.placement import Placement
from vyre_core.errors import (
    ClusterUnavailableError,
    PoolFailedError,
    SystemResourceError,
    VyreError,
    as_vyre_error,
)
from vyre_core.registry import BackendRegistration
from vyre_core.supervisor import published
from vyre_core.supervisor.facts import PoolFacts
from vyre_core.supervisor.lane import interrupts_deferred
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.outcome import Outcome
from vyre_core.supervisor.rules.actions import Promote, Send, Signal, Spawn, Stop
from vyre_core.supervisor.rules.constants import TICK_EVERY
from vyre_core.supervisor.rules.machine import PoolMachine
from vyre_core.supervisor.rules.requests import Request, Transfer
from vyre_core.supervisor.shell import Carrier, Spans

_log = logging.getLogger("vyre.cluster")
#: The longest the pool's thread waits on Ray before it looks again (hellos, heartbeats
#: and replies nobody waits on are noticed within it; a caller's reply is not delayed).
LOOK_EVERY = 0.05
#: Inputs of this many bytes or more go into the object store once per call, by the
#: caller; smaller ones ride inside each send (Ray inlines them).
PUT_FROM = 1 << 20


class RayTransfer(Transfer):
    """What the Ray shell keeps of a request: ``wire``, its arrays as sent (a list, or one
    object reference in Ray's store, put once for every send), and ``waker``, the token of
    the caller waiting in ``RayPool.call`` (whose thread takes the reply of that send)."""

    __slots__ = ("waker", "wire")

    def __init__(self, waker: object | None = None) -> None:
        super().__init__()
        self.wire: Any = None
        self.waker = waker


class RayPoolState(enum.StrEnum):
    """The Ray pool's own state (its workers' are the rules'): not started, running,
    closing (its actors being stopped), stopped."""

    NEW = "new"
    RUNNING = "running"
    CLOSING = "closing"
    STOPPED = "stopped"


class RayPool(Placement, PoolFacts):
    """One backend's workers as Ray actors; used by the Driver exactly as a local ``Pool``."""

    def __init__(self, registration: BackendRegistration, cluster: RayCluster,
                 options: PoolOptions, on_change: Any, snapshot: Path,
                 devices: tuple[int, ...] | None = None, spans: Spans | None = None) -> None:
        self.registration = registration
        self.backend = registration.id
        self.options = options
        self._cluster = cluster
        self._ray = cluster.ray
        self._on_change = on_change
        self._machine = PoolMachine(self.backend, options, devices)
        self._lock = threading.RLock()
        self._spans = spans
        self._carrier = Carrier(self, self._machine, self._lock, on_change, spans, _log)
        self._actors: dict[int, Any] = {}          # slot -> actor handle
        self._identity: dict[int, bytes] = {}      # slot -> the identity of its actor
        self._node: dict[int, str] = {}            # slot -> the node its actor runs on
        self._target: dict[int, str] = {}          # slot -> the node its actor is pinned to
        #: node -> (the backends installed there, why ours could not load): nodes that
        #: lack this backend, learnt from actors that failed to load it there
        self._lacking: dict[str, tuple[list[str], str]] = {}
        self._placing: dict[int, int] = {}  # slot -> the generation asked "placed?"
        self._pending: dict[Any, tuple[str, int, bytes, Request | None]] = {}
        self._beating: set[int] = set()            # slots with a heartbeat outstanding
        self._beat_at: dict[int, float] = {}
        self._state = RayPoolState.NEW
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._actor_class = None
        self._broken: str | None = None  # the pool's thread failed (a bug): why
        self._publisher = published.Publisher(snapshot, self.backend)  # for `vyre status`

    # -- what routing and the Driver read (the rest: PoolFacts) ------------------------

    def unavailable(self) -> str | None:
        if self._broken is not None:
            return f"its Ray pool failed ({self._broken})"
        return super().unavailable()

    def status(self, nodes: bool = True) -> dict[str, Any]:
        """As a local pool's, with each worker's node, the cluster and (``nodes``) each of
        its nodes: one call to Ray's control store."""
        with self._lock:
            status = self._machine.status(time.monotonic())
            for w in status["workers"]:
                w["node"] = self._node.get(w["index"])
        status["cluster"] = str(self._cluster.spec)
        if self._broken is not None:
            status["state"], status["failure"] = "failed", self._broken
        if nodes:
            with contextlib.suppress(Exception):  # (a cluster gone: no nodes to show)
                status["nodes"] = self._cluster.nodes()
        return status

    # -- calls ---------------------------------------------------------------------------

    def submit(self, request: Request) -> Outcome:
        """Hand ``request`` to the rules; its future always resolves."""
        future = request.call.future
        request.transfer = RayTransfer()
        self._begin_span(request)
        future.on_cancel = lambda: self._cancel(request)
        try:
            self._start()
            self._place_arrays(request)
        except VyreError as exc:
            future.set_exception(exc)
            return future
        with interrupts_deferred(), self._lock:
            self._machine.submit(request, time.monotonic())
            self._carry(self._machine.take_actions())
        self._deliver()
        return future

    def call(self, request: Request) -> tuple[dict[str, Any], list[Any]]:
        """Run ``request`` and wait for its answer: its first send is this thread's, and
        so (mostly: whichever thread looks first) is taking its reply; deadlines, deaths
        and retries are the rules' as always. An exception that lands in this thread
        while it waits (Ctrl-C) cancels the call, as ``Pool.call`` does."""
        future = request.call.future
        own = object()
        request.transfer = RayTransfer(own)
        self._begin_span(request)
        future.on_cancel = lambda: self._cancel(request)
        self._start()
        self._place_arrays(request)
        with interrupts_deferred(), self._lock:
            self._machine.submit(request, time.monotonic())
            mine = self._carry(self._machine.take_actions(), own)
        try:
            self._deliver()
            while not future.done():
                if mine is not None and mine in self._pending:
                    ready, _ = self._ray.wait([mine], timeout=LOOK_EVERY)
                    if ready:
                        self._take(mine)
                        self._deliver()
                else:
                    with contextlib.suppress(TimeoutError):
                        future.result(LOOK_EVERY)
        except BaseException:
            future.cancel()  # (a no-op if it was answered meanwhile)
            raise
        return future.result()

    def _cancel(self, request: Request) -> None:
        """(The cancelling thread.) Tell the rules: an actor cannot be told to stop at a
        safe point (its stop request goes nowhere), so one running the call is killed
        after ``cancel_grace``, a planned stop."""
        with interrupts_deferred(), self._lock:
            self._machine.cancel(request, time.monotonic())
            self._carry(self._machine.take_actions())
        self._deliver()

    def _place_arrays(self, request: Request) -> None:
        """(The caller's thread, outside the lock.) Large inputs go into Ray's object store
        once, here: every send of the request (a retry too) names them, and a store that
        cannot take them is this caller's error, not a worker's fault."""
        t = request.transfer
        arrays = [codec.as_frame_array(a) for a in request.call.arrays]
        t.nbytes = t.input_bytes = sum(a.nbytes for a in arrays)  # (its crossing is given time)
        if t.nbytes < PUT_FROM:
            t.wire = arrays
            return
        try:
            t.wire = self._ray.put(arrays)
        except Exception as exc:
            raise SystemResourceError(
                f"Ray's object store could not take the {t.nbytes} bytes of "
                f"{request.label}: {type(exc).__name__}: {_text(exc)}",
                "Give the cluster's nodes more object store memory (ray start "
                "--object-store-memory), or send less per call.") from None

    # -- the pool's thread ---------------------------------------------------------------

    def _start(self) -> None:
        self._cluster.check_usable()
        if self._broken is not None:
            raise PoolFailedError(f"the Ray pool of {self.backend!r} failed: {self._broken}",
                                  "Report this as a bug in vyre; create a new Driver.",
                                  backend=self.backend)
        with self._lock:
            if self._state != RayPoolState.NEW:
                if self._state != RayPoolState.RUNNING:
                    raise PoolFailedError(f"the driver is closed; pool {self.backend!r} takes "
                                          "no more work", "Create a new vyre Driver.",
                                          backend=self.backend)
                return
            self._state = RayPoolState.RUNNING
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"vyre-ray-{self.backend}")
            self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                now = time.monotonic()
                with self._lock:
                    if self._machine.stopped or (self._state == RayPoolState.CLOSING
                                                 and not self._actors):
                        break
                    self._machine.tick(now)
                    self._beat(now)
                    self._carry(self._machine.take_actions())
                    refs = list(self._pending)
                    unsure = self._unsure_of_place(now)
                self._deliver()
                if unsure:
                    self._check_placed(unsure)
                if self._publisher.due(now):
                    self._publisher.publish(now, self.status(nodes=False))
                if refs:
                    ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=LOOK_EVERY)
                    for ref in ready:
                        self._take(ref)
                    self._deliver()
                else:
                    self._stopped.wait(LOOK_EVERY)
        except Exception as exc:  # a bug: every caller gets an answer, never a wait
            _log.exception("pool %r (ray): its thread failed", self.backend)
            self._abandon(exc)
        finally:
            with self._lock:
                for index in list(self._actors):
                    self._kill(index)
            self._stopped.set()

    def _abandon(self, exc: BaseException) -> None:
        """The pool's thread failed (a bug in vyre): every waiting caller gets an error,
        and the pool takes no more work (routing passes it over)."""
        self._broken = f"{type(exc).__name__}: {exc}"
        error = PoolFailedError(f"the Ray pool of {self.backend!r} crashed: {self._broken}",
                                "Report this as a bug in vyre; create a new Driver.",
                                backend=self.backend)
        with self._lock:
            machine = self._machine
            waiting = [*machine.queue, *(r for w in machine.workers
                                         for r in (*w.pinned, w.current) if r is not None)]
            for req in waiting:
                future, req.call.future = req.call.future, None
                if future is not None:
                    self._carrier.resolved.append((future, error))
        self._deliver()
        self._on_change()

    def _beat(self, now: float) -> None:
        """(Locked.) Ask each live actor for a heartbeat every heartbeat interval."""
        for index, actor in list(self._actors.items()):
            if index in self._beating or now < self._beat_at.get(index, 0.0):
                continue
            self._beat_at[index] = now + self.options.timeouts.heartbeat_interval
            try:
                ref = actor.heartbeat.options(concurrency_group="ctl").remote()
            except Exception as exc:  # (Ray refuses calls to an actor it knows is gone)
                self._died(index, self._identity[index], None, _text(exc), kill=True)
                continue
            self._beating.add(index)
            self._pending[ref] = ("beat", index, self._identity[index], None)

    def _take(self, ref: Any) -> None:
        """An answer from an actor: a hello, a heartbeat or a reply (or its death), taken
        whole: a Ctrl-C inside waits till it is."""
        with interrupts_deferred(), self._lock:
            found = self._pending.pop(ref, None)
            if found is None:
                return
            kind, index, identity, request = found
            if kind == "beat":
                self._beating.discard(index)
            try:
                value = self._ray.get(ref, timeout=0)
            except self._ray.exceptions.GetTimeoutError:  # (not here after all: look again)
                self._pending[ref] = found
                if kind == "beat":
                    self._beating.add(index)
                return
            except self._ray.exceptions.RayActorError as exc:
                self._died(index, identity, None, _text(exc))
                self._carry(self._machine.take_actions())
                return
            except Exception as exc:  # a task error: the actor cannot run our methods
                self._died(index, identity, None, _text(exc), kill=True)
                self._carry(self._machine.take_actions())
                return
            now = time.monotonic()
            if kind == "hello":
                self._hello(index, identity, value, now)
            elif kind == "beat":
                received, finished, reply_bytes, rss = value
                self._machine.message(identity, _BEAT, now)
                self._machine.progress(index, received, finished, now, reply_bytes)
                self._machine.measured(index, rss)
            else:
                self._machine.message(identity, value, now)
                if isinstance(request.call.message, Shutdown):  # its device released: it goes
                    self._died(index, identity, 0, "stopped", kill=True)
            self._carry(self._machine.take_actions())

    def _hello(self, index: int, identity: bytes, hello: Hello | HelloFailed,
               now: float) -> None:
        w = self._machine.workers[index]
        if isinstance(hello, HelloFailed) and hello.missing:  # not on that node: elsewhere
            error = VyreError.from_dict(hello.error)
            self._lacking[str(hello.node)] = (list(hello.installed),
                                                    error.cause)
            if self._drop(index, identity):
                self._machine.start_refused(index, w.generation, error.cause, now)
            return
        if isinstance(hello, HelloFailed):
            self._machine.message(identity, Message(hello, 0, w.generation), now)
            self._died(index, identity, 3, "could not start", kill=True)
            return
        self._node[index] = hello.node or ""
        self._machine.message(identity, Message(hello, 0, w.generation), now)

    # -- actions -------------------------------------------------------------------------

    def _carry(self, actions: list[Any], own: object | None = None) -> Any:
        """(Locked.) Carry out the rules' actions, and what they answer to them
        (``Carrier.carry_all``); the reference of the send of the caller ``own`` is
        returned (that caller takes its reply)."""
        return self._carrier.carry_all(actions, own)

    # -- the shell: what the Carrier calls, one method per kind of action ----------------

    def spawn(self, action: Spawn) -> None:
        self._spawn(action)

    def send(self, action: Send) -> Any:
        return self._send(action)

    def stop(self, action: Stop) -> None:
        """Nothing, on purpose: an actor cannot be told to stop a call at a safe point
        (the stop request goes nowhere), so the rules kill one still running the call
        after ``cancel_grace``, a planned stop (``_cancel``)."""

    def signal(self, action: Signal) -> None:
        self._kill(action.index)  # (an actor is only ever killed: no SIGTERM to send)

    def promote(self, action: Promote) -> None:
        self._promote(action)

    def release(self, request: Request) -> None:
        """Nothing: arrays live in Ray's object store, with nothing of ours to reuse."""

    def reply_of(self, request: Request, value: Any) -> Any:
        # (every request this shell answers has a RayTransfer: made on submit or first send)
        cast(RayTransfer, request.transfer).wire = None  # answered: its inputs may go
        return value  # (outputs come back as arrays of the object store already)

    def action_failed(self, action: Any, exc: Exception) -> None:
        """Carrying out ``action`` failed: a Send counts as not sent, a Spawn as failed
        (the cluster could not start it); the pool goes on."""
        _log.error("pool %r (ray): carrying out %s failed", self.backend,
                   type(action).__name__, exc_info=exc)
        if isinstance(action, Send):
            self._machine.send_failed(action.index, action.request, str(exc),
                                      time.monotonic())
        elif isinstance(action, Spawn):
            self._machine.spawn_failed(action.index, action.generation,
                                       ClusterUnavailableError(
                                           f"Ray could not start a worker of "
                                           f"{self.backend!r}: {_text(exc)}",
                                           backend=self.backend),
                                       time.monotonic())

    def _send(self, action: Send) -> Any:
        actor = self._actors.get(action.index)
        if actor is None or self._identity.get(action.index) != action.identity:
            self._machine.send_failed(action.index, action.request, "its actor is gone",
                                      time.monotonic())
            return None
        req = action.request
        t = req.transfer
        if not isinstance(t, RayTransfer):  # (the rules' own: recovery, adoption, shutdown)
            t = req.transfer = RayTransfer()
            t.wire = [codec.as_frame_array(a) for a in req.call.arrays]
        try:
            ref = actor.handle.options(concurrency_group="work").remote(
                req.call.message, req.tracking.id, t.wire)
        except self._ray.exceptions.RayActorError as exc:
            self._machine.send_failed(action.index, req, _text(exc), time.monotonic())
            return None
        except Exception as exc:  # the request itself cannot go (unserialisable, say)
            error = as_vyre_error(exc, f"sending {req.label} to a Ray actor")
            self._machine.message(action.identity, codec.error_message(
                error, req.tracking.id, action.generation), time.monotonic())
            return None
        self._pending[ref] = ("reply", action.index, action.identity, req)
        return ref

    def _spawn(self, action: Spawn) -> None:
        w = self._machine.workers[action.index]
        if w.generation != action.generation or w.state != "spawning":
            return
        options: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0, "max_task_retries": 0}
        place = self._place()
        if isinstance(place, VyreError):
            self._machine.spawn_failed(action.index, action.generation, place,
                                       time.monotonic())
            return
        if place is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(place, soft=False)
            self._target[action.index] = place
        identity = secrets.token_hex(16).encode()
        proof = secrets.token_bytes(16)
        if self.options.gpus_per_worker:
            options["num_gpus"] = self.options.gpus_per_worker
        env = self._cluster.worker_env()
        if env:
            options["runtime_env"] = {"env_vars": env}
        actor = self._actor().options(**options).remote(
            self.backend, self.registration.entry_point.split(" = ")[0], action.generation,
            w.device, proof, self.options.transport.max_message_bytes)
        self._actors[action.index] = actor
        self._identity[action.index] = identity
        self._beat_at[action.index] = time.monotonic() + self.options.timeouts.heartbeat_interval
        self._pending[actor.hello.remote()] = ("hello", action.index, identity, None)
        self._machine.spawned(action.index, action.generation, identity, proof, 0,
                              time.monotonic())

    def _actor(self) -> Any:
        if self._actor_class is None:
            from vyre_workers.ray_actor import RayWorker

            self._actor_class = self._ray.remote(
                concurrency_groups={"ctl": 1, "work": 1})(RayWorker)
        return self._actor_class

    def _kill(self, index: int) -> None:
        """(Locked.) Kill the actor of ``index`` and tell the rules at once."""
        identity = self._identity.get(index)
        if identity is not None:
            self._died(index, identity, -9, "killed", kill=True)

    def _died(self, index: int, identity: bytes, code: int | None, how: str,
              kill: bool = False) -> None:
        """(Locked.) The actor of ``index`` is gone (or ``kill``: is ended now): the rules
        are told once, whichever thread saw it first."""
        if self._drop(index, identity, kill):
            self._machine.exited(index, code, how, time.monotonic())

    def _drop(self, index: int, identity: bytes, kill: bool = True) -> bool:
        """(Locked.) Forget (``kill``: and end) the actor of ``index``; False if the slot
        no longer has that actor."""
        if self._identity.get(index) != identity:
            return False
        actor = self._actors.pop(index)
        del self._identity[index]
        self._beating.discard(index)
        self._node.pop(index, None)
        self._target.pop(index, None)
        for ref, found in list(self._pending.items()):
            if found[1] == index and found[2] == identity:
                del self._pending[ref]
        if kill:
            with contextlib.suppress(Exception):
                self._ray.kill(actor, no_restart=True)
        return True

    def _promote(self, action: Promote) -> None:
        for table in (self._actors, self._identity, self._node, self._target, self._beat_at):
            if action.spare in table:
                table[action.index] = table.pop(action.spare)
        for ref, (kind, index, identity, request) in list(self._pending.items()):
            if index == action.spare:
                self._pending[ref] = (kind, action.index, identity, request)
        if action.spare in self._beating:
            self._beating.discard(action.spare)
            self._beating.add(action.index)

    def _deliver(self) -> None:
        """Outside the lock: tell routing, then complete the answered futures
        (``Carrier.deliver``)."""
        self._carrier.deliver()

    # -- closing -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._stopped.is_set()

    def begin_close(self) -> None:
        with self._lock:
            if self._state in (RayPoolState.CLOSING, RayPoolState.STOPPED):
                return
            started = self._state == RayPoolState.RUNNING
            self._state = RayPoolState.CLOSING
            self._machine.close(time.monotonic())
            self._carry(self._machine.take_actions())
            for index in list(self._actors):
                self._kill(index)
            self._carry(self._machine.take_actions())
        self._deliver()
        if not started:
            self._stopped.set()

    def wait_closed(self, timeout: float | None = None) -> None:
        self._stopped.wait(TICK_EVERY * 5 if timeout is None else timeout)

    def force_stop(self) -> None:
        self.begin_close()

    def forget(self) -> None:
        """In a forked child: Ray's connection is the parent's; nothing here is used."""
        self._state = RayPoolState.STOPPED


_BEAT = Message(Heartbeat())


def _text(exc: BaseException, limit: int = 4000) -> str:
    """What Ray said, whole (its first line seldom names the cause), within ``limit``."""
    text = f"{type(exc).__name__}: {str(exc).strip()}"
    return text if len(text) <= limit else text[:limit] + " [...]"
