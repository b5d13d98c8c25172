"""Plain value types the contract's hooks take and return."""

from __future__ import annotations

import functools
import json
import os
import platform
import time
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

import numpy as np

from vyre_core.errors import InvalidConfigError
from vyre_core.ir.requirements import DEFAULT_OPS
from vyre_core.sequence.nodes import LoopRun

#: The most threads a worker may be given (``PoolOptions.threads``), and the variable of
#: the worker's environment that carries them to its backend: what a worker's environment
#: tells its backend, so both sides read it here.
MAX_THREADS = 1024
THREADS_ENV = "VYRE_WORKER_THREADS"


@dataclass(frozen=True)
class Timing:
    """Host wall time, and device time when the backend can measure it."""

    wall_ns: int
    device_ns: int | None = None
    label: str | None = None


@dataclass(frozen=True)
class TimedDispatch:
    outputs: list[np.ndarray]
    timing: Timing


@dataclass(frozen=True)
class SequenceRun:
    """What ``vyre_dispatch_sequence`` returns: the returned buffers in order, each loop's
    run, and the time the whole sequence took."""

    outputs: list[np.ndarray]
    loops: list[LoopRun]
    timing: Timing


class Outputs(list):
    """The outputs of a dispatch, in ABI order; ``timing`` is set when profiling. A
    sequence's outputs also say how each of its loops ran (``loops``)."""

    timing: Timing | None = None
    loops: list[LoopRun] | None = None


@dataclass(frozen=True)
class CacheSnapshot:
    """Real pipeline-cache counters of a backend."""

    hits: int
    misses: int
    entries: int


@runtime_checkable
class NativePipeline(Protocol):
    """What ``vyre_compile`` returns: compiled state that dispatches many times."""

    def dispatch(self, inputs: list[np.ndarray], config: Any) -> list[np.ndarray]: ...


@runtime_checkable
class PendingDispatch(Protocol):
    """What ``vyre_dispatch_async`` returns."""

    def is_ready(self) -> bool: ...

    def result(self, timeout: float | None = None) -> list[np.ndarray]: ...


class ReadyPending:
    """A pending dispatch that finished before it was returned."""

    def __init__(self, outputs: list[np.ndarray]) -> None:
        self._outputs = outputs

    def is_ready(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> list[np.ndarray]:
        return self._outputs


def wall_clock_ns() -> int:
    return time.perf_counter_ns()


@dataclass(frozen=True)
class Capabilities:
    """Every capability query of the contract, answered. Defaults are the conservative
    floor of the contract (docs/contract.md); a field is true only when the backend's
    lowering really uses the feature and the device has it."""

    supported_ops: frozenset[str] = field(default=DEFAULT_OPS, repr=False)
    supports_subgroup_ops: bool = False
    supports_f16: bool = False
    supports_bf16: bool = False
    supports_f64: bool = False
    supports_tensor_cores: bool = False
    supports_async_compute: bool = False
    supports_indirect_dispatch: bool = False
    supports_grid_sync: bool = False
    is_distributed: bool = False
    max_workgroup_size: tuple[int, int, int] = (1, 1, 1)
    max_workgroups_per_dimension: int = 1
    max_invocations_per_workgroup: int = 1
    subgroup_size: int | None = None  # deprecated: subgroup_size_range
    subgroup_size_range: tuple[int, int] | None = None  # smallest and largest width
    max_storage_buffer_bytes: int = 0  # 0: not reported (not "unlimited")
    max_workgroup_memory_bytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict, compare=False)  # adapter facts etc.

    @classmethod
    def from_claims(cls, claims: dict[str, Any]) -> Capabilities:
        """Capabilities from a backend's static claims; unknown names are refused."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(claims) - known)
        if unknown:
            raise InvalidConfigError(f"unknown capability claims {unknown}",
                                     f"Claim only these names: {sorted(known - {'extra'})}.")
        claims = dict(claims)
        if "supported_ops" in claims:
            claims["supported_ops"] = frozenset(claims["supported_ops"])
        if claims.get("subgroup_size_range") is not None:
            claims["subgroup_size_range"] = tuple(claims["subgroup_size_range"])
        if "max_workgroup_size" in claims:
            claims["max_workgroup_size"] = tuple(claims["max_workgroup_size"])
            claims.setdefault("max_invocations_per_workgroup",
                              int(np.prod(claims["max_workgroup_size"])))
        return cls(**claims)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["supported_ops"] = sorted(out["supported_ops"])
        out["max_workgroup_size"] = list(out["max_workgroup_size"])
        if out["subgroup_size_range"] is not None:
            out["subgroup_size_range"] = list(out["subgroup_size_range"])
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Capabilities:
        return cls.from_claims(data)

    @functools.cached_property
    def identity(self) -> str:
        """Every field, ``extra`` included (equality leaves it out, yet routing reads its
        facts: the loop trip limit, a software adapter), as one canonical string: what
        tells the probes of unlike workers apart."""
        return json.dumps(self.to_dict(), sort_keys=True, default=repr)

    @classmethod
    def common(cls, found: list[Capabilities]) -> Capabilities:
        """What every one of ``found`` can do (workers of one device on different nodes of
        a cluster, say): a feature only where all have it, the smallest of each limit, the
        operations all support; a subgroup size and adapter facts only where all agree,
        and a software adapter if any is one (routing then demotes it)."""
        first, *rest = found
        if not rest:
            return first
        values: dict[str, Any] = {}
        for f in fields(cls):
            each = [getattr(c, f.name) for c in found]
            if f.name == "supported_ops":
                values[f.name] = frozenset.intersection(*each)
            elif f.name == "max_workgroup_size":
                values[f.name] = tuple(min(axis) for axis in zip(*each, strict=True))
            elif f.name == "extra":
                values[f.name] = {k: v for k, v in first.extra.items()
                                  if all(c.extra.get(k) == v for c in rest)}
                if any(c.extra.get("software_adapter") for c in found):
                    values[f.name]["software_adapter"] = True
            elif f.name in ("subgroup_size", "subgroup_size_range"):
                values[f.name] = each[0] if all(v == each[0] for v in each) else None
            elif isinstance(each[0], bool):
                values[f.name] = all(each)
            else:
                values[f.name] = min(each)
        return cls(**values)


@dataclass(frozen=True)
class DeviceInfo:
    """One device a backend can run on, as ``vyre_devices`` reports it: found without being
    opened, so that listing devices costs no device. ``id`` is what ``PoolOptions(devices=
    ...)`` names; ``software`` marks a CPU implementation of a device API (lavapipe)."""

    id: int
    name: str
    vendor: str = ""
    memory_bytes: int | None = None
    software: bool = False

    @classmethod
    def host_cpu(cls, how: str) -> DeviceInfo:
        """This machine's CPU as device 0 (for backends that run on it): its cores, its
        architecture and its physical memory; ``how`` says how the backend runs there."""
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return cls(0, f"CPU ({os.cpu_count()} cores), {how}", platform.machine(),
                   memory if memory > 0 else None, False)

    def __post_init__(self) -> None:
        bad = []
        if isinstance(self.id, bool) or not isinstance(self.id, int) or self.id < 0:
            bad.append(f"id={self.id!r}")
        if not isinstance(self.name, str) or not isinstance(self.vendor, str):
            bad.append(f"name={self.name!r}, vendor={self.vendor!r}")
        if self.memory_bytes is not None and (isinstance(self.memory_bytes, bool) or not
                                              isinstance(self.memory_bytes, int)
                                              or self.memory_bytes < 0):
            bad.append(f"memory_bytes={self.memory_bytes!r}")
        if not isinstance(self.software, bool):
            bad.append(f"software={self.software!r}")
        if bad:
            raise InvalidConfigError(
                f"bad device description: {', '.join(bad)}",
                "Report each device as DeviceInfo(id=int >= 0, name=str, vendor=str, "
                "memory_bytes=int >= 0 or None, software=bool) from vyre_devices.")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Any) -> DeviceInfo:
        """A device description from plain data (a worker's hello); refused when malformed."""
        if isinstance(data, DeviceInfo):
            return data
        known = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or set(data) - known or not {"id", "name"} <= set(data):
            raise InvalidConfigError(
                f"bad device description: {data!r}",
                "Report each device as DeviceInfo(id=..., name=...) from vyre_devices.")
        return cls(**data)


def device_list(found: Any) -> list[DeviceInfo]:
    """What a ``vyre_devices`` hook answered, checked: a non-empty list of devices with
    distinct ids."""
    if not isinstance(found, list | tuple) or not found:
        raise InvalidConfigError(f"vyre_devices answered {found!r}, not a list of devices",
                                 "Return a non-empty list of DeviceInfo from vyre_devices.")
    devices = [DeviceInfo.from_dict(d) for d in found]
    ids = [d.id for d in devices]
    if len(set(ids)) != len(ids):
        raise InvalidConfigError(f"vyre_devices answered duplicate ids {ids}",
                                 "Give each device its own id (its position in a stable "
                                 "order).")
    return devices
