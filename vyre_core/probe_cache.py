"""Probed capabilities kept on disk between processes, so that routing need not start a
backend only to learn that it would pass it over (a software adapter, demoted; a device
without f64). One small JSON file per backend and *probe identity*: everything that can
change what a probe finds without the backend's worker being asked.

The identity (``identity_facts``; a change to any part is a miss and a new probe):

- the backend: id, version, entry point, distribution and its version, the versions of
  the distribution's own requirements (wgpu-py, numba, ...), and where its code is and
  when it last changed (an editable install edited in place);
- vyre: its version and when its worker host and contract code last changed; the Python
  (executable and version);
- the machine: the environment variables that select adapters and devices (``VYRE_``
  but those that only place vyre's files, ``WGPU_``, ``VK_``, ``MESA_``, ``CUDA_``, ...),
  the GPU device nodes (``/dev/dri``,
  ``/dev/nvidia*``, ``/dev/kfd``: a new GPU), the Vulkan driver manifests and the libraries
  they name (a driver upgrade), the NVIDIA kernel driver's version;
- age: an entry older than ``MAX_AGE`` is probed again (whatever else the list misses).

A cached probe is a hint, never a licence: routing uses it only to pass a backend over,
or to start it; a backend it chooses is probed by its own worker before any work is sent
(and the file rewritten when that probe differs), and the worker still checks the work.
A stale entry can therefore make routing pass over a backend that could have run a
program, never send one to a backend that cannot.

Files are written whole (``cachefiles.write_whole``); an unreadable or corrupt one is
ignored with a warning and written again after the next probe. ``VYRE_PROBE_CACHE``
names another directory, or ``off`` for none."""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import blake3

from vyre_core import __version__
from vyre_core.cachefiles import user_cache_dir, write_whole
from vyre_core.contract.types import Capabilities
from vyre_core.registry import BackendRegistration
from vyre_core.supervisor import rundir

#: Bumped when the file layout changes; a file of another format is a miss.
FORMAT = 1
#: A directory for the cache, or "off" for none; unset: $XDG_CACHE_HOME/vyre/probes.
CACHE_ENV = "VYRE_PROBE_CACHE"
#: An entry this old (seconds) is probed again, and removed when its backend is written.
MAX_AGE = 7 * 24 * 3600.0
#: Environment variables whose values can change what a backend probes (they select
#: adapters, devices, drivers or their features; a ``VYRE_`` setting may configure a plugin).
ENV_PREFIXES = ("VYRE_", "WGPU_", "VK_", "MESA_", "LP_", "GALLIUM_", "LIBGL_", "DRI_",
                "CUDA_", "NVIDIA_", "HIP_", "ROCR_", "HSA_", "GPU_", "ZE_", "ONEAPI_",
                "NUMBA_", "OMP_", "LD_LIBRARY_PATH")
#: vyre's own variables that say where its files go (this cache, the workers' sockets,
#: tuning results, the cpu backend's kernels), never what a device can do: the one
#: ``vyre doctor`` and each test suite set must not cost every backend a new probe.
#: (The tuning and cpu variables are named here: their rooms lie above this one.)
NOT_PROBED = frozenset({CACHE_ENV, rundir.ENV, "VYRE_TUNING_CACHE", "VYRE_CPU_CACHE_DIR"})
#: Device nodes a GPU shows up as, and where Vulkan finds its drivers.
DEVICE_NODES = ("/dev/dri/*", "/dev/nvidia*", "/dev/kfd")
VULKAN_MANIFESTS = ("/usr/share/vulkan/icd.d/*.json", "/etc/vulkan/icd.d/*.json",
                    "/usr/local/share/vulkan/icd.d/*.json",
                    "~/.local/share/vulkan/icd.d/*.json")
NVIDIA_VERSION = "/proc/driver/nvidia/version"

_log = logging.getLogger("vyre.routing")


def directory(env: Mapping[str, str] = os.environ) -> Path | None:
    """Where the cache lives (not created here); None when ``VYRE_PROBE_CACHE=off``."""
    chosen = env.get(CACHE_ENV, "")
    if chosen.strip().lower() == "off":
        return None
    return Path(chosen) if chosen else user_cache_dir("probes", env)


def cacheable(registration: BackendRegistration) -> bool:
    """Only an installed backend (an entry point of a distribution) is cached: a plugin
    object registered by hand has no identity that outlives the process."""
    return registration.distribution is not None


def key_of(backend: str, facts: Mapping[str, Any]) -> str:
    """The file name of ``backend``'s entry for a probe identity (``identity_facts``)."""
    digest = blake3.blake3(json.dumps(facts, sort_keys=True, default=str).encode())
    return f"{backend}-{digest.hexdigest()[:24]}"


def entry(facts: Mapping[str, Any], caps: Capabilities, now: float) -> dict[str, Any]:
    """What a file holds: the identity it was probed under, when, and the capabilities."""
    return {"format": FORMAT, "facts": dict(facts), "probed_at": now,
            "capabilities": caps.to_dict()}


def read_entry(data: Any, facts: Mapping[str, Any], now: float) -> Capabilities | None:
    """The capabilities of a file's ``data`` when it is an entry for exactly ``facts`` and
    younger than ``MAX_AGE``; None when it is another's or too old. ValueError (with why)
    when it is no entry at all (corrupt)."""
    if not isinstance(data, dict) or not isinstance(data.get("probed_at"), int | float):
        raise ValueError("not a probe cache entry")
    if data.get("format") != FORMAT or data.get("facts") != json.loads(
            json.dumps(facts, sort_keys=True, default=str)):
        return None
    if not 0 <= now - data["probed_at"] < MAX_AGE:
        return None
    try:
        return Capabilities.from_dict(data["capabilities"])
    except Exception as exc:  # (a VyreError, KeyError, TypeError: the file is not ours)
        raise ValueError(f"its capabilities do not read: {exc}") from None


def identity_facts(registration: BackendRegistration,
                   env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Everything that can change what ``registration``'s probe finds and can be read
    without asking the backend (see the module's list)."""
    dist = registration.distribution
    return {
        "backend": [registration.id, registration.version, registration.entry_point],
        "distribution": [dist, _version(dist), _requirement_versions(dist)],
        "code": [_newest_change(_package_of(registration.plugin)),
                 _newest_change(Path(__file__).parents[1] / "contract"),
                 _newest_change(_package_dir("vyre_workers"))],
        "vyre": __version__,
        "python": [sys.executable, sys.version],
        "env": sorted((k, v) for k, v in env.items()
                      if k.startswith(ENV_PREFIXES) and k not in NOT_PROBED),
        "devices": sorted(p for pattern in DEVICE_NODES for p in glob.glob(pattern)),
        "drivers": _drivers(),
    }


class ProbeCache:
    """Probed capabilities per backend in ``where`` (None: nothing is kept). The probe
    identity of each backend is read once per cache (a Driver's life)."""

    def __init__(self, where: Path | None) -> None:
        self.where = where
        self._facts: dict[str, dict[str, Any]] = {}

    @classmethod
    def from_env(cls) -> ProbeCache:
        return cls(directory())

    def load(self, registration: BackendRegistration) -> Capabilities | None:
        """What a earlier probe of this backend found under today's identity, if kept."""
        path = self._path(registration)
        if path is None:
            return None
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            _log.warning("probe cache: cannot read %s (%s); probing %r instead", path, exc,
                         registration.id)
            return None
        try:
            found = read_entry(json.loads(text), self._facts[registration.id], time.time())
        except ValueError as exc:
            _log.warning("probe cache: ignoring the corrupt file %s (%s); probing %r again "
                         "and writing it anew", path, exc, registration.id)
            return None
        if found is not None:
            _log.info("probe cache: %r as probed before (%s)", registration.id, path)
        return found

    def store(self, registration: BackendRegistration, caps: Capabilities) -> None:
        """Keep what a worker of this backend just probed (unless the file holds it
        already), and remove this backend's entries past ``MAX_AGE``. A cache that cannot
        be written is only logged: the probe itself stands."""
        path = self._path(registration)
        if path is None:
            return
        now = time.time()
        facts = self._facts[registration.id]
        try:
            with_text = json.loads(path.read_text())
            same = read_entry(with_text, facts, now)
        except (OSError, ValueError):
            same = None
        if same is not None and same.identity == caps.identity:
            return
        try:
            write_whole(path, json.dumps(entry(facts, caps, now), sort_keys=True))
        except OSError as exc:
            _log.warning("probe cache: cannot write %s (%s); set %s to a writable directory "
                         "or to off", path, exc, CACHE_ENV)
            return
        self._remove_old(registration.id, now)

    def _path(self, registration: BackendRegistration) -> Path | None:
        if self.where is None or not cacheable(registration):
            return None
        facts = self._facts.get(registration.id)
        if facts is None:
            facts = self._facts[registration.id] = identity_facts(registration)
        return self.where / f"{key_of(registration.id, facts)}.json"

    def _remove_old(self, backend: str, now: float) -> None:
        for old in self.where.glob(f"{glob.escape(backend)}-*.json"):  # type: ignore[union-attr]
            try:
                if now - old.stat().st_mtime >= MAX_AGE:
                    old.unlink()
            except OSError:
                continue  # (another process removed it, or cannot: left for later)


def _version(distribution: str | None) -> str | None:
    try:
        return None if distribution is None else metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _requirement_versions(distribution: str | None) -> list[tuple[str, str | None]]:
    """The installed version of each of ``distribution``'s own requirements."""
    if distribution is None:
        return []
    try:
        required = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return []
    names = sorted({_requirement_name(r) for r in required if ";" not in r})
    return [(name, _version(name)) for name in names]


def _requirement_name(requirement: str) -> str:
    for i, char in enumerate(requirement):
        if not (char.isalnum() or char in "-_."):
            return requirement[:i]
    return requirement


def _package_of(plugin: object) -> Path | None:
    """The folder of the package a plugin module (or object) comes from."""
    module = sys.modules.get(getattr(plugin, "__module__", None) or "") or plugin
    found = getattr(module, "__file__", None)
    return None if found is None else Path(found).parent


def _package_dir(name: str) -> Path | None:
    """The folder of package ``name`` (found, not imported)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return None if spec is None or spec.origin is None else Path(spec.origin).parent


def _newest_change(folder: Path | None) -> list[Any]:
    """Where ``folder`` is and the newest modification time of its Python files."""
    if folder is None:
        return [None, None]
    newest = 0
    for path in folder.rglob("*.py"):
        try:
            newest = max(newest, path.stat().st_mtime_ns)
        except OSError:
            continue
    return [str(folder), newest]


def _drivers() -> list[Any]:
    """Each Vulkan driver manifest and the library it names (size and modification time),
    and the NVIDIA kernel driver's version line: what a driver upgrade changes."""
    found: list[Any] = []
    for pattern in VULKAN_MANIFESTS:
        for manifest in sorted(glob.glob(os.path.expanduser(pattern))):
            found.append([manifest, *_stamp(manifest)])
            try:
                library = json.loads(Path(manifest).read_text())["ICD"]["library_path"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            found.append([library, *_stamp(library)])
    with contextlib.suppress(OSError):
        found.append(Path(NVIDIA_VERSION).read_text().splitlines()[:1])
    return found


def _stamp(path: str) -> tuple[int | None, int | None]:
    try:
        stat = os.stat(path)
    except OSError:
        return (None, None)
    return (stat.st_size, stat.st_mtime_ns)
