"""Worker process entry point: ``python -m vyre_workers --page-fd N --backend ID ...``.

Started only by the supervisor. It ignores SIGINT (a terminal's Ctrl-C is the caller's,
and the worker dies with its parent or at close), dies with its parent (the kernel's
parent-death signal works even while this process is stuck in native code), takes its
identity, hello token and lane from the progress page it inherited, binds its lane (the
socket requests come on, from whichever parent thread carries each; only the pool's process
may connect) and proves itself on it, loads exactly one backend
entry point, prepares it, says hello with its probed capabilities and token, and serves.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import threading
import time
import traceback
from importlib import metadata

import zmq

from vyre_core import protocol
from vyre_core.dataplane import SegmentMaps
from vyre_core.errors import PluginLoadError, as_vyre_error
from vyre_core.protocol import Message, Op, ProgressPage
from vyre_core.registry import ENTRY_POINT_GROUP
from vyre_workers.backend_host import BackendHost
from vyre_workers.server import WorkerServer

_PR_SET_PDEATHSIG = 1
#: How long the lane's proof may wait for the pool to connect (it connects on the hello,
#: so this is reached only when something else took the lane's path meanwhile).
LANE_PROOF_WITHIN_MS = 5_000


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL us when the parent goes; exit if it already went."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(0)


def load_backend(entry_point: str, backend: str, generation: int) -> BackendHost:
    matches = metadata.entry_points(group=ENTRY_POINT_GROUP, name=entry_point)
    if not matches:
        raise PluginLoadError(f"no entry point {entry_point!r} in group {ENTRY_POINT_GROUP}",
                              "Install the backend's distribution in the worker's Python.")
    host = BackendHost(next(iter(matches)).load(), entry_point, generation)
    if host.id() != backend:
        raise PluginLoadError(f"entry point {entry_point!r} is backend {host.id()!r}, "
                              f"expected {backend!r}", "Reinstall the backend distribution.")
    return host


def heartbeat(context: zmq.Context, endpoint: str, identity: bytes, interval: float,
              stop: threading.Event) -> None:
    """Beats from its own socket: they stop when the main thread holds the GIL forever."""
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.IDENTITY, identity + b":hb")
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(endpoint)
    try:
        while not stop.wait(interval):
            protocol.send(socket, Message(Op.HEARTBEAT))
    finally:
        socket.close()


def main(argv: list[str] | None = None, parent_pid: int | None = None) -> int:
    """Run a worker; it dies with ``parent_pid``: the pool's process (``--parent-pid``)
    when started by the pool, the fork server when forked by it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parser = argparse.ArgumentParser(prog="python -m vyre_workers")
    parser.add_argument("--page-fd", type=int, required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--entry-point", required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--heartbeat", type=float, default=0.5)
    parser.add_argument("--max-message-bytes", type=int, default=protocol.MAX_MESSAGE_BYTES)
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid if parent_pid is None else parent_pid)
    page = ProgressPage(args.page_fd)
    handover = page.take_handover()
    identity, token = handover["identity"], handover["token"]
    lane_endpoint, lane_proof = handover["lane"], handover["lane_proof"]
    generation = handover["generation"]

    context = zmq.Context()
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.IDENTITY, identity)
    socket.setsockopt(zmq.LINGER, 1000)
    # Refuse oversized frames in the transport, before allocating them.
    socket.setsockopt(zmq.MAXMSGSIZE, max(args.max_message_bytes, protocol.MAX_HEADER_BYTES))
    socket.connect(args.endpoint)
    lane = context.socket(zmq.PAIR)  # requests come here, from one caller at a time
    lane.setsockopt(zmq.LINGER, 1000)
    lane.setsockopt(zmq.MAXMSGSIZE, max(args.max_message_bytes, protocol.MAX_HEADER_BYTES))
    try:
        # Only the pool's process may connect (the kernel's peer credentials): nobody else
        # can send it requests, nor hear the proof it sends first (after its hello, once
        # the pool has connected), which shows the pool that the process at the other end
        # of its lane is this worker and not one squatting its path.
        try:
            lane.setsockopt(zmq.IPC_FILTER_PID, args.parent_pid)
        except zmq.ZMQError as exc:
            raise PluginLoadError(
                f"this libzmq ({zmq.zmq_version()}) cannot filter ipc peers by pid ({exc})",
                "Install pyzmq with its bundled libzmq (pip install --force-reinstall "
                "pyzmq), built with SO_PEERCRED support.") from None
        lane.bind(lane_endpoint)
        host = load_backend(args.entry_point, args.backend, generation)
        host.prepare()
        caps = host.capabilities()
    except BaseException as exc:  # report why we cannot start, then leave
        text = traceback.format_exc()
        sys.stderr.write(text)
        protocol.send(socket, Message(Op.HELLO_FAILED, 0, generation, {
            "error": as_vyre_error(exc, f"starting backend {args.backend!r}").to_dict(),
            "traceback": text, "proof": token}))
        lane.close()
        socket.close()
        context.term()
        return 3

    server = WorkerServer(host, lane, args.max_message_bytes, page,
                          SegmentMaps(args.parent_pid))

    def on_sigterm(signum, frame):  # finish the current request, then leave
        server.stopping = True

    signal.signal(signal.SIGTERM, on_sigterm)
    stop = threading.Event()
    beat = threading.Thread(target=heartbeat, name="vyre-heartbeat", daemon=True,
                            args=(context, args.endpoint, identity, args.heartbeat, stop))
    beat.start()
    protocol.send(socket, Message(Op.HELLO, 0, generation, {
        "pid": os.getpid(), "backend": host.id(), "version": host.version(),
        "capabilities": caps.to_dict(), "started": time.time(), "proof": token}))
    try:
        lane.setsockopt(zmq.SNDTIMEO, LANE_PROOF_WITHIN_MS)  # the pool connects on hello
        try:
            protocol.send(lane, Message(Op.LANE, 0, generation, {"proof": lane_proof}))
        except zmq.Again:
            sys.stderr.write(f"the pool did not connect to {lane_endpoint} within "
                             f"{LANE_PROOF_WITHIN_MS // 1000} s of the hello\n")
            return 3
        lane.setsockopt(zmq.SNDTIMEO, -1)
        server.serve()
        host.shutdown()  # after SHUTDOWN or SIGTERM: release the device cleanly
    finally:
        stop.set()
        beat.join(timeout=2)
        lane.close()
        socket.close()
        context.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
