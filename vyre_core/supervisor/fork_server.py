"""The pool's side of its fork server (``vyre_workers/fork_server.py``).

The server is started by the pool's I/O thread (so it dies with that thread, like a worker
would) and imports for a while; until it says it is ready, and whenever it cannot be used,
workers start the plain way. Everything here is bounded: a server that does not answer a
spawn or report an exit within ``ANSWER_WITHIN`` seconds is killed (the worker then starts
the plain way; the exit's status is unknown).

What a plain start would give the worker is handed over with each spawn: the environment,
the working directory, the umask and the resource limits of this process at that moment.

The socket's descriptor is registered in the pool's poller, so only the pool closes it
(``close``), after unregistering it: closed earlier, its number could be reused by a new
worker's pidfd while stale poll events still name it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping

import msgpack

#: How long a ready server may take to answer a spawn or report a worker's exit (it forks
#: or reaps: milliseconds). The rules hear of a forked worker's death once its status is
#: in, so this also bounds how late a death is seen when its server is frozen.
ANSWER_WITHIN = 2.0
#: Variables read when an interpreter starts or numpy loads: a server started under other
#: values would give its workers the wrong ones, so such a worker starts the plain way.
PRELOADED_PREFIXES = ("PYTHON", "LD_", "OMP_", "OPENBLAS_", "MKL_")
MAX_MESSAGE_BYTES = 1 << 20  # (the socket's buffer may allow less: EMSGSIZE, no harm)
SERVER_MODULE = "vyre_workers.fork_server"

_log = logging.getLogger("vyre.pool")


def preloaded(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(PRELOADED_PREFIXES)}


def process_state() -> dict[str, object]:
    """What a process started now would inherit besides its environment: the working
    directory, the umask and the resource limits."""
    try:
        cwd = os.getcwd()
    except OSError:  # (removed meanwhile) the worker keeps the server's
        cwd = None
    umask = None
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
        umask = next((int(line.split()[1], 8) for line in status
                      if line.startswith("Umask:")), None)
    limits = {name: list(resource.getrlimit(getattr(resource, name)))
              for name in dir(resource) if name.startswith("RLIMIT_")}
    return {"cwd": cwd, "umask": umask, "rlimits": limits}


class ForkServer:
    """One pool's fork server process, as the pool's I/O thread sees it."""

    def __init__(self, backend: str, env: Mapping[str, str], ready_within: float) -> None:
        """Start it (without waiting for it); raises OSError when the OS refuses."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", SERVER_MODULE,
                 "--control-fd", str(theirs.fileno()), "--parent-pid", str(os.getpid()),
                 "--backend", backend],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),), close_fds=True, env=dict(env), process_group=0)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.control = ours
        self.state = "starting"  # starting, ready, gone
        self.was_ready = False
        self.ready_by = time.monotonic() + ready_within
        self._preloaded = preloaded(env)
        self._exits: dict[int, int] = {}
        self._tags = 0

    def fileno(self) -> int:
        return self.control.fileno()

    def can_start(self, env: Mapping[str, str]) -> bool:
        return self.state == "ready" and preloaded(env) == self._preloaded

    def close(self) -> None:
        """(By the pool, once the descriptor is out of its poller.) Stop it, and close the
        socket."""
        self.stop()
        with contextlib.suppress(OSError):
            self.control.close()

    def take_messages(self) -> None:
        """Read what the server said (without blocking): readiness and exit statuses."""
        while self.state != "gone":
            message = self._receive(block=False)
            if message is None:
                return

    def start(self, argv: list[str], env: Mapping[str, str], page_fd: int,
              output_fd: int) -> tuple[int, int]:
        """Fork a worker: its (pid, pidfd). Raises OSError when the server cannot; a server
        that does not answer is killed."""
        self._tags += 1
        tag = self._tags
        data = msgpack.packb({"op": "spawn", "tag": tag, "argv": argv, "env": dict(env),
                              **process_state()}, use_bin_type=True)
        if len(data) > MAX_MESSAGE_BYTES:
            raise OSError(errno.E2BIG, "the worker's environment is too large to hand over")
        try:
            socket.send_fds(self.control, [data], [page_fd, output_fd])
        except OSError as exc:
            if exc.errno not in (errno.EMSGSIZE, errno.ENOBUFS, errno.ENOMEM):
                self.stop()  # (too large a message is this spawn's problem, not the server's)
            raise
        deadline = time.monotonic() + ANSWER_WITHIN
        while True:
            message = self._receive(block=True, deadline=deadline)
            if message is None:
                self.stop()
                raise OSError(errno.ETIMEDOUT, "the fork server did not answer")
            op = message.get("op")
            if op == "spawned" and message.get("tag") == tag:
                return message["pid"], message["pidfd"]
            if op == "failed" and message.get("tag") in (tag, None):
                raise OSError(message.get("errno") or errno.EAGAIN,
                              f"the fork server could not start a worker: {message['error']}")

    def knows_exit(self, pid: int) -> bool:
        """Whether ``exit_code(pid)`` answers without waiting."""
        return pid in self._exits or self.state == "gone"

    def exit_code(self, pid: int, timeout: float | None = None) -> int | None:
        """The exit status of a worker it forked (negative: killed by that signal), once it
        reports it (waiting at most ``timeout``, default ``ANSWER_WITHIN``); None when the
        server went without saying. A server that keeps an exit to itself that long is
        stopped: it no longer serves."""
        deadline = time.monotonic() + (ANSWER_WITHIN if timeout is None else timeout)
        while pid not in self._exits and self.state != "gone":
            if self._receive(block=True, deadline=deadline) is None \
                    and time.monotonic() >= deadline:
                _log.warning("the fork server did not report the exit of pid %d; it is "
                             "stopped", pid)
                self.stop()
        return self._exits.pop(pid, None)

    def stop(self) -> None:
        """End the server (its workers go with it: they die with their parent), within a
        bound; the socket stays open until ``close``."""
        self.state = "gone"
        if self.popen.poll() is None:
            self.popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=ANSWER_WITHIN)

    def kill(self) -> None:
        """SIGKILL it and wait for it (from any thread: the last resort of a close)."""
        with contextlib.suppress(OSError):
            self.popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=ANSWER_WITHIN)

    def forget(self) -> None:
        """(In a forked child.) The server is the parent's: close our copy of the socket
        and never touch the process."""
        self.state = "gone"
        with contextlib.suppress(OSError):
            self.control.close()

    def _receive(self, block: bool, deadline: float = 0.0) -> dict | None:
        """One message (handled: readiness, exits), or None when there is none (by the
        deadline) or the server has gone."""
        if self.state == "gone":
            return None
        wait = max(0.0, deadline - time.monotonic()) if block else 0.0
        ready, _, _ = select.select([self.control], [], [], wait)
        if not ready:
            return None
        try:
            data, fds, _, _ = socket.recv_fds(self.control, MAX_MESSAGE_BYTES, 1)
        except OSError:
            data, fds = b"", []
        if not data:
            self._gone()
            return None
        try:
            message = msgpack.unpackb(data, raw=False)
            op = message["op"]
        except Exception:  # never from our server: treat it as broken
            for fd in fds:
                os.close(fd)
            self.stop()
            return None
        if op == "ready":
            self.state = "ready"
            self.was_ready = True
        elif op == "exited":
            self._exits[message["pid"]] = message["code"]
        elif op == "spawned":
            if len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                self.stop()
                return None
            message["pidfd"] = fds[0]
            return message
        for fd in fds:
            os.close(fd)
        return message

    def _gone(self) -> None:
        if self.state != "gone":
            _log.warning("the fork server of a pool left (%s); workers start the plain way "
                         "until a new one is ready", self._describe_exit())
        self.stop()

    def _describe_exit(self) -> str:
        code = self.popen.poll()
        if code is None:
            return "it closed its socket"
        with contextlib.suppress(ValueError):
            if code < 0:
                return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"
