"""A pool of worker processes for one backend, supervised by one I/O thread.

The I/O thread owns the ROUTER socket and polls it together with a wake pipe (callers
enqueue requests from any thread) and one pidfd per worker, so a worker's death is seen
the moment it happens. It alone sends, matches replies to requests by id and generation
(a reply from an earlier generation is dropped), enforces deadlines (terminate, then
kill after a grace period), retries pure work cut off by a crash, recovers lost devices,
recycles workers between requests, and fails the pool past its restart intensity.
Every request's future is always resolved: with a reply, or with a VyreError.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import psutil
import zmq

from vyre_core import protocol
from vyre_core.contract.types import Capabilities
from vyre_core.errors import (
    DeviceLostError,
    DispatchTimeoutError,
    InvalidConfigError,
    PipelineInvalidatedError,
    PoolFailedError,
    ProtocolError,
    VyreError,
    WorkerCrashedError,
)
from vyre_core.protocol import Message, Op
from vyre_core.registry import BackendRegistration
from vyre_core.supervisor.process import WorkerProcess, describe_exit
from vyre_core.supervisor.rundir import RunDir


@dataclass(frozen=True)
class PoolOptions:
    """How a backend's workers are run; see docs/operations.md."""

    workers: int = 1
    max_restarts: int = 5           # Erlang-style intensity: at most this many restarts ...
    restart_window: float = 60.0    # ... in this many seconds, else the pool fails
    kill_grace: float = 2.0         # SIGTERM -> SIGKILL delay
    startup_timeout: float = 60.0   # spawn -> hello
    compile_timeout: float = 120.0
    heartbeat_interval: float = 0.5
    heartbeat_timeout: float = 30.0  # a busy worker silent this long is stuck: killed
    recycle_rss_bytes: int | None = None
    recycle_after: int | None = None  # requests served
    max_message_bytes: int = protocol.MAX_MESSAGE_BYTES

    def __post_init__(self) -> None:
        positive = {name: getattr(self, name) for name in (
            "kill_grace", "startup_timeout", "compile_timeout", "heartbeat_interval",
            "heartbeat_timeout", "restart_window")}
        bad = [f"{k}={v!r}" for k, v in positive.items() if not v > 0]
        if self.workers < 1 or self.max_restarts < 0:
            bad.append(f"workers={self.workers}, max_restarts={self.max_restarts}")
        if self.heartbeat_interval >= self.heartbeat_timeout:
            bad.append(f"heartbeat_interval={self.heartbeat_interval} is not below "
                       f"heartbeat_timeout={self.heartbeat_timeout}")
        bad += [f"{k}={v!r}" for k, v in (("recycle_rss_bytes", self.recycle_rss_bytes),
                                          ("recycle_after", self.recycle_after))
                if v is not None and v < 1]
        if bad:
            raise InvalidConfigError(f"bad pool options: {', '.join(bad)}",
                                     "Use workers >= 1, max_restarts >= 0, positive times "
                                     "(heartbeats more often than their timeout), and "
                                     "recycle limits >= 1 or None.")


_request_ids = itertools.count(1)


class Request:
    """One request and the future its caller waits on."""

    def __init__(self, op: Op, meta: dict[str, Any], arrays: list[Any], *,
                 timeout: float | None = None, retries: int = 0, slot: int | None = None,
                 generation: int | None = None,
                 on_done: Callable[[Message], None] | None = None) -> None:
        self.id = next(_request_ids)
        self.op = op
        self.meta = meta
        self.arrays = arrays
        self.timeout = timeout
        self.retries = retries
        self.slot = slot               # pinned to a worker (pipelines, resident buffers)
        self.generation = generation   # ... made in this generation
        self.on_done = on_done         # internal requests: no caller, a callback
        self.future: Future = Future()
        self.deadline: float | None = None
        self.finished = False  # resolved (or about to be): never retried or re-answered
        self.served_by: tuple[int, int] | None = None  # (worker index, generation)

    def renewed(self) -> Request:
        """A fresh copy (new id and future) to send again elsewhere."""
        return Request(self.op, self.meta, self.arrays, timeout=self.timeout,
                       retries=self.retries, slot=self.slot, generation=self.generation,
                       on_done=self.on_done)


class _Slot:
    def __init__(self, index: int) -> None:
        self.index = index
        self.generation = 0
        self.process: WorkerProcess | None = None
        self.identity = b""
        self.state = "stopped"  # starting, idle, busy, stopping, killing, stopped
        self.current: Request | None = None
        self.pinned: collections.deque[Request] = collections.deque()
        self.deadline: float | None = None  # startup deadline or kill escalation
        self.last_beat = 0.0
        self.restarts = 0
        self.served = 0                 # caller requests, over every generation
        self.served_generation = 0      # caller requests by the current process
        self.capabilities: Capabilities | None = None
        self.hello_error: str | None = None
        self.last_exit = ""


class Pool:
    def __init__(self, registration: BackendRegistration, rundir: RunDir, name: str,
                 options: PoolOptions, on_capabilities: Callable[[], None]) -> None:
        self.registration = registration
        self.backend = registration.id
        self.options = options
        self._rundir = rundir
        self._on_capabilities = on_capabilities
        self._lock = threading.Lock()
        self._slots = [_Slot(i) for i in range(options.workers)]
        self._by_identity: dict[bytes, _Slot] = {}
        self._queue: collections.deque[Request] = collections.deque()
        self._restart_times: collections.deque[float] = collections.deque()
        self._resolved: list[tuple[Future, Any, bool]] = []
        self.failure: PoolFailedError | None = None
        self.dropped_replies = 0
        self._closing = False
        self._thread: threading.Thread | None = None
        self._endpoint = rundir.endpoint(name)  # short: ipc paths have a length limit

    # -- caller side ---------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities | None:
        """Capabilities probed by the most recent worker to say hello (None before)."""
        with self._lock:
            known = [s.capabilities for s in self._slots if s.capabilities is not None]
        return known[-1] if known else None

    def generation_of(self, slot: int) -> int:
        with self._lock:
            return self._slots[slot].generation

    def submit(self, request: Request) -> Future:
        size = sum(protocol.as_frame_array(a).nbytes for a in request.arrays)
        if size > self.options.max_message_bytes:
            request.future.set_exception(ProtocolError(
                f"{request.op} to {self.backend!r} carries {size} bytes, over "
                f"max_message_bytes={self.options.max_message_bytes}",
                "Split the data across dispatches, or raise PoolOptions.max_message_bytes."))
            return request.future
        with self._lock:
            if self._closing:
                request.future.set_exception(PoolFailedError(
                    f"the driver is closed; pool {self.backend!r} takes no more work",
                    "Create a new vyre Driver."))
                return request.future
            if self.failure is not None:
                request.future.set_exception(self.failure)
                return request.future
            if self._thread is None:
                self._start()
            if request.slot is None:
                self._queue.append(request)
            else:
                self._slots[request.slot].pinned.append(request)
        self._wake()
        return request.future

    def call(self, request: Request) -> tuple[dict[str, Any], list[Any]]:
        """Submit and wait; the supervisor guarantees the wait ends."""
        return self.submit(request).result()

    def status(self) -> dict[str, Any]:
        with self._lock:
            workers = [{"index": s.index, "pid": s.process.pid if s.process else None,
                        "generation": s.generation, "state": s.state, "restarts": s.restarts,
                        "in_flight": int(s.current is not None and s.current.on_done is None),
                        "served": s.served, "queued": len(s.pinned)} for s in self._slots]
            state = ("failed" if self.failure else "closed" if self._closing
                     else "not started" if self._thread is None else "running")
            return {"backend": self.backend, "state": state, "queued": len(self._queue),
                    "restarts": sum(s.restarts for s in self._slots),
                    "dropped_replies": self.dropped_replies, "workers": workers,
                    "failure": None if self.failure is None else self.failure.cause}

    def close(self) -> None:
        """Stop every worker and fail what was still pending; idempotent."""
        with self._lock:
            if self._closing:
                thread = self._thread
            else:
                self._closing = True
                thread = self._thread
                closed = PoolFailedError(f"the driver was closed while this request to "
                                         f"{self.backend!r} was pending",
                                         "Keep the driver open until results are collected.")
                for req in self._take_all_pending():
                    self._fail(req, closed)
        self._flush_resolved()
        if thread is not None:
            self._wake()
            thread.join(timeout=self.options.kill_grace + 10)

    # -- supervisor thread ----------------------------------------------------------------

    def _start(self) -> None:
        self._context = zmq.Context()
        self._router = self._context.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.LINGER, 0)
        self._router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._router.setsockopt(zmq.SNDHWM, 0)
        self._router.setsockopt(zmq.RCVHWM, 0)
        self._router.bind(self._endpoint)
        self._wake_r, self._wake_w = os.pipe()
        for fd in (self._wake_r, self._wake_w):
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        self._poller = zmq.Poller()
        self._poller.register(self._router, zmq.POLLIN)
        self._poller.register(self._wake_r, zmq.POLLIN)
        # Workers are spawned by the supervisor thread only: the kernel's parent-death
        # signal is tied to the thread that forked, and this one outlives its workers.
        self._thread = threading.Thread(target=self._run, name=f"vyre-pool-{self.backend}",
                                        daemon=True)
        self._thread.start()

    def _wake(self) -> None:
        with contextlib.suppress(AttributeError, OSError):  # a wake is already pending
            os.write(self._wake_w, b"\0")

    def _run(self) -> None:
        try:
            with self._lock:
                for slot in self._slots:
                    self._spawn(slot)
                timeout = self._poll_timeout()
            while True:
                # Resolve futures right before blocking: the woken callers get the GIL at
                # once instead of waiting for this thread's bookkeeping.
                self._flush_resolved()
                events = dict(self._poller.poll(timeout))
                with self._lock:
                    if self._closing:
                        break
                    if self._wake_r in events:
                        self._drain_wake()
                    if self._router in events:
                        self._receive()
                    for slot in self._slots:
                        if slot.process is not None and slot.process.pidfd in events:
                            self._on_exit(slot)
                    self._on_timers(time.monotonic())
                    self._schedule()
                    timeout = self._poll_timeout()
        except BaseException as exc:  # the supervisor itself failed: leave nobody waiting
            with self._lock:
                self.failure = PoolFailedError(
                    f"the supervisor of pool {self.backend!r} crashed: "
                    f"{type(exc).__name__}: {exc}", "Report this as a bug in vyre.")
                for req in self._take_all_pending():
                    self._fail(req, self.failure)
            self._flush_resolved()
        finally:
            self._stop_workers()

    def _poll_timeout(self) -> int:
        now = time.monotonic()
        timers = [1.0]
        for s in self._slots:
            if s.deadline is not None:
                timers.append(s.deadline - now)
            if s.current is not None and s.current.deadline is not None:
                timers.append(s.current.deadline - now)
            if s.state == "busy":
                timers.append(s.last_beat + self.options.heartbeat_timeout - now)
        return max(0, int(min(timers) * 1000) + 1)

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    # -- workers ---------------------------------------------------------------------------

    def _spawn(self, slot: _Slot) -> None:
        slot.generation += 1
        slot.identity = f"w{slot.index}.{slot.generation}".encode()
        slot.capabilities = None
        slot.hello_error = None
        slot.served_generation = 0
        reg = self.registration
        args = ["--backend", reg.id, "--entry-point", reg.entry_point.split(" = ")[0],
                "--endpoint", self._endpoint, "--identity", slot.identity.decode(),
                "--generation", str(slot.generation), "--parent-pid", str(os.getpid()),
                "--heartbeat", str(self.options.heartbeat_interval),
                "--max-message-bytes", str(self.options.max_message_bytes)]
        env = dict(os.environ, VYRE_WORKER=f"{reg.id}/{slot.index}/{slot.generation}")
        slot.process = WorkerProcess(args, self._rundir.log(slot.identity.decode()), env)
        self._poller.register(slot.process.pidfd, zmq.POLLIN)
        self._by_identity[slot.identity] = slot
        slot.state = "starting"
        slot.deadline = time.monotonic() + self.options.startup_timeout
        slot.last_beat = time.monotonic()

    def _retire(self, slot: _Slot, state: str) -> None:
        """Ask a worker to stop (SIGTERM or a SHUTDOWN request), SIGKILL after the grace."""
        if slot.process is None or slot.state in ("stopping", "killing"):
            return
        if state == "stopping" and slot.state == "idle":
            self._send(slot, Request(Op.SHUTDOWN, {}, [], on_done=lambda m: None))
        else:
            slot.process.terminate()
        slot.state = state
        slot.deadline = time.monotonic() + self.options.kill_grace

    def _on_exit(self, slot: _Slot) -> None:
        process = slot.process
        self._poller.unregister(process.pidfd)
        code = process.reap()
        tail = process.stderr_tail()
        self._by_identity.pop(slot.identity, None)
        planned = slot.state in ("stopping", "killing")
        slot.last_exit = f"worker {slot.index} (pid {process.pid}) {describe_exit(code)}"
        slot.process = None
        slot.deadline = None
        req, slot.current = slot.current, None
        if req is not None and req.on_done is None and not req.finished:
            if code == -signal.SIGABRT:
                # Device runtimes abort the process on some calls to a lost device: that
                # is a device loss, answered as one; the restart invalidates its handles.
                self._fail(req, DeviceLostError(
                    f"{slot.last_exit} while serving {req.op} on {self.backend!r}: the device "
                    f"runtime aborted, treated as a lost device", generation=slot.generation,
                    stderr=tail))
            elif req.slot is None and req.retries > 0:
                req.retries -= 1
                self._queue.appendleft(req)  # pure work: run it again on a fresh worker
            else:
                self._fail(req, WorkerCrashedError(
                    f"{slot.last_exit} while serving {req.op} on {self.backend!r}",
                    stderr=tail))
        slot.state = "stopped"
        if self._closing:
            return
        if not planned and req is None:  # died idle or starting: the worker's own fault
            slot.restarts += 1  # deaths charged to the restart intensity
            now = time.monotonic()
            self._restart_times.append(now)
            window_start = now - self.options.restart_window
            while self._restart_times and self._restart_times[0] < window_start:
                self._restart_times.popleft()
            if len(self._restart_times) > self.options.max_restarts:
                self._fail_pool(slot, tail)
                return
        self._spawn(slot)

    def _fail_pool(self, slot: _Slot, tail: str) -> None:
        why = slot.hello_error or tail or "(no output)"
        self.failure = PoolFailedError(
            f"pool {self.backend!r} failed: more than {self.options.max_restarts} worker "
            f"restarts in {self.options.restart_window:g} s; last: {slot.last_exit}. "
            f"Worker output:\n{why}",
            "Fix the backend (see the worker output above) or uninstall it; routing skips "
            "it until the driver restarts.", backend=self.backend)
        for req in self._take_all_pending():
            self._fail(req, self.failure)
        for other in self._slots:
            self._retire(other, "killing")
        self._on_capabilities()

    # -- messages ----------------------------------------------------------------------------

    def _send(self, slot: _Slot, req: Request) -> None:
        msg = Message(req.op, req.id, slot.generation, req.meta, req.arrays)
        try:
            protocol.send(self._router, msg, slot.identity)
        except zmq.ZMQError:  # the worker's socket is gone: make sure its exit follows
            if req.on_done is None:
                (self._queue if req.slot is None else slot.pinned).appendleft(req)
            self._retire(slot, "killing")
            return
        slot.current = req
        req.served_by = (slot.index, slot.generation)
        slot.state = "busy"
        slot.last_beat = time.monotonic()
        if req.timeout is not None:
            req.deadline = time.monotonic() + req.timeout

    def _receive(self) -> None:
        for _ in range(256):
            try:
                frames = self._router.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            self._on_message(frames[0].bytes, frames[1:])

    def _on_message(self, identity: bytes, frames: list[Any]) -> None:
        if identity.endswith(b":hb"):
            slot = self._by_identity.get(identity[:-3])
            if slot is not None:
                slot.last_beat = time.monotonic()
            return
        slot = self._by_identity.get(identity)
        if slot is None:
            self.dropped_replies += 1  # from a worker that is already gone
            return
        try:
            msg = protocol.decode(frames, self.options.max_message_bytes)
        except ProtocolError as exc:
            req = slot.current
            if req is not None and exc.details.get("request_id") == req.id:
                self._finish(slot, req, exc)
            else:
                self.dropped_replies += 1
            return
        if msg.op is Op.HELLO:
            if msg.gen == slot.generation and slot.state == "starting":
                slot.state, slot.deadline = "idle", None
                slot.last_beat = time.monotonic()
                slot.capabilities = Capabilities.from_dict(msg.meta["capabilities"])
                self._on_capabilities()
        elif msg.op is Op.HELLO_FAILED:
            error = VyreError.from_dict(msg.meta.get("error", {}))
            slot.hello_error = f"{error}\n{msg.meta.get('traceback', '')}".strip()
        elif msg.op in (Op.REPLY, Op.ERROR):
            req = slot.current
            if req is None or msg.id != req.id or msg.gen != slot.generation \
                    or slot.state == "killing":
                self.dropped_replies += 1  # late: its request already ended
                return
            result = (VyreError.from_dict(msg.meta.get("error", {})) if msg.op is Op.ERROR
                      else (msg.meta, msg.arrays))
            self._finish(slot, req, result)
        else:
            self.dropped_replies += 1

    def _finish(self, slot: _Slot, req: Request, result: Any) -> None:
        slot.current = None
        slot.state = "stopping" if req.op is Op.SHUTDOWN else "idle"
        if req.on_done is None and req.op is not Op.PING:
            slot.served += 1
            slot.served_generation += 1
        if req.on_done is not None:
            req.on_done(result)
        elif isinstance(result, Exception):
            self._fail(req, result)
        elif not req.finished:
            req.finished = True
            self._resolved.append((req.future, result, False))
        if isinstance(result, DeviceLostError):
            self._recover(slot)
        elif slot.state == "idle" and self._should_recycle(slot):
            self._retire(slot, "stopping")

    def _recover(self, slot: _Slot) -> None:
        """Device lost: ask the backend to recover in place (new generation), else restart."""
        def done(result: Any) -> None:
            if isinstance(result, Exception):
                self._retire(slot, "stopping")
            else:
                slot.generation += 1
                slot.capabilities = Capabilities.from_dict(result[0]["capabilities"])
                self._on_capabilities()

        self._send(slot, Request(Op.TRY_RECOVER, {"generation": slot.generation + 1}, [],
                                 on_done=done))

    def _should_recycle(self, slot: _Slot) -> bool:
        opts = self.options
        if opts.recycle_after is not None and slot.served_generation >= opts.recycle_after:
            return True
        if opts.recycle_rss_bytes is not None and slot.process is not None:
            try:
                return psutil.Process(slot.process.pid).memory_info().rss > opts.recycle_rss_bytes
            except psutil.Error:
                return False
        return False

    def _on_timers(self, now: float) -> None:
        for slot in self._slots:
            req = slot.current
            if req is not None and req.deadline is not None and now >= req.deadline \
                    and slot.state == "busy":
                self._fail(req, DispatchTimeoutError(
                    f"{req.meta.get('label') or req.op} on {self.backend!r} ran past its "
                    f"{req.timeout:g} s deadline; worker {slot.index} was killed",
                    timeout=req.timeout))
                self._retire(slot, "killing")
            elif slot.state == "busy" and now - slot.last_beat > self.options.heartbeat_timeout:
                if req is not None and req.on_done is None:
                    self._fail(req, WorkerCrashedError(
                        f"worker {slot.index} of {self.backend!r} sent no heartbeat for "
                        f"{self.options.heartbeat_timeout:g} s while serving {req.op}",
                        "The backend is stuck holding the GIL; set DispatchConfig.timeout, "
                        "or report the hang to its authors."))
                self._retire(slot, "killing")
            elif slot.deadline is not None and now >= slot.deadline:
                if slot.state == "starting":
                    slot.hello_error = (f"no hello within {self.options.startup_timeout:g} s "
                                        "of starting")
                    slot.process.kill()
                elif slot.state in ("stopping", "killing") and slot.process is not None:
                    slot.process.kill()
                slot.deadline = None

    # -- queue helpers ----------------------------------------------------------------------

    def _schedule(self) -> None:
        if self.failure is not None:
            return
        for slot in self._slots:
            if slot.state != "idle":
                continue
            req = None
            while slot.pinned and req is None:
                req = slot.pinned.popleft()
                if req.generation != slot.generation:
                    self._fail(req, PipelineInvalidatedError(
                        f"{req.op} uses a handle from worker {slot.index} generation "
                        f"{req.generation}; that worker is now generation {slot.generation}",
                        generation=req.generation, backend=self.backend))
                    req = None
            if req is None and self._queue:
                req = self._queue.popleft()
            if req is not None:
                self._send(slot, req)

    def _take_all_pending(self) -> list[Request]:
        pending = list(self._queue)
        self._queue.clear()
        for slot in self._slots:
            pending.extend(slot.pinned)
            slot.pinned.clear()
            if slot.current is not None and slot.current.on_done is None:
                pending.append(slot.current)
        return pending

    def _fail(self, req: Request, error: Exception) -> None:
        if req.on_done is None and not req.finished:
            req.finished = True
            self._resolved.append((req.future, error, True))

    def _flush_resolved(self) -> None:
        with self._lock:
            resolved, self._resolved = self._resolved, []
        for future, value, is_error in resolved:
            if future.done():
                continue
            if is_error:
                future.set_exception(value)
            else:
                future.set_result(value)

    def _stop_workers(self) -> None:
        """On close: SHUTDOWN or SIGTERM every worker, SIGKILL after the grace, reap all."""
        with self._lock:
            for slot in self._slots:
                if slot.process is not None:
                    slot.state = "stopping"
                    slot.process.terminate()
            live = [s for s in self._slots if s.process is not None]
        deadline = time.monotonic() + self.options.kill_grace
        for slot in live:
            try:
                slot.process.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:
                slot.process.kill()
        for slot in live:
            slot.process.reap()
            slot.process = None
        self._router.close(linger=0)
        self._context.term()
        os.close(self._wake_r)
        os.close(self._wake_w)
