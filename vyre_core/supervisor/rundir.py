"""The private run directory of one driver: ``<tmp>/vyre-<uid>/<pid>-<token>``, mode 0700,
holding its ipc sockets and worker logs. A new driver removes the directories of drivers
whose process is gone (killed with SIGKILL, say), so stale socket files never pile up."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

import psutil


def base_dir() -> Path:
    root = Path(os.environ.get("VYRE_RUNTIME_DIR") or tempfile.gettempdir())
    base = root / f"vyre-{os.getuid()}"
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    if base.stat().st_uid != os.getuid() or base.stat().st_mode & 0o077:
        os.chmod(base, 0o700)
    return base


def stale_dirs(base: Path) -> list[Path]:
    """Run directories whose driver process no longer exists."""
    stale = []
    for entry in base.iterdir():
        pid, _, _ = entry.name.partition("-")
        if entry.is_dir() and pid.isdigit() and not psutil.pid_exists(int(pid)):
            stale.append(entry)
    return stale


class RunDir:
    def __init__(self) -> None:
        base = base_dir()
        for stale in stale_dirs(base):
            shutil.rmtree(stale, ignore_errors=True)
        self.path = base / f"{os.getpid()}-{secrets.token_hex(3)}"
        self.path.mkdir(mode=0o700)

    def endpoint(self, name: str) -> str:
        return f"ipc://{self.path / name}.sock"

    def log(self, name: str) -> Path:
        return self.path / f"{name}.log"

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
