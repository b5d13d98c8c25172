"""The worker's serve loop: one request at a time from its lane (``framing.py``), each
answered on it with a reply or an error for the same request id and this worker's
generation. After each reply the loop spins on the lane for a moment (``--spin``) before it
sleeps: a caller's next request often comes within microseconds, and waking a sleeping
process costs more than the whole round trip.

The id of each request is written into the progress page the moment it arrives (before
the backend runs) and again once it is answered, so the parent knows what this worker
holds even when the backend keeps the GIL. A copy of a request already received (the
parent sends again what it believes lost) is ignored. A malformed message gets a
protocol-error reply for its id whenever the id can be read, and the loop keeps
serving. After a failed device operation the backend is asked whether the device was
lost; if so the reply is DeviceLostError, so the supervisor recovers this worker.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import time
from typing import Any

from vyre_core import framing
from vyre_core.boundary import codec
from vyre_core.boundary.messages import REQUESTS, Adopt, Message
from vyre_core.boundary.progress import ProgressPage
from vyre_core.dataplane import SegmentMaps
from vyre_core.errors import ProtocolError, SystemResourceError, as_vyre_error
from vyre_core.spinning import Spinning
from vyre_workers.backend_host import BackendHost
from vyre_workers.handlers import Handlers

#: How long a reply may wait for room once the worker was asked to stop (SIGTERM: the
#: parent is closing, or the request ran past its deadline, and nobody may read it).
STOPPING_SEND_WITHIN = 0.25


class Stopped(Exception):
    """SIGTERM arrived while a reply was going out."""


class WorkerServer:
    """Serves one lane: decodes each request, drops copies of one already received, keeps
    the progress page, and has ``Handlers`` answer it."""

    def __init__(self, host: BackendHost, lane: socket.socket,
                 max_message_bytes: int = codec.MAX_MESSAGE_BYTES,
                 page: ProgressPage | None = None, maps: SegmentMaps | None = None,
                 spin: float = 0.0) -> None:
        self.host = host
        self.lane = lane  # non-blocking
        self.reader = framing.StreamReader(lane, codec.MAX_FRAMES,
                                           max_message_bytes + codec.MAX_HEADER_BYTES)
        self.spin = spin
        self.max_message_bytes = max_message_bytes
        self.page = page
        self.maps = maps
        self.stopping = False
        self.sending = False  # a reply is going out (SIGTERM then cuts it short)
        self._last_received = 0
        self.handlers = Handlers(host, max_message_bytes, maps)

    def serve(self, wake_ms: int = 100) -> None:
        """Answer requests until SHUTDOWN, ``stopping`` (set by SIGTERM) or the end of the
        lane (the pool closed it, or went)."""
        poller = select.poll()
        poller.register(self.lane, select.POLLIN)
        spinning = Spinning(self.spin)
        while not self.stopping:
            try:
                received = self.reader.messages()
            except framing.BrokenStream as exc:  # the parent's bug: nothing can be framed
                sys.stderr.write(f"vyre worker: its lane broke ({exc}); leaving\n")
                return
            if not received:
                if self.reader.ended:
                    return
                now = time.perf_counter()
                if spinning.on(now):
                    os.sched_yield()
                    spinning.yielded(now, time.perf_counter())
                else:
                    poller.poll(wake_ms)
                continue
            for frames in received:
                reply = self.handle(frames)
                if reply is not None and not self._send(reply):
                    return
            now = time.perf_counter()
            spinning.start(now)
            if not spinning.on(now) and not self.stopping:
                poller.poll(wake_ms)  # (the lane was read to its end: a read now finds
                # nothing, and costs a system call and an exception, before the same poll)

    def _send(self, reply: Message) -> bool:
        """Send ``reply`` whole on the lane; False when the parent's end is gone."""
        try:
            encoded = codec.encode(reply)
        except Exception as exc:  # an unencodable reply: say so rather than die
            encoded = codec.encode(codec.error_message(
                as_vyre_error(exc, f"encoding the reply to {reply.id}"), reply.id, reply.gen))
        if self.page is not None and reply.id:  # the parent allows it time to cross
            self.page.answered(reply.id, sum(len(f) if isinstance(f, bytes) else f.nbytes
                                             for f in encoded))
        self.sending = True
        try:  # (asked to stop, it waits little for a parent that may no longer read)
            framing.send(self.lane, encoded, within=STOPPING_SEND_WITHIN if self.stopping
                         else None)
        except (OSError, Stopped):
            return False
        finally:
            self.sending = False
        return True

    def stop(self) -> None:
        """(SIGTERM.) Leave after the current request; a reply that is going out to a
        parent that no longer reads it (closing) is cut short, so the worker leaves now
        instead of at the SIGKILL."""
        self.stopping = True
        if self.sending:
            raise Stopped

    def handle(self, frames: list[Any] | framing.Dropped) -> Message | None:
        """The answer to one request (None for a copy of one already received)."""
        generation = self.host.generation
        try:
            if isinstance(frames, framing.Dropped):
                raise codec.dropped_error(frames, f"worker of {self.host.id()!r}",
                                             SystemResourceError)
            msg = codec.decode(frames, self.max_message_bytes)
            if msg.op not in REQUESTS:
                raise ProtocolError(f"{msg.op} is not a request a worker serves",
                                    "Send requests only.", request_id=msg.id)
        except (ProtocolError, SystemResourceError) as exc:
            return codec.error_message(exc, exc.details.get("request_id") or 0,
                                          generation)
        if msg.id and msg.id == self._last_received:
            return None  # sent again by a parent that thought it lost: already handled
        if isinstance(msg.body, Adopt):
            generation = msg.body.generation  # answered, or refused, as its new self
        self._last_received = msg.id
        if self.page is not None:
            self.page.received(msg.id)
        reply = self.handlers.answer(msg, generation)
        self.stopping |= self.handlers.stopping
        return reply
