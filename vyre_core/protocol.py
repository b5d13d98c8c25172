"""The parent <-> worker wire protocol: the one codec both sides use.

A message is a msgpack header frame followed by one raw frame per array (on a lane, framed
by ``framing.py``; on the control socket, as ZeroMQ parts). The header is
``{"v", "op", "id", "gen", "meta", "arrays": [[dtype, count], ...]}``; an array in shared
memory (``dataplane.Shared``) is ``[dtype, count, segment, fd, size]``, then its offset in
the segment when not 0, and has no frame.
Arrays cross without pickle: received frames become read-only numpy arrays over the
message memory (``np.frombuffer``), and large frames are sent without copying. Everything
received is checked (version, operation, field types, frame count, sizes against dtype and count,
size caps); a bad message raises ``ProtocolError`` carrying the request id when known.

Beside its sockets, each worker shares a small ``ProgressPage`` with its parent: it hands
the worker its identity and hello token at start (never on the command line), and the
worker's main thread writes into it the id of each request the moment it receives it
and once it has answered, so the parent can tell a request that never arrived from one
that is running in a worker too busy to send heartbeats.
"""

from __future__ import annotations

import contextlib
import enum
import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
import zmq

from vyre_core.dataplane import Shared
from vyre_core.errors import InvalidInputError, ProtocolError, VyreError
from vyre_core.ir.wire import MAX_WIRE_BYTES

PROTOCOL_VERSION = 3
#: Every header the parent may legally send fits: a program at the wire limit, plus its
#: config, label and the envelope.
MAX_HEADER_BYTES = MAX_WIRE_BYTES + (1 << 20)
MAX_ARRAYS = 256
#: Frames a lane takes in one message: a header with too many arrays is still answered.
MAX_FRAMES = 4 * MAX_ARRAYS
MAX_MESSAGE_BYTES = 1 << 36
#: The largest spawn request a fork server takes (argv and environment): both sides read
#: it, the parent's fork server and the worker side's. The socket's buffer may allow less
#: (EMSGSIZE): that worker then starts the plain way.
FORK_REQUEST_BYTES = 1 << 20
ZERO_COPY_THRESHOLD = 1 << 16  # frames at least this large are sent without copying

DTYPES = {name: np.dtype(name) for name in ("u1", "u4", "i4", "f2", "f4", "f8", "i1", "u2",
                                             "i2", "u8", "i8")}
_DTYPE_NAMES = {dt: name for name, dt in DTYPES.items()}


class Op(enum.StrEnum):
    # worker -> parent
    HELLO = "hello"                  # started: pid, backend, version, capabilities
    HELLO_FAILED = "hello_failed"    # could not start: error and traceback
    REPLY = "reply"
    ERROR = "error"                  # meta["error"] is a VyreError dict
    HEARTBEAT = "heartbeat"
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


_OPS = {op.value: op for op in Op}  # (a dict lookup: Op(value) costs 10x more per message)

#: Decoded programs a worker keeps by fingerprint (the most recently used); the parent
#: mirrors each worker's set to send a program's wire form only to a worker without it.
PROGRAM_CACHE = 256
#: The ProtocolError detail with which a worker asks for a program's wire form: the
#: request named the program by fingerprint only, and the worker does not hold it.
PROGRAM_NOT_HELD = "program_not_held"
#: The ProtocolError detail with which a worker asks for a request's arrays on the socket:
#: it cannot open the parent's shared memory (the parent became undumpable, say).
SHARED_REFUSED = "shared_refused"

REQUESTS = frozenset({Op.PING, Op.DISPATCH, Op.COMPILE, Op.PIPELINE_DISPATCH, Op.ALLOCATE,
                      Op.UPLOAD, Op.DOWNLOAD, Op.FREE, Op.DISPATCH_RESIDENT, Op.SEQUENCE,
                      Op.COMPILE_SEQUENCE, Op.TRY_RECOVER, Op.ADOPT, Op.SHUTDOWN})


@dataclass
class Message:
    op: Op
    id: int = 0
    gen: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    arrays: list[np.ndarray] = field(default_factory=list)


def as_frame_array(data: Any) -> np.ndarray:
    """An array or bytes as a 1-D contiguous array of a protocol dtype."""
    if isinstance(data, bytes | bytearray | memoryview):
        return np.frombuffer(data, dtype=np.uint8)
    array = np.ascontiguousarray(data).reshape(-1)
    if array.dtype not in _DTYPE_NAMES:
        raise InvalidInputError(f"arrays of dtype {array.dtype} cannot cross to a worker",
                                f"Pass numpy arrays of one of {sorted(DTYPES)} (or bytes).")
    return array


def encode(msg: Message) -> list[Any]:
    """The frames of ``msg``: header then arrays (arrays are not copied; a ``Shared`` one
    is only described in the header)."""
    specs, frames = [], []
    for a in msg.arrays:
        if isinstance(a, Shared):
            specs.append(array_spec(a.dtype, a.count, a))
        else:
            array = as_frame_array(a)
            specs.append(array_spec(array.dtype, int(array.shape[0])))
            frames.append(array)
    header = msgpack.packb({
        "v": PROTOCOL_VERSION, "op": str(msg.op), "id": msg.id, "gen": msg.gen,
        "meta": msg.meta, "arrays": specs}, use_bin_type=True)
    return [header, *frames]


def array_spec(dtype: np.dtype, count: int, shared: Shared | None = None) -> list[Any]:
    """How a header names an array: ``[dtype, count]``, or where it lies in shared memory
    (``shared``), ``[dtype, count, segment, fd, size]`` and its offset there if not 0."""
    if shared is None:
        return [_DTYPE_NAMES[dtype], count]
    spec = [_DTYPE_NAMES[dtype], count, shared.segment, shared.fd, shared.size]
    return [*spec, shared.offset] if shared.offset else spec


def describe_shared(spec: Any) -> Shared | None:
    """The ``Shared`` array a ``[dtype, count, segment, fd, size(, offset)]`` spec
    describes, or None when ``spec`` is not one."""
    if isinstance(spec, list) and len(spec) in (5, 6) and spec[0] in DTYPES \
            and all(_is_uint(v) for v in spec[1:]):
        return Shared(DTYPES[spec[0]], *spec[1:])
    return None


def encode_checked(msg: Message, max_bytes: int) -> list[Any]:
    """``encode(msg)`` for a request about to be submitted: one over the limits the worker
    enforces is refused here, in the caller, with the limit named."""
    try:
        frames = encode(msg)
    except (TypeError, ValueError, OverflowError) as exc:  # msgpack, a lone surrogate...
        raise InvalidInputError(f"{msg.op} request cannot be encoded: {exc}",
                                "Pass plain numbers, str labels and numpy arrays of the "
                                f"protocol dtypes ({sorted(DTYPES)}).") from None
    if len(frames[0]) > MAX_HEADER_BYTES:
        raise InvalidInputError(
            f"{msg.op} request header is {len(frames[0])} bytes, over the "
            f"{MAX_HEADER_BYTES}-byte limit of the worker protocol",
            "Send a smaller program or label (programs are limited to "
            f"{MAX_WIRE_BYTES} bytes of wire form).")
    size = sum(a.nbytes for a in msg.arrays if isinstance(a, Shared)) \
        + sum(a.nbytes for a in frames[1:])
    if size > max_bytes:
        raise InvalidInputError(
            f"{msg.op} request carries {size} bytes of arrays, over "
            f"max_message_bytes={max_bytes}",
            "Split the data across several dispatches, or raise "
            "Transport.max_message_bytes (PoolOptions.transport).")
    return frames


def check_output_bytes(size: int, max_bytes: int) -> None:
    """Outputs over ``max_bytes`` are refused: by the parent before sending when it knows
    their sizes, by the worker before replying otherwise."""
    if size > max_bytes:
        raise InvalidInputError(
            f"the outputs of this request are {size} bytes, over max_message_bytes={max_bytes}",
            "Return less data per call (split the dispatch), or raise "
            "Transport.max_message_bytes (PoolOptions.transport).")


def send(socket: zmq.Socket, msg: Message, identity: bytes | None = None) -> None:
    """Send ``msg`` (to ``identity`` on a ROUTER); large arrays go without a copy."""
    send_frames(socket, encode(msg), identity)


def send_frames(socket: zmq.Socket, frames: list[Any], identity: bytes | None = None) -> None:
    """Send already encoded frames (to ``identity`` on a ROUTER); large ones without a
    copy. Every part is made before the first is sent: pyzmq's zero-copy bookkeeping
    needs a thread and descriptors on first use, and a process out of them (EMFILE) then
    sends copies instead of half a message."""
    parts = ([] if identity is None else [identity]) + frames
    with contextlib.suppress(OSError):  # (then every part is copied below)
        parts = [zmq.Frame(part, copy=False) if _size(part) >= ZERO_COPY_THRESHOLD else part
                 for part in parts]
    last = len(parts) - 1
    for i, part in enumerate(parts):
        socket.send(part, zmq.SNDMORE if i < last else 0, copy=not isinstance(part, zmq.Frame))


def _size(part: Any) -> int:
    return part.nbytes if isinstance(part, np.ndarray) else len(part)


def peek_request_id(header: Any) -> int | None:
    """The ``id`` of a header too large or malformed to decode whole, when it can be read
    without unpacking the rest (the encoder writes it before ``meta``)."""
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=len(_buffer(header)) + 1)
    try:
        unpacker.feed(_buffer(header))
        for _ in range(min(unpacker.read_map_header(), 6)):
            key = unpacker.unpack()
            if key == "id":
                value = unpacker.unpack()
                return value if _is_uint(value) else None
            unpacker.skip()
    except Exception:  # whatever the bytes are, there is no readable id
        return None
    return None


def decode(frames: list[Any], max_bytes: int = MAX_MESSAGE_BYTES) -> Message:
    """Check and decode received frames (``zmq.Frame`` or bytes) into a Message."""
    if not frames:
        raise _bad("empty message", None)
    header_bytes = _buffer(frames[0])
    if len(header_bytes) > MAX_HEADER_BYTES:
        raise _bad(f"header of {len(header_bytes)} bytes is over {MAX_HEADER_BYTES}",
                   peek_request_id(header_bytes))
    try:
        header = msgpack.unpackb(header_bytes, raw=False, strict_map_key=True,
                                 max_array_len=MAX_ARRAYS * 2 + 64, max_map_len=64,
                                 max_str_len=MAX_HEADER_BYTES, max_bin_len=MAX_HEADER_BYTES)
    except Exception as exc:  # the msgpack boundary
        raise _bad(f"header is not msgpack ({exc})", peek_request_id(header_bytes)) from None
    if not isinstance(header, dict):
        raise _bad(f"header is a {type(header).__name__}, not a map", None)
    request_id = header.get("id")
    rid = request_id if _is_uint(request_id) else None
    if type(header.get("v")) is not int or header["v"] != PROTOCOL_VERSION:
        raise _bad(f"protocol version {header.get('v')!r}, expected {PROTOCOL_VERSION}", rid)
    op = _OPS.get(header.get("op")) if isinstance(header.get("op"), str) else None
    if op is None:
        raise _bad(f"unknown operation {header.get('op')!r}", rid)
    gen, meta, specs = header.get("gen"), header.get("meta"), header.get("arrays")
    if rid is None or not _is_uint(gen) or not isinstance(meta, dict) \
            or not isinstance(specs, list):
        raise _bad("header needs integer id and gen, a meta map and an arrays list", rid)
    if len(specs) > MAX_ARRAYS:
        raise _bad(f"header declares {len(specs)} arrays, over {MAX_ARRAYS}", rid)
    declared: list[Shared | tuple[np.dtype, int]] = []
    for i, spec in enumerate(specs):
        shared = describe_shared(spec)
        if shared is not None:
            if shared.end > shared.size:
                raise _bad(f"array {i} does not fit the segment it names", rid)
            declared.append(shared)
        elif (isinstance(spec, list) and len(spec) == 2 and spec[0] in DTYPES
                and _is_uint(spec[1])):
            declared.append((DTYPES[spec[0]], spec[1]))
        else:
            raise _bad(f"array {i} is declared as {spec!r}, not [dtype, count] or [dtype, "
                       "count, segment, fd, size(, offset)]", rid)
    framed = sum(not isinstance(d, Shared) for d in declared)
    if framed != len(frames) - 1:
        raise _bad(f"header declares {framed} arrays in frames but {len(frames) - 1} frames "
                   "follow", rid)
    arrays: list[Any] = []
    total, following = 0, iter(frames[1:])
    for i, found in enumerate(declared):
        if isinstance(found, Shared):
            total += found.nbytes
            arrays.append(found)
        else:
            dtype, count = found
            data = _buffer(next(following))
            if count * dtype.itemsize != len(data):
                raise _bad(f"array {i} declares {count} x {dtype} but its frame has "
                           f"{len(data)} bytes", rid)
            total += len(data)
            array = np.frombuffer(data, dtype=dtype)
            array.flags.writeable = False  # a view of the message: never written through
            arrays.append(array)
        if total > max_bytes:
            raise _bad(f"message carries more than {max_bytes} bytes", rid)
    return Message(op, rid, gen, meta, arrays)


def _buffer(frame: Any) -> memoryview:
    return memoryview(frame.buffer if isinstance(frame, zmq.Frame) else frame).cast("B")


def _is_uint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def _bad(cause: str, request_id: int | None) -> ProtocolError:
    return ProtocolError(f"malformed message: {cause}",
                         "Use matching vyre versions in the parent and the workers; "
                         "never write to a worker socket by hand.", request_id=request_id)


def dropped_error(dropped: Any, where: str,
                  kind: type[VyreError] = ProtocolError) -> VyreError:
    """The error for a message whose frame ``where`` could not allocate (a
    ``framing.Dropped``): read through and dropped, so only its request fails."""
    request_id = None if dropped.header is None else peek_request_id(dropped.header)
    part = "its header" if dropped.index == 0 else f"array {dropped.index - 1}"
    return kind(f"{where} could not allocate the {dropped.nbytes} bytes of {part} of a "
                "message (out of memory), so the message was dropped",
                "Free memory in that process (or raise its memory limit), or let large "
                "arrays travel through shared memory (VYRE_SHARED_MEMORY=1).",
                request_id=request_id)


def error_message(error: Any, request_id: int, gen: int) -> Message:
    """The reply carrying a VyreError (as a dict) for ``request_id``."""
    return Message(Op.ERROR, request_id, gen, {"error": error.to_dict()})


class ProgressPage:
    """A page of memory shared by a worker and its parent (a memfd the worker inherits).

    Layout: the id of the last request the worker's main thread received, the id of the
    last one it answered and that answer's size in bytes, the id of a request its caller
    cancelled (written by the parent; little-endian u64 each), then the start-up hand-over
    (identity and hello token, msgpack), which the worker erases once read. The worker is
    to stop the request it runs when the first and fourth words are equal
    (``stop_requested``; ``vyre_core.cancel``)."""

    SIZE = 4096
    _IDS = struct.Struct("<QQQ")
    _WORDS = struct.Struct("<QQQQ")
    CANCEL_AT = 24
    _BOOT = 64

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._map = mmap.mmap(fd, self.SIZE)

    @classmethod
    def create(cls, handover: dict[str, Any]) -> ProgressPage:
        """A new page carrying ``handover`` for the worker (the caller passes ``fd`` to it)."""
        blob = msgpack.packb(handover, use_bin_type=True)
        if len(blob) > cls.SIZE - cls._BOOT - 4:
            raise ValueError("hand-over too large for the progress page")
        fd = os.memfd_create("vyre-worker-progress", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, cls.SIZE)
            page = cls(fd)
        except BaseException:
            os.close(fd)
            raise
        page._map[cls._BOOT:cls._BOOT + 4] = len(blob).to_bytes(4, "little")
        page._map[cls._BOOT + 4:cls._BOOT + 4 + len(blob)] = blob
        return page

    def take_handover(self) -> dict[str, Any]:
        """Read the start-up hand-over and erase it from the page (worker side)."""
        size = int.from_bytes(self._map[self._BOOT:self._BOOT + 4], "little")
        if not 0 < size <= self.SIZE - self._BOOT - 4:
            raise ProtocolError("the progress page carries no start-up hand-over",
                                "Workers are started by the vyre supervisor only.")
        blob = self._map[self._BOOT + 4:self._BOOT + 4 + size]
        self._map[self._BOOT:self.SIZE] = bytes(self.SIZE - self._BOOT)
        handover = msgpack.unpackb(blob, raw=False)
        if not isinstance(handover, dict):
            raise ProtocolError("the start-up hand-over is malformed",
                                "Workers are started by the vyre supervisor only.")
        return handover

    def read(self) -> tuple[int, int, int]:
        """(last received request id, last answered request id, its answer's bytes)."""
        return self._IDS.unpack_from(self._map, 0)

    def received(self, request_id: int) -> None:
        struct.pack_into("<Q", self._map, 0, request_id)

    def answered(self, request_id: int, nbytes: int) -> None:
        struct.pack_into("<Q", self._map, 16, nbytes)  # the size first: read with the id
        struct.pack_into("<Q", self._map, 8, request_id)

    def cancel(self, request_id: int) -> None:
        """(Parent.) Ask the worker to stop request ``request_id`` at its next safe point."""
        struct.pack_into("<Q", self._map, self.CANCEL_AT, request_id)

    def stop_requested(self) -> bool:
        """(Worker.) Whether the request it received last was cancelled."""
        received, _, _, cancelled = self._WORDS.unpack_from(self._map, 0)
        return received != 0 and received == cancelled

    def words(self) -> memoryview:
        """The four words as a writable u64 view (for code that checks the stop itself,
        compiled code say: ``words[0] == words[3]``)."""
        return memoryview(self._map)[:self._WORDS.size].cast("Q")

    def close(self) -> None:
        self._map.close()
        os.close(self.fd)
