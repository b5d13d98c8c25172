"""The one place that starts and stops worker processes.

Death is observed through a pidfd (readable the moment the process exits), so the pool's
poll loop notices it at once without heartbeats. stderr goes to a log file whose tail is
attached to crash errors.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

STDERR_TAIL_BYTES = 4096


class WorkerProcess:
    def __init__(self, args: list[str], log_path: Path, env: dict[str, str]) -> None:
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "vyre_workers", *args], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, close_fds=True, env=env)
        self.pid = self.popen.pid
        self.pidfd = os.pidfd_open(self.pid)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)

    def reap(self) -> int:
        """The exit status of a process that has exited (negative: killed by a signal)."""
        code = self.popen.wait()
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1
        return code

    def stderr_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - STDERR_TAIL_BYTES))
                return log.read().decode(errors="replace").strip()
        except OSError:
            return ""


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"
