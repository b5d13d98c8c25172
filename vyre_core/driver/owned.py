"""What a Driver owns, and the parts of it that do not need the Driver's class.

``_Owned``: the parts of a Driver that outlive its last reference: its finalizer, atexit
and the pools' threads hold this, never the Driver, so a Driver dropped unclosed is still
collected and these then closed. This module never imports the Driver, so nothing here
can hold one by name; the functions that take a Driver keep no strong reference to it.

Here too: a Driver's making (``_started``: cluster, pools, routing, shadow, let go of when
a step fails), the state of one process (``_own_process``) and a fork's (``_forked``),
every live Driver (``_DRIVERS``) and the hooks that reach them when the process forks or
its main thread ends on an uncaught exception, ``_keeping`` (a handle holds its Driver),
``close``, ``status`` and ``metrics`` over the pools, and two small bases of the Driver:
``_Closing`` (``with`` and ``async with``) and ``_SharedArrays`` (``empty``, ``zeros``,
``asarray``)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

import numpy as np

from vyre_core import deprecations, lifetime, shared_arrays
from vyre_core.cluster import connect
from vyre_core.cluster.place import RayPlace
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Outputs
from vyre_core.deadline import checked_seconds
from vyre_core.driver.calls import _dispatched
from vyre_core.driver.pending import Background
from vyre_core.driver.resident import ResidentBuffer
from vyre_core.errors import InvalidConfigError, PoolFailedError
from vyre_core.pipeline import CompiledPipeline, CompiledSequence
from vyre_core.pools import Pools
from vyre_core.routing import RoutingPolicy
from vyre_core.shadow_sampler import Every, ShadowOptions, ShadowSampler, default_dir
from vyre_core.supervisor.local.place import LocalPlace
from vyre_core.supervisor.options import PoolOptions
from vyre_core.tuning.tuner import Tuner

if TYPE_CHECKING:
    from vyre_core.ir import Program
    from vyre_core.registry import Registry
    from vyre_core.supervisor.rundir import RunDir

_Handle = TypeVar("_Handle", CompiledPipeline, CompiledSequence, "ResidentBuffer")


class _Hooked(Protocol):
    """A Driver as the process's hooks see it (this room never imports the Driver)."""

    routing: RoutingPolicy

    def close(self, timeout: float | None = None) -> None: ...


_DRIVERS: weakref.WeakSet[_Hooked] = weakref.WeakSet()


def _invalidate_routing(driver: weakref.ref[_Hooked]) -> None:
    if (alive := driver()) is not None:
        alive.routing.router.invalidate()


def _keeping(driver: object, handle: _Handle) -> _Handle:
    """``handle``, holding ``driver``: a driver is closed once garbage-collected, and the
    handles it gave out (pipelines, resident buffers) keep it, and so their workers."""
    handle._driver = driver  # type: ignore[union-attr]
    return handle


class _Owned:
    """What a Driver owns and ``close()`` stops, apart from the Driver: its finalizer,
    atexit and the pools' threads hold this, never the Driver, so a dropped Driver is
    collected (and its finalizer closes this)."""

    pools: Pools

    def __init__(self, cluster: connect.RayCluster | None) -> None:
        self.owner_pid = os.getpid()
        self.cluster = cluster
        self.arrays = shared_arrays.SharedArrays()  # (Driver.empty's)
        self.shadow: ShadowSampler | None = None
        self._closing = threading.Lock()  # (a second close waits for the first to end)

    def close(self, timeout: float | None = None) -> None:
        """The shadow first (it needs the reference's pool), then the pools, then the
        cluster; every step runs even when one before it is interrupted."""
        if os.getpid() != self.owner_pid:
            return  # forked without Python's fork hooks: nothing here is this process's
        with self._closing:
            try:
                try:
                    if self.shadow is not None:
                        self.shadow.close(30.0 if timeout is None else timeout)
                finally:
                    try:
                        self.pools.close(timeout)
                    finally:
                        self.arrays.close()
                        if self.cluster is not None:
                            self.cluster.close()
            finally:
                atexit.unregister(self.close)

    def close_in_multiprocessing_child(self) -> None:
        """A multiprocessing child leaves with os._exit (no atexit): close there too."""
        from multiprocessing import util

        util.Finalize(None, _close_if_alive, args=(weakref.ref(self),), exitpriority=10)


def _close_if_alive(owned: weakref.ref[_Owned]) -> None:
    if (alive := owned()) is not None:
        alive.close()


def _options_for(per_backend: Mapping[str, PoolOptions], options: PoolOptions,
                 backend: str) -> PoolOptions:
    return per_backend.get(backend, options)


def _after_fork_in_child() -> None:
    for driver in list(_DRIVERS):
        _forked(driver)


def _on_uncaught_exit() -> None:
    """Runs when the main thread ends, before Python waits for other threads. After an
    uncaught exception (Ctrl-C, say), close every driver now: other threads' dispatches
    fail at once instead of keeping the interpreter alive."""
    if getattr(sys, "last_value", None) is None:
        return
    for driver in list(_DRIVERS):
        with contextlib.suppress(Exception):
            driver.close(timeout=1.0)


def _watch(driver: Any) -> None:
    """Dropped unclosed, this driver is closed by the reaper thread, with a
    ResourceWarning naming the line that made it (``lifetime.py``)."""
    driver._dropped = lifetime.watch(driver, driver._owned.close, "a vyre Driver",
                                     driver._made_at)


def _own_process(driver: Any, rundir: RunDir | None) -> None:
    """State that belongs to one process: made at construction, and made again in a
    forked child, which must never touch the parent's sockets, workers or locks."""
    driver._owner_pid = os.getpid()
    driver._background = Background()
    driver._tuner = Tuner(driver)
    # nothing the pools keep may refer to the Driver: their threads would keep it alive
    driver._owned = owned = _Owned(driver.cluster)
    place = LocalPlace() if driver.cluster is None else RayPlace(driver.cluster)
    driver.pools = owned.pools = Pools(
        driver.registry, place,
        functools.partial(_options_for, driver._backend_options, driver.options),
        functools.partial(_invalidate_routing, weakref.ref(driver)), rundir,
        owned.close_in_multiprocessing_child)
    atexit.register(owned.close)


def _forked(driver: Any) -> None:
    """A Driver inherited by a forked child: pools, threads and locks of its own."""
    # the parent's pools: kept (never collected, never used), across nested forks too
    driver._inherited = [*getattr(driver, "_inherited", []), *driver.pools.forget()]
    driver._shadow = None  # (its thread stayed in the parent)
    driver._dropped.detach()  # (the parent's parts: never closed here)
    _own_process(driver, None)  # (the run directory is made on first use in this process)
    driver.routing.attach(driver.pools)
    _watch(driver)


def _close(driver: Any, timeout: float | None) -> None:
    """``Driver.close``: in the process that owns ``driver`` only."""
    if os.getpid() != driver._owner_pid:
        return  # forked without Python's fork hooks: nothing here is this process's
    timeout = checked_seconds(timeout, "close timeout", zero=True)
    driver._dropped.detach()  # (closed by its user: no warning when collected)
    try:
        driver._owned.close(timeout)
    finally:
        if driver.pools.closed:  # queued routing fails fast now
            driver._background.shutdown()


def _status(pools: Pools, registry: Registry) -> dict[str, Any]:
    """``Driver.status``: every registered backend's pool, started or not."""
    started = {pool.backend: pool for pool in pools.all()}
    return {
        "closed": pools.closed,
        "pools": {reg.id: (started[reg.id].status() if reg.id in started
                           else {"backend": reg.id, "state": "not started", "workers": []})
                  for reg in registry.backends()},
        "broken_plugins": [{"name": b.name, "error": b.error} for b in registry.broken],
    }


def _metrics(pools: Pools) -> dict[str, Any]:
    """``Driver.metrics``: each started pool's, under the driver's name."""
    rundir = pools.rundir
    return {"driver": rundir.path.name if rundir is not None else str(os.getpid()),
            "pools": {pool.backend: pool.metrics() for pool in pools.all()}}


def _shadow_options(shadow: ShadowOptions | None, every: int | None,
                    directory: str | os.PathLike | None) -> ShadowOptions:
    """``Driver(shadow=...)``, or what the deprecated ``shadow_every=`` and ``shadow_dir=``
    say (warned; both forms at once refused)."""
    given = {name: value for name, value in (("shadow_every", every),
                                             ("shadow_dir", directory)) if value is not None}
    if shadow is not None and given:
        raise InvalidConfigError(
            f"Driver got shadow= and {'= and '.join(given)}= together",
            "Pass the shadow's options in one place: Driver(shadow=ShadowOptions(every=N, "
            "dir=...)).")
    for name in given:
        deprecations.enforce(deprecations.of_kind("call")[f"Driver({name}=)"],
                             "this program", InvalidConfigError)
    if shadow is None:
        return ShadowOptions(every, directory)
    if not isinstance(shadow, ShadowOptions):
        raise InvalidConfigError(f"Driver(shadow={shadow!r}) is not a ShadowOptions",
                                 "Pass Driver(shadow=ShadowOptions(every=N)), or leave it "
                                 "out.")
    return shadow


def _shadow_plan(registry: Registry, every: int) -> tuple[Every, str]:
    """The sampling rule and the reference backend's id, or the error saying why not."""
    rule = Every(every)
    reference = next((r.id for r in registry.backends() if r.is_reference), None)
    if reference is None:
        raise InvalidConfigError("ShadowOptions(every=...) needs the reference backend, "
                                 "which is not loaded", "Install vyre-reference, or leave "
                                 "Driver(shadow=...) out.")
    return rule, reference


def _shadow_sampler(driver: weakref.ref[Any], rule: Every, reference: str,
                    directory: str | os.PathLike | None) -> ShadowSampler:
    """The sampler, holding its driver weakly (the sampler's thread must not keep the
    Driver alive)."""
    def run_reference(program: Program, inputs: Sequence[Any],
                      config: DispatchConfig) -> Outputs:
        alive = driver()
        if alive is None:
            raise PoolFailedError("the driver was dropped", "Close the driver after "
                                  "the dispatches it shadows.")
        return _dispatched(alive.routing, alive._plans, program, inputs, reference, config,
                           None, None)

    return ShadowSampler(rule, Path(directory) if directory else default_dir(),
                         run_reference)


def _started(driver: Any, spec: connect.ClusterSpec, rundir_made: Callable[[], RunDir],
             options: ShadowOptions) -> None:
    """What a new Driver makes (its cluster, pools, routing and shadow), or, when a step
    fails, none of it."""
    # checked before the run directory exists; its thread starts last, when nothing
    # after it can fail and leave it behind
    shadow = None if options.every is None else _shadow_plan(driver.registry, options.every)
    driver._shadow = None
    driver.cluster = None
    rundir = rundir_made()
    try:  # (what was made is let go of when a later step fails)
        driver.cluster = None if spec.local else connect.RayCluster(spec)
        _own_process(driver, rundir)
        driver.routing = RoutingPolicy(driver.registry, driver.pools)
        if shadow is not None:
            driver._shadow = driver._owned.shadow = _shadow_sampler(
                weakref.ref(driver), *shadow, options.dir)
    except BaseException:
        if driver.cluster is not None:
            driver.cluster.close()
        rundir.remove()
        with contextlib.suppress(AttributeError):  # (made by _own_process)
            atexit.unregister(driver._owned.close)
        raise


class _Closing:
    """A Driver as a context manager (``with``, ``async with``): closed on the way out."""

    close: Callable[..., None]  # (the Driver's)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """``close()`` on a worker thread: stopping workers waits (up to their kill grace),
        and the event loop must keep running meanwhile."""
        import asyncio

        await asyncio.to_thread(self.close)


class _SharedArrays:
    """A Driver's arrays in shared memory (``shared_arrays.py``, held by ``_Owned``)."""

    _owned: _Owned

    def empty(self, shape: int | Sequence[int], dtype: Any = np.float64) -> np.ndarray:
        """A writable numpy array in shared memory (zero-filled, as ``np.zeros``): passed to
        a dispatch, launch or sequence of any open Driver of this process, it crosses
        without a copy (its descriptor travels), and as an output (``out=``, a launch's
        written argument) it is written in place by the worker. Under 64 KiB, or without
        shared memory, it is an ordinary array. Its lifetime rules: docs/operations.md,
        "Arrays in shared memory". Such an array keeps its driver, as a pipeline does."""
        return self._owned.arrays.empty(shape, dtype, self)

    def zeros(self, shape: int | Sequence[int], dtype: Any = np.float64) -> np.ndarray:
        """``empty``: its memory is always zero-filled when made."""
        return self._owned.arrays.empty(shape, dtype, self)

    def asarray(self, data: Any, dtype: Any = None) -> np.ndarray:
        """``data`` in shared memory (``empty``): itself when it already is an open one
        of this ``dtype``, else a copy."""
        return self._owned.arrays.asarray(data, dtype, self)
