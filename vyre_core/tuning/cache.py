"""The tuning cache: the best candidate per (program, backend and its version, device,
vyre version, input sizes), one small JSON file each, in the user's cache directory.

A file is written whole (a temporary file renamed over it), so a reader never sees half
of one and two writers leave one of their two. A file this vyre cannot use (corrupt, or
written by another format) raises ``InvalidConfigError`` naming it, with a Fix, and is
left as it is: the cache never deletes what it did not just write.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import blake3

from vyre_core import __version__
from vyre_core.cachefiles import user_cache_dir, write_whole
from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidConfigError, SystemResourceError, system_resource_error
from vyre_core.ir.specialize import Values
from vyre_core.tuning.candidates import Candidate

#: Bumped when the file layout changes; files of another format are refused, not read.
FORMAT = 1
#: Where the cache lives when set; else $XDG_CACHE_HOME/vyre/tuning, else ~/.cache/...
CACHE_ENV = "VYRE_TUNING_CACHE"


@dataclass(frozen=True)
class TuneKey:
    """What a tuned choice is valid for: change any part and it is tuned again."""

    program: str           # the program's fingerprint (as written, constants declared)
    backend: str
    backend_version: str
    device: str            # a digest of the capabilities the backend's worker probed
    vyre_version: str
    sizes: tuple[int, ...]  # the input lengths, in ABI order
    config: str            # a digest of what the caller's config fixes (config_digest)

    @property
    def digest(self) -> str:
        return blake3.blake3(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Tuned:
    """A cache entry: the best candidate, its time and the program's own time."""

    best: Candidate
    seconds: float
    baseline_seconds: float


def key_for(program: str, backend: str, backend_version: str, device_identity: str,
            sizes: tuple[int, ...], base: DispatchConfig) -> TuneKey:
    device = blake3.blake3(device_identity.encode()).hexdigest()[:16]
    return TuneKey(program, backend, backend_version, device, __version__, tuple(sizes),
                   config_digest(base))


def config_digest(base: DispatchConfig) -> str:
    """What in the caller's config changes what runs or how much of it: its constants
    (exactly: -0.0 is not 0.0), workgroup override, grid, invocations (dim) and fixpoint
    runs. A choice tuned under one is not used under another."""
    fixed = (Values(base.constants).exact(), base.workgroup_override, base.grid_override,
             base.dispatch_elements, base.fixpoint_iterations)
    if base.dim is not None:  # (only then: the digests of configs without it stay as they were)
        fixed += (base.dim,)
    return blake3.blake3(repr(fixed).encode()).hexdigest()[:16]


def directory() -> Path:
    """The cache directory (not created here)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return user_cache_dir("tuning")


def path_of(key: TuneKey, where: Path | None = None) -> Path:
    return (where or directory()) / f"{key.digest}.json"


def load(key: TuneKey, where: Path | None = None) -> Tuned | None:
    """The entry for ``key``, None when there is none."""
    path = path_of(key, where)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _os_error(exc, f"reading the tuning cache file {path}") from None
    fix = (f"Delete {path} (vyre tune writes it again), or point {CACHE_ENV} at another "
           "directory.")
    try:
        data = json.loads(text)
    except ValueError:
        raise InvalidConfigError(f"tuning cache file {path} is not valid JSON", fix) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else None
        raise InvalidConfigError(f"tuning cache file {path} has format {found!r}, this vyre "
                                 f"reads format {FORMAT}", fix)
    try:
        if data["key"] != _key_dict(key):
            raise InvalidConfigError(f"tuning cache file {path} holds another key's entry",
                                     fix)
        return Tuned(Candidate.from_dict(data["best"]), float(data["seconds"]),
                     float(data["baseline_seconds"]))
    except (KeyError, TypeError, ValueError) as exc:
        cause = exc.cause if isinstance(exc, InvalidConfigError) else \
            f"tuning cache file {path} is malformed ({type(exc).__name__}: {exc})"
        raise InvalidConfigError(cause, fix) from None


def store(key: TuneKey, entry: Tuned, where: Path | None = None) -> Path:
    """Write the entry for ``key`` (whole, or not at all); returns its path."""
    path = path_of(key, where)
    data = {"format": FORMAT, "key": _key_dict(key), "best": entry.best.to_dict(),
            "seconds": entry.seconds, "baseline_seconds": entry.baseline_seconds}
    try:
        write_whole(path, json.dumps(data, indent=1))
    except OSError as exc:
        raise _os_error(exc, f"writing the tuning cache file {path}") from None
    return path


def _os_error(exc: OSError, during: str) -> SystemResourceError:
    """The OS's refusal, with a Fix about this cache (not the run directory)."""
    found = system_resource_error(exc, during)
    return SystemResourceError(found.cause, f"Make {directory()} writable and free space "
                               f"there, or point {CACHE_ENV} at another directory.",
                               errno=found.details.get("errno"))


def _key_dict(key: TuneKey) -> dict[str, Any]:
    return {**asdict(key), "sizes": list(key.sizes)}

