"""A worker keeps a bounded table of compiled pipelines: compiling the same pipeline again
reuses its entry, and past the limit the least recently used is dropped, a later use of
its handle refused with PipelineInvalidatedError. Found by a hostile pass: 4000 compiles of
2000 distinct programs grew a worker by 318 MiB (the table was never pruned). Runs the
worker's serve code in-process, without a socket."""

from __future__ import annotations

import numpy as np
import pytest

import vyre_reference.backend as reference
from vyre_core import framing
from vyre_core.boundary import codec
from vyre_core.boundary.messages import Body, Compile, Compiled, Message, Op, PipelineDispatch, Ran
from vyre_core.config import DispatchConfig
from vyre_core.errors import PipelineInvalidatedError, VyreError
from vyre_core.ir import Kernel, global_id, u32
from vyre_workers import handlers
from vyre_workers.backend_host import BackendHost
from vyre_workers.server import WorkerServer

pytestmark = pytest.mark.fast


def adder(n: int):
    """``out[i] = x[i] + n``: a distinct program for each n."""
    k = Kernel(workgroup=(4,))
    x = k.read("x", u32)
    out = k.output("out", u32, count=4)
    i = k.let("i", global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] + n
    return k.build()


class Worker:
    def __init__(self) -> None:
        self.lanes = framing.pair()  # (handle() is called directly: nothing is sent)
        self.server = WorkerServer(BackendHost(reference), self.lanes[1])
        self.ids = iter(range(1, 10**6))

    def call(self, body: Body, arrays=()) -> Message:
        frames = codec.encode(Message(body, next(self.ids), 0, list(arrays)))
        return self.server.handle([bytes(f) for f in frames])

    def compile(self, n: int) -> int:
        reply = self.call(Compile(adder(n).to_wire(), DispatchConfig().to_wire()))
        assert isinstance(reply.body, Compiled), reply.body
        return reply.body.pipeline

    def run(self, pipeline: int) -> Message:
        return self.call(PipelineDispatch(pipeline, DispatchConfig().to_wire()),
                         [np.arange(4, dtype=np.uint32)])


def test_compiling_the_same_pipeline_again_reuses_its_entry() -> None:
    worker = Worker()
    first = worker.compile(1)
    assert worker.compile(1) == first
    assert len(worker.server.handlers._pipelines) == 1
    assert worker.run(first).arrays[0].tolist() == [1, 2, 3, 4]


def test_the_table_keeps_the_most_recently_used_and_refuses_dropped_handles(
        monkeypatch) -> None:
    monkeypatch.setattr(handlers, "PIPELINE_LIMIT", 4)
    worker = Worker()
    ids = [worker.compile(n) for n in range(4)]
    assert isinstance(worker.run(ids[0]).body, Ran)  # used: now the most recent
    worker.compile(10)                        # over the limit: ids[1] is dropped
    assert len(worker.server.handlers._pipelines) == 4
    reply = worker.run(ids[1])
    assert reply.op is Op.ERROR
    error = VyreError.from_dict(reply.body.error)
    assert isinstance(error, PipelineInvalidatedError)
    assert "4 most recently used" in error.cause and "Compile the program again" in error.fix
    assert worker.run(ids[0]).arrays[0].tolist() == [0, 1, 2, 3]
    for n in range(100, 300):
        worker.compile(n)
    assert len(worker.server.handlers._pipelines) == 4
    assert len(worker.server.handlers._pipeline_of_key) == 4
