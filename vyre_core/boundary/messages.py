"""What crosses between a parent and its workers: one class per request and per reply.

Each class is a frozen ``msgspec.Struct`` whose fields are its wire form: an array of its
tag and its fields in declaration order, every field checked against its annotation by
the codec's decoder (in C: the measurement that chose msgspec over plain dataclasses is in
BENCHMARKS.md). Adding a field is one line in one class; the worker, the rules and the
shells read fields, never keys.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, ClassVar

import msgspec

from vyre_core.errors import ProtocolError


class Op(enum.StrEnum):
    """Which class a message's body is (the envelope's tag)."""
    # worker -> parent
    HELLO = "hello"                  # started
    HELLO_FAILED = "hello_failed"    # could not start
    HEARTBEAT = "heartbeat"
    ERROR = "error"                  # any request failed: a VyreError
    RAN = "ran"
    SEQUENCE_RAN = "sequence_ran"
    COMPILED = "compiled"
    ALLOCATED = "allocated"
    RECOVERED = "recovered"
    DONE = "done"
    # parent -> worker
    PING = "ping"
    DISPATCH = "dispatch"
    COMPILE = "compile"
    PIPELINE_DISPATCH = "pipeline_dispatch"
    ALLOCATE = "allocate"
    UPLOAD = "upload"
    DOWNLOAD = "download"
    FREE = "free"
    DISPATCH_RESIDENT = "dispatch_resident"
    SEQUENCE = "sequence"            # a Sequence's steps, run as one request
    COMPILE_SEQUENCE = "compile_sequence"
    TRY_RECOVER = "try_recover"
    ADOPT = "adopt"                  # a spare process now serves a slot: its generation
    SHUTDOWN = "shutdown"


#: Decoded programs a worker keeps by fingerprint (the most recently used); the parent
#: mirrors each worker's set to send a program's wire form only to a worker without it.
PROGRAM_CACHE = 256
#: The ProtocolError detail with which a worker asks for a program's wire form: the
#: request named the program by fingerprint only, and the worker does not hold it.
PROGRAM_NOT_HELD = "program_not_held"
#: The ProtocolError detail with which a worker asks for a request's arrays on the socket:
#: it cannot open the parent's shared memory (the parent became undumpable, say).
SHARED_REFUSED = "shared_refused"


#: A handle, a generation, a size, an id: a non-negative integer.
Handle = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class Body(msgspec.Struct, array_like=True, frozen=True, gc=False,
           forbid_unknown_fields=True):
    """What every message class answers. On the wire a body is an array: its tag (the
    ``Op``), then its fields in declaration order, each checked by the decoder against
    its annotation. ``fp``, ``label`` and ``program`` are None on a class without such a
    field, so the rules and the worker read them off any request."""
    kind: ClassVar[Op]
    fp: ClassVar[str | None]
    label: ClassVar[str | None]
    program: ClassVar[bytes | None]


def bad(cause: str, request_id: int | None) -> ProtocolError:
    """The error for a message that breaks the protocol."""
    return ProtocolError(f"malformed message: {cause}",
                         "Use matching vyre versions in the parent and the workers; "
                         "never write to a worker socket by hand.", request_id=request_id)


def is_uint(value: Any) -> bool:
    return type(value) is int and 0 <= value < 2**63


# -- requests ------------------------------------------------------------------------------

class Ping(Body, tag="ping"):
    label: str | None = None


class Dispatch(Body, tag="dispatch"):
    fp: str
    program: bytes | None  # nil when sent to a worker that holds it (the lean path)
    config: dict[str, Any]  # DispatchConfig.to_wire()
    label: str | None = None


class Compile(Body, tag="compile"):
    program: bytes  # (no fingerprint: a compile always carries its program)
    config: dict[str, Any]


class PipelineDispatch(Body, tag="pipeline_dispatch"):
    pipeline: Handle
    config: dict[str, Any]
    label: str | None = None


class Allocate(Body, tag="allocate"):
    byte_len: Handle


class Upload(Body, tag="upload"):
    handle: Handle  # (its data is the message's one array)


class Download(Body, tag="download"):
    handle: Handle


class Free(Body, tag="free"):
    handle: Handle


class DispatchResident(Body, tag="dispatch_resident"):
    fp: str
    program: bytes | None
    config: dict[str, Any]
    handles: tuple[Handle, ...]
    label: str | None = None


class RunSequence(Body, tag="sequence"):
    fp: str
    program: bytes | None  # the sequence's wire form
    config: dict[str, Any]
    resident: dict[str, Handle]  # names of its buffers held in the worker, to their handles
    label: str | None = None


class CompileSequence(Body, tag="compile_sequence"):
    fp: str
    program: bytes | None
    config: dict[str, Any]


class TryRecover(Body, tag="try_recover"):
    generation: Handle


class Adopt(Body, tag="adopt"):
    generation: Handle


class Shutdown(Body, tag="shutdown"):
    pass


# -- replies -------------------------------------------------------------------------------

class Ran(Body, tag="ran"):
    wall_ns: int | None = None  # (all three None when the backend does not time)
    device_ns: int | None = None
    label: str | None = None


class SequenceRan(Body, tag="sequence_ran"):
    wall_ns: int | None = None
    device_ns: int | None = None
    label: str | None = None
    loops: tuple[tuple[Handle, bool], ...] = ()  # (iterations, converged) per loop


class Compiled(Body, tag="compiled"):
    pipeline: Handle
    key: str
    compile_ns: Handle


class Allocated(Body, tag="allocated"):
    handle: Handle


class Recovered(Body, tag="recovered"):
    capabilities: dict[str, Any]  # Capabilities.to_dict()


class Done(Body, tag="done"):
    pass


class Hello(Body, tag="hello"):
    pid: int
    backend: str
    version: str
    capabilities: dict[str, Any]
    device: int | None
    devices: list[dict[str, Any]]
    proof: bytes
    started: float | None = None  # a process worker's
    node: str | None = None       # a Ray actor's


class HelloFailed(Body, tag="hello_failed"):
    error: dict[str, Any]  # VyreError.to_dict()
    proof: bytes
    traceback: str | None = None
    pid: int | None = None    # (these four a Ray actor's)
    node: str | None = None
    missing: bool = False     # the backend is not installed on its node
    installed: tuple[str, ...] = ()


class Failed(Body, tag="error"):
    error: dict[str, Any]  # VyreError.to_dict()


class Heartbeat(Body, tag="heartbeat"):
    pass


#: The class of each tag.
CLASS_OF: dict[Op, type[Body]] = {}
for _cls in Body.__subclasses__():
    _cls.kind = Op(_cls.__struct_config__.tag)
    CLASS_OF[_cls.kind] = _cls
    for _name in ("fp", "label", "program"):
        if _name not in _cls.__struct_fields__:
            setattr(_cls, _name, None)

REQUESTS = frozenset({Op.PING, Op.DISPATCH, Op.COMPILE, Op.PIPELINE_DISPATCH, Op.ALLOCATE,
                      Op.UPLOAD, Op.DOWNLOAD, Op.FREE, Op.DISPATCH_RESIDENT, Op.SEQUENCE,
                      Op.COMPILE_SEQUENCE, Op.TRY_RECOVER, Op.ADOPT, Op.SHUTDOWN})
#: The answers to a request (an error answers any).
REPLIES = frozenset({Op.RAN, Op.SEQUENCE_RAN, Op.COMPILED, Op.ALLOCATED, Op.RECOVERED,
                     Op.DONE, Op.ERROR})
#: The reply class each request is answered with.
REPLY_OF: dict[type[Body], type[Body]] = {
    Ping: Done, Dispatch: Ran, Compile: Compiled, PipelineDispatch: Ran, Allocate: Allocated,
    Upload: Done, Download: Done, Free: Done, DispatchResident: Ran, RunSequence: SequenceRan,
    CompileSequence: Done, TryRecover: Recovered, Adopt: Done, Shutdown: Done,
}


@dataclasses.dataclass(slots=True)
class Message:
    """The envelope: a body, the request's id, the worker generation answering, the
    arrays, and two parts of the envelope itself: ``out``, the slots in shared memory a
    request's outputs are to be written into, and ``cache``, the pipeline-cache counters
    (hits, misses, entries) a reply carries about once a second."""
    body: Body
    id: int = 0
    gen: int = 0
    arrays: list[Any] = dataclasses.field(default_factory=list)
    out: list[Any] | None = None
    cache: tuple[int, int, int] | None = None

    @property
    def op(self) -> Op:
        return self.body.kind
