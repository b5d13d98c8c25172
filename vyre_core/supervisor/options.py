"""``PoolOptions``: how a backend's workers are run and supervised, with three groups of
fields that belong together (``RestartPolicy``, ``Timeouts``, ``Transport``). Each is
checked when made, so a bad value is refused with a Fix before any process starts; see
docs/operations.md."""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass, field
from typing import Any

from vyre_core import deprecations
from vyre_core.boundary import codec

# (THREADS_ENV is importable here too: plugins built against older vyre read it here)
from vyre_core.contract.types import MAX_THREADS
from vyre_core.contract.types import THREADS_ENV as THREADS_ENV
from vyre_core.deadline import seconds_wrong
from vyre_core.errors import InvalidConfigError

#: The longest time any option may name (a year): longer is a mistake, and infinite or
#: astronomically large values would overflow the waits built from them.
MAX_SECONDS = 365 * 24 * 3600.0
#: The most spare workers a pool may keep (each is a whole prepared worker process).
MAX_STANDBY = 16
#: The longest a lane may be spun on: beyond it, sleeping costs less than the CPU burnt.
MAX_SPIN = 0.01
#: The most devices one pool may name (each gets ``workers`` processes).
MAX_DEVICES = 64


# -- checks ---------------------------------------------------------------------------------

def _seconds(group: object, names: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(name, f"seconds above 0 and at most {MAX_SECONDS:g}") for name in names
            if seconds_wrong(getattr(group, name), infinite=False, most=MAX_SECONDS)
            is not None]


def _refuse(group: object, what: str, bad: list[tuple[str, str]],
            cause: str | None = None) -> None:
    """Raise for ``bad`` ((field, what it should be) pairs of ``group``), if any, each Fix
    naming the field as the group's class takes it (``Timeouts(startup=...)``)."""
    if not bad:
        return
    kind = type(group).__name__
    if cause is None:
        cause = ", ".join(f"{name}={getattr(group, name)!r}" for name, _ in bad)
    raise InvalidConfigError(f"bad {what}: {cause}",
                             "Use " + "; ".join(f"{kind}({name}=...): {rule}"
                                                for name, rule in bad) + ".")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # (a parent package missing, or blocked)
        return False


def _is_int(value: object, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


@dataclass(frozen=True)
class RestartPolicy:
    """When dead workers are started again, and when a pool gives up for a while."""

    max_restarts: int = 10          # restart intensity: more than this many deaths per
    window: float = 10.0            # worker process in this many seconds fails the pool
    cooldown: float = 60.0          # a failed pool is tried again this long after it failed
    recycle_after: int | None = None      # a worker is replaced after serving this many
    recycle_rss_bytes: int | None = None  # ... or once its memory grows past this

    def __post_init__(self) -> None:
        bad = _seconds(self, ("window", "cooldown"))
        if not _is_int(self.max_restarts, 0):
            bad.append(("max_restarts", "a whole number >= 0"))
        for name in ("recycle_after", "recycle_rss_bytes"):
            value = getattr(self, name)
            if value is not None and not _is_int(value, 1):
                bad.append((name, "None or a whole number >= 1"))
        _refuse(self, "restart policy", bad)


@dataclass(frozen=True)
class Timeouts:
    """How long each step may take before the pool acts, in seconds."""

    startup: float = 60.0           # spawn -> hello
    compile: float = 120.0
    heartbeat_interval: float = 0.5
    heartbeat: float = 30.0         # a worker running a request silent this long is stuck
    kill_grace: float = 2.0         # SIGTERM -> SIGKILL delay
    cancel_grace: float = 0.25      # a cancelled call's worker stops within this, or is killed
    #: How long a worker that has work may stay silent before it is judged frozen, and how
    #: long a request may go unacknowledged before it is judged lost: three heartbeats
    #: (never under a quarter second, for loaded machines). Worked out once, when made.
    silence_limit: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        bad = _seconds(self, ("startup", "compile", "heartbeat_interval", "heartbeat",
                              "kill_grace", "cancel_grace"))
        if not bad and self.heartbeat_interval >= self.heartbeat:
            bad.append(("heartbeat_interval", "well below Timeouts(heartbeat=...) (a third "
                                              "or less)"))
            _refuse(self, "timeouts", bad, f"heartbeat_interval={self.heartbeat_interval} "
                                           f"is not below heartbeat={self.heartbeat}")
        _refuse(self, "timeouts", bad)
        object.__setattr__(self, "silence_limit", max(3 * self.heartbeat_interval, 0.25))


@dataclass(frozen=True)
class Transport:
    """How requests and replies travel between the caller and its workers."""

    max_message_bytes: int = codec.MAX_MESSAGE_BYTES
    fork_server: bool = True        # fork workers from a pre-imported process (faster starts)
    spin: float = 0.0002            # seconds a lane is polled busily before sleeping on it

    def __post_init__(self) -> None:
        bad: list[tuple[str, str]] = []
        if not _is_int(self.max_message_bytes, 1) \
                or self.max_message_bytes > codec.MAX_MESSAGE_BYTES:
            bad.append(("max_message_bytes", f"1 to {codec.MAX_MESSAGE_BYTES}"))
        if not isinstance(self.fork_server, bool):
            bad.append(("fork_server", "True or False"))
        if seconds_wrong(self.spin, zero=True, most=MAX_SPIN) is not None:
            bad.append(("spin", f"0 to {MAX_SPIN:g} seconds"))
        _refuse(self, "transport", bad)


#: PoolOptions' groups: the field that holds each, and its class.
GROUPS: dict[str, type] = {"restart": RestartPolicy, "timeouts": Timeouts,
                           "transport": Transport}
#: The flat field names of vyre 0.1 (deprecated, kind ``option``): group and field of each.
FLAT: dict[str, tuple[str, str]] = {
    flat: (group, name) for group, _, names in deprecations.OPTION_GROUPS
    for flat, name in names.items()}


@dataclass(frozen=True)
class PoolOptions:
    """How a backend's workers are run; see docs/operations.md for each field."""

    workers: int = 1                # per device, when ``devices`` is set
    standby: int = 0                # prepared spare workers, promoted at once on a death
    # None: the backend's preferred device; "all": one worker set per device it lists; or
    # the ids of the devices to run on (``vyre backends --probe`` lists them)
    devices: str | tuple[int, ...] | None = None
    # the threads each worker's backend may compute with, handed to it as THREADS_ENV
    # (None: the backend's own default; the cpu backend's: the cores the worker may use)
    threads: int | None = None
    gpus_per_worker: float = 0.0    # on a Ray cluster: the GPUs each worker actor requests
    tracing: bool = False           # one OpenTelemetry span per call (observability/tracing)
    restart: RestartPolicy = RestartPolicy()
    timeouts: Timeouts = Timeouts()
    transport: Transport = Transport()

    def __post_init__(self) -> None:
        if isinstance(self.devices, list):
            object.__setattr__(self, "devices", tuple(self.devices))
        bad: list[tuple[str, str]] = []  # (what is wrong, how to put it right)
        for name, group in GROUPS.items():
            value = getattr(self, name)
            if not isinstance(value, group):
                kind = group.__name__
                bad.append((f"{name}={value!r}", f"{name}: a {kind} (for example "
                                                 f"{name}={kind}(...))"))
        for name, low, high in (("workers", 1, None), ("standby", 0, MAX_STANDBY)):
            value = getattr(self, name)
            if not _is_int(value, low) or (high is not None and value > high):
                bad.append((f"{name}={value!r}", f"{name}: a whole number >= {low}"
                            + (f" and <= {high}" if high is not None else "")))
        devices = self.devices
        if not (devices is None or devices == "all" or (
                isinstance(devices, tuple) and 0 < len(devices) <= MAX_DEVICES
                and all(_is_int(d, 0) for d in devices) and len(set(devices)) == len(devices))):
            bad.append((f"devices={devices!r}",
                        f"devices: None (the backend's preferred device), 'all', or a list of "
                        f"1 to {MAX_DEVICES} distinct ids, each an id `vyre backends --probe` "
                        "shows (for example devices=[0, 1])"))
        if isinstance(self.gpus_per_worker, bool) or not isinstance(
                self.gpus_per_worker, int | float) or not 0 <= self.gpus_per_worker <= 64:
            bad.append((f"gpus_per_worker={self.gpus_per_worker!r}",
                        "gpus_per_worker: 0 to 64 (fractions share a GPU)"))
        if not isinstance(self.tracing, bool):
            bad.append((f"tracing={self.tracing!r}", "tracing: True or False"))
        elif self.tracing and not _importable("opentelemetry.trace"):
            bad.append(("tracing=True without OpenTelemetry installed",
                        "tracing: False, or install its API first "
                        "(pip install 'vyre[opentelemetry]')"))
        if self.threads is not None and not (_is_int(self.threads, 1)
                                             and self.threads <= MAX_THREADS):
            bad.append((f"threads={self.threads!r}",
                        f"threads: None or a whole number from 1 to {MAX_THREADS}"))
        if bad:
            raise InvalidConfigError(f"bad pool options: {', '.join(b for b, _ in bad)}",
                                     "Use " + "; ".join(f for _, f in bad) + ".")


# -- the flat names of vyre 0.1, for one version ---------------------------------------------

_made = PoolOptions.__init__


@functools.wraps(_made)
def _init(self: PoolOptions, *args: Any, **fields: Any) -> None:
    """``PoolOptions(...)``, taking the deprecated flat names too (``kill_grace=0.5`` is
    ``timeouts=Timeouts(kill_grace=0.5)``): each warns once, and is refused from 1.0.0."""
    if fields.keys() & FLAT:
        fields = _grouped(fields)
    _made(self, *args, **fields)


def _grouped(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with each flat name moved into its group (a group given as well is
    refused: which of the two was meant is not for vyre to guess)."""
    flat = sorted(fields.keys() & FLAT)
    for name in flat:
        group, inner = FLAT[name]
        if group in fields:
            kind = GROUPS[group].__name__
            raise InvalidConfigError(
                f"PoolOptions got {name}= and {group}= together",
                f"Set it inside the group: PoolOptions({group}={kind}({inner}=...)), "
                f"without {name}= (a deprecated flat name).")
    options = deprecations.of_kind("option")
    for name in flat:
        deprecations.enforce(options[name], "this program", InvalidConfigError)
    changes: dict[str, dict[str, Any]] = {}
    grouped = {k: v for k, v in fields.items() if k not in FLAT}
    for name in flat:
        group, inner = FLAT[name]
        changes.setdefault(group, {})[inner] = fields[name]
    for group, inner_fields in changes.items():
        grouped[group] = GROUPS[group](**inner_fields)
    return grouped


def _flat_reader(name: str) -> property:
    group, inner = FLAT[name]

    def read(self: PoolOptions) -> Any:
        deprecations.enforce(deprecations.of_kind("option")[name], "this program",
                             InvalidConfigError)
        return getattr(getattr(self, group), inner)

    read.__doc__ = (f"Deprecated: ``{group}.{inner}`` (warns once; refused from the version "
                    "that removes it).")
    return property(read)


PoolOptions.__init__ = _init  # type: ignore[method-assign]
for _name in FLAT:
    setattr(PoolOptions, _name, _flat_reader(_name))
del _name
