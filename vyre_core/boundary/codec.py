"""The one codec a parent and its workers use for the messages of ``messages.py``.

A message is a msgpack header frame followed by one raw frame per array (on a lane, framed
by ``framing.py``; on the control socket, as ZeroMQ parts). The header is positional,
``[v, id, gen, body, arrays, out, cache]``: ``body`` its class's tag then its fields in
declaration order (``messages.py``), ``arrays`` one spec per array (``[dtype, count]``;
an array in shared memory, ``dataplane.Shared``, is ``[dtype, count, segment, fd, size]``
and its offset in the segment when not 0, and has no frame), ``out`` the output slots of
a request or nil, ``cache`` a reply's pipeline-cache counters or nil.
Arrays cross without pickle: received frames become read-only numpy arrays over the
message memory (``np.frombuffer``), and large frames are sent without copying. Everything
received is checked (version, operation, each field against its class, frame count, sizes
against dtype and count, size caps); a bad message raises ``ProtocolError`` carrying the
request id when known.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import re
from typing import Any

import msgpack
import msgspec
import numpy as np
import zmq

from vyre_core.boundary.messages import CLASS_OF, Failed, Handle, Message, bad, is_uint
from vyre_core.dataplane import Shared
from vyre_core.errors import InvalidInputError, ProtocolError, VyreError
from vyre_core.ir.wire import MAX_WIRE_BYTES

PROTOCOL_VERSION = 4
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

#: Any message class (the decoder picks one by the tag that opens the body).
AnyBody = functools.reduce(operator.or_, CLASS_OF.values())


class _Header(msgspec.Struct, array_like=True, gc=False, forbid_unknown_fields=True):
    v: int
    id: Handle
    gen: Handle
    body: AnyBody
    arrays: list[Any]  # (the specs are checked below, against the frames)
    out: list[Any] | None
    cache: tuple[Handle, Handle, Handle] | None


_HEADER_FIELDS = _Header.__struct_fields__
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Header)


def as_frame_array(data: Any) -> np.ndarray:
    """An array or bytes as a 1-D contiguous array of a protocol dtype."""
    if isinstance(data, bytes | bytearray | memoryview):
        return np.frombuffer(data, dtype=np.uint8)
    array = np.ascontiguousarray(data).reshape(-1)
    if array.dtype not in _DTYPE_NAMES:
        raise InvalidInputError(f"arrays of dtype {array.dtype} cannot cross to a worker",
                                f"Pass numpy arrays of one of {sorted(DTYPES)} (or bytes).")
    return array


def encode(msg: Message, *, with_program: bool = True) -> list[Any]:
    """The frames of ``msg``: header then arrays (arrays are not copied; a ``Shared`` one
    is only described in the header). ``with_program=False`` sends the body's program as
    nil: the worker holds it by fingerprint (the lean path)."""
    specs, frames = [], []
    for a in msg.arrays:
        if isinstance(a, Shared):
            specs.append(array_spec(a.dtype, a.count, a))
        else:
            array = as_frame_array(a)
            specs.append(array_spec(array.dtype, int(array.shape[0])))
            frames.append(array)
    body = msg.body
    if not with_program and body.fp is not None and body.program is not None:
        body = msgspec.structs.replace(body, program=None)
    return [_ENCODER.encode((PROTOCOL_VERSION, msg.id, msg.gen, body, specs, msg.out,
                             msg.cache)), *frames]


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
            and all(is_uint(v) for v in spec[1:]):
        return Shared(DTYPES[spec[0]], *spec[1:])
    return None


def encode_checked(msg: Message, max_bytes: int, *, with_program: bool = True) -> list[Any]:
    """``encode(msg)`` for a request about to be submitted: one over the limits the worker
    enforces is refused here, in the caller, with the limit named."""
    try:
        frames = encode(msg, with_program=with_program)
    except (TypeError, ValueError, OverflowError) as exc:  # a numpy scalar, a surrogate...
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
    without unpacking the rest (the second entry, before the body)."""
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=len(_buffer(header)) + 1)
    try:
        unpacker.feed(_buffer(header))
        if unpacker.read_array_header() < 2:
            return None
        unpacker.skip()
        value = unpacker.unpack()
        return value if is_uint(value) else None
    except Exception:  # whatever the bytes are, there is no readable id
        return None


def decode(frames: list[Any], max_bytes: int = MAX_MESSAGE_BYTES) -> Message:
    """Check and decode received frames (``zmq.Frame`` or bytes) into a Message."""
    if not frames:
        raise bad("empty message", None)
    header_bytes = _buffer(frames[0])
    if len(header_bytes) > MAX_HEADER_BYTES:
        raise bad(f"header of {len(header_bytes)} bytes is over {MAX_HEADER_BYTES}",
                  peek_request_id(header_bytes))
    try:
        header = _DECODER.decode(header_bytes)
    except msgspec.ValidationError as exc:
        raise _invalid(header_bytes, str(exc)) from None
    except Exception as exc:  # the msgpack boundary
        raise bad(f"header is not msgpack ({exc})", peek_request_id(header_bytes)) from None
    if header.v != PROTOCOL_VERSION:
        raise bad(f"protocol version {header.v!r}, expected {PROTOCOL_VERSION}", header.id)
    return Message(header.body, header.id, header.gen,
                   _arrays(frames, header.arrays, max_bytes, header.id), header.out,
                   header.cache)


_AT = re.compile(r"^(.*) - at (?:`key` in )?`\$\[(\d+)\](?:\[(\d+)\])?")


def _invalid(header_bytes: memoryview, found: str) -> ProtocolError:
    """The error for a header the decoder refused (``found``, its words), naming the
    version, or the field, that is wrong."""
    rid = peek_request_id(header_bytes)
    try:
        raw = msgpack.unpackb(header_bytes, raw=False, strict_map_key=False)
    except Exception:  # (valid msgpack, or the decoder would have said so)
        raw = None
    if not isinstance(raw, list):
        return bad(f"header is a {type(raw).__name__}, not a list of {len(_HEADER_FIELDS)}",
                   rid)
    if not raw or raw[0] != PROTOCOL_VERSION:
        return bad(f"protocol version {raw[0] if raw else None!r}, expected "
                   f"{PROTOCOL_VERSION}", rid)
    at = _AT.match(found)
    if at is None:
        return bad(f"header: {found}", rid)
    cause, entry, inner = at.group(1), int(at.group(2)), at.group(3)
    name = _HEADER_FIELDS[entry] if entry < len(_HEADER_FIELDS) else f"entry {entry}"
    body = raw[3] if len(raw) > 3 else None
    kind = CLASS_OF.get(body[0]) if isinstance(body, list) and body and isinstance(
        body[0], str) else None
    if name == "body" and inner == "0":
        return bad(f"unknown operation {body[0] if isinstance(body, list) else body!r}", rid)
    if name == "body" and kind is not None and inner is not None:
        fields = kind.__struct_fields__
        field = fields[int(inner) - 1] if int(inner) <= len(fields) else "?"
        return bad(f"{kind.kind} field {field!r}: {cause}", rid)
    return bad(f"header {name}: {cause}", rid)


def _arrays(frames: list[Any], specs: list[Any], max_bytes: int, rid: int) -> list[Any]:
    """The arrays ``specs`` declare: those in frames over the frames' memory, the others
    as the ``Shared`` places they name."""
    if len(specs) > MAX_ARRAYS:
        raise bad(f"header declares {len(specs)} arrays, over {MAX_ARRAYS}", rid)
    declared: list[Shared | tuple[np.dtype, int]] = []
    for i, spec in enumerate(specs):
        shared = describe_shared(spec)
        if shared is not None:
            if shared.end > shared.size:
                raise bad(f"array {i} does not fit the segment it names", rid)
            declared.append(shared)
        elif (isinstance(spec, list) and len(spec) == 2 and spec[0] in DTYPES
                and is_uint(spec[1])):
            declared.append((DTYPES[spec[0]], spec[1]))
        else:
            raise bad(f"array {i} is declared as {spec!r}, not [dtype, count] or [dtype, "
                      "count, segment, fd, size(, offset)]", rid)
    framed = sum(not isinstance(d, Shared) for d in declared)
    if framed != len(frames) - 1:
        raise bad(f"header declares {framed} arrays in frames but {len(frames) - 1} frames "
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
                raise bad(f"array {i} declares {count} x {dtype} but its frame has "
                          f"{len(data)} bytes", rid)
            total += len(data)
            array = np.frombuffer(data, dtype=dtype)
            array.flags.writeable = False  # a view of the message: never written through
            arrays.append(array)
        if total > max_bytes:
            raise bad(f"message carries more than {max_bytes} bytes", rid)
    return arrays


def _buffer(frame: Any) -> memoryview:
    return memoryview(frame.buffer if isinstance(frame, zmq.Frame) else frame).cast("B")


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
    """The reply carrying a VyreError for ``request_id``."""
    return Message(Failed(error.to_dict()), request_id, gen)
