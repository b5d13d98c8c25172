"""Worker process entry point: ``python -m vyre_workers --page-fd N --backend ID ...``.

Started only by the supervisor. It ignores SIGINT (a terminal's Ctrl-C is the caller's,
and the worker dies with its parent or at close), dies with its parent (the kernel's
parent-death signal works even while this process is stuck in native code), takes its
identity and hello token from the progress page it inherited, loads exactly one backend
entry point, pins it to its device (``--device``), prepares it, says hello with its
probed capabilities, devices and token on the pool's ZeroMQ socket, and serves requests
on its lane: the inherited end of a socket pair (``--lane-fd``), on which whichever
parent thread carries a request sends it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
import time
import traceback

import zmq

from vyre_core import cancel
from vyre_core.boundary import codec
from vyre_core.boundary.messages import Heartbeat, Hello, HelloFailed, Message
from vyre_core.boundary.progress import ProgressPage
from vyre_core.dataplane import SegmentMaps
from vyre_core.errors import as_vyre_error
from vyre_workers import title
from vyre_workers.backend_host import listed_devices, load_backend
from vyre_workers.server import WorkerServer

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL us when the parent goes; exit if it already went."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(0)


def first_for_the_oom_killer() -> None:
    """Make this worker the one the kernel's OOM killer takes first (oom_score_adj 1000,
    which any process may raise for itself): a worker is replaced and its request fails
    with a Fix, while the caller, whose memory maps the data plane's segments, would
    otherwise often be the one killed."""
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as adj:
        adj.write("1000")


def heartbeat(context: zmq.Context, endpoint: str, identity: bytes, interval: float,
              stop: threading.Event, maps: SegmentMaps) -> None:
    """Beats from its own socket: they stop when the main thread holds the GIL forever.
    After each, lets go of mappings of segments the parent has closed."""
    beats = context.socket(zmq.DEALER)
    beats.setsockopt(zmq.IDENTITY, identity + b":hb")
    beats.setsockopt(zmq.LINGER, 0)
    beats.connect(endpoint)
    try:
        while not stop.wait(interval):
            codec.send(beats, Message(Heartbeat()))
            maps.drop_closed()
    finally:
        beats.close()


def main(argv: list[str] | None = None, parent_pid: int | None = None) -> int:
    """Run a worker; it dies with ``parent_pid``: the pool's process (``--parent-pid``)
    when started by the pool, the fork server when forked by it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parser = argparse.ArgumentParser(prog="python -m vyre_workers")
    parser.add_argument("--page-fd", type=int, required=True)
    parser.add_argument("--lane-fd", type=int, required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--entry-point", required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--heartbeat", type=float, default=0.5)
    parser.add_argument("--spin", type=float, default=0.0)
    parser.add_argument("--max-message-bytes", type=int, default=codec.MAX_MESSAGE_BYTES)
    parser.add_argument("--device", type=int, default=None)
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid if parent_pid is None else parent_pid)
    first_for_the_oom_killer()
    page = ProgressPage(args.page_fd)
    handover = page.take_handover()
    cancel.install(page)  # a cancelled call stops at the backend's next safe point
    identity, token = handover["identity"], handover["token"]
    generation = handover["generation"]
    title.name_worker(args.backend, generation, args.device, args.parent_pid)
    lane = socket.socket(fileno=args.lane_fd)
    lane.setblocking(False)
    for fd in (args.page_fd, args.lane_fd):  # the backend's own subprocesses get neither
        os.set_inheritable(fd, False)

    context = zmq.Context()
    control = context.socket(zmq.DEALER)
    control.setsockopt(zmq.IDENTITY, identity)
    control.setsockopt(zmq.LINGER, 1000)
    # Refuse oversized frames in the transport, before allocating them.
    control.setsockopt(zmq.MAXMSGSIZE, max(args.max_message_bytes, codec.MAX_HEADER_BYTES))
    control.connect(args.endpoint)
    try:
        host = load_backend(args.entry_point, args.backend, generation)
        if args.device is not None:
            host.select_device(args.device)  # before prepare: it opens only this device
        devices = listed_devices(host)
        host.prepare()
        caps = host.capabilities()
    except BaseException as exc:  # report why we cannot start, then leave
        text = traceback.format_exc()
        sys.stderr.write(text)
        codec.send(control, Message(HelloFailed(
            as_vyre_error(exc, f"starting backend {args.backend!r}").to_dict(), token, text),
            0, generation))
        lane.close()
        control.close()
        context.term()
        return 3

    maps = SegmentMaps(args.parent_pid)
    server = WorkerServer(host, lane, args.max_message_bytes, page, maps, spin=args.spin)

    def on_sigterm(signum, frame):  # finish the current request, then leave
        server.stop()

    signal.signal(signal.SIGTERM, on_sigterm)
    stop = threading.Event()
    beat = threading.Thread(target=heartbeat, name="vyre-heartbeat", daemon=True,
                            args=(context, args.endpoint, identity, args.heartbeat, stop, maps))
    beat.start()
    codec.send(control, Message(Hello(
        os.getpid(), host.id(), host.version(), caps.to_dict(), host.device, devices, token,
        started=time.time()), 0, generation))
    try:
        server.serve()
        host.shutdown()  # after SHUTDOWN or SIGTERM: release the device cleanly
    finally:
        stop.set()
        beat.join(timeout=2)
        lane.close()
        control.close()
        context.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
