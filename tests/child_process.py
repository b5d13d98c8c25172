"""A driver run in a child Python, for tests that must kill, interrupt or starve the
process that owns the workers: the script runs in a session of its own (its own process
group, like a terminal job) and reports JSON lines on stdout."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

REPORT_LIMIT = 60.0  # seconds to wait for a report line of the child (a loaded machine)


class Child:
    """``script`` (the whole text) run with ``VYRE_RUNTIME_DIR`` set to ``runtime``."""

    def __init__(self, tmp_path: Path, script: str, runtime: Path | None = None) -> None:
        self.runtime = runtime if runtime is not None else tmp_path
        self.runtime.mkdir(exist_ok=True)
        self.err_path = tmp_path / "child.err"
        path = tmp_path / "child.py"
        path.write_text(script)
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(path)], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=err, start_new_session=True,
                env=dict(os.environ, VYRE_RUNTIME_DIR=str(self.runtime)))
        self.pgid = self.proc.pid  # a session leader's group is its own pid
        self._buffer = b""
        self.workers: list[psutil.Process] = []

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def report(self, timeout: float = REPORT_LIMIT) -> dict[str, Any]:
        """The child's next JSON line, waiting at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise AssertionError(f"no report from the child within {timeout} s; "
                                         f"stderr:\n{self.stderr()[-3000:]}")
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError(f"the child ended without a report (status "
                                         f"{self.proc.wait(10)}); stderr:\n{self.stderr()[-3000:]}")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def watch(self, pids: list[int]) -> list[psutil.Process]:
        """Worker processes to check (and clean up) later, taken while they run."""
        found = [psutil.Process(pid) for pid in pids]
        self.workers += found
        return found

    def interrupt(self) -> None:
        """Ctrl-C at the terminal: SIGINT to the child's whole process group."""
        os.killpg(self.pgid, signal.SIGINT)

    def stop(self) -> None:
        """Whatever happened: the child and every worker it reported are gone."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for proc in self.workers:
            if running(proc):
                proc.kill()
        self.proc.stdout.close()


def running(proc: psutil.Process) -> bool:
    """Alive: the same process (not a reused pid) and not a zombie awaiting its reaper."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _command(proc: psutil.Process) -> list[str] | None:
    """Its command line while it is alive, else None."""
    try:
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc.cmdline()
    except psutil.Error:
        return None


def title(command: list[str]) -> list[str]:
    """The words of a process's title (a retitled process's command line is its title
    padded with empty arguments)."""
    return " ".join(filter(None, command)).split()


def _is_fork_server(command: list[str] | None) -> bool:
    """Its title says so (or, before it names itself, its command line)."""
    return command is not None and (title(command)[:1] == ["vyre-fork-server"]
                                    or "vyre_workers.fork_server" in command)


def fork_servers(root: psutil.Process | None = None) -> list[psutil.Process]:
    """The live fork servers under ``root`` (default: this process)."""
    root = root or psutil.Process()
    return [p for p in root.children(recursive=True)
            if _is_fork_server(_command(p)) and not _is_fork_server(_command_of_parent(p))]


def worker_processes(root: psutil.Process | None = None,
                     backend: str | None = None) -> list[psutil.Process]:
    """The live worker processes under ``root`` (default: this process), of ``backend``
    or of any, by their title (``vyre-worker <backend> ...``), or before they name
    themselves: started by their pool (``-m vyre_workers``), or forked by its fork server
    (then still showing the server's title, which names the backend)."""
    found = []
    for proc in (root or psutil.Process()).children(recursive=True):
        command = _command(proc)
        if command is None:
            continue
        plain = title(command)[:1] == ["vyre-worker"] or "vyre_workers" in command
        forked = _is_fork_server(command) and _is_fork_server(_command_of_parent(proc))
        if (plain or forked) and (backend is None or backend in title(command)):
            found.append(proc)
    return found


def _command_of_parent(proc: psutil.Process) -> list[str] | None:
    try:
        parent = proc.parent()
    except psutil.Error:
        return None
    return None if parent is None else _command(parent)


def started_by(worker: psutil.Process, pid: int) -> bool:
    """Whether process ``pid`` started ``worker``: itself, or through its fork server."""
    try:
        parent = worker.parent()
        return parent is not None and (parent.pid == pid or parent.ppid() == pid)
    except psutil.Error:
        return False
