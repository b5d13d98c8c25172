"""What routing and the Driver read of a pool, answered from its rules (``PoolMachine``)
the same way whichever I/O shell runs it: worker processes here (``local/``) or Ray
actors (``cluster/ray_pool.py``)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from vyre_core.contract.types import Capabilities, DeviceInfo
from vyre_core.supervisor.rules.machine import PoolMachine
from vyre_core.supervisor.rules.requests import Request

if TYPE_CHECKING:
    from vyre_core.supervisor.shell import Spans


class PoolFacts:
    """A pool's facts; the shell sets ``_machine`` and ``_lock`` (held while the rules
    change)."""

    backend: str
    _machine: PoolMachine
    _lock: threading.Lock | threading.RLock
    _spans: Spans | None  # (PoolOptions.tracing: made by whoever made the pool)

    def _begin_span(self, request: Request) -> None:
        """(The caller's thread.) Note where ``request``'s span starts, when tracing."""
        if self._spans is not None:
            self._spans.begin(request)

    @property
    def capabilities(self) -> Capabilities | None:
        """What a worker probed (the first slot's device's); kept across restarts until a
        new probe differs."""
        with self._lock:
            return self._machine.capabilities

    @property
    def device_capabilities(self) -> dict[int | None, Capabilities]:
        """What its workers probed, per device (None: unpinned workers), as a copy."""
        with self._lock:
            return dict(self._machine.device_capabilities)

    @property
    def device_variants(self) -> dict[int | None, tuple[Capabilities, ...]]:
        """Per device, each distinct set of capabilities its serving workers probed: more
        than one where they run on unlike nodes of a cluster."""
        with self._lock:
            return dict(self._machine.device_variants)

    @property
    def varied(self) -> bool:
        """Whether the workers of some device probed unlike (routing then limits each call
        to the workers that can run it)."""
        return self._machine.varied

    @property
    def pinned(self) -> bool:
        """Whether its workers are pinned to devices (``PoolOptions(devices=...)``)."""
        return self._machine.devices is not None

    def device_of(self, slot: int) -> int | None:
        """The device worker ``slot`` is pinned to (None: unpinned)."""
        return self._machine.workers[slot].device

    @property
    def devices(self) -> list[DeviceInfo]:
        """The backend's devices, as its latest worker listed them (empty before)."""
        with self._lock:
            return list(self._machine.device_list)

    @property
    def unprobed_devices(self) -> list[int | None]:
        """Its devices that no worker has probed yet (``[None]``: none has, unpinned)."""
        with self._lock:
            return self._machine.unprobed_devices

    def holds(self, slot: int, generation: int) -> bool:
        """Whether handles made in worker ``slot`` as ``generation`` are still valid."""
        return self._machine.holds(slot, generation)

    def unavailable(self) -> str | None:
        """Why routing must pass this pool over now (failed and cooling down, closed)."""
        return self._machine.unavailable(time.monotonic())

    def metrics(self) -> dict[str, Any]:
        """Its counters and gauges (``supervisor/metrics.py``), for ``Driver.metrics()``."""
        with self._lock:
            return self._machine.metrics_snapshot()
