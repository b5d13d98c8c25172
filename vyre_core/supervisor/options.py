"""``PoolOptions``: how a backend's workers are run and supervised. Checked when made, so
a bad value is refused with a Fix before any process starts; see docs/operations.md."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from vyre_core import protocol

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


@dataclass(frozen=True)
class PoolOptions:
    """How a backend's workers are run; see docs/operations.md for each field."""

    workers: int = 1                # per device, when ``devices`` is set
    standby: int = 0                # prepared spare workers, promoted at once on a death
    max_restarts: int = 10          # restart intensity: more than this many deaths per
    restart_window: float = 10.0    # worker process in this many seconds fails the pool
    cooldown: float = 60.0          # a failed pool is tried again this long after it failed
    kill_grace: float = 2.0         # SIGTERM -> SIGKILL delay
    cancel_grace: float = 0.25      # a cancelled call's worker stops within this, or is killed
    startup_timeout: float = 60.0   # spawn -> hello
    compile_timeout: float = 120.0
    heartbeat_interval: float = 0.5
    heartbeat_timeout: float = 30.0  # a worker running a request silent this long is stuck
    recycle_rss_bytes: int | None = None
    recycle_after: int | None = None  # requests served
    max_message_bytes: int = protocol.MAX_MESSAGE_BYTES
    fork_server: bool = True        # fork workers from a pre-imported process (faster starts)
    spin: float = 0.0002            # seconds a lane is polled busily before sleeping on it
    # None: the backend's preferred device; "all": one worker set per device it lists; or
    # the ids of the devices to run on (``vyre backends --probe`` lists them)
    devices: str | tuple[int, ...] | None = None
    gpus_per_worker: float = 0.0    # on a Ray cluster: the GPUs each worker actor requests
    tracing: bool = False           # one OpenTelemetry span per call (observability/tracing)
    # the threads each worker's backend may compute with, handed to it as THREADS_ENV
    # (None: the backend's own default; the cpu backend's: the cores the worker may use)
    threads: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.devices, list):
            object.__setattr__(self, "devices", tuple(self.devices))
        bad: list[tuple[str, str]] = []  # (what is wrong, how to put it right)
        for name in ("kill_grace", "cancel_grace", "startup_timeout", "compile_timeout",
                     "heartbeat_interval",
                     "heartbeat_timeout", "restart_window", "cooldown"):
            value = getattr(self, name)
            if seconds_wrong(value, infinite=False, most=MAX_SECONDS) is not None:
                bad.append((f"{name}={value!r}", f"{name}: seconds above 0 and at most "
                                                 f"{MAX_SECONDS:g}"))
        for name, low, high in (("workers", 1, None), ("max_restarts", 0, None),
                                ("standby", 0, MAX_STANDBY)):
            value = getattr(self, name)
            if not _is_int(value, low) or (high is not None and value > high):
                bad.append((f"{name}={value!r}", f"{name}: a whole number >= {low}"
                            + (f" and <= {high}" if high is not None else "")))
        if not bad and self.heartbeat_interval >= self.heartbeat_timeout:
            bad.append((f"heartbeat_interval={self.heartbeat_interval} is not below "
                        f"heartbeat_timeout={self.heartbeat_timeout}",
                        "heartbeat_interval: well below heartbeat_timeout (a third or less)"))
        for name in ("recycle_rss_bytes", "recycle_after"):
            value = getattr(self, name)
            if value is not None and not _is_int(value, 1):
                bad.append((f"{name}={value!r}", f"{name}: None or a whole number >= 1"))
        if not _is_int(self.max_message_bytes, 1) \
                or self.max_message_bytes > protocol.MAX_MESSAGE_BYTES:
            bad.append((f"max_message_bytes={self.max_message_bytes!r}",
                        f"max_message_bytes: 1 to {protocol.MAX_MESSAGE_BYTES}"))
        if not isinstance(self.fork_server, bool):
            bad.append((f"fork_server={self.fork_server!r}", "fork_server: True or False"))
        if seconds_wrong(self.spin, zero=True, most=MAX_SPIN) is not None:
            bad.append((f"spin={self.spin!r}", f"spin: 0 to {MAX_SPIN:g} seconds"))
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

    @property
    def silence_limit(self) -> float:
        """How long a worker that has work may stay silent before it is judged frozen, and
        how long a request may go unacknowledged before it is judged lost: three heartbeats
        (never under a quarter second, for loaded machines)."""
        return max(3 * self.heartbeat_interval, 0.25)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # (a parent package missing, or blocked)
        return False


def _is_int(value: object, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum
