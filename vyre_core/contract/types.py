"""Plain value types the contract's hooks take and return."""

from __future__ import annotations

import functools
import json
import math
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


#: How the capabilities of several workers combine into what all of them can do
#: (``Capabilities.common``), named in a field's metadata; a field without one: ``all``
#: for a feature (bool), ``least`` for a limit.
_COMBINE = {
    "all": all,
    "least": min,
    "least_known": lambda each: min((v for v in each if v is not None), default=None),
    "each_least": lambda each: tuple(min(axis) for axis in zip(*each, strict=True)),
    "intersect": lambda each: frozenset.intersection(*each),
    "agree": lambda each: each[0] if all(v == each[0] for v in each) else None,
}


def _rule(combine: str, *, ops: bool = False, tuple_: bool = False,
          count: bool = False) -> dict[str, Any]:
    """A field's metadata: how it combines, and what a claim of it is coerced to (a set
    of op names, a tuple: plain data arrives as lists) or checked as (a count)."""
    return {"combine": combine, "ops": ops, "tuple": tuple_, "count": count}


def is_count(value: Any) -> bool:
    """An int of 0 or more (not a bool): what a limit such as ``max_loop_trip`` is."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _facts_as_fields(claims: dict[str, Any], user: str, logged_only: bool) -> None:
    """Each fact of ``claims["extra"]`` named as a field it became (vyre 0.1's docs put
    the loop trip limit there) taken out, warned, and claimed as that field unless the
    field is claimed itself; a value that is no count was ignored then, and still is."""
    from vyre_core.deprecations import enforce, of_kind

    extra = claims["extra"]
    for name in sorted(FACTS_NOW_FIELDS & set(extra)):
        enforce(of_kind("claim")[f"extra[{name!r}]"], user, InvalidConfigError,
                logged_only=logged_only)
        value = extra[name]
        if claims.get(name) is None and is_count(value):
            claims[name] = value
    claims["extra"] = {k: v for k, v in extra.items() if k not in FACTS_NOW_FIELDS}


#: Device facts (integer limits) once claimed in ``Capabilities.extra`` that are fields now.
FACTS_NOW_FIELDS = frozenset({"max_loop_trip"})


@dataclass(frozen=True)
class Capabilities:
    """Every capability of a backend on its device. Defaults are the conservative floor of
    the contract (docs/contract.md); a field is true only when the backend's lowering
    really uses the feature and the device has it. A new capability is a field here (its
    metadata says how workers' answers combine and how a claim is coerced, where the
    type's default rule does not fit) and a claim in the backends that have it."""

    supported_ops: frozenset[str] = field(default=DEFAULT_OPS, repr=False,
                                          metadata=_rule("intersect", ops=True))
    supports_subgroup_ops: bool = False
    supports_f16: bool = False
    supports_bf16: bool = False
    supports_f64: bool = False
    supports_tensor_cores: bool = False
    supports_async_compute: bool = False
    supports_indirect_dispatch: bool = False
    supports_grid_sync: bool = False
    is_distributed: bool = False
    max_workgroup_size: tuple[int, int, int] = field(
        default=(1, 1, 1), metadata=_rule("each_least", tuple_=True))
    max_workgroups_per_dimension: int = 1
    # None (not claimed): the product of max_workgroup_size, made in __post_init__
    max_invocations_per_workgroup: int = None  # type: ignore[assignment]
    # deprecated: subgroup_size_range
    subgroup_size: int | None = field(default=None, metadata=_rule("agree"))
    # the smallest and largest width
    subgroup_size_range: tuple[int, int] | None = field(
        default=None, metadata=_rule("agree", tuple_=True))
    max_storage_buffer_bytes: int = 0  # 0: not reported (not "unlimited")
    max_workgroup_memory_bytes: int = 0
    # loop iterations an invocation may run in all before the device silently stops it
    # (a software adapter's); None: no such limit known
    max_loop_trip: int | None = field(default=None, metadata=_rule("least_known", count=True))
    extra: dict[str, Any] = field(default_factory=dict, compare=False)  # adapter facts etc.

    def __post_init__(self) -> None:
        """Invocations per workgroup, when not claimed, are the claimed workgroup size's
        product (a record built directly, as from claims: otherwise 1, and routing would
        refuse every workgroup of more than one invocation). Made once, here: a
        ``dataclasses.replace`` of the workgroup size keeps the number it had, so give
        both there."""
        if self.max_invocations_per_workgroup is None:
            object.__setattr__(self, "max_invocations_per_workgroup",
                               math.prod(self.max_workgroup_size))

    @classmethod
    def from_claims(cls, claims: dict[str, Any], user: str | None = None, *,
                    logged_only: bool = False) -> Capabilities:
        """Capabilities from a backend's static claims (or its record as plain data);
        unknown names and limits that are no count are refused. ``user``
        (the backend, where the parent reads its claims or a worker's hello) reads a fact
        claimed in ``extra`` that is a field now as that field, and warns it (or refuses
        it, ``vyre_core.deprecations``; ``logged_only``: a log record, no Python warning,
        as a pool's rules reading a hello need); None (in the worker) keeps it in
        ``extra``, so the parent sees it and warns where a person reads it."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(claims) - set(known))
        if unknown:
            raise InvalidConfigError(f"unknown capability claims {unknown}",
                                     f"Claim only these names: {sorted(set(known) - {'extra'})}.")
        claims = dict(claims)
        if user is not None and isinstance(claims.get("extra"), dict):
            _facts_as_fields(claims, user, logged_only)
        for name, value in claims.items():
            if known[name].metadata.get("ops"):
                claims[name] = op_names(value)
            elif known[name].metadata.get("tuple") and value is not None:
                claims[name] = tuple(value)
            elif known[name].metadata.get("count") and value is not None and not is_count(value):
                raise InvalidConfigError(
                    f"{name} is claimed as {value!r:.100}, not a count",
                    f"Claim {name} as an int of 0 or more, or leave it out (None: no limit).")
        return cls(**claims)

    @classmethod
    def of(cls, answer: Any, hook: str = "vyre_capabilities") -> Capabilities:
        """What ``hook`` answered (a record, or a dict of its fields) as a record; refused
        when it is neither or names a field the record does not have."""
        if isinstance(answer, Capabilities):
            return answer
        if not isinstance(answer, dict):
            raise InvalidConfigError(
                f"{hook} answered {answer!r:.200}, not a Capabilities record",
                "Return Capabilities(...) (vyre_core.contract), or a dict of its fields, "
                f"from {hook}.")
        return cls.from_claims(answer)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON, the wire): op sets sorted, tuples as lists."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = (sorted(value) if isinstance(value, frozenset) else
                           list(value) if isinstance(value, tuple) else value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], user: str | None = None, *,
                  logged_only: bool = False) -> Capabilities:
        return cls.from_claims(data, user, logged_only=logged_only)

    @functools.cached_property
    def identity(self) -> str:
        """Every field, ``extra`` included (equality leaves it out, yet routing reads its
        facts: a software adapter), as one canonical string: what tells the probes of
        unlike workers apart."""
        return json.dumps(self.to_dict(), sort_keys=True, default=repr)

    @classmethod
    def common(cls, found: list[Capabilities]) -> Capabilities:
        """What every one of ``found`` can do (workers of one device on different nodes of
        a cluster, say), each field combined by its rule (``_COMBINE``); adapter facts
        only where all agree, and a software adapter if any is one (routing then demotes
        it)."""
        first, *rest = found
        if not rest:
            return first
        values: dict[str, Any] = {}
        for f in fields(cls):
            each = [getattr(c, f.name) for c in found]
            if f.name == "extra":
                values[f.name] = {k: v for k, v in first.extra.items()
                                  if all(c.extra.get(k) == v for c in rest)}
                if any(c.extra.get("software_adapter") for c in found):
                    values[f.name]["software_adapter"] = True
            else:
                combine = f.metadata.get("combine") or (
                    "all" if isinstance(each[0], bool) else "least")
                values[f.name] = _COMBINE[combine](each)
        return cls(**values)


def op_names(ops: Any) -> frozenset[str]:
    """Claimed ops as a set of names; refused when they are not one (a lone string would
    otherwise become its letters)."""
    try:
        names = None if isinstance(ops, str | bytes) else frozenset(ops)
    except TypeError:
        names = None
    if names is None or not all(isinstance(op, str) for op in names):
        raise InvalidConfigError(f"supported_ops is {ops!r:.200}, not a set of op names",
                                 "Claim supported_ops as a frozenset of op ids (the "
                                 "vocabulary of vyre_core.ir.ALL_OPS).")
    return names


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
