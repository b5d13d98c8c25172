"""Every routing decision of a Driver in one place: rank the candidates (``rank.Router``
over static claims, or what a started pool probed), probe a backend before committing
to it on claims alone, pass over a pool that failed and a backend that refused this
work, and fall over to the next capable backend when a call fails that way. Every Driver
call (dispatch, dispatch_async, compile, sequences, route, explain) goes through it."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from vyre_core.contract.types import Capabilities
from vyre_core.errors import (
    DispatchTimeoutError,
    NoCapableBackendError,
    PoolFailedError,
    UnsupportedFeatureError,
    VyreError,
)
from vyre_core.pools import probe_expired
from vyre_core.routing.rank import Candidate, Explanations, RouteDecision, Router, demotable
from vyre_core.sequence import Sequence as StepSequence

if TYPE_CHECKING:
    from vyre_core.deadline import Deadline
    from vyre_core.registry import Registry
    from vyre_core.routing.rank import Routable
    from vyre_core.supervisor.rules.requests import Request
    from vyre_core.supervisor.shell import PoolHandle

Reply = tuple[dict[str, Any], list[Any]]
_log = logging.getLogger("vyre.routing")


class PoolSource(Protocol):
    """What routing needs of the pools (``pools.Pools``)."""

    @property
    def closed(self) -> bool: ...

    def existing(self, backend: str) -> PoolHandle | None: ...

    def open(self, backend: str) -> PoolHandle: ...

    def probe(self, backend: str, deadline: Deadline) -> Capabilities: ...

    def can_probe_apart(self, backend: str) -> bool: ...

    def probe_apart(self, backend: str, deadline: Deadline) -> Capabilities: ...

    def cooldown(self, backend: str) -> float: ...


class RoutingPolicy:
    """Routing decisions over ``registry``'s backends and the pools of ``pools``."""

    def __init__(self, registry: Registry, pools: PoolSource) -> None:
        self.registry = registry
        self.pools = pools
        self._lock = threading.Lock()
        # work fingerprint -> {backend: its refusal}: routing passes over these
        self._refusals: dict[str, dict[str, str]] = {}
        # backends probed apart (no pool of theirs started), and those whose probe failed
        self._apart: dict[str, Capabilities] = {}
        self._apart_failed: dict[str, tuple[str, float]] = {}  # (why, monotonic time)
        self._probing: dict[str, threading.Lock] = {}
        self.router = Router(self._candidates, self._skip)

    def attach(self, pools: PoolSource) -> None:
        """Route over other pools (a forked child's own): cached decisions are dropped,
        what backends refused is kept."""
        self.pools = pools
        self._probing = {}  # (a lock a parent's thread held at the fork stays held)
        self.router = Router(self._candidates, self._skip)

    # -- questions ----------------------------------------------------------------------

    def route(self, work: Routable, backend: str | None, deadline: Deadline) -> RouteDecision:
        """The backend a call would use, its pool started and probed as the call would."""
        self.pool_for(work, backend, deadline)
        return self.router.route(work, backend)

    def explain(self, work: Routable, deadline: Deadline) -> Explanations:
        """Every backend, accepted or why not, after probing the winner as a call would;
        also when none can run it."""
        with contextlib.suppress(NoCapableBackendError):
            self.pool_for(work, None, deadline)
        return self.router.explain(work)

    # -- a routed call --------------------------------------------------------------------

    def call(self, work: Routable, backend: str | None,
             make_request: Callable[[PoolHandle], Request],
             deadline: Deadline) -> tuple[PoolHandle, Request, Reply]:
        """Run a request (built for the pool that serves it) on the routed backend, routing
        again after a failure that allows it (``again``). Returns the pool, the request
        that ran, and its reply."""
        while True:
            pool = None
            request = None
            try:
                pool = self.pool_for(work, backend, deadline)
                request = self.place(make_request(pool), work, backend, pool)
                return pool, request, pool.call(request)
            except (PoolFailedError, UnsupportedFeatureError) as exc:
                if not self.again(exc, work, backend, pool, request):
                    if isinstance(exc, UnsupportedFeatureError) and backend is not None:
                        raise self._elsewhere(exc, work, backend) from None
                    raise

    def _elsewhere(self, exc: UnsupportedFeatureError, work: Routable,
                   backend: str) -> UnsupportedFeatureError:
        """A named backend's refusal, its Fix naming the backends that can run all of
        ``work`` (a backend's own message cannot know them)."""
        others = self.router.capable_elsewhere(work, backend)
        if not others:
            return exc
        return UnsupportedFeatureError(
            exc.cause, f"Name {' or '.join(others)} as the backend (their claims accept "
            f"every {'step' if isinstance(work, StepSequence) else 'operation'}), or leave "
            f"backend out: routing then passes {backend!r} over for it.", **exc.details)

    def again(self, exc: BaseException, work: Routable, backend: str | None,
              pool: PoolHandle | None, request: Request | None = None) -> bool:
        """Whether a routed call that failed with ``exc`` on ``pool`` may be routed again:
        its pool failed (fall over to the next capable backend), or its backend refused
        this work (remembered: routing passes it over for this work from now; on the
        device that refused, when ``request`` ran on a pool with devices). Never when the
        backend was named."""
        if backend is not None:
            return False
        if isinstance(exc, PoolFailedError):
            failed = self.pools.existing(exc.details.get("backend", ""))
            again = (not self.pools.closed and failed is not None
                     and failed.unavailable() is not None)
            if again:
                _log.info("program %s: the pool of %r failed; falling over to the next "
                          "capable backend", work.fingerprint()[:12], failed.backend)
            return again
        if isinstance(exc, UnsupportedFeatureError) and pool is not None:
            served = None if request is None else request.tracking.served_by
            device = pool.device_of(served[0]) if served is not None else None
            why = exc.cause.splitlines()[0]
            with self._lock:
                self._refusals.setdefault(work.fingerprint(), {}).setdefault(
                    pool.backend, {})[device] = why
            self.router.invalidate()  # (decisions naming that device are made again)
            _log.info("program %s: %r%s refused it (%s); routing passes it over for this "
                      "program and falls over", work.fingerprint()[:12], pool.backend,
                      "" if device is None else f" on device {device}", why)
            return True
        return False

    def place(self, request: Request, work: Routable, backend: str | None,
              pool: PoolHandle) -> Request:
        """``request`` limited to the devices of ``pool`` that can run ``work``, for a pool
        with one worker set per device (the decision is cached), and to the workers whose
        own probe accepts it, where workers of one device probed unlike (unlike nodes)."""
        if request.call.slot is None and (pool.pinned or pool.varied):
            try:
                decision = self.router.route(work, backend)
            except VyreError:  # (its pool failed meanwhile: it answers with its own error)
                return request
            if decision.backend != pool.backend:
                return request
            if decision.devices is not None:
                request.call.devices = frozenset(decision.devices)
            if pool.varied:
                accepted = self.router.capable(work, pool.device_variants, request.call.devices)
                request.call.capable = None if accepted is None else frozenset(
                    c.identity for c in accepted)  # (none: the pool answers at once)
        return request

    def decide(self, work: Routable, backend: str | None) -> tuple[PoolHandle | None, list[str]]:
        """One routing decision that never blocks: the pool to run ``work`` on, or the
        backends to probe before deciding again (``pool_for`` probes them)."""
        pool, apart, start = self._decide(work, backend)
        return pool, apart + start

    def _decide(self, work: Routable,
                backend: str | None) -> tuple[PoolHandle | None, list[str], list[str]]:
        """The pool to run ``work`` on; else the backends to probe apart (those ranked
        ahead of the choice, and the choice itself when a probe could demote it, never
        probed: routing may pass them over, so no pool of theirs is started) and the one
        to start and probe with its own pool (the choice, once it stands on probed facts:
        the work will run there). Backends never probed are judged on their static claims,
        a floor (a software adapter, say, is demoted below the reference once probed)."""
        if self.pools.closed:
            raise PoolFailedError("the driver is closed", "Create a new vyre Driver.")
        if backend is not None:
            named = self.pools.existing(backend)
            if named is not None and named.unavailable() is not None:
                return named, [], []  # its pool answers with its own error, and when to retry
        try:
            chosen = self.router.route(work, backend).backend
        except NoCapableBackendError:
            if backend is not None:  # a named backend is judged on its probe, not its claims
                if self.pools.existing(backend) is None:
                    return None, [], [backend]
                raise
            ahead = self._unprobed_ahead(None)
            if not ahead:
                raise
            return None, ahead, []
        # (the choice itself too, when a probe could demote it: claims are a floor, so
        # only a demotion can turn routing away from a backend its claims chose)
        apart = [] if backend is not None else self._unprobed_ahead(chosen) + [
            name for name in (chosen,)
            if self._unprobed(name) and demotable(self.registry.backends(), name)]
        if apart:
            return None, apart, []  # (the choice may change: started once it stands)
        if self.pools.existing(chosen) is None:
            return None, [], [chosen]
        return self.pools.open(chosen), [], []

    def pool_for(self, work: Routable, backend: str | None, deadline: Deadline) -> PoolHandle:
        """The pool to run ``work`` on, probing backends first as ``_decide`` asks."""
        while True:
            pool, apart, start = self._decide(work, backend)
            if pool is not None:
                return pool
            for name in apart:
                self._probe_apart(name, deadline)
            for name in start:
                try:
                    self.pools.probe(name, deadline)  # its hello: decide again
                except PoolFailedError as exc:
                    if self.pools.closed or backend is not None:
                        raise  # a named backend's failure is the caller's answer
                    # it never started: routing skips the failed pool now; decide again
                    _log.info("%r could not start (%s); routing passes it over", name,
                              exc.cause.splitlines()[0])

    def _probe_apart(self, name: str, deadline: Deadline) -> None:
        """Learn what ``name`` can do without keeping a worker of it: probed apart (a
        short-lived process, or the probe cache), or, for a pool that names its devices,
        by starting its pool as before. One thread probes a backend at a time (the others
        wait for its answer, within their deadline); a failure is remembered (routing
        passes the backend over) for its pool's cooldown."""
        with self._lock:
            probing = self._probing.setdefault(name, threading.Lock())
        left = deadline.left()
        if not probing.acquire(timeout=-1 if left is None else left):
            raise probe_expired(name, deadline)
        try:
            if not self._unprobed(name):
                return  # (another thread probed it meanwhile)
            if not self.pools.can_probe_apart(name):
                self.pools.probe(name, deadline)
                return
            caps = self.pools.probe_apart(name, deadline)
        except DispatchTimeoutError:
            raise  # the caller's deadline: its answer, nothing learnt of the backend
        except VyreError as exc:
            if self.pools.closed:
                raise
            why = exc.cause.splitlines()[0]
            with self._lock:
                self._apart_failed[name] = (why, time.monotonic())
            _log.info("%r could not be probed (%s); routing passes it over", name, why)
        else:
            with self._lock:
                self._apart[name] = caps
                self._apart_failed.pop(name, None)
        finally:
            probing.release()
        self.router.invalidate()

    # -- inside ---------------------------------------------------------------------------

    def _candidates(self) -> list[Candidate]:
        """Each backend with what its pool probed (per device when it runs one worker set
        per device: only the devices probed so far), else what it probed apart, else its
        static claims."""
        found = []
        for reg in self.registry.backends():
            pool = self.pools.existing(reg.id)
            probed = pool.device_capabilities if pool is not None else {}
            if not probed:
                found.append(Candidate(reg, self._apart.get(reg.id, reg.claims)))
                continue
            variants = pool.device_variants if pool.varied else {}
            for device, caps in probed.items():  # (unlike workers: routing takes any one)
                found.extend(Candidate(reg, each, device)
                             for each in variants.get(device) or (caps,))
        return found

    def _skip(self, backend: str, fingerprint: str, device: int | None) -> str | None:
        """Why routing must pass ``backend`` (on ``device``; None: as a whole) over for
        this work: its pool failed, or it refused the work there."""
        pool = self.pools.existing(backend)
        unavailable = pool.unavailable() if pool is not None else None
        if unavailable is not None:
            return unavailable
        failed = self._apart_failed.get(backend) if pool is None else None
        if failed is not None and self._failed_recently(backend, failed[1]):
            return f"it could not be probed: {failed[0]}"
        refused = self._refusals.get(fingerprint, {}).get(backend, {})
        refusal = refused.get(device) or refused.get(None)
        return None if refusal is None else f"it refused this program at compile: {refusal}"

    def _unprobed_ahead(self, chosen: str | None) -> list[str]:
        """Backends ranked ahead of ``chosen`` (all, for None) never probed."""
        ahead = []
        for reg in self.registry.backends():
            if reg.id == chosen:
                break
            if self._unprobed(reg.id):
                ahead.append(reg.id)
        return ahead

    def _unprobed(self, backend: str) -> bool:
        """Never probed: no pool, no probe apart, no failed probe within its cooldown."""
        failed = self._apart_failed.get(backend)
        return (self.pools.existing(backend) is None and backend not in self._apart
                and (failed is None or not self._failed_recently(backend, failed[1])))

    def _failed_recently(self, backend: str, when: float) -> bool:
        """Whether a probe that failed at ``when`` still bars ``backend`` (its cooldown)."""
        return time.monotonic() - when < self.pools.cooldown(backend)
