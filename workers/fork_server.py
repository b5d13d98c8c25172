"""The pool's fork server (zygote): ``python -m vyre_workers.fork_server``.

A worker's start is almost all imports. This process imports what every worker needs
once, then forks a worker per request from its pool, so a replacement costs a fork, the
plugin's own import and its ``prepare`` instead of a whole interpreter start. It never
imports a plugin and never opens a device or a ZeroMQ context: what it forks is clean. A
backend may name modules of its dependencies for it to import too (``preload``), such as
numba for the cpu backend: they must open no device and start no thread.

Parent-death detection holds through it: it dies with the pool's supervisor thread and
each worker dies with it (the kernel's parent-death signal at both steps). Because the
workers are its children and not the pool's, it reaps them and reports each exit status.
It talks to its pool only over an inherited socket pair (no name anyone else can reach):

    pool -> server   {"op": "spawn", "tag", "argv", "env", "cwd", "umask", "rlimits"}
                     + fds [progress page, lane, output]
                     (argv: the worker's, but for --page-fd and --lane-fd, which the
                     server adds)
    server -> pool   {"op": "ready", "pid"}
                     {"op": "spawned", "tag", "pid"}         + fd [the worker's pidfd]
                     {"op": "failed", "tag", "errno", "error"}
                     {"op": "exited", "pid", "code"}          (code: negative = a signal)

When its pool closes the socket (or goes), it SIGKILLs the workers still alive, reaps
them and leaves.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import os
import resource
import select
import signal
import socket
import sys
import traceback
from typing import NoReturn

import msgpack

# (the pool never sends more)
from vyre_core.boundary.codec import FORK_REQUEST_BYTES

# What every worker needs, imported once here (the reason this process exists).
from vyre_workers import title
from vyre_workers.__main__ import die_with_parent
from vyre_workers.__main__ import main as worker_main

#: Exit status of a forked child that could not become a worker.
CHILD_FAILED = 70
#: The entry points by which a backend's distribution names modules for its fork server
#: to import before it forks (``[project.entry-points."vyre.preload"] cpu = "numba"``).
PRELOAD_GROUP = "vyre.preload"


def preload(backend: str) -> list[str]:
    """Import the modules ``backend`` names in ``PRELOAD_GROUP``, so that every worker
    forked from here has them; returns those that failed. A failure costs only the time:
    each worker imports the module itself, and reports its error where it always would."""
    failed = []
    for entry in importlib.metadata.entry_points(group=PRELOAD_GROUP, name=backend):
        try:
            importlib.import_module(entry.value)
        except Exception:  # (BaseException: SystemExit and the like end the server)
            failed.append(entry.value)
    return failed


def _send(control: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    data = msgpack.packb(message, use_bin_type=True)
    if fds:
        socket.send_fds(control, [data], fds)
    else:
        control.send(data)


def _take_process_state(request: dict) -> None:
    """Become what a plain start would have made: the pool's working directory (also
    ``sys.path[0]``, as for ``python -m``), umask and resource limits at the spawn."""
    cwd = request.get("cwd")
    if isinstance(cwd, str):
        with contextlib.suppress(OSError):
            os.chdir(cwd)
            if not sys.flags.safe_path:  # (else sys.path[0] is no directory of the start)
                sys.path[0] = cwd
    if isinstance(request.get("umask"), int):
        os.umask(request["umask"])
    limits = request.get("rlimits")
    for name, value in (limits.items() if isinstance(limits, dict) else ()):
        with contextlib.suppress(AttributeError, ValueError, OSError, TypeError):
            resource.setrlimit(getattr(resource, name), tuple(value))


def _become_worker(request: dict, page_fd: int, lane_fd: int, out_fd: int,
                   inherited: list[int], server_pid: int) -> NoReturn:
    """(In the forked child.) Drop what was the server's, take the pool's environment,
    process state and output pipe, and run the worker; never returns into the server's
    loop."""
    code = CHILD_FAILED
    try:
        os.setpgid(0, 0)  # a terminal's Ctrl-C is the caller's, not its workers'
        for fd in inherited:
            os.close(fd)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        os.environ.clear()
        os.environ.update(request["env"])
        _take_process_state(request)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        code = worker_main(["--page-fd", str(page_fd), "--lane-fd", str(lane_fd),
                            *request["argv"]], parent_pid=server_pid)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


class _Server:
    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.children: dict[int, int] = {}  # pidfd -> pid
        self.poller = select.poll()
        self.poller.register(control, select.POLLIN)

    def serve(self) -> None:
        _send(self.control, {"op": "ready", "pid": os.getpid()})
        while True:
            for fd, _ in self.poller.poll():
                if fd == self.control.fileno():
                    if not self._take_request():
                        return
                elif fd in self.children:
                    self._reap(fd)

    def _take_request(self) -> bool:
        """Serve one request; False once the pool has gone."""
        try:
            data, fds, flags, _ = socket.recv_fds(self.control, FORK_REQUEST_BYTES, 3)
        except OSError:
            return False
        if not data:
            return False
        try:
            request = msgpack.unpackb(data, raw=False)
            tag = request["tag"]
            if flags & socket.MSG_TRUNC or len(fds) != 3 or request.get("op") != "spawn":
                raise ValueError("a malformed spawn request")
            if not isinstance(request.get("argv"), list) \
                    or not isinstance(request.get("env"), dict):
                raise ValueError("a spawn request needs argv and env")
            self._spawn(tag, request, *fds)
        except (ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
            _send(self.control, {"op": "failed", "tag": None, "errno": 22, "error": str(exc)})
        finally:
            for fd in fds:
                os.close(fd)
        return True

    def _spawn(self, tag: int, request: dict, page_fd: int, lane_fd: int,
               out_fd: int) -> None:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        server_pid = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            _send(self.control, {"op": "failed", "tag": tag, "errno": exc.errno or 11,
                                 "error": str(exc)})
            return
        if pid == 0:
            _become_worker(request, page_fd, lane_fd, out_fd,
                           [self.control.fileno(), *self.children], server_pid)
        try:  # before any wait: the pid is surely this child's
            pidfd = os.pidfd_open(pid)
        except OSError as exc:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            _send(self.control, {"op": "failed", "tag": tag, "errno": exc.errno or 24,
                                 "error": str(exc)})
            return
        self.children[pidfd] = pid
        self.poller.register(pidfd, select.POLLIN)
        _send(self.control, {"op": "spawned", "tag": tag, "pid": pid}, [pidfd])

    def _reap(self, pidfd: int) -> None:
        pid = self.children.pop(pidfd)
        self.poller.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        _send(self.control, {"op": "exited", "pid": pid,
                             "code": os.waitstatus_to_exitcode(status)})

    def stop_children(self) -> None:
        for pidfd in self.children:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        for pidfd, pid in list(self.children.items()):
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
            os.close(pidfd)
        self.children.clear()


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parser = argparse.ArgumentParser(prog="python -m vyre_workers.fork_server")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--backend", required=True)  # (names its pool in process listings)
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid)
    title.name_fork_server(args.backend, args.parent_pid)
    preload(args.backend)
    control = socket.socket(fileno=args.control_fd)
    server = _Server(control)
    try:
        server.serve()
    except OSError:  # the pool's end is gone
        pass
    finally:
        server.stop_children()
        control.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
