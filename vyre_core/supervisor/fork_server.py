"""The pool's side of its fork server (``workers/fork_server.py``, which runs as
``python -m vyre_workers.fork_server``).

The server is started by the pool's I/O thread (so it dies with that thread, like a worker
would) and imports for a while; the pool holds the first starts until it is ready, and
starts workers the plain way whenever it cannot be used. Everything here is bounded: a
spawn that the server does not answer within ``ANSWER_WITHIN`` seconds fails (the server
is stopped; the pool starts that worker the plain way), and so does an exit status it
keeps to itself (the pool then stops it; the status is unknown).

What a plain start would give the worker is handed over with each spawn: the environment,
the working directory, the umask and the resource limits of this process at that moment.

The socket's descriptor is registered in the pool's poller, so only the pool closes it
(``close``), after unregistering it: closed earlier, its number could be reused by a new
worker's pidfd while stale poll events still name it.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import resource
import select
import socket
import subprocess
import sys
import time
from collections.abc import Mapping

import msgpack

from vyre_core.boundary.codec import FORK_REQUEST_BYTES

#: How long a ready server may take to answer a spawn or report a worker's exit (it forks
#: or reaps: milliseconds). The rules hear of a forked worker's death once its status is
#: in, so this also bounds how late a death is seen when its server is frozen.
ANSWER_WITHIN = 2.0
#: Variables read when an interpreter starts or numpy loads, or numba (which a backend may
#: have the server import: ``vyre.preload``): a server started under other values would
#: give its workers the wrong ones, so such a worker starts the plain way.
PRELOADED_PREFIXES = ("PYTHON", "LD_", "OMP_", "OPENBLAS_", "MKL_", "NUMBA_")
_ANSWER_BYTES = 4096  # (what the server says is small: ids and numbers)
SERVER_MODULE = "vyre_workers.fork_server"



class ServerState(enum.StrEnum):
    """A fork server's state, as its pool sees it."""

    STARTING = "starting"  # importing; starts wait for it (or go the plain way)
    READY = "ready"        # serving spawns
    GONE = "gone"          # stopped or lost: starts go the plain way, or to a new one


STARTING, READY, GONE = ServerState.STARTING, ServerState.READY, ServerState.GONE


class ForkServerError(OSError):
    """The fork server could not start a worker (it may still be fine: the pool decides)."""


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
        self.state = STARTING
        self.was_ready = False
        self.ready_by = time.monotonic() + ready_within
        self._poller = select.poll()  # (not select(): descriptors may be numbered >= 1024)
        self._poller.register(ours, select.POLLIN)
        self._preloaded = preloaded(env)
        self._exits: dict[int, int] = {}
        self._tags = 0

    def fileno(self) -> int:
        return self.control.fileno()

    def can_start(self, env: Mapping[str, str]) -> bool:
        return self.state == READY and preloaded(env) == self._preloaded

    def take_messages(self) -> None:
        """Read what the server said (without blocking): readiness and exit statuses."""
        while self._receive(block=False) is not None:
            pass

    def start(self, argv: list[str], env: Mapping[str, str], page_fd: int, lane_fd: int,
              output_fd: int) -> tuple[int, int]:
        """Fork a worker: its (pid, pidfd). Raises ForkServerError when the server cannot;
        one that does not answer (or cannot be reached) is stopped."""
        self._tags += 1
        tag = self._tags
        data = msgpack.packb({"op": "spawn", "tag": tag, "argv": argv, "env": dict(env),
                              **process_state()}, use_bin_type=True)
        if len(data) > FORK_REQUEST_BYTES:
            raise ForkServerError(errno.E2BIG, "the worker's environment is too large to "
                                               "hand over")
        try:
            socket.send_fds(self.control, [data], [page_fd, lane_fd, output_fd])
        except OSError as exc:
            if exc.errno not in (errno.EMSGSIZE, errno.ENOBUFS, errno.ENOMEM):
                self.stop()  # (too large a message is this spawn's problem, not the server's)
            raise ForkServerError(exc.errno or errno.EIO, str(exc)) from None
        deadline = time.monotonic() + ANSWER_WITHIN
        while True:
            message = self._receive(block=True, deadline=deadline)
            if message is None:
                if self.state != GONE:
                    self.stop()
                raise ForkServerError(errno.ETIMEDOUT, "the fork server did not answer")
            op = message.get("op")
            if op == "spawned" and message.get("tag") == tag:
                return message["pid"], message["pidfd"]
            if op == "failed" and message.get("tag") in (tag, None):
                raise ForkServerError(message.get("errno") or errno.EAGAIN,
                                      f"the fork server could not start a worker: "
                                      f"{message.get('error')}")

    def knows_exit(self, pid: int) -> bool:
        """Whether ``exit_code(pid)`` answers without waiting."""
        return pid in self._exits or self.state == GONE

    def exit_code(self, pid: int) -> int | None:
        """The exit status of a worker it forked (negative: killed by that signal), once it
        reports it, waiting at most ``ANSWER_WITHIN``; None when it does not say."""
        deadline = time.monotonic() + ANSWER_WITHIN
        while pid not in self._exits and self.state != GONE \
                and self._receive(block=True, deadline=deadline) is not None:
            pass
        return self._exits.pop(pid, None)

    def stop(self) -> None:
        """End the server, from any thread (its workers go with it: they die with their
        parent), within a bound; the socket stays open until ``close``."""
        self.state = GONE
        with contextlib.suppress(OSError):
            self.popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=ANSWER_WITHIN)

    def close(self) -> None:
        """(By the pool, once the descriptor is out of its poller.) Stop it, and close the
        socket."""
        self.stop()
        with contextlib.suppress(OSError):
            self.control.close()

    def forget(self) -> None:
        """(In a forked child.) The server is the parent's: close our copy of the socket
        and never touch the process."""
        self.state = GONE
        with contextlib.suppress(OSError):
            self.control.close()

    def _receive(self, block: bool, deadline: float = 0.0) -> dict | None:
        """One message, handled (readiness, exits), or None when there is none by the
        deadline, or the server has gone."""
        if self.state == GONE:
            return None
        wait = max(0.0, deadline - time.monotonic()) if block else 0.0
        if not self._poller.poll(int(wait * 1000)):
            return None
        try:
            data, fds, _, _ = socket.recv_fds(self.control, _ANSWER_BYTES, 1)
        except OSError:
            data, fds = b"", []
        for fd in fds:  # (received descriptors are inheritable: never into a user's exec)
            os.set_inheritable(fd, False)
        try:
            message = msgpack.unpackb(data, raw=False) if data else None
            op = message["op"] if message is not None else None
            if op == "exited":
                self._exits[int(message["pid"])] = message["code"]
        except Exception:  # never from our server: treat it as broken
            message = op = None
        if op is None or (op == "spawned" and len(fds) != 1):
            for fd in fds:
                os.close(fd)
            self.stop()  # gone (its end closed), or broken
            return None
        if op == "ready":
            self.state = READY
            self.was_ready = True
        elif op == "spawned":
            message["pidfd"] = fds[0]
            return message
        for fd in fds:
            os.close(fd)
        return message
