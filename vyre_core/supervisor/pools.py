"""The worker pools of one Driver in one process: one per backend, made on first use,
with the run directory, the zmq context and the hello secret they share; probed for
routing, closed together. A forked child makes pools of its own (``forget``)."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable

import zmq

from vyre_core.contract.types import Capabilities
from vyre_core.errors import PoolFailedError
from vyre_core.protocol import Op
from vyre_core.registry import Registry
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.pool import Pool, Request
from vyre_core.supervisor.rundir import RunDir


class Pools:
    """``options_for(backend)`` gives a backend's PoolOptions; ``invalidate`` is called
    whenever a pool's capabilities or availability change (routing forgets its
    decisions). Without ``rundir`` one is made on the first pool, and ``on_late_rundir``
    called then (a multiprocessing child must close its driver itself)."""

    def __init__(self, registry: Registry, options_for: Callable[[str], PoolOptions],
                 invalidate: Callable[[], None], rundir: RunDir | None,
                 on_late_rundir: Callable[[], None]) -> None:
        self.registry = registry
        self.rundir = rundir
        self.closed = False
        self._options_for = options_for
        self._invalidate = invalidate
        self._on_late_rundir = on_late_rundir
        self._lock = threading.Lock()
        self._pools: dict[str, Pool] = {}
        self._secret = secrets.token_bytes(32)  # workers prove it in their hello
        self._zmq: zmq.Context | None = None

    def existing(self, backend: str) -> Pool | None:
        return self._pools.get(backend)

    def all(self) -> list[Pool]:
        with self._lock:
            return list(self._pools.values())

    def open(self, backend: str) -> Pool:
        """``backend``'s pool, made now if it has none (its workers start lazily)."""
        with self._lock:
            if self.closed:
                raise PoolFailedError("the driver is closed", "Create a new vyre Driver.")
            pool = self._pools.get(backend)
            if pool is None:
                if self.rundir is None:
                    self.rundir = RunDir()
                    self._on_late_rundir()
                pool = self._pools[backend] = Pool(
                    self.registry.get(backend), self.rundir, f"p{len(self._pools)}",
                    self._options_for(backend), self._invalidate, self._secret,
                    self._zmq_context)
            return pool

    def probe(self, backend: str, deadline: float | None,
              timeout: float | None = None) -> Capabilities:
        """What ``backend``'s worker probed, starting its pool if needed."""
        pool = self.open(backend)
        if pool.capabilities is None:
            pool.call(Request(Op.PING, {"label": f"routing probe of {backend!r}"}, [],
                              deadline=deadline, timeout=timeout))
        caps = pool.capabilities
        if caps is None:  # answered, yet no hello was recorded: cannot happen
            raise PoolFailedError(f"backend {backend!r} answered without saying hello",
                                  backend=backend)
        return caps

    def forget(self) -> list[Pool]:
        """In a forked child: the parent's pools, never to be touched (nor collected:
        the caller keeps them)."""
        pools = list(self._pools.values())
        for pool in pools:
            pool.forget()
        return pools

    def close(self, timeout: float | None) -> bool:
        """Stop every pool (told first, then waited for, then forced), remove the run
        directory, end the zmq context. False when already closed."""
        with self._lock:
            if self.closed:
                return False
            self.closed = True
            pools = list(self._pools.values())
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
            if self._zmq is not None and not any(p.running for p in pools):
                self._zmq.term()  # (a pool thread still running keeps it: term would wait)
        return True

    def _zmq_context(self) -> zmq.Context:
        """The driver's one zmq context (its I/O thread starts with the first socket)."""
        with self._lock:
            if self._zmq is None:
                self._zmq = zmq.Context()
            return self._zmq
