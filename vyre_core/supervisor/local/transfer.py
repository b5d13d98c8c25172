"""The local pool's data path: a request onto a worker's lane and into shared memory,
and its reply back. A room of its own because this is where bytes cross (frames, segments
a caller lends, output slots a worker writes, a lane held or broken), and every rule of
that crossing is read here against the others; ``Pool`` mixes it in (``local/pool.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Any, cast

import zmq

from vyre_core import framing, shared_arrays
from vyre_core.boundary import codec
from vyre_core.boundary.messages import Message
from vyre_core.dataplane import SHARE_THRESHOLD, Segment, Shared
from vyre_core.errors import ProtocolError, SystemResourceError, VyreError
from vyre_core.supervisor.lane import Lane
from vyre_core.supervisor.local.base import _Local
from vyre_core.supervisor.rules.actions import Send
from vyre_core.supervisor.rules.requests import Request, Transfer

_log = logging.getLogger("vyre.supervisor")


class LocalTransfer(Transfer):
    """What the local shell keeps of a request: its encoded ``frames``; the shared memory
    holding its data (``shared``: segments it placed, caller's arrays it lends) and of it
    the slot taken for each output (``out_slots``, or None per output); ``wire``, its
    (out, arrays) as encoded, to encode it again with its program; ``lean``, whether it
    was encoded naming its program by fingerprint alone."""

    __slots__ = ("frames", "lean", "out_slots", "shared", "wire")

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[Any] | None = None
        self.shared: list[Any] = []
        self.out_slots: list[Any] = []
        self.wire: tuple[Any, list[Any]] | None = None
        self.lean = False


def local_transfer(request: Request) -> LocalTransfer:
    """``request``'s transfer: every request this shell holds has a LocalTransfer (a
    caller's made by ``Pool.submit``, one of the rules' own by its first send)."""
    return cast(LocalTransfer, request.transfer)


class DataPath(_Local):
    """A request's way onto a lane and into shared memory, and its reply's way back
    (see the module docstring)."""

    def _encode_into(self, request: Request) -> None:
        t = local_transfer(request)
        t.frames = self._encode(request, t)
        t.nbytes = len(t.frames[0]) + sum(a.nbytes for a in t.frames[1:])

    def _encode(self, request: Request, t: LocalTransfer) -> list[Any]:
        """The request's frames, its large inputs placed in shared memory and a segment
        taken for each large output (``Call.outputs``), where the worker writes it."""
        call = request.call
        outputs = call.outputs
        if outputs:  # known before it runs: refused before any copy
            codec.check_output_bytes(sum(dtype.itemsize * count for dtype, count in outputs),
                                     self.options.transport.max_message_bytes)
        inputs = [codec.as_frame_array(data) for data in call.arrays]
        into = call.into or [None] * len(outputs or ())
        # (a caller's arrays in shared memory, taken at once: see lend_all)
        lent = shared_arrays.lend_all(
            [(a, False) for a in inputs] + [(a, True) for a in into if a is not None],
            t.shared, call.deadline, crossing=self._segments.enabled)
        lent_into = iter(lent[len(inputs):])
        arrays: list[Any] = []
        for array, segment in zip(inputs, lent[:len(inputs)], strict=True):
            t.input_bytes += array.nbytes
            if segment is None and array.nbytes >= SHARE_THRESHOLD:
                segment = self._segments.place(array)
                if segment is not None:
                    t.shared.append(segment)
            if segment is None:
                arrays.append(array)
            else:
                arrays.append(segment.describe(array.dtype, array.shape[0]))
        out = None
        if outputs:
            slots = [self._share(t, dtype.itemsize * count,
                                 None if target is None else next(lent_into))
                     for (dtype, count), target in zip(outputs, into, strict=True)]
            if any(slots):  # else the worker returns them as usual
                t.out_slots = slots
                out = [codec.array_spec(dtype, count, slot and slot.describe(dtype, count))
                       for (dtype, count), slot in zip(outputs, slots, strict=True)]
        t.wire = (out, arrays)
        # every worker holds the program: name it, do not send it
        t.lean = self._machine.holds_everywhere(request)
        return codec.encode_checked(Message(call.message, request.tracking.id, 0, arrays, out),
                                    self.options.transport.max_message_bytes,
                                    with_program=not t.lean)

    def _share(self, t: LocalTransfer, nbytes: int, lent: shared_arrays.Lent | None
               ) -> Segment | shared_arrays.Lent | None:
        """Where the worker writes ``nbytes`` of a request's output: the caller's own
        array (``lent``), else a segment of the pool's, else None: small, or no shared
        memory to be had (the data then rides the socket)."""
        if lent is not None:
            return lent
        segment = self._segments.take(nbytes) if nbytes >= SHARE_THRESHOLD else None
        if segment is not None:
            t.shared.append(segment)
        return segment

    def _release(self, request: Request) -> None:
        """No worker can write ``request``'s segments any more: reuse them (a caller's
        own: let go of them)."""
        t = local_transfer(request)
        if not t.shared:
            return
        shared, t.shared, t.out_slots = t.shared, [], []
        for segment in shared:
            if isinstance(segment, shared_arrays.Lent):
                segment.release()
            else:
                self._segments.give_back(segment)

    def _results(self, request: Request, value: Any) -> Any:
        """A reply with its shared outputs as arrays over the request's own output slots
        (each then held by its array, not the request). Output ``i`` must come back in
        exactly the slot taken for it, or as a frame when none was: anything else is a
        protocol error."""
        if isinstance(value, BaseException):
            return value
        body, arrays = value
        t = local_transfer(request)
        slots = t.out_slots or [None] * len(arrays)
        if len(arrays) != len(slots):
            return self._misnamed(request)
        results = []
        for array, segment in zip(arrays, slots, strict=True):
            if isinstance(array, Shared) != (segment is not None):
                return self._misnamed(request)
            if segment is not None:
                wanted = request.call.outputs[len(results)]
                if array.segment != segment.id or (array.dtype, array.count) != wanted:
                    return self._misnamed(request)
            results.append(array)
        for i, (array, segment) in enumerate(zip(arrays, slots, strict=True)):
            if isinstance(segment, shared_arrays.Lent):
                results[i] = segment.array  # the caller's own array, written in place
            elif segment is not None:
                t.shared.remove(segment)  # (the result holds it now)
                results[i] = self._segments.result(segment, array.dtype, array.count)
        t.out_slots = []
        return body, results

    @staticmethod
    def _misnamed(request: Request) -> ProtocolError:
        return ProtocolError(f"the reply to {request.label} does not name its output slots",
                             request_id=request.tracking.id)

    def _send(self, action: Send, lane: Lane) -> str | None:
        """Send ``action``'s request on ``lane`` (held by this thread): None, or why the
        transport refused."""
        req = action.request
        if lane.broken or lane.reader.ended:
            return "its lane is broken" if lane.broken else "its worker closed its lane"
        message, t = req.call.message, req.transfer
        if not isinstance(t, LocalTransfer):  # (the rules' own: recovery, adoption, shutdown)
            t = req.transfer = LocalTransfer()
            t.frames = codec.encode(Message(message, req.tracking.id, 0, req.call.arrays))
        if action.socket_only and t.shared:  # the worker cannot open shared memory
            self._segments.refused()
            t.out_slots = []
            frames = codec.encode(Message(message, req.tracking.id, 0, req.call.arrays))
        elif message.fp is not None and not action.socket_only \
                and (action.with_program or (t.lean and not action.holds_program)):
            out, arrays = t.wire  # named by fingerprint to a worker without the program
            frames = codec.encode(Message(message, req.tracking.id, 0, arrays, out))
        else:
            frames = t.frames
        try:
            # (a live worker reads a whole request before it does anything else)
            framing.send(lane.socket, frames, within=self.options.timeouts.silence_limit,
                         cut=lambda: self._break(lane))
        except OSError as exc:  # gone, or stuck with part of the message taken
            lane.broken = True  # (the rules retire the worker: it is killed)
            return f"{type(exc).__name__}: {exc}"
        return None

    def _io_send(self, action: Send, lane: Lane | None) -> None:
        """(I/O thread.) Send a request and watch its lane for the reply (looking busily
        for ``spin`` seconds first: ``_poll``). A lane not given back yet is tried again
        once it has."""
        if lane is None or lane.closed:
            self._machine.send_failed(action.index, action.request, "its worker is gone",
                                      time.monotonic(), action.generation)
            return
        held = lane in self._io_lanes  # (this thread holds it already: a resend, say)
        if not held and not lane.take(timeout=0):
            lane.on_free = self._wake_io
            self._waiting_sends.append(action)
            return
        error = self._send(action, lane)
        if error is not None:
            if held:
                del self._io_lanes[lane]
                with contextlib.suppress(KeyError):
                    self._poller.unregister(lane.fd)
            lane.give()
            self._machine.send_failed(action.index, action.request, error, time.monotonic(),
                                      action.generation)
            return
        self._io_lanes[lane] = action.request
        if not held:
            self._poller.register(lane.fd, zmq.POLLIN)
        self._spinning.start(time.perf_counter())

    def _let_go_of_answered_lanes(self) -> None:
        """(I/O thread, under the lock.) Give back the lanes of answered requests, and
        retry sends that waited for a lane."""
        for lane, request in list(self._io_lanes.items()):
            if (request.done and not request.tracking.stopping) or lane.doomed:
                del self._io_lanes[lane]
                with contextlib.suppress(KeyError):
                    self._poller.unregister(lane.fd)
                lane.give()
        waiting, self._waiting_sends = self._waiting_sends, []
        for action in waiting:
            if not action.request.done:
                self._io_send(action, self._lanes.get(action.index))

    def _wake_io(self) -> None:
        with self._gate:  # (the fd is closed under the gate when the thread ends)
            if self._wake_fd >= 0:
                os.eventfd_write(self._wake_fd, 1)

    def _read_lane(self, lane: Lane, budget: int | None = None) -> list[Message | VyreError]:
        """The messages waiting on ``lane`` (held by this thread), decoded; at most about
        ``budget`` bytes read. A stream that cannot be framed any more is its worker's
        fault, unless the worker went in the middle of a message: either way nothing more
        is read from it, and a live worker is stopped (its death then handled as any
        other). So is one whose stream was left in an unknown state by an exception in the
        middle of reading (only a bug, or one thrown into the I/O thread itself)."""
        if lane.closed or lane.broken:
            return []
        try:
            received = lane.reader.messages(budget)
        except framing.BrokenStream as exc:
            lane.broken = True
            if not lane.reader.ended:  # (else it died while sending: its exit tells)
                _log.error("pool %r: the lane of worker %r broke (%s); the worker is "
                           "stopped", self.backend, lane.identity, exc)
                self._kill_worker_of(lane)
            return []
        except BaseException:
            self._break(lane)
            raise
        messages: list[Message | VyreError] = []
        for frames in received:
            if isinstance(frames, framing.Dropped):
                messages.append(codec.dropped_error(  # (this process's memory)
                    frames, "this process", SystemResourceError))
                continue
            try:
                messages.append(codec.decode(frames, self.options.transport.max_message_bytes))
            except ProtocolError as exc:
                messages.append(exc)
        if messages and self.options.restart.recycle_rss_bytes is not None:
            self._measure(lane.identity)
        return messages

    def _break(self, lane: Lane) -> None:
        """Lane I/O was cut short (a send stalled part-way, an exception): what is on the
        stream is unknown, so nothing more crosses it and its worker is stopped."""
        lane.broken = True
        self._kill_worker_of(lane)

    def _kill_worker_of(self, lane: Lane) -> None:
        index = self._index_of.get(lane.identity)
        proc = None if index is None else self._processes.get(index)
        if proc is not None:
            proc.kill()
