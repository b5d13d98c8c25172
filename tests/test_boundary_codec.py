"""The parent <-> worker codec (``vyre_core.boundary.codec``) and its message classes
(``vyre_core.boundary.messages``), without processes: every body class round-trips exactly
with arrays of every protocol dtype, ``out`` and ``cache`` (and with its program as nil on
the lean path), received arrays are read-only views over the frames, and every
malformation (a field of the wrong type in any class, a header of the wrong shape or
version) is a ``ProtocolError`` naming what is wrong and carrying the request id whenever
the header was readable."""

from __future__ import annotations

from typing import Any

import msgpack
import msgspec
import numpy as np
import pytest
import zmq

from vyre_core.boundary import codec
from vyre_core.boundary import messages as m
from vyre_core.boundary.codec import DTYPES, MAX_ARRAYS, MAX_HEADER_BYTES
from vyre_core.boundary.messages import (
    CLASS_OF,
    REPLIES,
    REPLY_OF,
    REQUESTS,
    Dispatch,
    Handle,
    Message,
    Op,
)
from vyre_core.errors import DispatchTimeoutError, InvalidInputError, ProtocolError, VyreError

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

CONFIG = {"timeout": 1.5, "label": None, "profile": True, "name": "résumé", "big": 2**62,
          "neg": -7, "nested": [[1], {}]}
ERROR = {"code": 1302, "cause": "it broke", "fix": "mend it", "details": {"at": [1, 2]}}

#: One body of every class, every field set away from its default.
SAMPLES: dict[Op, m.Body] = {
    Op.PING: m.Ping("probe"),
    Op.DISPATCH: m.Dispatch("fp-1", b"\x00\x01wire", CONFIG, "résumé"),
    Op.COMPILE: m.Compile(b"\x00program", CONFIG),
    Op.PIPELINE_DISPATCH: m.PipelineDispatch(2**63 - 1, CONFIG, "pipe"),
    Op.ALLOCATE: m.Allocate(1 << 40),
    Op.UPLOAD: m.Upload(3),
    Op.DOWNLOAD: m.Download(4),
    Op.FREE: m.Free(5),
    Op.DISPATCH_RESIDENT: m.DispatchResident("fp-2", b"resident", CONFIG, (1, 2, 3), "res"),
    Op.SEQUENCE: m.RunSequence("fp-3", b"sequence", CONFIG, {"a": 1, "b": 2**40}, "seq"),
    Op.COMPILE_SEQUENCE: m.CompileSequence("fp-4", b"sequence", CONFIG),
    Op.TRY_RECOVER: m.TryRecover(6),
    Op.ADOPT: m.Adopt(7),
    Op.SHUTDOWN: m.Shutdown(),
    Op.RAN: m.Ran(10, 20, "ran"),
    Op.SEQUENCE_RAN: m.SequenceRan(11, 21, "seq", ((3, True), (0, False))),
    Op.COMPILED: m.Compiled(9, "key", 123),
    Op.ALLOCATED: m.Allocated(8),
    Op.RECOVERED: m.Recovered({"max_workgroup": 256, "features": ["f16"]}),
    Op.DONE: m.Done(),
    Op.HELLO: m.Hello(1234, "reference", "1.2.3", {"x": 1}, 0, [{"name": "d0"}], b"proof",
                      1.5, "node-1"),
    Op.HELLO_FAILED: m.HelloFailed(ERROR, b"proof", "Traceback...", 99, "node-2", True,
                                   ("cuda", "rocm")),
    Op.ERROR: m.Failed(ERROR),
    Op.HEARTBEAT: m.Heartbeat(),
}
OPS = list(SAMPLES)

#: For each annotation a body field uses, values of the wrong type (or range) for it.
WRONG: dict[Any, list[Any]] = {
    str: [5, None, b"fp", ["fp"]],
    str | None: [5, b"label", ["x"], True],
    bytes: [None, "text", 5],
    bytes | None: ["text", 5, [b"x"]],
    dict[str, Any]: [[1], "config", None, 1],
    Handle: [-1, True, "1", 1.5, None, 2**63],
    int: ["1", 1.5, True, None],
    int | None: ["1", 1.5, True],
    float | None: ["1", True, [1.0]],
    bool: [1, "yes", None],
    tuple[Handle, ...]: [3, ["1"], [-1], None],
    tuple[str, ...]: ["cuda", [1], None],
    dict[str, Handle]: [[], {"a": -1}, {"a": "1"}, None],
    tuple[tuple[Handle, bool], ...]: [5, [[1]], [[1, "yes"]], [[-1, True]]],
    list[dict[str, Any]]: [{}, [1], None],
}


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


def wire_body(body: m.Body) -> list[Any]:
    """``body`` as it lies in a header: its tag, then its fields."""
    return msgpack.unpackb(msgspec.msgpack.encode(body), raw=False)


def header(v: Any = codec.PROTOCOL_VERSION, id: Any = 7, gen: Any = 2,
           body: Any = ..., arrays: Any = (), out: Any = None, cache: Any = None,
           extra: tuple = ()) -> bytes:
    """A raw header ``[v, id, gen, body, arrays, out, cache]`` (body a Dispatch by default)."""
    body = wire_body(Dispatch("fp", None, {})) if body is ... else body
    arrays = list(arrays) if isinstance(arrays, tuple) else arrays
    return msgpack.packb([v, id, gen, body, arrays, out, cache, *extra], use_bin_type=True)


def refused(frames: list, request_id: int | None, match: str | None = None,
            **kwargs) -> ProtocolError:
    with pytest.raises(ProtocolError, match=match) as err:
        codec.decode(frames, **kwargs)
    assert err.value.details.get("request_id") == request_id
    assert err.value.fix and "Fix:" in str(err.value)
    return err.value


def field_types(cls: type[m.Body]) -> list[tuple[int, str, Any]]:
    """(position in the body's wire form, name, annotation) of each field of ``cls``."""
    return [(i + 1, f.name, f.type) for i, f in enumerate(msgspec.structs.fields(cls))]


# -- the classes -------------------------------------------------------------------------------


def test_every_class_has_a_sample_and_a_tag():
    assert set(CLASS_OF) == set(Op) == set(SAMPLES)
    for op, body in SAMPLES.items():
        assert type(body) is CLASS_OF[op] and body.kind is op


def test_every_request_names_its_reply_class():
    assert set(REPLY_OF) == {CLASS_OF[op] for op in REQUESTS}
    for op in REQUESTS:
        reply = REPLY_OF[CLASS_OF[op]]
        assert reply in CLASS_OF.values() and reply.kind in REPLIES and reply.kind is not Op.ERROR
    assert REQUESTS.isdisjoint(REPLIES)
    assert REQUESTS | REPLIES | {Op.HELLO, Op.HELLO_FAILED, Op.HEARTBEAT} == set(Op)


def test_every_field_annotation_has_wrong_values_here():
    """The wrong-type cases below cover every annotation a body class uses: a class with a
    field of a new type needs its wrong values added here."""
    used = {annotation for cls in CLASS_OF.values() for _, _, annotation in field_types(cls)}
    assert used <= set(WRONG), used - set(WRONG)


def test_fp_label_and_program_read_off_any_body():
    for body in SAMPLES.values():
        fields = type(body).__struct_fields__
        for name in ("fp", "label", "program"):
            if name not in fields:
                assert getattr(body, name) is None, (body, name)


# -- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS, ids=str)
def test_every_class_round_trips_with_out_cache_and_every_dtype(op):
    arrays = sample_arrays()
    raw = b"raw bytes payload"
    out = [["f4", 4, 3, 17, 4096], ["u1", 2]]
    msg = Message(SAMPLES[op], id=2**63 - 1, gen=3, arrays=[*arrays, raw], out=out,
                  cache=(1, 2, 3))
    frames = codec.encode(msg)
    assert len(frames) == 1 + len(arrays) + 1
    decoded = codec.decode(as_bytes(frames))
    assert type(decoded.body) is CLASS_OF[op] and decoded.body == SAMPLES[op]
    assert decoded.op is op and decoded.id == 2**63 - 1 and decoded.gen == 3
    assert decoded.out == out and decoded.cache == (1, 2, 3)
    assert len(decoded.arrays) == len(arrays) + 1
    for got, want in zip(decoded.arrays, arrays, strict=False):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()  # exact bits: NaN, -0.0, subnormals
    assert decoded.arrays[-1].dtype == np.uint8 and decoded.arrays[-1].tobytes() == raw


@pytest.mark.parametrize("op", OPS, ids=str)
def test_every_class_round_trips_with_its_defaults(op):
    cls = CLASS_OF[op]
    required = [f for f in msgspec.structs.fields(cls) if f.required]
    body = cls(*[getattr(SAMPLES[op], f.name) for f in required])
    decoded = codec.decode(as_bytes(codec.encode(Message(body))))
    assert decoded == Message(body, 0, 0, [], None, None)


@pytest.mark.parametrize("op", [op for op in OPS if "fp" in CLASS_OF[op].__struct_fields__],
                         ids=str)
def test_the_lean_path_sends_the_program_as_nil(op):
    body = SAMPLES[op]
    assert body.program and body.fp
    msg = Message(body, 5, 1, [np.arange(3, dtype=np.uint32)], out=[["u4", 3]],
                  cache=(0, 1, 2))
    lean = codec.encode(msg, with_program=False)
    assert len(lean[0]) < len(codec.encode(msg)[0])
    decoded = codec.decode(as_bytes(lean))
    assert decoded.body == msgspec.structs.replace(body, program=None)
    assert decoded.body.fp == body.fp and decoded.body.program is None
    assert (decoded.id, decoded.gen, decoded.out, decoded.cache) == (5, 1, [["u4", 3]],
                                                                     (0, 1, 2))
    assert decoded.arrays[0].tolist() == [0, 1, 2]
    assert body.program  # the message itself is not changed


def test_the_lean_path_leaves_a_body_without_a_program_alone():
    for body in (m.Ping("x"), m.Ran(1, 2, "l"), m.Allocate(3)):
        assert codec.decode(as_bytes(codec.encode(Message(body), with_program=False))).body \
            == body


def test_decoded_arrays_are_read_only_views_over_bytes_frames():
    arrays = sample_arrays()
    frames = as_bytes(codec.encode(Message(m.Ran(), 1, 1, arrays)))
    decoded = codec.decode(frames)
    for got, frame in zip(decoded.arrays, frames[1:], strict=True):
        assert not got.flags.writeable
        if got.nbytes:
            assert np.shares_memory(got, np.frombuffer(frame, dtype=np.uint8))
        with pytest.raises(ValueError):
            got[...] = 0


def test_round_trip_over_a_socket_with_zero_copy_frames():
    big = np.arange(1 << 18, dtype=np.uint32)  # over ZERO_COPY_THRESHOLD: sent without a copy
    assert big.nbytes >= codec.ZERO_COPY_THRESHOLD
    arrays = [*sample_arrays(), big]
    body = SAMPLES[Op.DISPATCH]
    context = zmq.Context()
    try:
        a, b = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
        a.bind("inproc://codec")
        b.connect("inproc://codec")
        codec.send(a, Message(body, 11, 4, arrays))
        assert b.poll(5000)
        decoded = codec.decode(b.recv_multipart(copy=False))
        a.close(linger=0)
        b.close(linger=0)
    finally:
        context.term()
    assert (decoded.op, decoded.id, decoded.gen, decoded.body) == (Op.DISPATCH, 11, 4, body)
    for got, want in zip(decoded.arrays, arrays, strict=True):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_arrays_decoded_from_zmq_frames_are_read_only():
    """Decoded arrays are read-only views of the message memory, for zmq.Frame and
    bytearray frames alike."""
    frames = codec.encode(Message(m.Ran(), 1, 1, [np.arange(4, dtype=np.uint32)]))
    for received in ([zmq.Frame(bytes(f)) for f in frames], [bytes(frames[0]),
                                                             bytearray(frames[1].tobytes())]):
        array = codec.decode(received).arrays[0]
        assert array.tolist() == [0, 1, 2, 3]
        assert not array.flags.writeable


def test_encode_does_not_copy_arrays():
    array = np.arange(100, dtype=np.float32)
    frames = codec.encode(Message(m.Upload(1), 1, 1, [array, array.reshape(10, 10)]))
    assert np.shares_memory(frames[1], array) and np.shares_memory(frames[2], array)
    assert frames[2].shape == (100,)
    head = msgpack.unpackb(frames[0])
    assert head[4] == [["f4", 100], ["f4", 100]]


def test_the_header_is_positional():
    frames = codec.encode(Message(m.Allocate(64), 9, 2, [b"ab"], out=[["u1", 2]],
                                  cache=(4, 5, 6)))
    assert msgpack.unpackb(frames[0]) == [codec.PROTOCOL_VERSION, 9, 2, ["allocate", 64],
                                          [["u1", 2]], [["u1", 2]], [4, 5, 6]]


def test_error_message_round_trips_the_error():
    error = DispatchTimeoutError("too slow", timeout=0.5)
    decoded = codec.decode(as_bytes(codec.encode(codec.error_message(error, 9, 3))))
    assert (decoded.op, decoded.id, decoded.gen) == (Op.ERROR, 9, 3)
    again = VyreError.from_dict(decoded.body.error)
    assert type(again) is DispatchTimeoutError and again.details == {"timeout": 0.5}
    assert again.cause == "too slow" and again.fix == error.fix


# -- as_frame_array ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.bool_, np.longdouble, ">u4",
                                   ">i8", "<U3", object])
def test_as_frame_array_refuses_unsupported_dtypes(dtype):
    with pytest.raises(InvalidInputError) as err:
        codec.as_frame_array(np.zeros(3, dtype=dtype))
    assert "Fix:" in str(err.value) and all(name in err.value.fix for name in DTYPES)
    with pytest.raises(InvalidInputError):
        codec.encode(Message(m.Upload(1), 1, 1, [np.zeros(3, dtype=dtype)]))


def test_as_frame_array_accepts_bytes_and_flattens():
    for data in (b"abc", bytearray(b"abc"), memoryview(b"abc")):
        array = codec.as_frame_array(data)
        assert array.dtype == np.uint8 and array.tobytes() == b"abc"
    grid = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert np.shares_memory(codec.as_frame_array(grid), grid)
    strided = codec.as_frame_array(grid[:, ::2])
    assert strided.flags.c_contiguous and strided.tolist() == [0, 2, 4, 6, 8, 10]
    assert codec.as_frame_array(np.float64(2.5)).tolist() == [2.5]


# -- malformations ---------------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS, ids=str)
def test_every_field_of_the_wrong_type_is_refused_naming_the_op_and_field(op):
    cls = CLASS_OF[op]
    good = wire_body(SAMPLES[op])
    assert codec.decode([header(body=good)]).body == SAMPLES[op]
    checked = 0
    for at, name, annotation in field_types(cls):
        for value in WRONG[annotation]:
            body = list(good)
            body[at] = value
            error = refused([header(body=body)], 7)
            assert error.cause.startswith(f"malformed message: {op} field {name!r}: "), \
                (name, value, error.cause)
            checked += 1
    assert checked >= len(cls.__struct_fields__)


@pytest.mark.parametrize(("op", "at"), [(Op.DISPATCH, 3), (Op.SEQUENCE, 4), (Op.RECOVERED, 1),
                                        (Op.ERROR, 1)], ids=str)
def test_a_map_key_of_the_wrong_type_is_refused_naming_the_op_and_field(op, at):
    body = wire_body(SAMPLES[op])
    body[at] = {1: 2}
    name = CLASS_OF[op].__struct_fields__[at - 1]
    refused([header(body=body)], 7, f"{op} field {name!r}")


def test_a_map_key_of_the_wrong_type_is_refused_with_the_id():
    body = wire_body(SAMPLES[Op.DISPATCH])
    body[3] = {1: 2}
    refused([header(body=body)], 7, "Expected `str`, got `int`")


@pytest.mark.parametrize("op", [op for op in OPS if any(
    f.required for f in msgspec.structs.fields(CLASS_OF[op]))], ids=str)
def test_a_body_without_its_required_fields_is_refused(op):
    refused([header(body=[op.value])], 7, "header body: Expected `array` of at least length")


@pytest.mark.parametrize("where", ["header", "body"])
def test_entries_beyond_the_form_are_refused(where):
    if where == "header":
        raw = header(body=["ping"], extra=("surplus",))
    else:
        raw = header(body=["ping", "label", "surplus"])
    refused([raw], 7, "at most length")


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


@pytest.mark.parametrize("tag", ["explode", "", None, 3, True, ["dispatch"], {"op": 1},
                                 b"dispatch", "DISPATCH", "REPLY", "reply"])
def test_unknown_operation(tag):
    refused([header(body=[tag])], 7, "unknown operation")
    refused([header(body=[tag, "fp", None, {}])], 7, "unknown operation")


@pytest.mark.parametrize("body", [[], "dispatch", None, 3, {"op": "dispatch"}])
def test_a_body_that_is_not_a_tagged_list(body):
    refused([header(body=body)], 7, "header body: Expected `array`")


@pytest.mark.parametrize("spec", [["i16", 1], ["b1", 1], ["c8", 1], ["f4"], ["f4", 1, 2],
                                  ["f4", -1], ["f4", 1.0], ["f4", True], "f4", None,
                                  [b"f4", 1]])
def test_bad_array_declarations(spec):
    refused([header(arrays=[spec]), bytes(4)], 7, "array 0 is declared")


def test_bad_version():
    v = codec.PROTOCOL_VERSION
    for version in (0, 1, 3, v + 1, -1, None, str(v), [v], True):
        error = refused([header(v=version)], 7)
        assert error.cause == f"malformed message: protocol version {version!r}, expected {v}"
    refused([header(v=3)], 7, f"protocol version 3, expected {v}")
    refused([header(v=v + 1, id=True)], None, "protocol version")
    refused([msgpack.packb([])], None, "protocol version None")


def test_version_must_be_the_integer():
    """The protocol version is an integer: 4.0 is refused like any float in an integer
    field, the entry named."""
    refused([header(v=float(codec.PROTOCOL_VERSION))], 7, "header v: Expected `int`")


def test_a_protocol_3_map_header_is_refused_naming_the_shape():
    v3 = msgpack.packb({"v": 3, "op": "ping", "id": 5, "gen": 1, "meta": {}, "arrays": []},
                       use_bin_type=True)
    error = refused([v3], None)
    assert error.cause == "malformed message: header is a dict, not a list of 7"


@pytest.mark.parametrize("length", [0, 1, 3, 6])
def test_a_header_shorter_than_its_form_is_refused(length):
    full = msgpack.unpackb(header(body=["ping"]))
    short = msgpack.packb(full[:length])
    refused([short], 7 if length >= 2 else None,
            "protocol version None" if length == 0 else
            f"header: Expected `array` of at least length 7, got {length}")


@pytest.mark.parametrize("value", [7, "header", b"bin", None, 1.5, True])
def test_header_that_is_not_a_list(value):
    refused([msgpack.packb(value, use_bin_type=True)], None,
            r"header is a \w+, not a list of 7")


def test_header_that_is_not_msgpack():
    refused([b"\xc1"], None, "not msgpack")
    refused([b""], None, "not msgpack")
    refused([header() + b"\x00"], 7, "not msgpack")  # the id is still readable
    refused([], None, "empty message")


def test_oversize_header():
    big = header(body=wire_body(Dispatch("fp", b"x" * MAX_HEADER_BYTES, {})))
    assert len(big) > MAX_HEADER_BYTES
    # refused, yet answered with its id: the caller's request fails, it is not lost
    refused([big], 7, f"over {MAX_HEADER_BYTES}")
    fits = header(body=wire_body(Dispatch("fp", b"x" * (MAX_HEADER_BYTES - 100), {})))
    assert len(fits) <= MAX_HEADER_BYTES
    assert len(codec.decode([fits]).body.program) == MAX_HEADER_BYTES - 100


def test_header_limit_admits_every_program_the_wire_form_allows():
    """A valid program of ~60k statements was refused by workers (issue 11, defect 1)."""
    from vyre_core.config import MAX_LABEL_CHARS, DispatchConfig
    from vyre_core.ir.wire import MAX_WIRE_BYTES

    label = "x" * MAX_LABEL_CHARS
    config = DispatchConfig(label=label, timeout=1.0).to_wire()
    body = Dispatch("f" * 64, b"p" * MAX_WIRE_BYTES, config, label)
    frames = codec.encode_checked(Message(body, 2**63 - 1, 0), 1 << 20)
    assert codec.decode(as_bytes(frames)).body == body


@pytest.mark.parametrize(("raw", "expected"), [
    (header(id=41), 41), (header(id=41) + b"junk", 41), (header(id=41)[:3], 41),
    (header(id=41)[:2], None),
    (header(id=-1), None), (header(id="41"), None), (header(id=True), None),
    (header(id=2**63), None), (b"\xc1", None), (b"", None),
    (msgpack.packb([4]), None), (msgpack.packb({"v": 4, "id": 5}), None),
])
def test_peek_request_id_reads_the_id_before_the_body(raw, expected):
    assert codec.peek_request_id(raw) == expected


def test_requests_over_the_limits_are_refused_before_sending():
    with pytest.raises(InvalidInputError, match="max_message_bytes=16") as info:
        codec.encode_checked(Message(Dispatch("fp", b"p", {}), 1, 0,
                                     [np.zeros(5, np.float32)]), 16)
    assert "Fix:" in str(info.value)
    with pytest.raises(InvalidInputError, match="header"):
        codec.encode_checked(Message(Dispatch("fp", b"y" * MAX_HEADER_BYTES, {}), 1, 0), 16)


def test_total_over_max_bytes():
    head = header(arrays=[["u4", 4], ["u1", 8]])
    frames = [head, bytes(16), bytes(8)]
    assert len(codec.decode(frames, max_bytes=24).arrays) == 2
    refused(frames, 7, "more than 23 bytes", max_bytes=23)
    refused(frames, 7, "more than 10 bytes", max_bytes=10)


def test_too_many_arrays():
    n = MAX_ARRAYS + 1
    refused([header(arrays=[["u1", 1]] * n), *[b"x"] * n], 7, f"over {MAX_ARRAYS}")


@pytest.mark.parametrize("request_id", [-1, 1.0, "7", None, [7], 2**63, True, False])
def test_ids_that_are_not_unsigned_integers(request_id):
    refused([header(id=request_id)], None, "header id: Expected `int`")


@pytest.mark.parametrize("gen", [-1, 1.0, "2", None, True, False, 2**63])
def test_generation_that_is_not_an_unsigned_integer_keeps_the_id(gen):
    refused([header(gen=gen)], 7, "header gen: Expected `int`")


@pytest.mark.parametrize(("field", "value"), [
    ("arrays", {}), ("arrays", None), ("arrays", "u4"), ("arrays", 3),
    ("out", {}), ("out", "slots"), ("out", 3),
    ("cache", [1, 2]), ("cache", [1, 2, 3, 4]), ("cache", [1, -2, 3]), ("cache", {}),
    ("cache", [1, True, 3]), ("cache", "hits")])
def test_envelope_entries_of_the_wrong_type(field, value):
    refused([header(**{field: value})], 7, f"header {field}: Expected")
