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
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
from typing import Any

from vyre_core.boundary.progress import ProgressPage
from vyre_core.contract.types import Capabilities, DeviceInfo, device_list
from vyre_core.errors import PoolFailedError, VyreError, system_resource_error
from vyre_core.memory import OomCounter
from vyre_core.supervisor.fork_server import ForkServer

#: The part of a worker's output kept in memory for crash errors, per generation.
OUTPUT_TAIL_BYTES = 64 * 1024
#: How much of that tail a crash error carries.
ERROR_TAIL_BYTES = 4096
#: Descriptors that must be free before a worker starts: its page, lane (both ends for a
#: moment), pipe and pidfd here, and the two connections ZeroMQ accepts from it (libzmq
#: aborts the whole process when an accept meets EMFILE, so a worker must never connect
#: to a parent without them).
DESCRIPTOR_HEADROOM = 8
#: How long reaping a process that should have ended may wait (one stuck in the kernel).
REAP_WITHIN = 5.0

_log = logging.getLogger("vyre.worker")


def ensure_descriptors(count: int = DESCRIPTOR_HEADROOM) -> None:
    """Raise OSError (EMFILE, ENFILE) unless ``count`` descriptors can be opened now."""
    opened: list[int] = []
    try:
        for _ in range(count):
            opened.append(os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC))
    finally:
        for fd in opened:
            os.close(fd)


class WorkerProcess:
    """One worker process: its pidfd, output pipe and progress page. Forked by the pool's
    fork server when it can (``fork_server.py``), else started as a new interpreter.
    Raises OSError (cleaning up what it opened) when the OS refuses any of them."""

    def __init__(self, args: list[str], env: dict[str, str], page: ProgressPage,
                 lane_fd: int, name: str, fork_server: ForkServer | None = None) -> None:
        """Start it, handing it ``page`` and its end of its lane: forked by ``fork_server``
        when given (raising ForkServerError when it cannot: the caller may then start it
        the plain way), else as a new interpreter."""
        self.page = page
        self.name = name
        self._tail = bytearray()
        self._partial = b""
        self._popen: subprocess.Popen | None = None
        self.fork_server = fork_server  # the one that forked it, if one did
        self.status_withheld = False    # its server did not report its exit in time
        self._fd_lock = threading.Lock()  # signals (any thread) against closing the pidfd
        read_fd, write_fd = os.pipe()
        try:
            fcntl.fcntl(read_fd, fcntl.F_SETFL, fcntl.fcntl(read_fd, fcntl.F_GETFL)
                        | os.O_NONBLOCK)
            if fork_server is not None:
                self.pid, self.pidfd = fork_server.start(args, env, page.fd, lane_fd,
                                                         write_fd)
            else:
                self._popen = subprocess.Popen(
                    [sys.executable, "-m", "vyre_workers", "--page-fd", str(page.fd),
                     "--lane-fd", str(lane_fd), *args],
                    stdin=subprocess.DEVNULL, stdout=write_fd, stderr=subprocess.STDOUT,
                    pass_fds=(page.fd, lane_fd), close_fds=True, env=env, process_group=0)
                self.pid = self._popen.pid
                self.pidfd = -1
        except BaseException:
            os.close(read_fd)
            os.close(write_fd)
            raise
        os.close(write_fd)
        self.output_fd = read_fd
        if self._popen is not None:
            try:
                self.pidfd = os.pidfd_open(self.pid)
            except BaseException:
                self._popen.kill()
                self._popen.wait()
                os.close(read_fd)
                raise
        self.oom = OomCounter(self.pid)  # (its cgroup: unknown once it is gone)

    def oom_killed(self, code: int | None) -> bool:
        """Whether an exit with ``code`` was the kernel's OOM killer: SIGKILL, and its
        memory cgroup counted an OOM kill since it started (or since the last look)."""
        return self.oom.new_kills() and code == -signal.SIGKILL

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        with self._fd_lock:  # (never a reused number: the pidfd is open while held)
            if self.pidfd >= 0:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(self.pidfd, sig)

    def exit_known(self) -> bool:
        """Whether ``reap`` (of an exited process) answers without waiting: a forked
        worker's status comes from its fork server, a moment after the exit itself."""
        return self.fork_server is None or self.fork_server.knows_exit(self.pid)

    def wait_exited(self, timeout: float) -> None:
        """Wait (at most ``timeout``) until the process has exited, without reaping it."""
        with self._fd_lock:
            if self.pidfd < 0:
                return
            watched = os.dup(self.pidfd)  # (closed by a reaping thread meanwhile: no matter)
        try:
            poller = select.poll()
            poller.register(watched, select.POLLIN)
            poller.poll(int(timeout * 1000))
        finally:
            os.close(watched)

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

    def reap(self) -> int | None:
        """Wait for the exited process and release its descriptors; returns the exit status
        (negative: killed by that signal; None: unknown, its fork server went without
        saying, or it did not end within ``REAP_WITHIN``). Bounded: by that, or by the fork
        server's answer limit for a forked worker."""
        if self._popen is not None:
            try:  # (exited, or SIGKILLed: only a process stuck in the kernel takes long)
                code: int | None = self._popen.wait(timeout=REAP_WITHIN)
            except subprocess.TimeoutExpired:
                code = None
        else:
            code = self.fork_server.exit_code(self.pid)  # type: ignore[union-attr]
        self.read_output()
        with self._fd_lock:
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


class Askers:
    """The short-lived processes (device listings, probes apart) a driver waits on, so
    that closing it ends them too: ``stop_all`` kills every one running and any started
    after it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self.stopped = False

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            if not self.stopped:
                self._running.add(proc)
                return
        proc.kill()

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._running.discard(proc)

    def stop_all(self) -> None:
        with self._lock:
            self.stopped = True
            running = list(self._running)
        for proc in running:  # (each is reaped by the thread that waits on it)
            with contextlib.suppress(OSError):
                proc.kill()


def list_devices(backend: str, entry_point: str, timeout: float,
                 askers: Askers | None = None) -> list[DeviceInfo]:
    """``backend``'s devices, listed by a short-lived worker process of its own (the parent
    never touches a device), within ``timeout`` seconds. Raises a VyreError saying why not."""
    answer = _ask(backend, entry_point, timeout, "devices",
                  f"listing the devices of backend {backend!r}", "Raise PoolOptions("
                  "timeouts=Timeouts(startup=...)), or name the device ids in "
                  "PoolOptions(devices=[...]).",
                  askers)
    return device_list(answer)


def probe_apart(backend: str, entry_point: str, timeout: float,
                askers: Askers | None = None) -> Capabilities:
    """What a worker of ``backend`` would probe on its preferred device, asked of a
    short-lived process of its own that ends with its answer (no pool, no fork server is
    made), within ``timeout`` seconds. Raises a VyreError saying why not."""
    answer = _ask(backend, entry_point, timeout, "capabilities",
                  f"probing backend {backend!r}", "Raise PoolOptions(timeouts=Timeouts("
                  "startup=...)), "
                  "or name the backend (backend=...) to start its pool instead.", askers)
    return Capabilities.from_dict(answer, f"backend {backend!r}")


def _ask(backend: str, entry_point: str, timeout: float, question: str, during: str,
         slow_fix: str, askers: Askers | None) -> Any:
    """The answer to ``question`` (``devices`` or ``capabilities``) of a short-lived
    ``python -m vyre_workers.devices`` process for ``backend`` (one of ``askers``)."""
    command = [sys.executable, "-m", "vyre_workers.devices", "--backend", backend,
               "--entry-point", entry_point, "--parent-pid", str(os.getpid())]
    if question == "capabilities":
        command.append("--capabilities")
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise system_resource_error(exc, during) from exc
    if askers is not None:
        askers.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise PoolFailedError(f"{during} took over {timeout:g} s", slow_fix,
                              backend=backend) from None
    except BaseException:  # (an interruption: the process never outlives the wait)
        proc.kill()
        proc.wait()
        raise
    finally:
        if askers is not None:
            askers.discard(proc)
    answer = _answer(out.decode(errors="replace"))
    try:
        if "error" in answer:
            raise VyreError.from_dict(answer["error"])
        return answer[question]
    except VyreError:
        raise
    except Exception:  # no answer: it died before it gave one
        tail = err.decode(errors="replace")[-ERROR_TAIL_BYTES:]
        raise PoolFailedError(f"{during} gave no answer (exit status {proc.returncode}):"
                              f"\n{tail}", "See the output above; `vyre doctor` checks "
                              "each backend.", backend=backend) from None


def _answer(output: str) -> dict:
    """The lister's answer: its last line that is one (a backend may print too)."""
    for line in reversed(output.splitlines()):
        with contextlib.suppress(ValueError):
            found = json.loads(line)
            if isinstance(found, dict) and ({"devices", "capabilities", "error"} & set(found)):
                return found
    return {}
