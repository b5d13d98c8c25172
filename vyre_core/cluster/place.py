"""``RayPlace``: workers as Ray actors on the driver's cluster (``connect.RayCluster``,
which the driver makes, shares and lets go of). Probes are never kept between processes
here: a cluster's nodes may change under a cached answer."""

from __future__ import annotations

from collections.abc import Callable

from vyre_core.cluster.connect import RayCluster
from vyre_core.cluster.ray_pool import RayPool
from vyre_core.contract.types import Capabilities, DeviceInfo
from vyre_core.registry import BackendRegistration
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.published import SUFFIX
from vyre_core.supervisor.rundir import RunDir
from vyre_core.supervisor.shell import Spans


class RayPlace:
    """A ``supervisor.shell.Place`` for Ray actors on ``cluster``."""

    keeps_probes = False

    def __init__(self, cluster: RayCluster) -> None:
        self.cluster = cluster

    def make_pool(self, registration: BackendRegistration, options: PoolOptions,
                  on_change: Callable[[], None], name: str, devices: tuple[int, ...] | None,
                  rundir: RunDir, spans: Spans | None) -> RayPool:
        return RayPool(registration, self.cluster, options, on_change,
                       rundir.path / f"{name}{SUFFIX}", devices, spans=spans)

    def list_devices(self, backend: str, entry_point: str,
                     timeout: float) -> list[DeviceInfo]:
        return self.cluster.list_devices(backend, entry_point, timeout)

    def probe_apart(self, backend: str, entry_point: str, timeout: float) -> Capabilities:
        return self.cluster.probe_apart(backend, entry_point, timeout)

    def check_usable(self) -> None:
        self.cluster.check_usable()  # (a forked child's cluster is its parent's)

    def stop_asking(self) -> None:
        """(A Ray task asked ends with its answer or its timeout; nothing runs here.)"""

    def close(self, pools_running: bool) -> None:
        """(The cluster is the driver's: it lets go of it after its pools.)"""
