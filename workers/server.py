"""The worker's serve loop: one request at a time from the parent's ROUTER, each
answered with a reply or an error for the same request id and generation.

A malformed message gets a protocol-error reply and the loop keeps serving. After a
failed device operation the backend is asked whether the device was lost; if so the
reply is DeviceLostError, so the supervisor recovers this worker.
"""

from __future__ import annotations

import functools
import itertools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import zmq

from vyre_core import protocol
from vyre_core.config import DispatchConfig
from vyre_core.errors import (
    DeviceLostError,
    InvalidConfigError,
    InvalidInputError,
    InvalidProgramError,
    LaunchLimitError,
    ProtocolError,
    ValidationError,
    VyreError,
    as_vyre_error,
)
from vyre_core.ir import Program
from vyre_core.pipeline import CompiledPipeline
from vyre_core.protocol import Message, Op
from vyre_workers.backend_host import BackendHost

#: Errors about the request itself: the device was never touched, so never "lost".
_CALLER_ERRORS = (InvalidProgramError, ValidationError, InvalidInputError, InvalidConfigError,
                  LaunchLimitError, ProtocolError)
_DEVICE_OPS = frozenset({Op.DISPATCH, Op.PIPELINE_DISPATCH, Op.COMPILE, Op.DISPATCH_RESIDENT,
                         Op.UPLOAD, Op.DOWNLOAD, Op.ALLOCATE, Op.FLUSH})
_PROGRAM_CACHE = 256

Handler = Callable[[Message], tuple[dict[str, Any], list[Any]]]


class WorkerServer:
    def __init__(self, host: BackendHost, socket: zmq.Socket,
                 max_message_bytes: int = protocol.MAX_MESSAGE_BYTES) -> None:
        self.host = host
        self.socket = socket
        self.max_message_bytes = max_message_bytes
        self.stopping = False
        self._programs: OrderedDict[bytes, Program] = OrderedDict()
        self._pipelines: dict[int, CompiledPipeline] = {}
        self._pipeline_ids = itertools.count(1)
        self._handlers: dict[Op, Handler] = {
            Op.PING: lambda m: ({}, []),
            Op.DISPATCH: self._dispatch,
            Op.COMPILE: self._compile,
            Op.PIPELINE_DISPATCH: self._pipeline_dispatch,
            Op.ALLOCATE: lambda m: ({"handle": self.host.allocate_resident(
                _int(m.meta, "byte_len"))}, []),
            Op.UPLOAD: self._upload,
            Op.DOWNLOAD: lambda m: ({}, [self.host.download_resident(_int(m.meta, "handle"))]),
            Op.FREE: lambda m: (self.host.free_resident(_int(m.meta, "handle")) or {}, []),
            Op.DISPATCH_RESIDENT: self._dispatch_resident,
            Op.CAPABILITIES: lambda m: ({"capabilities": self.host.capabilities().to_dict(),
                                         "profile": _plain(self.host.device_profile())}, []),
            Op.FLUSH: lambda m: (self.host.flush() or {}, []),
            Op.DEVICE_LOST: lambda m: ({"lost": self.host.device_lost()}, []),
            Op.TRY_RECOVER: self._try_recover,
            Op.SHUTDOWN: self._shutdown,
        }

    def serve(self, wake_ms: int = 100) -> None:
        """Answer requests until SHUTDOWN or ``stopping`` is set (e.g. by SIGTERM)."""
        self.socket.setsockopt(zmq.RCVTIMEO, wake_ms)  # cheaper than poll-then-recv
        while not self.stopping:
            try:
                frames = self.socket.recv_multipart(copy=False)
            except zmq.Again:
                continue
            protocol.send(self.socket, self.handle(frames))

    def handle(self, frames: list[Any]) -> Message:
        try:
            msg = protocol.decode(frames, self.max_message_bytes)
            if msg.op not in protocol.REQUESTS:
                raise ProtocolError(f"{msg.op} is not a request a worker serves",
                                    "Send requests only.", request_id=msg.id)
        except ProtocolError as exc:
            return protocol.error_message(exc, exc.details.get("request_id") or 0,
                                          self.host.generation)
        try:
            meta, arrays = self._handlers[msg.op](msg)
            return Message(Op.REPLY, msg.id, msg.gen, meta, arrays)
        except Exception as exc:  # the worker boundary: every failure becomes a reply
            error = as_vyre_error(exc, f"worker {msg.op}")
            if msg.op in _DEVICE_OPS and not isinstance(error, _CALLER_ERRORS) \
                    and self._device_lost():
                error = DeviceLostError(
                    f"backend {self.host.id()!r} lost its device in worker generation "
                    f"{msg.gen} ({error.cause})", generation=msg.gen)
            return protocol.error_message(error, msg.id, msg.gen)

    def _device_lost(self) -> bool:
        try:
            return self.host.device_lost()
        except VyreError:
            return True  # a backend that cannot even answer has lost its device

    # -- handlers ------------------------------------------------------------------------

    def _program(self, meta: dict[str, Any]) -> Program:
        wire = meta.get("program")
        if not isinstance(wire, bytes):
            raise ProtocolError("request carries no program bytes", "Send Program.to_wire().")
        program = self._programs.get(wire)
        if program is None:
            program = self._programs[wire] = Program.from_wire(wire)
            if len(self._programs) > _PROGRAM_CACHE:
                self._programs.popitem(last=False)
        else:
            self._programs.move_to_end(wire)
        return program

    def _dispatch(self, m: Message):
        outputs = self.host.dispatch(self._program(m.meta), m.arrays, _config(m.meta))
        return _timing_meta(outputs), list(outputs)

    def _compile(self, m: Message):
        pipeline = self.host.compile(self._program(m.meta), _config(m.meta))
        pipeline_id = next(self._pipeline_ids)
        self._pipelines[pipeline_id] = pipeline
        return {"pipeline": pipeline_id, "key": pipeline.key}, []

    def _pipeline_dispatch(self, m: Message):
        pipeline = self._pipelines.get(_int(m.meta, "pipeline"))
        if pipeline is None:
            raise InvalidInputError(f"pipeline {m.meta['pipeline']} is unknown in this worker",
                                    "Compile the program again (Driver.compile).")
        outputs = pipeline.dispatch(m.arrays, _config(m.meta))
        return _timing_meta(outputs), list(outputs)

    def _upload(self, m: Message):
        if len(m.arrays) != 1:
            raise ProtocolError("upload carries no data frame", "Send exactly one frame.",
                                request_id=m.id)
        self.host.upload_resident(_int(m.meta, "handle"), m.arrays[0].tobytes())
        return {}, []

    def _dispatch_resident(self, m: Message):
        handles = m.meta.get("handles")
        if not isinstance(handles, list) or not all(isinstance(h, int) for h in handles):
            raise ProtocolError("dispatch_resident needs a list of integer handles",
                                "Pass the handles of Driver.allocate_resident.", request_id=m.id)
        timed = self.host.dispatch_resident(self._program(m.meta), handles, _config(m.meta))
        return {"wall_ns": timed.timing.wall_ns, "device_ns": timed.timing.device_ns}, []

    def _try_recover(self, m: Message):
        self.host.try_recover()
        self.host.generation = _int(m.meta, "generation")
        self._pipelines.clear()
        return {"capabilities": self.host.capabilities().to_dict()}, []

    def _shutdown(self, m: Message):
        self.stopping = True  # the entry point shuts the backend down after the reply
        return {}, []


def _int(meta: dict[str, Any], key: str) -> int:
    value = meta.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"request field {key!r} must be an integer, got {value!r}",
                            "Use matching vyre versions in the parent and the workers.")
    return value


def _config(meta: dict[str, Any]) -> DispatchConfig:
    raw = meta.get("config", {})
    if not isinstance(raw, dict):
        raise ProtocolError("request config must be a map", "Send DispatchConfig.to_dict().")
    try:
        key = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in raw.items()))
        return _cached_config(key)
    except TypeError:  # unhashable values: not a config we could have sent
        return DispatchConfig.from_dict(raw)


@functools.lru_cache(maxsize=256)
def _cached_config(items: tuple) -> DispatchConfig:
    """Configs repeat from request to request; build and check each one once."""
    return DispatchConfig.from_dict(dict(items))


def _timing_meta(outputs: Any) -> dict[str, Any]:
    timing = getattr(outputs, "timing", None)
    return {} if timing is None else {"wall_ns": timing.wall_ns, "device_ns": timing.device_ns,
                                      "label": timing.label}


def _plain(value: Any) -> Any:
    """Device-profile values as msgpack-friendly data."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in (sorted(value) if isinstance(value, set | frozenset)
                                    else value)]
    if isinstance(value, np.generic):
        return value.item()
    return value if isinstance(value, str | int | float | bool | type(None)) else repr(value)
