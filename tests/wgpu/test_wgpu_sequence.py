"""Sequences on wgpu (issue 13, part 2): every step recorded into one command encoder,
one submit and one readback per run (a flag loop reads its flag once per iteration),
buffers and bind groups made once per sequence, resident buffers written in place.
Results are compared as exact bytes with the reference backend running the same
sequence in this process."""

from __future__ import annotations

import numpy as np
import pytest
from kernels import axpy_into

import vyre_reference.backend as reference
import vyre_wgpu.backend as backend
import vyre_wgpu.flag_loop as flag_loop
import vyre_wgpu.submission as submission
from vyre_core import DispatchConfig, Sequence, SequenceBuilder, ir
from vyre_core.conformance.cases_sequences import CASES as SEQUENCE_CASES
from vyre_core.conformance.cases_sequences import halve_while_big, store_row
from vyre_core.contract.types import LoopRun
from vyre_core.errors import InvalidInputError, InvalidSequenceError
from vyre_workers.backend_host import BackendHost

N = 1000


def head_only() -> ir.Program:
    """out[0] = v[0]: every other element of the output stays zero."""
    k = ir.Kernel(workgroup=(64,))
    v = k.read("v", ir.f32)
    out = k.output("out", ir.f32, count=N)
    with k.if_(ir.global_id(0) == 0):
        out[0] = v[0]
    return k.build()


@pytest.fixture(scope="module")
def oracle() -> BackendHost:
    return BackendHost(reference)


class Counting:
    """Counts calls of some methods of a real wgpu object and passes them through."""

    def __init__(self, real, *names: str) -> None:
        self._real = real
        self.calls = dict.fromkeys(names, 0)

    def __getattr__(self, name):
        attr = getattr(self._real, name)
        if name in self.calls:
            def counted(*args, **kwargs):
                self.calls[name] += 1
                return attr(*args, **kwargs)
            return counted
        return attr


@pytest.fixture
def counted(host, monkeypatch):
    """The device's queue and device, counting submits, buffers and bind groups made."""
    dev = backend.device()
    queue = Counting(dev.queue, "submit")
    device = Counting(dev.device, "create_buffer", "create_bind_group")
    monkeypatch.setattr(dev, "queue", queue)
    monkeypatch.setattr(dev, "device", device)
    return queue.calls, device.calls


def chain(times: int = 3):
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.input("y0", ir.f32, N)
    b.transient("y", ir.f32, N)
    b.transient("head", ir.f32, N)
    b.step(axpy_into(1.0), {"x": "y0", "y": "y"})
    with b.loop(times=times):
        b.step(axpy_into(0.5), {"y": "y"})
        b.step(axpy_into(-0.25), {"y": "y"})
    b.step(head_only(), {"v": "y", "out": "head"})
    return b.build(returns=["y", "head"])


RNG = np.random.default_rng(3)
X, Y0 = RNG.standard_normal(N).astype(np.float32), RNG.standard_normal(N).astype(np.float32)


def test_a_chain_is_one_submit_and_matches_the_reference(host, oracle, counted):
    submits, made = counted
    seq = chain()
    run = host.dispatch_sequence(seq, [X, Y0], {})
    want = oracle.dispatch_sequence(seq, [X, Y0], {})
    assert [o.tobytes() for o in run.outputs] == [o.tobytes() for o in want.outputs]
    assert run.outputs[1][1:].tolist() == [0.0] * (N - 1)  # an output binding starts at zero
    assert run.loops == [LoopRun(3, True)]
    assert submits["submit"] == 1
    made["create_buffer"] = made["create_bind_group"] = 0
    again = host.dispatch_sequence(seq, [Y0, X], {})  # the same sequence, other inputs
    assert submits["submit"] == 2
    assert made == {"create_buffer": 0, "create_bind_group": 0}  # its plan was kept
    want = oracle.dispatch_sequence(seq, [Y0, X], {})
    assert [o.tobytes() for o in again.outputs] == [o.tobytes() for o in want.outputs]


def test_a_long_fixed_loop_is_recorded_in_bounded_command_buffers(host, oracle, counted,
                                                                  monkeypatch):
    monkeypatch.setattr(submission, "PASSES_PER_SUBMIT", 4)
    submits, _ = counted
    seq = chain(times=5)  # 1 + 10 + 1 passes: three full command buffers, then the readback
    run = host.dispatch_sequence(seq, [X, Y0], {})
    assert submits["submit"] == 4
    want = oracle.dispatch_sequence(seq, [X, Y0], {})
    assert [o.tobytes() for o in run.outputs] == [o.tobytes() for o in want.outputs]


def flag_loop_sequence(most: int):
    """Halve v until no element is >= 1; each iteration also writes head = v[0] into an
    output binding (zeroed before the step: after the loop is done, nothing may zero it)."""
    b = SequenceBuilder()
    b.input("start", ir.f32, N)
    b.transient("v", ir.f32, N)
    b.transient("head", ir.f32, N)
    b.transient("flag", ir.u32, 1)
    b.step(axpy_into(1.0), {"x": "start", "y": "v"})
    with b.loop(until_zero="flag", max_iterations=most):
        b.step(halve_while_big())
        b.step(head_only(), {"v": "v", "out": "head"})
    return b.build(returns=["v", "head", "flag"])


def batches_until(iterations: int) -> int:
    """Readbacks of a device-side flag loop that stops after ``iterations``."""
    recorded, batch, reads = 0, 1, 0
    while recorded < iterations:
        recorded += batch
        reads += 1
        batch = min(batch * 2, flag_loop.MAX_BATCH)
    return reads


@pytest.mark.parametrize("device_side", [True, False], ids=["on-device", "on-host"])
@pytest.mark.parametrize("most", [100, 4])
def test_a_flag_loop_stops_where_the_reference_does(host, oracle, counted, monkeypatch,
                                                    most, device_side):
    """On the device (a GPU's way), iterations are recorded in growing batches with one
    small readback each, and those recorded after the loop is done dispatch nothing (the
    output binding keeps what the last iteration wrote); on the host (a software
    adapter's way), each iteration reads its flag back. At its maximum, the loop says it
    did not converge."""
    monkeypatch.setattr(backend.sequences(), "device_side_loops", device_side)
    submits, _ = counted
    seq = flag_loop_sequence(most)
    start = np.abs(RNG.standard_normal(N).astype(np.float32)) * np.float32(300)
    run = host.dispatch_sequence(seq, [start], {})
    want = oracle.dispatch_sequence(seq, [start], {})
    assert [o.tobytes() for o in run.outputs] == [o.tobytes() for o in want.outputs]
    assert run.loops == want.loops
    ran = run.loops[0].iterations
    assert run.loops[0].converged == (most == 100) and run.outputs[1][0] != 0
    readbacks = batches_until(ran) if device_side else ran
    assert submits["submit"] == readbacks + 1  # and then the returns
    again = host.dispatch_sequence(seq, [start * np.float32(2)], {})  # its plan, reset
    want = oracle.dispatch_sequence(seq, [start * np.float32(2)], {})
    assert [o.tobytes() for o in again.outputs] == [o.tobytes() for o in want.outputs]
    assert again.loops == want.loops


def test_resident_buffers_are_written_in_place(host, oracle):
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.resident("y", ir.f32, N)
    with b.loop(times=4):
        b.step(axpy_into(0.75))
    seq = b.build()
    y = host.allocate_resident(N * 4)
    host.upload_resident(y, Y0.tobytes())
    ref_y = oracle.allocate_resident(N * 4)
    oracle.upload_resident(ref_y, Y0.tobytes())
    for _ in range(2):
        assert host.dispatch_sequence(seq, [X], {"y": y}).outputs == []
        oracle.dispatch_sequence(seq, [X], {"y": ref_y})
    assert host.download_resident(y) == oracle.download_resident(ref_y)
    host.free_resident(y)
    with pytest.raises(InvalidSequenceError, match="which this worker does not hold"):
        host.dispatch_sequence(seq, [X], {"y": y})
    with pytest.raises(InvalidInputError, match="is not allocated on this device"):
        # the backend itself refuses it too, although the sequence's plan was kept
        backend.vyre_dispatch_sequence(seq, {"x": X}, {"y": y}, DispatchConfig())


def test_a_kept_plan_serves_the_same_sequence_decoded_again(host, oracle, counted):
    """A worker decodes a sequence again once it left its cache: new objects, the same
    sequence. The kept plan must serve it (it is found by fingerprint, its passes by step
    number), alternating with the old object, and give the same bytes."""
    seq = chain(times=2)
    want = [o.tobytes() for o in oracle.dispatch_sequence(seq, [X, Y0], {}).outputs]
    host.dispatch_sequence(seq, [X, Y0], {})
    _, made = counted
    made["create_buffer"] = 0
    for again in (Sequence.from_wire(seq.to_wire()), seq, Sequence.from_wire(seq.to_wire())):
        assert [o.tobytes() for o in host.dispatch_sequence(again, [X, Y0], {}).outputs] == want
    assert made["create_buffer"] == 0


def test_compiling_a_sequence_compiles_its_programs_with_the_runs_config(host):
    config = DispatchConfig(ulp_budget=2)
    seq = chain(times=1)
    host.compile_sequence(seq, config)
    before = host.pipeline_cache_snapshot()
    host.dispatch_sequence(seq, [X, Y0], {}, config)
    after = host.pipeline_cache_snapshot()
    assert after.misses == before.misses and after.hits > before.hits


def test_a_flag_loop_too_large_for_its_control_kernel_is_decided_on_the_host(
        host, oracle, counted, monkeypatch):
    """A flag (or a loop) so large that one control invocation would read it serially for
    long, or past a driver's loop budget, is read back per iteration instead."""
    monkeypatch.setattr(backend.sequences(), "device_side_loops", True)
    monkeypatch.setattr(flag_loop, "MAX_CONTROL_WORDS", 8)
    submits, _ = counted
    seq = flag_loop_sequence(99)  # (a sequence no earlier test left a kept plan for)
    start = np.full(N, 64.0, np.float32)
    run = host.dispatch_sequence(seq, [start], {})
    want = oracle.dispatch_sequence(seq, [start], {})
    assert [o.tobytes() for o in run.outputs] == [o.tobytes() for o in want.outputs]
    assert run.loops == want.loops == [LoopRun(7, True)]
    assert submits["submit"] == 7 + 1  # a readback per iteration, then the returns


@pytest.mark.parametrize("device_side", [True, False], ids=["on-device", "on-host"])
@pytest.mark.parametrize("case", SEQUENCE_CASES, ids=[c.name for c in SEQUENCE_CASES])
def test_iteration_numbers_nested_loops_and_inputs_in_place_match_numpy(
        host, monkeypatch, case, device_side):
    """Both ways a flag loop can be decided: an iteration number is right in each,
    nested loops count every iteration, an input a step writes comes back updated and
    the caller's array is left as it was."""
    monkeypatch.setattr(backend.sequences(), "device_side_loops", device_side)
    before = [a.copy() for a in case.inputs]
    run = host.dispatch_sequence(case.sequence, list(case.inputs), {})
    assert [o.tobytes() for o in run.outputs] == [e.tobytes() for e in case.expected]
    assert tuple(run.loops) == case.loops
    assert [a.tobytes() for a in case.inputs] == [a.tobytes() for a in before]


def test_iteration_numbers_of_a_fixed_loop_keep_it_one_submit(host, counted):
    """The number is copied in by the encoder, not written by the queue between passes."""
    submits, _ = counted
    case = next(c for c in SEQUENCE_CASES if c.name == "seq_times_in_times")
    run = host.dispatch_sequence(case.sequence, [], {})
    assert run.outputs[0].tobytes() == case.expected[0].tobytes()
    assert submits["submit"] == 1


def test_a_top_level_flag_loop_reading_its_number_is_decided_on_the_device(
        host, oracle, counted, monkeypatch):
    monkeypatch.setattr(backend.sequences(), "device_side_loops", True)
    submits, _ = counted
    b = SequenceBuilder()
    b.input("x", ir.f32, 4)
    b.transient("v", ir.f32, 4)
    b.transient("flag", ir.u32, 1)
    b.transient("rows", ir.f32, 4 * 40)
    b.step(axpy_into(1.0), {"x": "x", "y": "v"})
    with b.loop(until_zero="flag", max_iterations=40) as k:
        b.step(halve_while_big())
        b.step(store_row(4), {"k": k})
    seq = b.build(returns=["rows"])
    start = np.array([0.5, 3.0, 17.0, 1000.0], np.float32)
    run = host.dispatch_sequence(seq, [start], {})
    want = oracle.dispatch_sequence(seq, [start], {})
    assert run.outputs[0].tobytes() == want.outputs[0].tobytes()
    assert run.loops == want.loops == [LoopRun(10, True)]
    assert submits["submit"] == batches_until(10) + 1
