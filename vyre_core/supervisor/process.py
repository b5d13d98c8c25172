"""The one place that starts and stops worker processes.

A worker runs in its own process group, so a Ctrl-C at the terminal reaches the caller and
not its workers. Its death is observed through a pidfd (readable the moment it exits). Its
stdout and stderr go to a pipe the supervisor drains into a bounded tail, so a chatty
worker can neither fill a disk nor the parent's memory, and the tail still reaches the
error when it crashes. Its identity and hello token travel in the inherited progress page,
never on the command line.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import sys

from vyre_core.protocol import ProgressPage

#: The part of a worker's output kept in memory for crash errors, per generation.
OUTPUT_TAIL_BYTES = 64 * 1024
#: How much of that tail a crash error carries.
ERROR_TAIL_BYTES = 4096

_log = logging.getLogger("vyre.worker")


class WorkerProcess:
    """One worker process: its Popen, pidfd, output pipe and progress page. Raises OSError
    (cleaning up what it opened) when the OS refuses any of them."""

    def __init__(self, args: list[str], env: dict[str, str], page: ProgressPage,
                 name: str) -> None:
        self.page = page
        self.name = name
        self._tail = bytearray()
        self._partial = b""
        read_fd, write_fd = os.pipe()
        try:
            fcntl.fcntl(read_fd, fcntl.F_SETFL, fcntl.fcntl(read_fd, fcntl.F_GETFL)
                        | os.O_NONBLOCK)
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "vyre_workers", "--page-fd", str(page.fd), *args],
                stdin=subprocess.DEVNULL, stdout=write_fd, stderr=subprocess.STDOUT,
                pass_fds=(page.fd,), close_fds=True, env=env, process_group=0)
        except BaseException:
            os.close(read_fd)
            os.close(write_fd)
            raise
        os.close(write_fd)
        self.output_fd = read_fd
        self.pid = self.popen.pid
        try:
            self.pidfd = os.pidfd_open(self.pid)
        except BaseException:
            self.kill()
            self.popen.wait()
            os.close(read_fd)
            raise

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)

    def read_output(self) -> bool:
        """Take what the worker wrote (without blocking) into the tail and the
        ``vyre.worker`` log; False once the pipe is closed."""
        while self.output_fd >= 0:
            try:
                chunk = os.read(self.output_fd, 65536)
            except BlockingIOError:
                return True
            except OSError:
                chunk = b""
            if not chunk:
                os.close(self.output_fd)
                self.output_fd = -1
                return False
            self._tail += chunk
            del self._tail[:-OUTPUT_TAIL_BYTES]
            if _log.isEnabledFor(logging.DEBUG):
                *lines, self._partial = (self._partial + chunk).split(b"\n")
                for line in lines:
                    _log.debug("%s: %s", self.name, line.decode(errors="replace"))
        return False

    def output_tail(self, limit: int = ERROR_TAIL_BYTES) -> str:
        return bytes(self._tail[-limit:]).decode(errors="replace").strip()

    def reap(self) -> int:
        """Wait for the exited process and release its descriptors; returns the exit status
        (negative: killed by that signal)."""
        code = self.popen.wait()
        self.read_output()
        for fd in (self.pidfd, self.output_fd):
            if fd >= 0:
                os.close(fd)
        self.pidfd = self.output_fd = -1
        self.page.close()
        return code


class OutputHistory:
    """The output tails of the last few generations of one worker slot."""

    def __init__(self, keep: int = 3) -> None:
        self._kept: collections.deque[dict[str, object]] = collections.deque(maxlen=keep)

    def add(self, generation: int, exit_text: str, tail: str) -> None:
        self._kept.append({"generation": generation, "exit": exit_text, "output": tail})

    def list(self) -> list[dict[str, object]]:
        return list(self._kept)
