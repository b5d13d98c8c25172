"""The worker pools of one Driver in one process: one per backend, made on first use by
the ``Place`` the driver was given (processes here, or Ray actors: this room names
neither), sharing the run directory; probed for routing, closed together. Above both
shells and below routing: routing asks it for pools and probes, and keeps what a probe
apart found in the probe cache beside it (``probe_cache.py``). A forked child makes pools
of its own (``forget``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from vyre_core.boundary.messages import Ping
from vyre_core.contract.types import Capabilities
from vyre_core.deadline import NO_DEADLINE, Deadline
from vyre_core.errors import DispatchTimeoutError, PoolFailedError, VyreError
from vyre_core.probe_cache import ProbeCache
from vyre_core.registry import Registry
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.outcome import wait_first
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_core.supervisor.rundir import RunDir
from vyre_core.supervisor.shell import Place, PoolHandle, Spans

_log = logging.getLogger("vyre.supervisor")


def call_spans(backend: str, options: PoolOptions) -> Spans | None:
    """The spans a pool makes of its calls (None: tracing is off), handed to the pool:
    the shells take any ``Spans``, and never import observability themselves."""
    if not options.tracing:
        return None
    from vyre_core.observability.tracing import CallSpans

    return CallSpans(backend)


class Pools:
    """``place`` makes the pools (``supervisor.shell.Place``); ``options_for(backend)``
    gives a backend's PoolOptions; ``invalidate`` is called whenever a pool's capabilities
    or availability change (routing forgets its decisions). Without ``rundir`` one is made
    on the first pool, and ``on_late_rundir`` called then (a multiprocessing child must
    close its driver itself)."""

    def __init__(self, registry: Registry, place: Place,
                 options_for: Callable[[str], PoolOptions], invalidate: Callable[[], None],
                 rundir: RunDir | None, on_late_rundir: Callable[[], None]) -> None:
        self.registry = registry
        self.place = place
        self.rundir = rundir
        self.closed = False
        self._options_for = options_for
        self._invalidate = invalidate
        self._on_late_rundir = on_late_rundir
        self._lock = threading.Lock()
        self._pools: dict[str, PoolHandle] = {}
        self._listing: dict[str, threading.Lock] = {}  # per backend: its devices listed once
        self.probe_cache = ProbeCache.from_env() if place.keeps_probes else ProbeCache(None)

    def existing(self, backend: str) -> PoolHandle | None:
        return self._pools.get(backend)

    def all(self) -> list[PoolHandle]:
        with self._lock:
            return list(self._pools.values())

    def open(self, backend: str, deadline: Deadline = NO_DEADLINE) -> PoolHandle:
        """``backend``'s pool, made now if it has none (its workers start lazily; for
        ``devices="all"`` the backend's devices are listed first, by a process of its own,
        once, within ``deadline`` and the start-up bound)."""
        options = self._options_for(backend)
        devices = None
        if self._pools.get(backend) is None:
            self.place.check_usable()
        if options.devices == "all" and self._pools.get(backend) is None:
            with self._listing.setdefault(backend, threading.Lock()):
                if self._pools.get(backend) is None:  # (else another thread made it)
                    devices = self._all_devices(backend, options, deadline)
        with self._lock:
            if self.closed:
                raise PoolFailedError("the driver is closed", "Create a new vyre Driver.")
            pool = self._pools.get(backend)
            if pool is None:
                if self.rundir is None:
                    self.rundir = RunDir()
                    self._on_late_rundir()
                pool = self.place.make_pool(self.registry.get(backend), options,
                                            self._invalidate, f"p{len(self._pools)}",
                                            devices, self.rundir, call_spans(backend, options))
                self._pools[backend] = pool
            return pool

    def _all_devices(self, backend: str, options: PoolOptions,
                     deadline: Deadline) -> tuple[int, ...]:
        """Every device ``backend`` lists; device 0 alone when they cannot be listed (its
        worker then fails to start with the backend's own error, which routing sees).
        DispatchTimeoutError when the caller's deadline comes first (nothing is made)."""
        reg = self.registry.get(backend)
        if deadline.passed():
            raise _listing_timeout(backend, deadline)
        limit = deadline.bound(options.timeouts.startup)
        try:
            found = self.place.list_devices(backend, reg.entry_point.split(" = ")[0], limit)
        except VyreError as exc:
            if deadline.passed():
                raise _listing_timeout(backend, deadline) from exc
            _log.warning("pool %r: devices='all', but %s; running on device 0 alone",
                         backend, exc.cause)
            return (0,)
        _log.info("pool %r: one worker set per device: %s", backend,
                  ", ".join(f"{d.id} {d.name}" for d in found))
        return tuple(d.id for d in found)

    def probe(self, backend: str, deadline: Deadline) -> Capabilities:
        """What ``backend``'s worker probed, starting its pool if needed. A pool with one
        worker set per device is probed on each: the first answer is awaited as any call
        (bounded by ``deadline``, else by the workers' start-up and restarts), the others
        at most ``Timeouts.startup`` more, so that routing keeps no work off a device only
        because it started a little later, and a device that never starts delays only
        this first probe."""
        pool = self.open(backend, deadline)
        ping = Ping(f"routing probe of {backend!r}")
        pings = [pool.submit(Request(Call(ping, [], deadline=deadline,
                                          devices=None if d is None else frozenset({d}))))
                 for d in pool.unprobed_devices]
        waiting = set(pings)
        while waiting:  # the first answer: failures only when every device failed
            done, waiting = wait_first(waiting)
            if any(f.exception() is None for f in done):
                break
            if not waiting:
                raise next(iter(done)).exception()
        if waiting:
            wait_first(waiting, deadline.bound(pool.options.timeouts.startup), every=True)
        caps = pool.capabilities
        if caps is None:  # answered, yet no hello was recorded: cannot happen
            raise PoolFailedError(f"backend {backend!r} answered without saying hello",
                                  backend=backend)
        if self.can_probe_apart(backend):  # (its one probe: what the cache is of)
            self.probe_cache.store(self.registry.get(backend), caps)
        return caps

    def cooldown(self, backend: str) -> float:
        """How long routing passes ``backend`` over after it failed (its pool's cooldown)."""
        return self._options_for(backend).restart.cooldown

    def can_probe_apart(self, backend: str) -> bool:
        """Whether ``probe_apart`` can answer for ``backend``: its workers run on its
        preferred device (a pool that names devices probes each with its own workers)."""
        return self._options_for(backend).devices is None

    def probe_apart(self, backend: str, deadline: Deadline) -> Capabilities:
        """What a worker of ``backend`` would probe, without starting its pool: as kept in
        the probe cache, else asked of a short-lived process (here) or Ray task (on a
        cluster) that ends with its answer, which the cache then keeps. Bounded by
        ``deadline`` and the start-up bound; raises a VyreError saying why not."""
        reg = self.registry.get(backend)
        cached = self.probe_cache.load(reg)
        if cached is not None:
            return cached
        if deadline.passed():
            raise probe_expired(backend, deadline)
        limit = deadline.bound(self._options_for(backend).timeouts.startup)
        entry_point = reg.entry_point.split(" = ")[0]
        try:
            caps = self.place.probe_apart(backend, entry_point, limit)
        except VyreError as exc:
            if self.closed:
                raise PoolFailedError("the driver was closed while routing probed backend "
                                      f"{backend!r}", "Create a new vyre Driver.",
                                      backend=backend) from exc
            if deadline.passed():
                raise probe_expired(backend, deadline) from exc
            raise
        _log.info("routing probed %r apart (no pool started): %s", backend,
                  caps.extra.get("device") or caps.extra.get("description") or "its device")
        self.probe_cache.store(reg, caps)
        return caps

    def forget(self) -> list[PoolHandle]:
        """In a forked child: the parent's pools, never to be touched (nor collected:
        the caller keeps them)."""
        pools = list(self._pools.values())
        for pool in pools:
            pool.forget()
        return pools

    def close(self, timeout: float | None) -> bool:
        """Stop every pool (told first, then waited for, then forced), remove the run
        directory, let the place go. False when already closed."""
        with self._lock:
            if self.closed:
                return False
            self.closed = True
            pools = list(self._pools.values())
        self.place.stop_asking()
        try:
            for pool in pools:  # every pool told first: an interruption cannot skip one
                pool.begin_close()
            for pool in pools:
                pool.wait_closed(timeout)
        finally:
            for pool in pools:
                pool.begin_close()
                pool.force_stop()
            if self.rundir is not None:
                self.rundir.remove()
            self.place.close(any(p.running for p in pools))
        return True


def probe_expired(backend: str, deadline: Deadline) -> DispatchTimeoutError:
    """A call's deadline passed while routing probed ``backend`` (or waited for another
    thread's probe of it)."""
    return deadline.expired_error(
        f"routing probed backend {backend!r}",
        "Give the first call a longer timeout, or name the backend (backend=...).")


def _listing_timeout(backend: str, deadline: Deadline) -> DispatchTimeoutError:
    return deadline.expired_error(
        f"the devices of backend {backend!r} were being listed (devices='all')",
        "Give the first call a longer timeout, or name the device ids in "
        "PoolOptions(devices=[...]).")
