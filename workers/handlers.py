"""What a worker does with a request, whatever carried it: the handler of each operation
over one ``BackendHost``, the programs and compiled pipelines it keeps, and the rule that
every failure becomes an error reply (DeviceLostError when the device went with it). The
process worker (``server.py``, a lane) and the Ray actor (``ray_actor.py``) both use it."""

from __future__ import annotations

import functools
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

from vyre_core import cancel
from vyre_core.boundary import codec
from vyre_core.boundary.messages import (
    PROGRAM_CACHE,
    PROGRAM_NOT_HELD,
    Adopt,
    Allocate,
    Allocated,
    Body,
    Compile,
    Compiled,
    CompileSequence,
    Dispatch,
    DispatchResident,
    Done,
    Download,
    Free,
    Message,
    Op,
    Ping,
    PipelineDispatch,
    Ran,
    Recovered,
    RunSequence,
    SequenceRan,
    Shutdown,
    TryRecover,
    Upload,
)
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import CacheSnapshot, Timing, wall_clock_ns
from vyre_core.dataplane import SegmentMaps, Shared
from vyre_core.errors import (
    CallerError,
    DeviceLostError,
    PipelineInvalidatedError,
    ProtocolError,
    VyreError,
    as_vyre_error,
)
from vyre_core.ir import Program
from vyre_core.pipeline import CompiledPipeline
from vyre_core.sequence import Sequence as StepSequence
from vyre_workers.backend_host import BackendHost

#: Errors about the request itself: the device was never touched, so never "lost".
_CALLER_ERRORS = (CallerError, ProtocolError)
_DEVICE_OPS = frozenset({Op.DISPATCH, Op.PIPELINE_DISPATCH, Op.COMPILE, Op.DISPATCH_RESIDENT,
                         Op.UPLOAD, Op.DOWNLOAD, Op.ALLOCATE, Op.SEQUENCE,
                         Op.COMPILE_SEQUENCE})
#: Compiled pipelines a worker keeps (the most recently used); an older handle is refused
#: with PipelineInvalidatedError, a compile of the same pipeline key reuses its entry.
PIPELINE_LIMIT = 1024
#: How often (seconds) a reply carries the backend's pipeline-cache counters (and every
#: compile's reply does): the parent counts them for ``Driver.metrics()``.
CACHE_REPORT_EVERY = 1.0
_COMPILE_OPS = frozenset({Op.COMPILE, Op.COMPILE_SEQUENCE})

Handler = Callable[[Message], tuple[Body, list[Any]]]


class Handlers:
    """The operations of one worker. ``maps`` opens the parent's shared memory (a process
    worker's); ``stopping`` is set by a SHUTDOWN request."""

    def __init__(self, host: BackendHost, max_message_bytes: int = codec.MAX_MESSAGE_BYTES,
                 maps: SegmentMaps | None = None) -> None:
        self.host = host
        self.max_message_bytes = max_message_bytes
        self.maps = maps
        self.stopping = False
        self._programs: OrderedDict[str | bytes, Program] = OrderedDict()
        self._pipelines: OrderedDict[int, CompiledPipeline] = OrderedDict()
        self._pipeline_of_key: dict[str, int] = {}
        self._pipeline_ids = itertools.count(1)
        self._cache_report_at = 0.0  # (inf: the backend keeps no counters)
        self._handlers: dict[type[Body], Handler] = {
            Ping: lambda m: (_DONE, []),
            Dispatch: self._dispatch,
            Compile: self._compile,
            PipelineDispatch: self._pipeline_dispatch,
            Allocate: lambda m: (Allocated(self.host.allocate_resident(m.body.byte_len)), []),
            Upload: self._upload,
            Download: lambda m: (_DONE, [self.host.download_resident(m.body.handle)]),
            Free: lambda m: (self.host.free_resident(m.body.handle) or _DONE, []),
            DispatchResident: self._dispatch_resident,
            RunSequence: self._sequence,
            CompileSequence: lambda m: (self.host.compile_sequence(
                self._program(m.body, StepSequence), _config(m.body.config)) or _DONE, []),
            TryRecover: self._try_recover,
            Adopt: self._adopt,
            Shutdown: self._shutdown,
        }

    def answer(self, msg: Message, generation: int) -> Message:
        """The reply to ``msg`` (a request), as ``generation``: its result, or the error it
        raised as an error reply."""
        try:
            cancel.check()  # (cancelled before it arrived: nothing runs)
            if any(isinstance(a, Shared) for a in msg.arrays):
                msg.arrays = [self._shared(a) if isinstance(a, Shared) else a
                              for a in msg.arrays]
            body, arrays = self._handlers[type(msg.body)](msg)
            cancel.check()  # (cancelled while it ran: what it computed is not a result)
            reply = Message(body, msg.id, generation, arrays)
            if msg.op in _COMPILE_OPS or time.monotonic() >= self._cache_report_at:
                reply.cache = self._cache_report()
            self._check_size(reply)
            return reply
        except Exception as exc:  # the worker boundary: every failure becomes a reply
            error = as_vyre_error(exc, f"worker {msg.op}")
            if msg.op in _DEVICE_OPS and not isinstance(error, _CALLER_ERRORS) \
                    and self._device_lost():
                error = DeviceLostError(
                    f"backend {self.host.id()!r} lost its device in worker generation "
                    f"{generation} ({error.cause})", generation=generation)
            return codec.error_message(error, msg.id, generation)

    def _cache_report(self) -> tuple[int, int, int] | None:
        """The backend's pipeline-cache counters, when it keeps any."""
        if self._cache_report_at == float("inf"):
            return None
        self._cache_report_at = time.monotonic() + CACHE_REPORT_EVERY
        try:
            snapshot = self.host.pipeline_cache_snapshot()
        except Exception:  # (counters are not worth failing a call for: skip this one)
            return None
        if snapshot is None:  # (it keeps none: never ask again)
            self._cache_report_at = float("inf")
        if not isinstance(snapshot, CacheSnapshot):
            return None
        return snapshot.hits, snapshot.misses, snapshot.entries

    def _shared(self, shared: Shared, writable: bool = False) -> np.ndarray:
        if self.maps is None:
            raise ProtocolError("a request names shared memory, and this worker has none",
                                "Start workers through the vyre supervisor.")
        return self.maps.array(shared, writable)

    def _outputs(self, specs: list[Any] | None) -> list[tuple[np.ndarray, Shared | None]] | None:
        """The arrays to write a dispatch's outputs into, when the parent placed any in
        shared memory (the message's ``out``): a writable view of each shared one, a new
        array for each small one."""
        if specs is None:
            return None
        outputs = []
        for spec in specs:
            shared = codec.describe_shared(spec)
            if shared is not None:
                outputs.append((self._shared(shared, writable=True), shared))
            elif isinstance(spec, list) and len(spec) == 2 and spec[0] in codec.DTYPES \
                    and isinstance(spec[1], int) and spec[1] >= 0 \
                    and spec[1] * codec.DTYPES[spec[0]].itemsize <= self.max_message_bytes:
                outputs.append((np.empty(spec[1], dtype=codec.DTYPES[spec[0]]), None))
            else:
                raise ProtocolError(f"output spec {spec!r} is not [dtype, count] or [dtype, "
                                    "count, segment, fd, size(, offset)]",
                                    "Use matching vyre versions in the parent and the workers.")
        return outputs

    def _check_size(self, reply: Message) -> None:
        codec.check_output_bytes(sum(a.nbytes if isinstance(a, Shared)
                                        else codec.as_frame_array(a).nbytes
                                        for a in reply.arrays), self.max_message_bytes)

    def _device_lost(self) -> bool:
        try:
            return self.host.device_lost()
        except VyreError:
            return True  # a backend that cannot even answer has lost its device

    # -- handlers ------------------------------------------------------------------------

    def _program(self, body: Body, kind: type = Program) -> Any:
        """The request's program (or sequence: ``kind``), decoded once and kept by
        fingerprint (``fp``): the parent sends its wire form only to a worker that does
        not hold it yet, and sends it again when this worker answers that it does not
        (PROGRAM_NOT_HELD)."""
        fp, wire = body.fp, body.program
        key = fp if fp is not None else wire
        program = self._programs.get(key) if isinstance(key, str | bytes) else None
        if program is not None:
            if not isinstance(program, kind):
                raise ProtocolError(f"{key!r:.20} names a {type(program).__name__}, not a "
                                    f"{kind.__name__}", "Use matching vyre versions in the "
                                    "parent and the workers.")
            self._programs.move_to_end(key)
            return program
        if not isinstance(wire, bytes):
            if isinstance(fp, str):
                raise ProtocolError(f"program {fp[:16]} is not held by this worker",
                                    "The parent sends it again.",
                                    **{PROGRAM_NOT_HELD: True})
            raise ProtocolError("request carries no program bytes", "Send Program.to_wire().")
        program = self._programs[key] = kind.from_wire(wire)
        if len(self._programs) > PROGRAM_CACHE:
            self._programs.popitem(last=False)
        return program

    def _dispatch(self, m: Message) -> tuple[Ran, list[Any]]:
        program, config = self._program(m.body), _config(m.body.config)
        into = self._outputs(m.out)
        if into is None:
            outputs = self.host.dispatch(program, m.arrays, config)
            return _ran(outputs), list(outputs)
        timing = self.host.dispatch_into(program, m.arrays, [a for a, _ in into], config)
        return _ran(timing), [a if shared is None else shared for a, shared in into]

    def _compile(self, m: Message) -> tuple[Compiled, list[Any]]:
        program, config = self._program(m.body), _config(m.body.config)
        started = wall_clock_ns()
        pipeline = self.host.compile(program, config)
        took = wall_clock_ns() - started
        pipeline_id = self._pipeline_of_key.get(pipeline.key)
        if pipeline_id is None:
            pipeline_id = next(self._pipeline_ids)
            self._pipeline_of_key[pipeline.key] = pipeline_id
        self._pipelines[pipeline_id] = pipeline
        self._pipelines.move_to_end(pipeline_id)
        if len(self._pipelines) > PIPELINE_LIMIT:
            _, oldest = self._pipelines.popitem(last=False)
            self._pipeline_of_key.pop(oldest.key, None)
        return Compiled(pipeline_id, pipeline.key, took), []

    def _pipeline_dispatch(self, m: Message) -> tuple[Ran, list[Any]]:
        pipeline_id = m.body.pipeline
        pipeline = self._pipelines.get(pipeline_id)
        if pipeline is None:
            raise PipelineInvalidatedError(
                f"pipeline {pipeline_id} is not held by this worker (a worker keeps its "
                f"{PIPELINE_LIMIT} most recently used pipelines, and none from before a "
                "restart)",
                generation=self.host.generation)
        self._pipelines.move_to_end(pipeline_id)
        outputs = pipeline.dispatch(m.arrays, _config(m.body.config))
        return _ran(outputs), self._placed(m.out, outputs)

    def _placed(self, out: list[Any] | None, outputs: list[np.ndarray]) -> list[Any]:
        """The reply's arrays: each output copied into its shared slot when the parent
        placed one there (the message's ``out``), else the output itself."""
        into = self._outputs(out)
        if into is None:
            return list(outputs)
        if len(into) != len(outputs):
            raise ProtocolError(f"{len(into)} output slots for {len(outputs)} outputs",
                                "Use matching vyre versions in the parent and the workers.")
        replies = []
        for (target, shared), out in zip(into, outputs, strict=True):
            if shared is None:
                replies.append(out)
            else:
                np.copyto(target, out.reshape(target.shape), casting="no")
                replies.append(shared)
        return replies

    def _sequence(self, m: Message) -> tuple[SequenceRan, list[Any]]:
        run = self.host.dispatch_sequence(self._program(m.body, StepSequence), m.arrays,
                                          m.body.resident, _config(m.body.config))
        timing = run.timing
        loops = tuple((loop.iterations, loop.converged) for loop in run.loops)
        body = SequenceRan(loops=loops) if timing is None else SequenceRan(
            timing.wall_ns, timing.device_ns, timing.label, loops)
        return body, self._placed(m.out, run.outputs)

    def _upload(self, m: Message) -> tuple[Done, list[Any]]:
        if len(m.arrays) != 1:
            raise ProtocolError("upload carries no data frame", "Send exactly one frame.",
                                request_id=m.id)
        self.host.upload_resident(m.body.handle, m.arrays[0].tobytes())
        return _DONE, []

    def _dispatch_resident(self, m: Message) -> tuple[Ran, list[Any]]:
        timed = self.host.dispatch_resident(self._program(m.body), list(m.body.handles),
                                            _config(m.body.config))
        return Ran(timed.timing.wall_ns, timed.timing.device_ns), []

    def _try_recover(self, m: Message) -> tuple[Recovered, list[Any]]:
        self.host.try_recover(m.body.generation)
        self._forget_pipelines()
        return Recovered(self.host.capabilities().to_dict()), []

    def _adopt(self, m: Message) -> tuple[Done, list[Any]]:
        """This spare process now serves a slot, as that slot's next generation."""
        self.host.serve_as(m.body.generation)
        self._forget_pipelines()
        return _DONE, []

    def _forget_pipelines(self) -> None:
        """Pipelines compiled as an earlier generation are not this one's to serve."""
        self._pipelines.clear()
        self._pipeline_of_key.clear()

    def _shutdown(self, m: Message) -> tuple[Done, list[Any]]:
        self.stopping = True  # the worker shuts the backend down after the reply
        return _DONE, []


_DONE = Done()


def _config(raw: dict[str, Any]) -> DispatchConfig:
    try:  # its bytes are the exact key: -0.0 is not 0.0, True is not 1, NaN keeps its bits
        key = msgpack.packb(raw, use_bin_type=True)
    except (TypeError, ValueError, OverflowError):  # not a config we could have sent
        return DispatchConfig.from_dict(raw)
    if key == _last_config[0]:  # (a caller's calls mostly repeat one config)
        return _last_config[1]
    config = _cached_config(key)
    _last_config[:] = [key, config]
    return config


_last_config: list[Any] = [None, None]


@functools.lru_cache(maxsize=256)
def _cached_config(key: bytes) -> DispatchConfig:
    """Configs repeat from request to request; build and check each one once."""
    return DispatchConfig.from_dict(msgpack.unpackb(key, raw=False))


def _ran(found: Any) -> Ran:
    """The reply to a run: the Timing given (or the ``timing`` of outputs), if any."""
    timing = found if isinstance(found, Timing) else getattr(found, "timing", None)
    return _UNTIMED if timing is None else Ran(timing.wall_ns, timing.device_ns, timing.label)


_UNTIMED = Ran()
