"""The parts of a Driver that outlive its last reference: its finalizer, atexit and the
pools' threads hold these, never the Driver, so a Driver dropped unclosed is still
collected and these then closed. A module that never imports the Driver keeps that rule
checkable: nothing here can hold one."""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from collections.abc import Mapping

from vyre_core import shared_arrays
from vyre_core.cluster import connect
from vyre_core.shadow_sampler import ShadowSampler
from vyre_core.supervisor.pool import PoolOptions
from vyre_core.supervisor.pools import Pools


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
