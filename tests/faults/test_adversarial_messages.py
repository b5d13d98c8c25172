"""A real worker process fed hostile bytes: every malformed message gets exactly one ERROR
reply (ProtocolError, code 1305, unless a more specific error applies) carrying the
request id when the header was readable (0 otherwise), and the worker keeps serving.

The worker says hello (and beats) to its parent's ROUTER and serves requests on its lane
(an inherited end of a socket pair), so this test plays the parent: it binds a ROUTER on an
ipc path, starts ``python -m vyre_workers`` itself with the other end of a lane, and sends
on it. No mocks: real sockets, real process, real codec.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vyre_core
from vyre_core import DispatchConfig, Timeouts, Transport, abi, framing, ir
from vyre_core.boundary import codec
from vyre_core.boundary.messages import (
    REPLIES,
    REPLY_OF,
    REQUESTS,
    Dispatch,
    Done,
    Failed,
    Heartbeat,
    Hello,
    Message,
    Op,
    Ping,
    Ran,
    Shutdown,
)
from vyre_core.boundary.progress import ProgressPage
from vyre_core.errors import InvalidInputError, ProtocolError

from .support import saxpy

IDENTITY = b"w0.1"
TOKEN = b"hello-token"
GEN = 1
REPLY_TIMEOUT = 15.0
PROTOCOL_ERROR = 1305
INVALID_PROGRAM = 1001
INVALID_INPUT = 1101
INVALID_CONFIG = 1103
PIPELINE_INVALIDATED = 1304
UNSUPPORTED = 1102
LAUNCH_LIMIT = 1104
N = 32

pytestmark = pytest.mark.timeout(180)


PROGRAM = saxpy(N, workgroup=32)


def saxpy_inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32),
            np.array([3.25], dtype=np.float32)]


class Worker:
    """A worker process started by hand, and the ROUTER it answers to."""

    def __init__(self, tmp: Path) -> None:
        self.endpoint = f"ipc://{tmp / 'adversary.sock'}"
        self.context = zmq.Context()
        self.router = self.context.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.router.bind(self.endpoint)
        self.lane, theirs = framing.pair()
        self.reader = framing.StreamReader(self.lane, codec.MAX_FRAMES, 1 << 36)
        self.waiting: list[Any] = []  # replies read off the lane, not yet taken
        self.log_path = tmp / "worker.log"
        self._next_id = 1000
        # identity and hello token reach the worker in its progress page, as from the pool
        self.page = ProgressPage.create(
            {"identity": IDENTITY, "token": TOKEN, "generation": GEN})
        with open(self.log_path, "wb") as log, theirs:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "vyre_workers", "--page-fd", str(self.page.fd),
                 "--lane-fd", str(theirs.fileno()),
                 "--backend", "reference", "--entry-point", "reference",
                 "--endpoint", self.endpoint,
                 "--parent-pid", str(os.getpid()),
                 "--heartbeat", "0.5"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(self.page.fd, theirs.fileno()),
                env=dict(os.environ, VYRE_WORKER="reference/0/1"))
        self.beats = 0
        self.hello = self.receive(timeout=60)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def receive_raw(self, timeout: float = REPLY_TIMEOUT) -> list[Any]:
        """The frames of the next message from the worker: a reply on its lane, or its
        hello on the ROUTER (heartbeats from its ``:hb`` socket are counted and skipped)."""
        deadline = time.monotonic() + timeout
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        poller.register(self.lane, zmq.POLLIN)
        while True:
            self.waiting += self.reader.messages()
            if self.waiting:
                return self.waiting.pop(0)
            assert not self.reader.ended, f"the worker closed its lane; log:\n{self.log()}"
            left = deadline - time.monotonic()
            events = dict(poller.poll(int(left * 1000) + 1)) if left > 0 else {}
            if not events:
                raise AssertionError(f"no message from the worker within {timeout} s "
                                     f"(alive: {self.proc.poll() is None}); log:\n{self.log()}")
            if self.router not in events:
                continue
            frames = self.router.recv_multipart(copy=False)
            identity = frames[0].bytes
            if identity == IDENTITY + b":hb":
                self.beats += 1
                continue
            assert identity == IDENTITY, identity
            return frames[1:]

    def wait_beat(self, timeout: float = 5.0) -> None:
        """Wait for the next heartbeat; no other message may arrive meanwhile."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0 and self.router.poll(
                int(left * 1000) + 1):
            identity, *frames = self.router.recv_multipart(copy=False)
            assert identity.bytes == IDENTITY + b":hb", codec.decode(frames)
            assert codec.decode(frames).op is Op.HEARTBEAT
            self.beats += 1
            return
        raise AssertionError(f"no heartbeat within {timeout} s; log:\n{self.log()}")

    def receive(self, timeout: float = REPLY_TIMEOUT) -> Message:
        return codec.decode(self.receive_raw(timeout))

    def send_frames(self, frames: list[Any]) -> None:
        framing.send(self.lane, frames, within=REPLY_TIMEOUT)

    def send(self, msg: Message) -> None:
        self.send_frames(codec.encode(msg))

    def exchange(self, frames: list[Any]) -> Message:
        self.send_frames(frames)
        return self.receive()

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.send(Message(Shutdown(), self.next_id(), GEN))
                    self.proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self.router.close(linger=0)
            self.lane.close()
            self.context.term()
            self.page.close()


@pytest.fixture(scope="module")
def worker(tmp_path_factory) -> Iterator[Worker]:
    w = Worker(tmp_path_factory.mktemp("adversary"))
    try:
        yield w
    finally:
        w.close()


def header(v: Any = codec.PROTOCOL_VERSION, id: Any = 1, gen: Any = GEN,
           body: Any = ("ping", None), arrays: Any = (), out: Any = None,
           cache: Any = None) -> bytes:
    """A raw header, positional: ``[v, id, gen, body, arrays, out, cache]``, ``body`` its
    tag then its fields (a PING by default)."""
    body = list(body) if isinstance(body, tuple) else body
    arrays = list(arrays) if isinstance(arrays, tuple) else arrays
    return msgpack.packb([v, id, gen, body, arrays, out, cache], use_bin_type=True)


def wire_body(body: Any) -> list[Any]:
    """A message body as it lies in a header: its tag, then its fields."""
    return msgpack.unpackb(codec.encode(Message(body))[0], raw=False)[3]


def assert_error(reply: Message, request_id: int, code: int = PROTOCOL_ERROR) -> dict:
    assert reply.op is Op.ERROR, (reply.op, reply.body)
    error = reply.body.error
    assert error["code"] == code, error
    assert reply.id == request_id, (reply.id, request_id, error)
    assert reply.arrays == []
    assert error["cause"] and error["fix"]
    return error


def assert_serving(worker: Worker, seed: int = 0) -> None:
    """A proper PING and a proper saxpy DISPATCH still get correct replies."""
    assert worker.proc.poll() is None, worker.log()
    rid = worker.next_id()
    worker.send(Message(Ping(), rid, GEN))
    reply = worker.receive()
    assert (reply.body, reply.id, reply.gen, reply.arrays) == (Done(), rid, GEN, [])

    inputs = saxpy_inputs(seed)
    rid = worker.next_id()
    worker.send(Message(Dispatch(PROGRAM.fingerprint(), PROGRAM.to_wire(),
                                 DispatchConfig().to_wire(), None), rid, GEN,
                        abi.bind_inputs(PROGRAM, inputs)))
    reply = worker.receive()
    assert (reply.op, reply.id, reply.gen) == (Op.RAN, rid, GEN), reply.body
    assert len(reply.arrays) == 1
    x, y, a = inputs
    assert reply.arrays[0].tobytes() == (a[0] * x + y).astype(np.float32).tobytes()


# -- the catalogue of malformed messages: (name, frames, echoed id, error code) --------------

VALID_PING = header(id=7)
F32_4 = np.arange(4, dtype=np.float32).tobytes()


def dispatch(fp: str, program: Any, config: Any) -> list[Any]:
    """A DISPATCH body, raw: each case names its own fingerprint (a made-up one: the
    worker, which keeps programs by fingerprint, then reads the program bytes)."""
    return ["dispatch", fp, program, config, None]


def _cases() -> list[tuple[str, list[Any], int, int]]:
    rng = np.random.default_rng(1234)
    program = PROGRAM.to_wire()
    cfg = DispatchConfig().to_wire()
    good_arrays = [a.tobytes() for a in abi.bind_inputs(PROGRAM, saxpy_inputs(1))]
    good_specs = [["f4", N], ["f4", N], ["f4", 1]]
    hello = Hello(1, "reference", "0", {}, None, [], TOKEN)
    return [
        ("empty header frame", [b""], 0, PROTOCOL_ERROR),
        # a header that cannot be decoded is still answered for its id when the id can be
        # read (it comes before the body): the request fails at once instead of getting lost
        ("truncated header", [VALID_PING[: len(VALID_PING) // 2]], 7, PROTOCOL_ERROR),
        ("header cut before its id", [VALID_PING[:2]], 0, PROTOCOL_ERROR),
        ("header cut by one byte", [VALID_PING[:-1]], 7, PROTOCOL_ERROR),
        ("random bytes", [rng.bytes(64)], 0, PROTOCOL_ERROR),
        ("random bytes, several frames", [rng.bytes(9), rng.bytes(100), b""], 0,
         PROTOCOL_ERROR),
        ("header followed by trailing garbage", [VALID_PING + b"\xc1junk"], 7,
         PROTOCOL_ERROR),
        # protocol 3's header, a map: its id is not where protocol 4 reads it
        ("header is a map (protocol 3)", [msgpack.packb({"v": 3, "op": "ping", "id": 3,
                                                          "gen": 1, "meta": {},
                                                          "arrays": []})], 0, PROTOCOL_ERROR),
        ("header map with int keys", [msgpack.packb({1: 2, "id": 3})], 0, PROTOCOL_ERROR),
        ("header shorter than its form", [msgpack.packb([codec.PROTOCOL_VERSION, 9, GEN])],
         9, PROTOCOL_ERROR),
        ("header of the version only", [msgpack.packb([codec.PROTOCOL_VERSION])], 0,
         PROTOCOL_ERROR),
        ("header is an int", [msgpack.packb(12)], 0, PROTOCOL_ERROR),
        ("header is a string", [msgpack.packb("ping")], 0, PROTOCOL_ERROR),
        ("header too large", [header(id=11, body=["ping", "x" * (codec.MAX_HEADER_BYTES
                                                                + 10)])], 11,
         PROTOCOL_ERROR),
        ("wrong protocol version", [header(id=12, v=codec.PROTOCOL_VERSION + 1)], 12,
         PROTOCOL_ERROR),
        ("protocol version 3", [header(id=13, v=3)], 13, PROTOCOL_ERROR),
        ("protocol version as string", [header(id=14, v=str(codec.PROTOCOL_VERSION))], 14,
         PROTOCOL_ERROR),
        ("unknown op", [header(id=15, body=["format_disk"])], 15, PROTOCOL_ERROR),
        ("op not a string", [header(id=16, body=[3])], 16, PROTOCOL_ERROR),
        # replies, each well formed, sent as requests
        ("hello as request", [header(id=17, body=wire_body(hello))], 17, PROTOCOL_ERROR),
        ("ran reply as request", [header(id=18, body=wire_body(Ran(1, 2, "x")))], 18,
         PROTOCOL_ERROR),
        ("heartbeat as request", [header(id=19, body=wire_body(Heartbeat()))], 19,
         PROTOCOL_ERROR),
        ("error as request", [header(id=20, body=wire_body(Failed({"code": 1})))], 20,
         PROTOCOL_ERROR),
        ("done reply as request", [header(id=61, body=wire_body(Done()))], 61,
         PROTOCOL_ERROR),
        ("protocol 3's reply op", [header(id=62, body=["reply"])], 62, PROTOCOL_ERROR),
        ("negative id", [header(id=-5)], 0, PROTOCOL_ERROR),
        ("bool id", [header(id=True)], 0, PROTOCOL_ERROR),
        ("float id", [header(id=2.0)], 0, PROTOCOL_ERROR),
        ("string id", [header(id="21")], 0, PROTOCOL_ERROR),
        ("id 2**63", [header(id=2**63)], 0, PROTOCOL_ERROR),
        ("id nil", [header(id=None)], 0, PROTOCOL_ERROR),
        ("negative gen", [header(id=22, gen=-1)], 22, PROTOCOL_ERROR),
        ("body not a list", [header(id=23, body={"op": "ping"})], 23, PROTOCOL_ERROR),
        ("body an empty list", [header(id=63, body=[])], 63, PROTOCOL_ERROR),
        ("ping label not a string", [header(id=64, body=["ping", 5])], 64, PROTOCOL_ERROR),
        ("arrays not a list", [header(id=24, arrays={"f4": 4})], 24, PROTOCOL_ERROR),
        ("out slots not a list", [header(id=65, out={"f4": 4})], 65, PROTOCOL_ERROR),
        ("cache counters of two", [header(id=66, cache=[1, 2])], 66, PROTOCOL_ERROR),
        ("declares 2 arrays, 1 frame", [header(id=25, arrays=[["f4", 4], ["f4", 4]]), F32_4],
         25, PROTOCOL_ERROR),
        ("declares 0 arrays, 1 frame", [header(id=26), F32_4], 26, PROTOCOL_ERROR),
        ("count does not match frame", [header(id=27, arrays=[["f4", 5]]), F32_4], 27,
         PROTOCOL_ERROR),
        ("dtype does not match frame", [header(id=28, arrays=[["f8", 4]]), F32_4], 28,
         PROTOCOL_ERROR),
        ("frame not a multiple of itemsize", [header(id=29, arrays=[["f4", 1]]), b"\0" * 5],
         29, PROTOCOL_ERROR),
        ("unknown dtype", [header(id=30, arrays=[["c16", 1]]), b"\0" * 16], 30,
         PROTOCOL_ERROR),
        ("object dtype", [header(id=31, arrays=[["O", 2]]), b"\0" * 16], 31, PROTOCOL_ERROR),
        ("negative count", [header(id=32, arrays=[["f4", -1]]), b""], 32, PROTOCOL_ERROR),
        ("bool count", [header(id=33, arrays=[["u1", True]]), b"\0"], 33, PROTOCOL_ERROR),
        ("count 2**40", [header(id=34, arrays=[["f4", 2**40]]), F32_4], 34, PROTOCOL_ERROR),
        ("count 2**64-1", [header(id=35, arrays=[["u1", 2**64 - 1]]), b"\0"], 35,
         PROTOCOL_ERROR),
        ("spec of three fields", [header(id=36, arrays=[["f4", 4, 0]]), F32_4], 36,
         PROTOCOL_ERROR),
        ("spec not a list", [header(id=37, arrays=["f4"]), F32_4], 37, PROTOCOL_ERROR),
        ("too many arrays", [header(id=38, arrays=[["u1", 0]] * (codec.MAX_ARRAYS + 1)),
                             *([b""] * (codec.MAX_ARRAYS + 1))], 38, PROTOCOL_ERROR),
        ("dispatch with garbage program bytes",
         [header(id=39, body=dispatch("fp-39", rng.bytes(200), cfg), arrays=good_specs),
          *good_arrays], 39, INVALID_PROGRAM),
        ("dispatch with truncated program bytes",
         [header(id=40, body=dispatch("fp-40", program[: len(program) // 2], cfg),
                 arrays=good_specs), *good_arrays], 40, INVALID_PROGRAM),
        ("dispatch with empty program bytes",
         [header(id=41, body=dispatch("fp-41", b"", cfg), arrays=good_specs),
          *good_arrays], 41, INVALID_PROGRAM),
        ("dispatch with program as a string",
         [header(id=42, body=dispatch("fp-42", "saxpy", cfg), arrays=good_specs),
          *good_arrays], 42, PROTOCOL_ERROR),
        ("dispatch without program",
         [header(id=43, body=["dispatch", "fp-43"], arrays=good_specs), *good_arrays], 43,
         PROTOCOL_ERROR),
        ("dispatch naming a program the worker does not hold",
         [header(id=67, body=dispatch("fp-67", None, cfg), arrays=good_specs),
          *good_arrays], 67, PROTOCOL_ERROR),
        ("dispatch with fingerprint an int",
         [header(id=68, body=dispatch(68, program, cfg), arrays=good_specs), *good_arrays],
         68, PROTOCOL_ERROR),
        ("dispatch with config a list",
         [header(id=44, body=dispatch("fp-44", program, [1, 2]), arrays=good_specs),
          *good_arrays], 44, PROTOCOL_ERROR),
        ("dispatch with config a string",
         [header(id=45, body=dispatch("fp-45", program, "fast"), arrays=good_specs),
          *good_arrays], 45, PROTOCOL_ERROR),
        ("dispatch with config an int",
         [header(id=46, body=dispatch("fp-46", program, 1), arrays=good_specs),
          *good_arrays], 46, PROTOCOL_ERROR),
        ("dispatch with unknown config field",
         [header(id=47, body=dispatch("fp-47", program, {"turbo": True}), arrays=good_specs),
          *good_arrays], 47, INVALID_CONFIG),
        ("dispatch with a config field of the wrong type",
         [header(id=48, body=dispatch("fp-48", program, {"timeout": "x"}), arrays=good_specs),
          *good_arrays], 48, INVALID_CONFIG),
        # (the config is a map of str keys in the message class: the codec refuses it)
        ("dispatch with a config key that is bytes",
         [header(id=57, body=dispatch("fp-57", program, {b"label": "x"}), arrays=good_specs),
          *good_arrays], 57, PROTOCOL_ERROR),
        ("dispatch with a grid of 2**96 workgroups",
         [header(id=58, body=dispatch("fp-58", program, {"grid_override": [2**32 - 1] * 3}),
                 arrays=good_specs), *good_arrays], 58, LAUNCH_LIMIT),
        ("dispatch covering 2**62 elements",
         [header(id=59, body=dispatch("fp-59", program, {"dispatch_elements": 2**62}),
                 arrays=good_specs), *good_arrays], 59, LAUNCH_LIMIT),
        ("allocate of 2**40 bytes", [header(id=60, body=["allocate", 2**40])], 60,
         UNSUPPORTED),
        ("dispatch with too few inputs",
         [header(id=49, body=dispatch("fp-49", program, cfg), arrays=good_specs[:1]),
          good_arrays[0]], 49, INVALID_INPUT),
        ("pipeline_dispatch of an unknown pipeline",
         [header(id=50, body=["pipeline_dispatch", 999, cfg, None])], 50,
         PIPELINE_INVALIDATED),
        ("pipeline_dispatch with pipeline id a string",
         [header(id=51, body=["pipeline_dispatch", "1", cfg, None])], 51, PROTOCOL_ERROR),
        ("allocate with bool size", [header(id=52, body=["allocate", True])], 52,
         PROTOCOL_ERROR),
        ("allocate with negative size", [header(id=69, body=["allocate", -1])], 69,
         PROTOCOL_ERROR),
        ("upload without a data frame", [header(id=53, body=["upload", 1])], 53,
         PROTOCOL_ERROR),
        ("download of an unknown handle", [header(id=54, body=["download", 424242])], 54,
         INVALID_INPUT),
        ("dispatch_resident with handles not a list",
         [header(id=55, body=["dispatch_resident", "fp-55", program, cfg, 3, None])], 55,
         PROTOCOL_ERROR),
        ("free with handle a string", [header(id=56, body=["free", "1"])], 56,
         PROTOCOL_ERROR),
    ]


CASES = _cases()


@pytest.mark.parametrize(("frames", "request_id", "code"),
                         [pytest.param(f, i, c, id=name) for name, f, i, c in CASES])
def test_malformed_message_gets_an_error_reply(worker, frames, request_id, code):
    reply = worker.exchange(frames)
    assert_error(reply, request_id, code)
    assert reply.gen == GEN
    assert worker.proc.poll() is None, worker.log()


def test_worker_serves_after_every_malformed_message(worker):
    """All of the catalogue again, back to back without reading in between, then the
    replies: exactly one per message, in order, and the worker still computes."""
    assert worker.hello.op is Op.HELLO and worker.hello.gen == GEN
    assert worker.hello.body.backend == "reference"
    assert worker.hello.body.pid == worker.proc.pid
    assert worker.hello.body.proof == TOKEN  # what the pool checks before trusting it
    for _, frames, _, _ in CASES:
        worker.send_frames(frames)
    for name, _, request_id, code in CASES:
        reply = worker.receive()
        assert reply.op is Op.ERROR, name
        assert (reply.id, reply.body.error["code"]) == (request_id, code), name
    assert_serving(worker, seed=2)
    worker.wait_beat()  # the heartbeat socket keeps beating too


def test_a_large_valid_message_after_the_attacks(worker):
    """Large inputs (sent zero-copy) still cross intact after all of the above."""
    n = 1 << 18
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] + x[i]
    program = k.build()
    data = np.random.default_rng(5).integers(0, 2**31, n, dtype=np.uint32)
    rid = worker.next_id()
    worker.send(Message(Dispatch(program.fingerprint(), program.to_wire(),
                                 DispatchConfig().to_wire()), rid, GEN,
                        abi.bind_inputs(program, [data])))
    reply = worker.receive(timeout=60)
    assert (reply.op, reply.id) == (Op.RAN, rid), reply.body
    assert reply.arrays[0].tobytes() == (data + data).tobytes()


# -- fuzzing -------------------------------------------------------------------------------

def _expected_id(frames: list[bytes]) -> int | None:
    """The id the worker must echo for ``frames``: the decoder is the oracle for whether
    the id was readable; None when the message is valid."""
    try:
        msg = codec.decode(frames)
    except ProtocolError as exc:
        return exc.details.get("request_id") or 0
    if msg.op not in REQUESTS:
        return msg.id
    return None


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=6))
def test_random_frame_lists(worker, frames):
    reply = worker.exchange(frames)
    rid = _expected_id(frames)
    assert rid is not None  # random bytes never make a valid request
    assert_error(reply, rid)


_i64 = st.integers(-(2**63), 2**63 - 1)
_ids = st.one_of(st.integers(-(2**63), 2**64 - 1), st.booleans(), st.none(),
                 st.floats(allow_nan=False), st.text(max_size=4))
_specs = st.lists(st.one_of(
    st.tuples(st.sampled_from(["u1", "u4", "i4", "f2", "f4", "f8", "f16", "", "O"]),
              st.one_of(st.integers(-3, 2**64 - 1), st.booleans())).map(list),
    _i64, st.text(max_size=3), st.lists(st.integers(0, 4), max_size=3)), max_size=4)


_entries = st.one_of(_i64, st.none(), st.booleans(), st.text(max_size=4),
                    st.binary(max_size=40), st.lists(_i64, max_size=2))
_bodies = st.one_of(
    st.builds(lambda tag, fields: [tag, *fields],
              st.sampled_from(["ping", "ping", "dispatch", "hello", "ran", "done", "error",
                               "heartbeat", "free", "reply", "bogus", "", 7, None]),
              st.lists(_entries, max_size=5)),
    st.just(["ping", None]), _entries)


@st.composite
def _headers(draw) -> list[bytes]:
    entries = [
        draw(st.sampled_from([4, 4, 4, 3, 0, 5, "4", None, True, 4.0])),  # v
        draw(_ids),                                                          # id
        draw(st.one_of(st.integers(-2, 2**63), st.booleans(), st.none())),  # gen
        draw(_bodies),                                                       # body
        draw(st.one_of(_specs, st.none(), _i64)),                            # arrays
        draw(st.one_of(st.none(), st.none(), _specs, _i64)),                 # out
        draw(st.one_of(st.none(), st.none(), st.lists(st.integers(-1, 9), max_size=4),
                       _i64)),                                               # cache
    ]
    if draw(st.integers(0, 4)) == 0:  # a header cut short
        entries = entries[:draw(st.integers(0, 6))]
    frames = [msgpack.packb(entries, use_bin_type=True)]
    specs = entries[4] if len(entries) > 4 else None
    if isinstance(specs, list) and draw(st.booleans()):  # frames that fit the specs
        for spec in specs:
            if isinstance(spec, list) and len(spec) == 2 and spec[0] in codec.DTYPES \
                    and isinstance(spec[1], int) and 0 <= spec[1] <= 64:
                frames.append(bytes(codec.DTYPES[spec[0]].itemsize * spec[1]))
            else:
                frames.append(draw(st.binary(max_size=16)))
    else:
        frames += draw(st.lists(st.binary(max_size=64), max_size=4))
    return frames


@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(_headers())
def test_random_headers(worker, frames):
    """Structured headers with random field values: never a crash; malformed ones get
    error replies with the id echoed exactly when the codec could read it."""
    reply = worker.exchange(frames)
    assert reply.op in REPLIES
    rid = _expected_id(frames)
    if rid is not None:
        assert_error(reply, rid)
    else:
        msg = codec.decode(frames)
        assert reply.id == msg.id
        if msg.op is Op.PING:
            assert type(reply.body) is REPLY_OF[type(msg.body)] is Done
        else:  # free without a handle, dispatch without a valid program, ...
            assert reply.op is Op.ERROR
            assert reply.body.error["code"] in vyre_core.errors.catalog()
    assert worker.proc.poll() is None, worker.log()


def test_worker_still_serves_after_fuzzing(worker):
    assert_serving(worker, seed=3)
    rid = worker.next_id()
    worker.send(Message(Shutdown(), rid, GEN))
    reply = worker.receive()
    assert (reply.body, reply.id) == (Done(), rid)
    assert worker.proc.wait(timeout=10) == 0


# -- bugs ----------------------------------------------------------------------------------

def test_pool_option_max_message_bytes_refuses_oversized_dispatches():
    """PoolOptions.max_message_bytes bounds what crosses the process boundary: a dispatch
    whose inputs or outputs exceed it is refused before it is sent, naming the limit, and
    the pool keeps serving calls within it."""
    limit = 1 << 16
    n = 1 << 18  # 1 MiB per f32 array: 16 times the limit
    big = saxpy(n, workgroup=32)
    small = saxpy(N, workgroup=32)
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5),
                          transport=Transport(max_message_bytes=limit)) as drv:
        assert drv.options.transport.max_message_bytes == limit
        big_in = [np.ones(n, dtype=np.float32), np.ones(n, dtype=np.float32),
                  np.array([2.0], dtype=np.float32)]
        with pytest.raises(InvalidInputError, match=f"over max_message_bytes={limit}") as out:
            drv.dispatch(big, big_in, backend="reference")
        assert "max_message_bytes" in out.value.fix
        small_in = saxpy_inputs(5)  # small inputs, outputs over the limit
        with pytest.raises(InvalidInputError, match=f"over max_message_bytes={limit}"):
            drv.dispatch(big, [*small_in[:2], small_in[2]], backend="reference")
        result = drv.dispatch(small, small_in, backend="reference")
        x, y, a = small_in
        assert result[0].tobytes() == (a[0] * x + y).astype(np.float32).tobytes()
