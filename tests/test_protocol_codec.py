"""The parent <-> worker codec (``vyre_core.protocol``), without processes: every operation
round-trips with its meta and arrays of every protocol dtype, received arrays are
read-only views over the frames, and every malformation is a ``ProtocolError`` that
carries the request id whenever the header was readable."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
import zmq

from vyre_core import protocol
from vyre_core.errors import DispatchTimeoutError, InvalidInputError, ProtocolError, VyreError
from vyre_core.protocol import DTYPES, MAX_ARRAYS, MAX_HEADER_BYTES, Message, Op

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

META = {"program": b"\x00\x01wire", "config": {"timeout": 1.5, "label": None, "profile": True},
        "handles": [1, 2, 3], "name": "résumé", "big": 2**62, "neg": -7, "nested": [[1], {}]}


def sample_arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    arrays = [rng.integers(0, 256, 37).astype(np.uint8),
              rng.integers(0, 2**32, 5, dtype=np.uint64).astype(np.uint32),
              np.array([-(2**31), -1, 0, 2**31 - 1], dtype=np.int32),
              np.array([0.5, -0.0, np.inf, 65504.0], dtype=np.float16),
              np.array([np.nan, 1e-45, -3.5], dtype=np.float32),
              np.array([np.pi, -np.inf, 5e-324], dtype=np.float64),
              np.zeros(0, dtype=np.float32),
              np.array([-128, 127, -1], dtype=np.int8),
              np.array([0, 65535, 7], dtype=np.uint16),
              np.array([-(2**15), 2**15 - 1], dtype=np.int16),
              np.array([0, 2**64 - 1, 2**63], dtype=np.uint64),
              np.array([-(2**63), 2**63 - 1, -1], dtype=np.int64)]
    assert {a.dtype for a in arrays} == set(DTYPES.values())
    return arrays


def as_bytes(frames: list) -> list[bytes]:
    """Frames as received from the wire (immutable bytes)."""
    return [f if isinstance(f, bytes) else f.tobytes() for f in frames]


def header(**fields) -> bytes:
    base = {"v": protocol.PROTOCOL_VERSION, "op": "dispatch", "id": 7, "gen": 2, "meta": {},
            "arrays": []}
    base.update(fields)
    return msgpack.packb({k: v for k, v in base.items() if v is not _MISSING},
                         use_bin_type=True)


_MISSING = object()


def refused(frames: list, request_id: int | None, match: str | None = None,
            **kwargs) -> ProtocolError:
    with pytest.raises(ProtocolError, match=match) as err:
        protocol.decode(frames, **kwargs)
    assert err.value.details.get("request_id") == request_id
    assert err.value.fix and "Fix:" in str(err.value)
    return err.value


# -- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("op", list(Op), ids=[str(o) for o in Op])
def test_every_op_round_trips_with_meta_and_every_dtype(op):
    arrays = sample_arrays()
    raw = b"raw bytes payload"
    msg = Message(op, id=2**63 - 1, gen=3, meta=META, arrays=[*arrays, raw])
    frames = protocol.encode(msg)
    assert len(frames) == 1 + len(arrays) + 1
    decoded = protocol.decode(as_bytes(frames))
    assert decoded.op is op and decoded.id == 2**63 - 1 and decoded.gen == 3
    assert decoded.meta == META
    assert len(decoded.arrays) == len(arrays) + 1
    for got, want in zip(decoded.arrays, arrays, strict=False):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()  # exact bits: NaN, -0.0, subnormals
    assert decoded.arrays[-1].dtype == np.uint8 and decoded.arrays[-1].tobytes() == raw


def test_defaults_round_trip():
    decoded = protocol.decode(as_bytes(protocol.encode(Message(Op.PING))))
    assert decoded == Message(Op.PING, 0, 0, {}, [])


def test_decoded_arrays_are_read_only_views_over_bytes_frames():
    arrays = sample_arrays()
    frames = as_bytes(protocol.encode(Message(Op.REPLY, 1, 1, {}, arrays)))
    decoded = protocol.decode(frames)
    for got, frame in zip(decoded.arrays, frames[1:], strict=True):
        assert not got.flags.writeable
        if got.nbytes:
            assert np.shares_memory(got, np.frombuffer(frame, dtype=np.uint8))
        with pytest.raises(ValueError):
            got[...] = 0


def test_round_trip_over_a_socket_with_zero_copy_frames():
    big = np.arange(1 << 18, dtype=np.uint32)  # over ZERO_COPY_THRESHOLD: sent without a copy
    assert big.nbytes >= protocol.ZERO_COPY_THRESHOLD
    arrays = [*sample_arrays(), big]
    context = zmq.Context()
    try:
        a, b = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
        a.bind("inproc://codec")
        b.connect("inproc://codec")
        protocol.send(a, Message(Op.DISPATCH, 11, 4, META, arrays))
        assert b.poll(5000)
        decoded = protocol.decode(b.recv_multipart(copy=False))
        a.close(linger=0)
        b.close(linger=0)
    finally:
        context.term()
    assert (decoded.op, decoded.id, decoded.gen, decoded.meta) == (Op.DISPATCH, 11, 4, META)
    for got, want in zip(decoded.arrays, arrays, strict=True):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_arrays_decoded_from_zmq_frames_are_read_only():
    """Decoded arrays are read-only views of the message memory, for zmq.Frame and
    bytearray frames alike."""
    frames = protocol.encode(Message(Op.REPLY, 1, 1, {}, [np.arange(4, dtype=np.uint32)]))
    for received in ([zmq.Frame(bytes(f)) for f in frames], [bytes(frames[0]),
                                                             bytearray(frames[1].tobytes())]):
        array = protocol.decode(received).arrays[0]
        assert array.tolist() == [0, 1, 2, 3]
        assert not array.flags.writeable


def test_encode_does_not_copy_arrays():
    array = np.arange(100, dtype=np.float32)
    frames = protocol.encode(Message(Op.UPLOAD, 1, 1, {}, [array, array.reshape(10, 10)]))
    assert np.shares_memory(frames[1], array) and np.shares_memory(frames[2], array)
    assert frames[2].shape == (100,)
    head = msgpack.unpackb(frames[0])
    assert head["arrays"] == [["f4", 100], ["f4", 100]]


def test_error_message_round_trips_the_error():
    error = DispatchTimeoutError("too slow", timeout=0.5)
    decoded = protocol.decode(as_bytes(protocol.encode(protocol.error_message(error, 9, 3))))
    assert (decoded.op, decoded.id, decoded.gen) == (Op.ERROR, 9, 3)
    again = VyreError.from_dict(decoded.meta["error"])
    assert type(again) is DispatchTimeoutError and again.details == {"timeout": 0.5}
    assert again.cause == "too slow" and again.fix == error.fix


# -- as_frame_array ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.bool_, np.longdouble, ">u4",
                                   ">i8", "<U3", object])
def test_as_frame_array_refuses_unsupported_dtypes(dtype):
    with pytest.raises(InvalidInputError) as err:
        protocol.as_frame_array(np.zeros(3, dtype=dtype))
    assert "Fix:" in str(err.value) and all(name in err.value.fix for name in DTYPES)
    with pytest.raises(InvalidInputError):
        protocol.encode(Message(Op.UPLOAD, 1, 1, {}, [np.zeros(3, dtype=dtype)]))


def test_as_frame_array_accepts_bytes_and_flattens():
    for data in (b"abc", bytearray(b"abc"), memoryview(b"abc")):
        array = protocol.as_frame_array(data)
        assert array.dtype == np.uint8 and array.tobytes() == b"abc"
    grid = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert np.shares_memory(protocol.as_frame_array(grid), grid)
    strided = protocol.as_frame_array(grid[:, ::2])
    assert strided.flags.c_contiguous and strided.tolist() == [0, 2, 4, 6, 8, 10]
    assert protocol.as_frame_array(np.float64(2.5)).tolist() == [2.5]


# -- malformations ---------------------------------------------------------------------------------


def test_missing_and_extra_frames():
    head = header(arrays=[["u4", 2], ["u1", 3]])
    refused([head, bytes(8)], 7, "declares 2 arrays in frames but 1 frames")
    refused([head], 7, "declares 2 arrays in frames but 0 frames")
    refused([head, bytes(8), bytes(3), b""], 7, "declares 2 arrays in frames but 3 frames")
    refused([header(), b"stray"], 7, "declares 0 arrays in frames but 1 frames")


def test_size_mismatch():
    refused([header(arrays=[["u4", 2]]), bytes(7)], 7, "declares 2 x uint32")
    refused([header(arrays=[["f8", 1]]), bytes(4)], 7)
    refused([header(arrays=[["u4", 0]]), bytes(4)], 7)
    refused([header(arrays=[["u1", 2**62]]), bytes(4)], 7)


def test_unknown_operation():
    for op in ("explode", "", None, 3, ["dispatch"], {"op": 1}, b"dispatch"):
        refused([header(op=op)], 7, "unknown operation")
    refused([header(op=_MISSING)], 7, "unknown operation")


@pytest.mark.parametrize("spec", [["i16", 1], ["b1", 1], ["c8", 1], ["f4"], ["f4", 1, 2],
                                  ["f4", -1], ["f4", 1.0], ["f4", True], "f4", None,
                                  [b"f4", 1]])
def test_bad_array_declarations(spec):
    refused([header(arrays=[spec]), bytes(4)], 7, "array 0 is declared")


def test_bad_version():
    v = protocol.PROTOCOL_VERSION
    for version in (0, 1, v + 1, -1, None, str(v), [v]):
        refused([header(v=version)], 7, "protocol version")
    refused([header(v=_MISSING)], 7, "protocol version")
    refused([header(v=v + 1, id=True)], None, "protocol version")


def test_version_must_be_the_integer():
    """The protocol version is an integer: True and 2.0 are refused like any bool or
    float in an integer field."""
    for version in (True, float(protocol.PROTOCOL_VERSION)):
        refused([header(v=version)], 7, "protocol version")


@pytest.mark.parametrize("value", [[1, 2], 7, "header", b"bin", None, 1.5, True])
def test_header_that_is_not_a_map(value):
    refused([msgpack.packb(value, use_bin_type=True)], None, "not a map")


def test_header_that_is_not_msgpack():
    refused([b"\xc1"], None, "not msgpack")
    refused([b""], None, "not msgpack")
    refused([header() + b"\x00"], 7, "not msgpack")  # the id is still readable
    refused([msgpack.packb({1: 2})], None, "not msgpack")  # non-string map keys
    refused([], None, "empty message")


def test_oversize_header():
    big = header(meta={"blob": b"x" * MAX_HEADER_BYTES})
    assert len(big) > MAX_HEADER_BYTES
    # refused, yet answered with its id: the caller's request fails, it is not lost
    refused([big], 7, f"over {MAX_HEADER_BYTES}")
    fits = header(meta={"blob": b"x" * (MAX_HEADER_BYTES - 100)})
    assert len(fits) <= MAX_HEADER_BYTES
    assert len(protocol.decode([fits]).meta["blob"]) == MAX_HEADER_BYTES - 100


def test_header_limit_admits_every_program_the_wire_form_allows():
    """A valid program of ~60k statements was refused by workers (issue 11, defect 1)."""
    from vyre_core.config import MAX_LABEL_CHARS, DispatchConfig
    from vyre_core.ir.wire import MAX_WIRE_BYTES

    config = DispatchConfig(label="x" * MAX_LABEL_CHARS, timeout=1.0).to_dict()
    meta = {"program": b"p" * MAX_WIRE_BYTES, "config": config, "label": "x" * MAX_LABEL_CHARS}
    frames = protocol.encode_checked(Message(Op.DISPATCH, 2**63 - 1, 0, meta), 1 << 20)
    assert protocol.decode(as_bytes(frames)).meta["program"] == meta["program"]


@pytest.mark.parametrize(("raw", "expected"), [
    (header(id=41), 41), (header(id=41) + b"junk", 41), (header(id=41)[:20], 41),
    (header(id=41)[:12], None),
    (header(id=-1), None), (header(id="41"), None), (b"\xc1", None), (b"", None),
    (msgpack.packb([1, 2]), None), (msgpack.packb({"meta": {}, "id": 5}), 5),
])
def test_peek_request_id_reads_the_id_before_the_meta(raw, expected):
    assert protocol.peek_request_id(raw) == expected


def test_requests_over_the_limits_are_refused_before_sending():
    from vyre_core.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="max_message_bytes=16") as info:
        protocol.encode_checked(Message(Op.DISPATCH, 1, 0, {}, [np.zeros(5, np.float32)]), 16)
    assert "Fix:" in str(info.value)
    with pytest.raises(InvalidInputError, match="header"):
        protocol.encode_checked(Message(Op.DISPATCH, 1, 0, {"x": b"y" * MAX_HEADER_BYTES}), 16)


def test_total_over_max_bytes():
    head = header(arrays=[["u4", 4], ["u1", 8]])
    frames = [head, bytes(16), bytes(8)]
    assert len(protocol.decode(frames, max_bytes=24).arrays) == 2
    refused(frames, 7, "more than 23 bytes", max_bytes=23)
    refused(frames, 7, "more than 10 bytes", max_bytes=10)


def test_too_many_arrays():
    n = MAX_ARRAYS + 1
    refused([header(arrays=[["u1", 1]] * n), *[b"x"] * n], 7)


@pytest.mark.parametrize("request_id", [-1, 1.0, "7", None, [7], 2**63, True, False])
def test_ids_that_are_not_unsigned_integers(request_id):
    refused([header(id=request_id)], None, "integer id")


def test_missing_id():
    refused([header(id=_MISSING)], None, "integer id")


@pytest.mark.parametrize("gen", [-1, 1.0, "2", None, True, False])
def test_generation_that_is_not_an_unsigned_integer_keeps_the_id(gen):
    refused([header(gen=gen)], 7, "integer id and gen")


@pytest.mark.parametrize("field,value", [("meta", []), ("meta", None), ("meta", "m"),
                                         ("arrays", {}), ("arrays", None), ("arrays", "u4")])
def test_meta_and_arrays_of_the_wrong_type(field, value):
    refused([header(**{field: value})], 7, "meta map and an arrays list")
