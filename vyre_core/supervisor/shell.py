"""What the two shells share: the ``Shell`` protocol each implements, the ``Spans`` it is
handed, the ``Carrier`` (the one dispatcher of the rules' actions), and what the set of
pools above them (``vyre_core/pools.py``) sees: a ``PoolHandle`` per backend, made by the
``Place`` it is given (``local/place.py``: worker processes here; ``cluster/place.py``:
Ray actors), so that the set of pools never names either shell. A room of its own
because the rules (``rules/``) answer every event with actions, and the local pool
(``local/``) and the Ray pool (``cluster/ray_pool.py``) must carry out each kind the same
way where it is the same work: a reply resolved (its future, its count, its span),
routing told before any caller goes on, a log line, a failed action answered. Each shell
keeps what is its own (the local pool's I/O thread, lanes, fork server and shared memory;
the Ray pool's thread, actors, heartbeats and placement) behind the protocol's methods."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import InvalidStateError
from typing import TYPE_CHECKING, Any, Protocol

from vyre_core.errors import as_vyre_error
from vyre_core.supervisor.lane import interrupts_deferred
from vyre_core.supervisor.outcome import Outcome
from vyre_core.supervisor.rules.actions import (
    Action,
    Log,
    Promote,
    Release,
    Resolve,
    RoutingChanged,
    Send,
    Signal,
    Spawn,
    Stop,
)
from vyre_core.supervisor.rules.machine import PoolMachine
from vyre_core.supervisor.rules.requests import Request

if TYPE_CHECKING:
    from vyre_core.contract.types import Capabilities, DeviceInfo
    from vyre_core.registry import BackendRegistration
    from vyre_core.supervisor.options import PoolOptions
    from vyre_core.supervisor.rundir import RunDir

_log = logging.getLogger("vyre.supervisor")


class Spans(Protocol):
    """The spans a pool makes of its calls (``observability/tracing.py``'s ``CallSpans``
    when ``PoolOptions.tracing``), made by whoever makes the pool and handed to it, so the
    supervisor never imports observability."""

    def begin(self, request: Request) -> None:
        """(The caller's thread.) ``request``'s span starts now."""

    def answered(self, request: Request, value: Any) -> None:
        """(Under the pool's lock.) ``request`` is answered with ``value``."""

    def flush(self) -> None:
        """(Outside the lock, the callers answered.) Make the spans answered so far."""


class Shell(Protocol):
    """Carries out what the rules decide, on the thread that holds the rules' lock; the
    ``Carrier`` calls one method per kind of action."""

    backend: str

    def spawn(self, action: Spawn) -> None:
        """Start a worker for ``action.index``; the shell tells the rules how it went."""

    def send(self, action: Send) -> object | None:
        """Send a request; a ticket its caller may wait on (Ray), or None."""

    def stop(self, action: Stop) -> None:
        """Ask a worker to stop a request at its next safe point."""

    def signal(self, action: Signal) -> None:
        """Terminate or kill a worker."""

    def promote(self, action: Promote) -> None:
        """A spare serves a slot now: move what the shell keeps per worker."""

    def release(self, request: Request) -> None:
        """No worker can write ``request``'s memory any more: reuse it."""

    def reply_of(self, request: Request, value: Any) -> Any:
        """What ``request``'s caller gets for the rules' answer ``value``."""

    def action_failed(self, action: Action, exc: Exception) -> None:
        """Carrying out ``action`` raised ``exc`` (a bug, or out of a resource): log it,
        and tell the rules what they must know, so no caller is stranded."""


class Carrier:
    """Carries the rules' actions out through a ``Shell`` (on the thread that holds the
    rules' ``lock``), and hands the answers over (``deliver``, outside the lock): routing
    is told first (``on_change``), then each answered outcome completes. ``log`` is the
    logger of the rules' ``Log`` actions."""

    def __init__(self, shell: Shell, machine: PoolMachine,
                 lock: threading.Lock | threading.RLock, on_change: Callable[[], None],
                 spans: Spans | None, log: logging.Logger = _log) -> None:
        self.shell = shell
        self.machine = machine
        self.lock = lock
        self.on_change = on_change
        self.spans = spans
        self.log = log
        self.resolved: list[tuple[Outcome, Any]] = []  # answered, for ``deliver``
        self.changed = False                           # routing to be told, before them

    def carry(self, actions: list[Action], own: object | None = None) -> object | None:
        """(Locked.) Carry out ``actions``, each whole or not at all: one that fails goes
        to the shell's ``action_failed``, and the rest are carried out still. The ticket
        of the send of the caller ``own`` (its ``request.transfer.waker``) is returned, for that
        caller to take its reply (Ray); else None."""
        mine = None
        for action in actions:
            try:
                match action:
                    case Resolve():
                        self._resolve(action)
                    case Send():
                        ticket = self.shell.send(action)
                        if ticket is not None and own is not None \
                                and action.request.transfer.waker is own:
                            mine = ticket
                    case Spawn():
                        self.shell.spawn(action)
                    case Stop():
                        self.shell.stop(action)
                    case Signal():
                        self.shell.signal(action)
                    case Promote():
                        self.shell.promote(action)
                    case Release():
                        self.shell.release(action.request)
                    case Log():
                        self.log.log(action.level, action.text)
                    case RoutingChanged():
                        self.changed = True  # told in deliver, before outcomes complete
                    case _:
                        raise TypeError(f"no case for the action {action!r}")
            except Exception as exc:  # never strand a caller on a failed action
                self.shell.action_failed(action, exc)
        return mine

    def carry_all(self, actions: list[Action], own: object | None = None) -> object | None:
        """(Locked.) ``carry``, then whatever the rules answered to that, until they
        answer nothing more."""
        mine = self.carry(actions, own)
        while actions:
            actions = self.machine.take_actions()
            found = self.carry(actions, own)
            mine = mine or found
        return mine

    def _resolve(self, action: Resolve) -> None:
        request = action.request
        future, request.call.future = request.call.future, None
        try:
            value = self.shell.reply_of(request, action.value)
        except Exception as exc:  # a bug: the caller gets it, never a wait
            value = as_vyre_error(exc, f"pool {self.shell.backend!r} reading a reply")
        if future is not None:
            self.resolved.append((future, value))
        self.answered(request, value)
        if not action.running:  # (else its worker may still write there: a Release follows)
            try:
                self.shell.release(request)
            except Exception as exc:  # (the answer is queued: only the memory is at stake)
                self.shell.action_failed(Release(request), exc)

    def answered(self, request: Request, value: Any) -> None:
        """(Locked, once ``request``'s answer is queued for its caller.) Count it, and
        note its span's end; counting never changes or holds up an answer."""
        try:
            self.machine.answered(request, value, time.monotonic())
        except Exception as exc:  # (a bug: logged, the answer goes out as it is)
            _log.error("pool %r: counting %s failed", self.shell.backend, request.label,
                       exc_info=exc)
        if self.spans is not None:
            self.spans.answered(request, value)

    def deliver(self) -> None:
        """Outside the lock: tell routing if it must decide again, then complete the
        outcomes the rules answered, in that order, so no caller goes on on a stale
        routing decision. Completing an outcome never blocks (``outcome.py``); one its
        caller cancelled meanwhile stays cancelled. On the main thread a Ctrl-C inside
        waits till every one is complete, or their callers would wait on. (Every thread
        that queues an answer or a change delivers after it, so a look without the lock
        that finds none may return: most passes of the I/O thread answer nothing.)"""
        if not self.resolved and not self.changed and self.spans is None:
            return
        with interrupts_deferred():
            with self.lock:
                resolved, self.resolved = self.resolved, []
                changed, self.changed = self.changed, False
            if changed:
                self.on_change()
            for future, value in resolved:
                with contextlib.suppress(InvalidStateError):  # cancelled by its caller
                    if isinstance(value, BaseException):
                        future.set_exception(value)
                    else:
                        future.set_result(value)
        if self.spans is not None:
            self.spans.flush()


class PoolHandle(Protocol):
    """One backend's pool as routing, the set of pools and the Driver use it, whichever
    shell carries it (``local.pool.Pool``, ``cluster.ray_pool.RayPool``): the caller's
    side and the read side (``facts.PoolFacts``, which both inherit)."""

    backend: str
    registration: BackendRegistration
    options: PoolOptions

    def submit(self, request: Request) -> Outcome:
        """Queue ``request``; its outcome completes with the reply or the error."""

    def call(self, request: Request) -> tuple[dict[str, Any], list[Any]]:
        """``submit``, then wait for the reply (bounded by the request's deadline)."""

    @property
    def capabilities(self) -> Capabilities | None:
        """What the workers probed (None before the first hello)."""

    @property
    def device_capabilities(self) -> dict[int | None, Capabilities]:
        """Per device, what its workers probed."""

    @property
    def device_variants(self) -> dict[int | None, tuple[Capabilities, ...]]:
        """Per device, every distinct record its workers reported."""

    @property
    def varied(self) -> bool:
        """Whether the devices reported different capabilities."""

    @property
    def pinned(self) -> bool:
        """Whether the pool runs one worker set per named device."""

    def device_of(self, slot: int) -> int | None:
        """The device worker slot ``slot`` runs on."""

    @property
    def devices(self) -> list[DeviceInfo]:
        """The devices the workers reported."""

    @property
    def unprobed_devices(self) -> list[int | None]:
        """The devices no worker has said hello from yet."""

    def holds(self, slot: int, generation: int) -> bool:
        """Whether the worker ``slot`` of ``generation`` still lives (its handles hold)."""

    def unavailable(self) -> str | None:
        """Why the pool serves nothing now (failed, closed), or None."""

    def metrics(self) -> dict[str, Any]:
        """What the pool counted (docs/operations.md)."""

    def status(self) -> dict[str, Any]:
        """The pool's workers, their states and requests."""

    @property
    def running(self) -> bool:
        """Whether the pool's own thread still runs."""

    def begin_close(self) -> None:
        """Tell every worker to stop; returns at once."""

    def wait_closed(self, timeout: float | None = None) -> None:
        """Wait (within ``timeout``) for what ``begin_close`` started."""

    def force_stop(self) -> None:
        """Kill what is still running; never blocks for long."""

    def forget(self) -> None:
        """(A forked child.) Never touch the parent's workers."""


class Place(Protocol):
    """Where a driver's workers run, given to the set of pools (``vyre_core/pools.py``),
    which never imports a shell: it makes each backend's pool, and asks short-lived
    processes (or Ray tasks) what a backend would probe or list, without a pool."""

    #: Whether probes may be kept between processes (the probe cache): on this machine
    #: only; a cluster's nodes may change under it.
    keeps_probes: bool

    def make_pool(self, registration: BackendRegistration, options: PoolOptions,
                  on_change: Callable[[], None], name: str, devices: tuple[int, ...] | None,
                  rundir: RunDir, spans: Spans | None) -> PoolHandle:
        """A new pool for ``registration`` (its workers start lazily); ``name`` is unique
        among the driver's pools, ``on_change`` tells routing to decide again."""

    def list_devices(self, backend: str, entry_point: str,
                     timeout: float) -> list[DeviceInfo]:
        """``backend``'s devices, listed apart within ``timeout`` seconds; raises a
        VyreError saying why not."""

    def probe_apart(self, backend: str, entry_point: str, timeout: float) -> Capabilities:
        """What a worker of ``backend`` would probe, asked apart within ``timeout``."""

    def check_usable(self) -> None:
        """Raise a VyreError with a Fix where no pool can be made here now."""

    def stop_asking(self) -> None:
        """End the processes ``list_devices`` and ``probe_apart`` started, and any
        started after (the driver is closing)."""

    def close(self, pools_running: bool) -> None:
        """Let go of what the place holds, once its pools are closed (``pools_running``:
        a pool's thread still runs, and may still use it)."""
