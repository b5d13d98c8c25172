"""The local pool's worker processes: spawning one (the plain way or through the fork
server), the fork server's life, a process's exit and what it leaves, promotions of a
spare, and stopping them all. A room of its own because this is where the pool touches
the OS for processes, which the calls' path never does; ``Pool`` mixes it in
(``local/pool.py``)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import time
from typing import Any

import blake3
import psutil
import zmq

from vyre_core import framing
from vyre_core.boundary import codec
from vyre_core.boundary.progress import ProgressPage
from vyre_core.contract.types import THREADS_ENV
from vyre_core.dataplane import release_cached, short_of_descriptors
from vyre_core.errors import PoolFailedError, VyreError, system_resource_error
from vyre_core.supervisor.fork_server import GONE, STARTING, ForkServer, ForkServerError
from vyre_core.supervisor.lane import Lane
from vyre_core.supervisor.local.base import _Local
from vyre_core.supervisor.local.transfer import LocalTransfer
from vyre_core.supervisor.process import WorkerProcess, ensure_descriptors
from vyre_core.supervisor.rules.actions import Promote, Spawn, describe_exit
from vyre_core.supervisor.rules.requests import Request
from vyre_core.supervisor.rundir import ENV as RUNTIME_DIR_ENV

_log = logging.getLogger("vyre.supervisor")
FORK_SERVER_LOSSES = 3
#: How often (seconds) the I/O thread looks whether the socket workers report in through
#: is still there (a temp cleaner may remove the run directory); each worker start looks
#: too, since a new worker can say hello only through it.
ENDPOINT_CHECK_EVERY = 2.0


class Processes(_Local):
    """Spawning, exits and the fork server (see the module docstring)."""

    def _spawn(self, action: Spawn, retried: bool = False) -> None:
        w = self._machine.workers[action.index]
        if w.generation != action.generation or w.state != "spawning":
            return  # (parked, and the rules moved on meanwhile)
        if self._fork_server is None:
            self._launch_fork_server()  # (the last one left)
        if self._fork_server is not None and self._fork_server.state == STARTING:
            self._parked.append(action)  # forking is cheaper than starting anew
            return
        reg = self.registration
        identity = secrets.token_hex(16).encode()
        token = blake3.blake3(identity, key=self._secret).digest()
        name = f"{reg.id} worker {action.index}.{action.generation}"
        page = lane = theirs = None
        again = False  # out of descriptors: once more, after the segment caches let go
        try:
            self._keep_endpoint(time.monotonic())
            ensure_descriptors()
            handover = {"identity": identity, "token": token, "generation": action.generation}
            page = ProgressPage.create(handover)
            lane, theirs = self._new_lane(identity)
            args = ["--backend", reg.id, "--entry-point", reg.entry_point.split(" = ")[0],
                    "--endpoint", self._endpoint,
                    "--parent-pid", str(os.getpid()),
                    "--heartbeat", str(self.options.timeouts.heartbeat_interval),
                    "--spin", str(self.options.transport.spin),
                    "--max-message-bytes", str(self.options.transport.max_message_bytes)]
            if w.device is not None:
                args += ["--device", str(w.device)]
            env = dict(os.environ,
                       VYRE_WORKER=f"{reg.id}/{action.index}/{action.generation}")
            if self.options.threads is not None:
                env[THREADS_ENV] = str(self.options.threads)
            server = self._fork_server
            if server is not None and server.can_start(env):
                try:
                    proc = WorkerProcess(args, env, page, theirs.fileno(), name, server)
                except ForkServerError as exc:  # the plain way, with a page and lane of its
                    _log.warning("pool %r: %s could not be forked (%s); starting it the "
                                 "plain way", self.backend, name, exc)
                    page.close()  # own (a child forked before the server failed may hold
                    page = ProgressPage.create(handover)  # the first ones)
                    lane.doom()
                    theirs.close()
                    lane, theirs = self._new_lane(identity)
                    proc = WorkerProcess(args, env, page, theirs.fileno(), name)
            else:
                proc = WorkerProcess(args, env, page, theirs.fileno(), name)
        except Exception as exc:  # never a slot left spawning (VyreError: a path too long)
            if page is not None:
                page.close()
            if lane is not None:
                lane.doom()
            again = not retried and short_of_descriptors(exc) and release_cached() > 0
            if again:
                _log.warning("pool %r: out of file descriptors starting worker %d; cached "
                             "shared-memory segments were closed to make room",
                             self.backend, action.index)
            else:
                error = exc if isinstance(exc, VyreError) else system_resource_error(
                    OSError(getattr(exc, "errno", None) or errno.EAGAIN, str(exc)),
                    f"starting worker {action.index} of {reg.id!r}")
                self._machine.spawn_failed(action.index, action.generation, error,
                                           time.monotonic())
            return
        finally:
            if theirs is not None:
                theirs.close()  # (the worker's now, or nobody's)
            if again:  # (after the failed try's descriptors are closed)
                self._spawn(action, retried=True)
        self._processes[action.index] = proc
        self._index_of[identity] = action.index
        self._lanes[action.index] = lane
        self._poller.register(proc.pidfd, zmq.POLLIN)
        self._poller.register(proc.output_fd, zmq.POLLIN)
        self._machine.spawned(action.index, action.generation, identity, token, proc.pid,
                              time.monotonic())

    def _new_lane(self, identity: bytes) -> tuple[Lane, Any]:
        """A lane for the worker ``identity``, and the end of it to hand to that worker."""
        ours, theirs = framing.pair()
        return Lane(ours, identity, framing.StreamReader(
            ours, codec.MAX_FRAMES,
            self.options.transport.max_message_bytes + codec.MAX_HEADER_BYTES)), theirs

    def _keep_endpoint(self, now: float) -> None:
        """(I/O thread.) If the socket workers say hello through is gone with the run
        directory, make the directory again and bind anew: workers already connected stay
        so (and lanes are socketpairs, never in it). PoolFailedError, with a Fix, when it
        cannot be made again: a start then fails with it instead of timing out unheard."""
        self._endpoint_check_at = now + ENDPOINT_CHECK_EVERY
        path = self._endpoint.removeprefix("ipc://")
        if os.path.exists(path):
            return
        try:
            self._rundir.restore()
            self._router.bind(self._endpoint)  # (the old listener keeps its connections)
        except (VyreError, zmq.ZMQError) as exc:
            cause, fix = (exc.cause, " " + exc.fix) if isinstance(exc, VyreError) \
                else (str(exc), "")
            if self._endpoint_lost is None:
                _log.error("pool %r: its socket %s is gone with its run directory and cannot "
                           "be made again: %s", self.backend, path, cause)
            self._endpoint_lost = cause
            raise PoolFailedError(
                f"pool {self.backend!r} lost its run directory (its socket {path} is gone) "
                f"and cannot make it again: {cause}",
                "Keep temp cleaners (systemd-tmpfiles, tmpreaper, rm -rf) off the run "
                f"directory, or point {RUNTIME_DIR_ENV} at a directory they leave alone; the "
                "pool tries again at each worker start." + fix, backend=self.backend) from exc
        self._endpoint_lost = None
        _log.warning("pool %r: its socket %s was gone (the run directory removed?); bound "
                     "again", self.backend, path)

    def _launch_fork_server(self) -> None:
        """(I/O thread: the server dies with it.) Start the fork server, without waiting;
        until it is ready, workers start the plain way or wait for it (``_spawn``)."""
        losses = self._fork_server_losses
        while losses and losses[0] < time.monotonic() - self.options.restart.window:
            losses.popleft()
        if not self.options.transport.fork_server or self._fork_server_broken \
                or len(losses) >= FORK_SERVER_LOSSES:
            return
        try:
            server = ForkServer(self.backend, os.environ, self.options.timeouts.startup)
        except OSError as exc:
            _log.warning("pool %r: no fork server (%s); workers start the plain way",
                         self.backend, exc)
            return
        self._fork_server, self._fork_server_fd = server, server.fileno()
        self._poller.register(self._fork_server_fd, zmq.POLLIN)

    def _hear_fork_server(self, readable: bool, now: float) -> None:
        """Take the fork server's news; once it is ready or gone, the spawns parked for it
        are carried out (by it, or the plain way) at the top of the next round, before
        the next poll: never on events polled before they existed."""
        server = self._fork_server
        assert server is not None
        if readable:
            server.take_messages()
        if server.state == STARTING and now > server.ready_by:
            _log.warning("pool %r: the fork server was not ready within %g s; workers start "
                         "the plain way", self.backend, self.options.timeouts.startup)
            server.stop()
        if server.state == GONE:
            _log.warning("pool %r: its fork server (pid %d) %s; workers start the plain way "
                         "until a new one is ready", self.backend, server.popen.pid,
                         describe_exit(server.popen.poll()))
            self._fork_server_losses.append(now)
            self._fork_server_broken |= not server.was_ready  # it never worked: no more
            self._drop_fork_server()
        if server.state != STARTING:
            self._deferred += self._parked
            self._parked = []

    def _drop_fork_server(self) -> None:
        """Stop the fork server; its socket is closed only once out of the poller."""
        server, fd = self._fork_server, self._fork_server_fd
        if server is not None:
            with contextlib.suppress(KeyError):
                self._poller.unregister(fd)
            server.close()
        self._fork_server, self._fork_server_fd = None, -1

    def _shell_deadlines(self) -> list[float]:
        """When the shell itself must look again: exit statuses due from the fork server,
        the server's readiness."""
        due = list(self._exits_awaited.values())
        if self._fork_server is not None and self._fork_server.state == STARTING:
            due.append(self._fork_server.ready_by)
        return due

    def _settle_exits(self, now: float) -> None:
        """Tell the rules of the exits whose status is known: at once for a worker started
        the plain way, once its fork server reports for a forked one (or after
        ``ANSWER_WITHIN``: the server is then stopped, and the status unknown)."""
        for proc, due in list(self._exits_awaited.items()):
            if proc.exit_known() or now >= due:
                if not proc.exit_known():  # a server that keeps it to itself serves no more
                    _log.warning("pool %r: the fork server did not report how %s ended; "
                                 "it is stopped", self.backend, proc.name)
                    proc.status_withheld = True  # (it died on its own: not collateral)
                    proc.fork_server.stop()
                del self._exits_awaited[proc]
                # by process: a promotion may have moved it
                index = next(i for i, p in self._processes.items() if p is proc)
                self._exited(index, now)

    def _exited(self, index: int, now: float) -> None:
        proc = self._processes.pop(index)
        lane = self._lanes.pop(index, None)
        if lane is not None:
            held = lane in self._io_lanes
            try:
                if held or lane.take(timeout=0):  # what it sent last is heard (and counted)
                    try:
                        for msg in self._read_lane(lane):
                            self._machine.message(lane.identity, msg, now)
                    finally:
                        if not held:
                            lane.give()
            finally:
                lane.doom()  # (closed by its holder, if any, when it lets go)
        self._pages.pop(index, None)
        for fd in (proc.pidfd, proc.output_fd):
            if fd >= 0:
                with contextlib.suppress(KeyError):
                    self._poller.unregister(fd)
        self._exits_awaited.pop(proc, None)
        received, answered, reply_bytes = proc.page.read()
        self._machine.progress(index, received, answered, now, reply_bytes=reply_bytes)
        code = proc.reap()
        # unknown, for a forked worker whose exit was not withheld: its server went first,
        # and it with the server
        collateral = code is None and proc.fork_server is not None \
            and not proc.status_withheld
        tail = proc.output_tail()
        self._history[index].add(self._machine.workers[index].generation, describe_exit(code),
                                 tail)
        self._index_of = {k: v for k, v in self._index_of.items() if v != index}
        self._machine.exited(index, code, tail, now, collateral=collateral,
                             oom_killed=proc.oom_killed(code))
        for promotion in self._machine.take_promotions():
            self._promote(promotion)

    def _promote(self, action: Promote) -> None:
        """The spare slot's process serves ``action.index`` now: so do its records."""
        proc = self._processes.pop(action.spare)
        self._processes[action.index] = proc
        self._lanes[action.index] = self._lanes.pop(action.spare)
        self._pages.pop(action.spare, None)
        self._pages.pop(action.index, None)
        self._index_of = {k: (action.index if v == action.spare else v)
                          for k, v in self._index_of.items()}

    def _read_pages(self, now: float) -> None:
        for index, proc in self._processes.items():
            page = proc.page.read()
            if page != self._pages.get(index):
                self._pages[index] = page
                self._machine.progress(index, *page[:2], now, reply_bytes=page[2])

    def _measure(self, identity: bytes) -> None:
        index = self._index_of.get(identity)
        proc = self._processes.get(index) if index is not None else None
        if proc is not None:
            with contextlib.suppress(psutil.Error):
                self._machine.measured(index, psutil.Process(proc.pid).memory_info().rss)

    def _stop_all(self) -> None:
        """On the way out of the I/O thread: no worker may outlive it, and the memory only
        they could still write is free once they are gone."""
        for proc in self._processes.values():
            proc.kill()
        for index, proc in list(self._processes.items()):
            proc.reap()
            del self._processes[index]
        self._drop_fork_server()  # (after the reaping: it reports exit statuses)
        # every request still known (queued, on a worker, or not yet taken from the inbox,
        # as when this thread failed): what it holds is free now, and a caller's array it
        # named would otherwise keep every later call that names it waiting
        machine = self._machine
        known = [*machine.queue, *(item for item in self._inbox if isinstance(item, Request))]
        for worker in machine.workers:
            known += [*worker.holding, *worker.pinned, worker.current]
            worker.holding.clear()
        for request in known:
            if request is not None and isinstance(request.transfer, LocalTransfer):
                self._release(request)
        for lane in list(self._io_lanes):
            with contextlib.suppress(KeyError):
                self._poller.unregister(lane.fd)
            lane.give()
        self._io_lanes.clear()
        for lane in self._lanes.values():
            lane.doom()
        self._lanes.clear()
        self._segments.close()
