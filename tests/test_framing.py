"""Messages on a lane's byte stream (``vyre_core.framing``): real socket pairs, in-process."""

from __future__ import annotations

import signal
import socket
import threading
import time

import numpy as np
import pytest

from vyre_core import framing
from vyre_core.boundary import codec
from vyre_core.boundary.messages import Dispatch, Message

pytestmark = pytest.mark.fast  # the fast tier: no process (make test-fast)

MAX_FRAMES = 8
CHUNK_BYTES = framing.CHUNK
MAX_BYTES = 64 << 20


@pytest.fixture
def lane():
    ours, theirs = framing.pair()
    theirs.setblocking(False)
    yield ours, theirs, framing.StreamReader(theirs, MAX_FRAMES, MAX_BYTES)
    ours.close()
    theirs.close()


def wait_for(reader: framing.StreamReader, count: int, within: float = 10.0) -> list:
    """Poll ``reader`` (with a deadline) until ``count`` messages came."""
    found: list = []
    deadline = time.monotonic() + within
    while len(found) < count:
        assert time.monotonic() < deadline, f"only {len(found)} of {count} messages came"
        found += reader.messages()
    return found


def as_bytes(frames: list) -> list[bytes]:
    return [bytes(f) for f in frames]


def test_messages_arrive_whole_and_in_order(lane):
    ours, _, reader = lane
    sent = [[b"header-%d" % i, np.arange(i, dtype=np.uint32), b""] for i in range(50)]
    for frames in sent:
        framing.send(ours, frames)
    got = wait_for(reader, len(sent))
    assert [as_bytes(f) for f in got] == [as_bytes(f) for f in sent]
    assert reader.messages() == []


def test_a_message_cut_into_single_bytes_is_put_back_together(lane):
    ours, _, reader = lane
    frames = [b"header", np.arange(1000, dtype=np.uint32).tobytes()]
    wire = framing.prefix(frames) + b"".join(frames)
    for i in range(len(wire)):
        ours.sendall(wire[i:i + 1])
        ready = reader.messages()
        assert ready == [] if i < len(wire) - 1 else as_bytes(ready[0]) == frames


def test_a_large_frame_is_received_into_memory_of_its_own(lane):
    ours, _, reader = lane
    big = np.random.default_rng(0).integers(0, 2**32, 4 << 20, dtype=np.uint32)  # 16 MiB
    writer = threading.Thread(target=framing.send, args=(ours, [b"h", big]))
    writer.start()
    (got,) = wait_for(reader, 1)
    writer.join()
    assert isinstance(got[1], np.ndarray) and np.array_equal(
        np.frombuffer(got[1], dtype=np.uint32), big)


def test_a_frame_that_cannot_be_allocated_is_dropped_and_the_stream_goes_on(lane, monkeypatch):
    ours, _, reader = lane
    header = codec.encode(Message(Dispatch("fp", None, {}), 77, 0, []))[0]

    real = framing._allocate

    def allocate(size: int) -> np.ndarray:
        if size > 1 << 20:
            raise MemoryError
        return real(size)

    monkeypatch.setattr(framing, "_allocate", allocate)
    big = np.zeros(2 << 20, dtype=np.uint8)
    writer = threading.Thread(target=lambda: [
        framing.send(ours, [header, big, b""]),  # (an empty frame after the dropped one)
        framing.send(ours, [bytes(big), big, b""]),  # the header itself dropped, then more
        framing.send(ours, [b"next", b"x" * 10])])
    writer.start()
    dropped, header_dropped, following = wait_for(reader, 3)
    writer.join()
    assert dropped == framing.Dropped(header, 1, 2 << 20)
    assert header_dropped == framing.Dropped(None, 0, 2 << 20)
    assert codec.dropped_error(header_dropped, "x").details["request_id"] is None
    assert as_bytes(following) == [b"next", b"x" * 10]
    error = codec.dropped_error(dropped, "the worker")
    assert error.details["request_id"] == 77 and "2097152 bytes of array 0 " in error.cause
    assert "Fix:" in str(error)


def test_empty_frames_after_a_large_one_end_the_message_at_once(lane):
    """Found in review: a message whose last frames were empty, after a frame received in
    place, waited for the next message's bytes before it came out."""
    ours, _, reader = lane
    frames = [b"h", b"a" * 60000, b"b" * 60000, b"", b""]
    writer = threading.Thread(target=framing.send, args=(ours, frames))
    writer.start()
    (got,) = wait_for(reader, 1)
    writer.join()
    assert as_bytes(got) == frames


@pytest.mark.parametrize("header_bytes", range(1, 9))
def test_arrays_received_are_aligned_whatever_came_before(lane, header_bytes):
    ours, _, reader = lane
    data = np.arange(5, dtype=np.float64)
    framing.send(ours, [b"h" * header_bytes, data, data.astype(np.float32)])
    (got,) = wait_for(reader, 1)
    for frame, dtype in zip(got[1:], (np.float64, np.float32), strict=True):
        array = np.frombuffer(frame, dtype=dtype)
        assert array.flags.aligned and array.tolist() == data.tolist()


def test_a_budget_leaves_the_rest_for_the_next_call(lane):
    ours, _, reader = lane
    for i in range(5):  # 150 kB: within the socket's buffer
        framing.send(ours, [b"%d" % i, b"x" * 30000])
    first = reader.messages(budget=1)  # one read of at most CHUNK bytes
    assert 0 < len(first) <= CHUNK_BYTES // 30000
    rest = wait_for(reader, 5 - len(first))
    assert [bytes(f[0]) for f in first + rest] == [b"%d" % i for i in range(5)]


@pytest.mark.parametrize("wire, why", [
    (framing.prefix([b""] * (MAX_FRAMES + 1)), "frames"),
    (b"\0\0\0\0", "0 frames"),
    (framing.prefix([b"x", np.zeros(MAX_BYTES + 1, dtype=np.uint8)]), "bytes"),
])
def test_a_prefix_outside_the_limits_breaks_the_stream(lane, wire, why):
    ours, _, reader = lane
    ours.sendall(wire)
    with pytest.raises(framing.BrokenStream, match=why):
        wait_for(reader, 1)


def test_the_end_of_the_stream_between_messages_is_an_end(lane):
    ours, _, reader = lane
    framing.send(ours, [b"last"])
    ours.close()
    assert as_bytes(wait_for(reader, 1)[0]) == [b"last"]
    # (the read that took the message took all there was: the end is the next read's)
    assert reader.fill() and reader.ended and reader.messages() == []


class CountingSocket:
    """A socket whose reads are counted."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reads = 0

    def recv(self, n: int) -> bytes:
        self.reads += 1
        return self.sock.recv(n)


def test_a_read_that_took_all_there_was_is_not_followed_by_one_that_finds_nothing(lane):
    """A worker reads each request, and the pool each reply: a second read, which finds
    nothing, cost a system call and an exception every time. Fails on main before this
    commit (two reads)."""
    ours, theirs, _ = lane
    counted = CountingSocket(theirs)
    reader = framing.StreamReader(counted, MAX_FRAMES, MAX_BYTES)  # type: ignore[arg-type]
    framing.send(ours, [b"header", np.arange(16, dtype=np.uint32)])
    framing.send(ours, [b"second"])
    assert wait_for(reader, 2) and counted.reads == 1
    assert reader.messages() == [] and counted.reads == 2  # (asked again: it looks again)


def test_the_end_of_the_stream_inside_a_message_breaks_it(lane):
    ours, _, reader = lane
    frames = [b"header", b"0123456789"]
    ours.sendall((framing.prefix(frames) + b"".join(frames))[:-3])
    ours.close()
    with pytest.raises(framing.BrokenStream, match="middle of a message"):
        wait_for(reader, 1)


def test_a_send_nobody_reads_ends_within_its_bound(lane, vyre_stalls):
    ours, _, _ = lane
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"within 0\.2 s"):
        framing.send(ours, [b"h", np.zeros(8 << 20, dtype=np.uint8)], within=0.2)
    assert time.monotonic() - started < 2.0 + vyre_stalls.since(started), vyre_stalls


def test_a_send_to_a_closed_peer_raises_and_never_signals(lane):
    """A peer that is gone is an error (EPIPE), never SIGPIPE: with SIGPIPE's default
    action the caller's whole process would end."""
    ours, theirs, _ = lane
    theirs.close()
    previous = signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        with pytest.raises(BrokenPipeError):
            framing.send(ours, [b"header"])
    finally:
        signal.signal(signal.SIGPIPE, previous)
