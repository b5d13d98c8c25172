"""The private run directory of one driver: ``<tmp>/vyre-<uid>/<pid>-<start>-<token>``, mode 0700,
holding its ipc sockets and worker logs. A new driver removes the directories of drivers
whose process is gone (killed with SIGKILL, say), so stale socket files never pile up."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

import psutil

from vyre_core.errors import InvalidConfigError

_MAX_SOCKET_PATH = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux


def base_dir() -> Path:
    root = Path(os.environ.get("VYRE_RUNTIME_DIR") or tempfile.gettempdir())
    base = root / f"vyre-{os.getuid()}"
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    if base.stat().st_uid != os.getuid() or base.stat().st_mode & 0o077:
        os.chmod(base, 0o700)
    return base


def _started(pid: int) -> str | None:
    """A process's start time as a short stamp (None when it does not exist)."""
    try:
        return _base36(int(psutil.Process(pid).create_time() * 100))
    except psutil.Error:
        return None


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


def stale_dirs(base: Path) -> list[Path]:
    """Run directories whose driver process is gone, even if its pid was reused since."""
    stale = []
    for entry in base.iterdir():
        pid, _, rest = entry.name.partition("-")
        stamp = rest.partition("-")[0]
        if entry.is_dir() and pid.isdigit() and _started(int(pid)) != stamp:
            stale.append(entry)
    return stale


def remove_stale(base: Path) -> list[Path]:
    """Remove the stale run directories under ``base`` (what every new driver does, and
    ``vyre doctor --clean``); returns those removed."""
    stale = stale_dirs(base)
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


class RunDir:
    def __init__(self) -> None:
        base = base_dir()
        remove_stale(base)
        pid = os.getpid()
        self.path = base / f"{pid}-{_started(pid)}-{secrets.token_hex(2)}"
        self.path.mkdir(mode=0o700)

    def endpoint(self, name: str) -> str:
        path = f"{self.path / name}.sock"
        if len(path.encode()) > _MAX_SOCKET_PATH:
            raise InvalidConfigError(
                f"socket path {path!r} is longer than the {_MAX_SOCKET_PATH} bytes a unix "
                "socket allows", "Set VYRE_RUNTIME_DIR to a shorter directory, e.g. /tmp.")
        return f"ipc://{path}"

    def log(self, name: str) -> Path:
        return self.path / f"{name}.log"

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
