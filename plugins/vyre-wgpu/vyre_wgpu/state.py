"""What the jobs of the device layer read of one open device: the wgpu device and queue,
its features, limits and generation, its probed facts, and whether it is lost or closed."""

from __future__ import annotations

from typing import Any, Protocol


class DeviceState(Protocol):
    """The fields of an open device (``vyre_wgpu.device.Device`` derives from this, and
    sets and owns them); the modules below the device take this, so none imports it."""

    adapter: Any
    facts: dict[str, Any]
    software: bool
    device: Any
    queue: Any
    features: frozenset[str]
    limits: dict[str, Any]
    generation: int
    lost_reason: str | None
    closed: bool
    probes: dict[str, str]
    max_loop_trip: int | None
    subgroup_size: int | None  # the one size it forms subgroups of (probed), if any
    readback: Any  # its submission.Readback

    @property
    def name(self) -> str:
        return self.facts.get("device") or self.facts.get("description") or "unknown"

    @property
    def timestamps(self) -> bool:
        return "timestamp-query" in self.features

    def limit(self, name: str) -> int:
        return int(self.limits[name])
