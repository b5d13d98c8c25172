"""Only our workers talk to us (issue 11, defect 9), with real sockets: a same-uid process
that connects to a pool's socket (guessing worker identities, forging hellos, replies and
errors, sending garbage) receives no request, delivers nothing to any caller, is counted
in ``status()``, and the supervisor keeps serving. Worker identities and hello tokens
never appear on a command line or in the environment.

Before: identities were predictable (``w<i>.<gen>``, on the command line), so an impostor
that squatted the next identity received requests (inputs and resident uploads leaked)
and its forged outputs were delivered; an ERROR reply with a malformed details map
crashed the supervisor thread.
"""

from __future__ import annotations

import contextlib
import os
import signal

import msgpack
import psutil
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from waiting import wait_for

from vyre_core.boundary import codec
from vyre_core.boundary.messages import Done, Failed, Heartbeat, Hello, Message, Ran

from .support import PROGRAM, assert_saxpy, driver, inputs, pool_status, wait_idle

GUESSES = [b"w0.1", b"w0.2", b"w0.3", b"w1.1", b"worker", b"\x01", b"a" * 32]


def forgeries(generation: int) -> list[list[bytes]]:
    """What an impostor sends: hellos with made-up proofs, replies, malformed errors."""
    caps = {"max_workgroup_size": [1024, 1, 1], "max_invocations_per_workgroup": 1024}
    hello = Hello(os.getpid(), "faults", "0", caps, None, [], b"guess")
    messages = [
        Message(hello, 0, generation),
        Message(Ran(), 1, generation, []),
        Message(Done(), 1, generation),
        Message(Failed({"code": 1302, "details": "not a map"}), 1, generation),
        Message(Failed({"code": "x", "details": {1: 2}}), 2, generation),
        Message(Failed(None), 0, generation),  # (not a map: encoded, refused on decoding)
        Message(Heartbeat(), 0, generation),
    ]
    frames = [[bytes(f) for f in codec.encode(m)] for m in messages]
    # a hello without its proof (and so without the fields after it), as raw bytes
    unproven = msgpack.packb([codec.PROTOCOL_VERSION, 0, generation,
                              ["hello", os.getpid(), "faults", "0", caps, None, []], [], None,
                              None])
    return [*frames, [unproven], [b"\xc1garbage"], [msgpack.packb({"v": 2, "op": "reply"})],
            [msgpack.packb({"v": 3, "op": "reply", "id": 1, "gen": generation, "meta": {},
                            "arrays": []})], []]


def connect(context: zmq.Context, endpoint: str, identity: bytes) -> zmq.Socket:
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, identity)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    return sock


@pytest.mark.timeout(60)
def test_impostors_receive_nothing_deliver_nothing_and_are_counted() -> None:
    context = zmq.Context()
    impostors: list[zmq.Socket] = []
    try:
        with driver(restart={"max_restarts": 10}) as drv:
            data = inputs(1)
            assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
            endpoint = drv.pools.existing("faults")._endpoint
            before = wait_idle(drv)
            sent = 0
            for identity in GUESSES:
                for suffix in (b"", b":hb"):
                    sock = connect(context, endpoint, identity + suffix)
                    impostors.append(sock)
                    for frames in forgeries(before["generation"] + 1):
                        if frames:
                            sock.send_multipart(frames)
                            sent += 1
            wait_for(lambda: pool_status(drv)["rejected_messages"] >= sent, 10.0,
                     f"all {sent} forged messages counted")

            # the real worker dies; its replacement's identity cannot be guessed
            os.kill(before["pid"], signal.SIGKILL)
            wait_for(lambda: (w := pool_status(drv)["workers"][0])["generation"]
                     == before["generation"] + 1 and w["state"] == "idle", 10.0,
                     "the replacement worker")
            for sock in impostors:  # and they keep trying, as the next generation
                for frames in forgeries(before["generation"] + 1):
                    if frames:
                        sock.send_multipart(frames)
            for seed in range(2, 8):
                data = inputs(seed)
                assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
            assert all(sock.poll(0) == 0 for sock in impostors), "a request leaked"
            status = pool_status(drv)
            assert status["state"] == "running"
            assert status["rejected_messages"] >= sent
    finally:
        for sock in impostors:
            sock.close(linger=0)
        context.term()


def named_sockets(pid: int) -> list[str]:
    """The paths of the unix sockets process ``pid`` holds that have one (bound ones)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    with open("/proc/net/unix") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return [row[7] for row in rows if len(row) > 7 and row[6] in inodes]


@pytest.mark.timeout(60)
def test_a_worker_binds_no_name_anyone_could_reach() -> None:
    """Found by a hostile pass: lanes were ZeroMQ PAIR sockets that each worker bound on a
    predictable ipc path (``p0-<n>``), so a same-uid process that bound the next path
    first got the next request (inputs leaked) and its forged reply was delivered; later a
    dead worker's path could be squatted before the pool heard of the death. Now a lane is
    an inherited end of a socket pair: the worker binds nothing, and the run directory
    holds the pool's own socket only, before and after a restart."""
    with driver(restart={"max_restarts": 10}) as drv:
        for seed in (11, 12):
            data = inputs(seed)
            assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
            live = wait_idle(drv)
            assert named_sockets(live["pid"]) == [], named_sockets(live["pid"])
            name = drv.pools.existing("faults")._name
            found = drv.pools.rundir.path.iterdir()
            assert sorted(p.name for p in found if p.suffix != ".new") == [
                f"{name}.sock", f"{name}.status.json"]  # (the snapshot for `vyre status`)
            os.kill(live["pid"], signal.SIGKILL)


@pytest.mark.timeout(60)
def test_no_identity_or_token_on_a_command_line_or_in_the_environment() -> None:
    with driver() as drv:
        data = inputs(9)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        live = wait_idle(drv)
        worker = drv.pools.existing("faults")._machine.workers[0]
        secrets_of_it = [worker.identity, worker.proof]
        proc = psutil.Process(live["pid"])
        cmdline = " ".join(proc.cmdline()).encode()
        environ = b"\0".join(f"{k}={v}".encode() for k, v in proc.environ().items())
        for secret in secrets_of_it:
            assert len(secret) >= 16
            assert secret not in cmdline and secret not in environ
            assert secret.hex().encode() not in cmdline
        assert b"--identity" not in cmdline


@pytest.mark.timeout(120)
def test_the_supervisor_survives_random_frames_from_strangers() -> None:
    context = zmq.Context()
    sock = None
    try:
        with driver() as drv:
            data = inputs(10)
            assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
            sock = connect(context, drv.pools.existing("faults")._endpoint, b"fuzzer")
            sent = [0]
            entry = (st.none() | st.integers(-2**63, 2**64 - 1) | st.text(max_size=8)
                     | st.binary(max_size=8) | st.lists(st.integers(0, 2**32), max_size=3))
            body = st.builds(lambda tag, fields: [tag, *fields],
                             st.sampled_from(["ran", "done", "error", "hello", "heartbeat",
                                              "reply", "ping"]) | st.text(max_size=8),
                             st.lists(entry, max_size=8))

            @settings(max_examples=150, deadline=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture])
            @given(st.lists(st.binary(max_size=64) | st.builds(
                lambda d: msgpack.packb(d), st.dictionaries(  # (protocol 3's map header)
                    st.sampled_from(["v", "op", "id", "gen", "meta", "arrays"]), entry,
                    max_size=6)) | st.builds(  # the positional header, entries at random
                lambda v, rest: msgpack.packb([v, *rest]),
                st.sampled_from([codec.PROTOCOL_VERSION, 3]) | entry,
                st.lists(entry | body, max_size=8)),
                min_size=1, max_size=4))
            def fuzz(frames: list[bytes]) -> None:
                sock.send_multipart(frames)
                sent[0] += 1

            fuzz()
            wait_for(lambda: pool_status(drv)["rejected_messages"] >= sent[0], 10.0,
                     "every fuzzed message counted")
            for seed in (11, 12):
                data = inputs(seed)
                assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
            assert pool_status(drv)["state"] == "running"
    finally:
        if sock is not None:
            sock.close(linger=0)
        context.term()
