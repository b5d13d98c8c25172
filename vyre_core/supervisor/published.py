"""What a running driver publishes for ``vyre status`` (and tools like it) to read: each
pool's ``status()`` snapshot as ``<pool>.status.json`` in the driver's private run
directory, rewritten by the pool's I/O thread about once a second. Readers see a whole
file or none (written aside, then renamed); the files go with the run directory when the
driver closes, or with the next driver's clean-up of a dead one's."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from vyre_core.supervisor import rundir

_log = logging.getLogger("vyre.supervisor")
SUFFIX = ".status.json"
#: How often a pool rewrites its snapshot (seconds).
EVERY = 1.0


def publish(path: Path, snapshot: dict[str, Any]) -> None:
    """Write ``snapshot`` to ``path`` whole (readable by this user only). Raises OSError
    (a full disk, say): the caller decides how loudly to say so."""
    data = json.dumps(snapshot, default=str).encode()
    aside = path.with_name(path.name + ".new")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(aside, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(aside)
        raise


class Publisher:
    """One pool's snapshot, rewritten at most every ``EVERY`` seconds by its thread; a
    failure (a full disk) is logged once, and the pool serves on without."""

    def __init__(self, path: Path, backend: str) -> None:
        self.path = path
        self._backend = backend
        self._next = 0.0
        self._failing = False

    def due(self, now: float) -> bool:
        return now >= self._next

    def publish(self, now: float, status: dict[str, Any]) -> None:
        self._next = now + EVERY
        try:
            publish(self.path, {**status, "published": time.time()})
        except OSError as exc:
            if not self._failing:
                _log.warning("pool %r: cannot publish its status for `vyre status` (%s); "
                             "it serves on without", self._backend, exc)
            self._failing = True
        else:
            self._failing = False


def running_drivers(base: Path) -> list[dict[str, Any]]:
    """Every live driver under ``base`` with what its pools published: ``{"pid",
    "run_dir", "pools": {backend: snapshot}}``, by pid. A pool that has not
    published yet, or a file being replaced right now, is simply absent."""
    found = []
    for run_dir, pid in rundir.live_dirs(base):
        pools = {}
        for path in sorted(run_dir.glob(f"*{SUFFIX}")):
            try:
                snapshot = json.loads(path.read_bytes())
            except (OSError, ValueError):
                continue
            if isinstance(snapshot, dict) and isinstance(snapshot.get("backend"), str):
                pools[snapshot["backend"]] = snapshot
        found.append({"pid": pid, "run_dir": str(run_dir), "pools": pools})
    return sorted(found, key=lambda d: d["pid"])
