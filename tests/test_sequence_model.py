"""Sequences without processes: the rules a sequence must keep (each a clear error with a
Fix, before any work runs), its canonical bytes, routing it as a whole, and what running
it means, step by step over the reference interpreter in this process."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

import vyre_reference.backend as reference
from vyre_core import DispatchConfig, ir
from vyre_core.conformance.cases_sequences import CASES as SEQUENCE_CASES
from vyre_core.conformance.cases_sequences import halve_while_big, mark_iteration
from vyre_core.contract.types import LoopRun
from vyre_core.errors import InvalidInputError, InvalidSequenceError, LaunchLimitError
from vyre_core.sequence import MAX_ITERATIONS, Sequence, SequenceBuilder, Step
from vyre_workers.backend_host import BackendHost

pytestmark = pytest.mark.fast

N = 100


def scale(n: int = N, factor: float = 2.0) -> ir.Program:
    """out[i] = x[i] * factor over f32 (``x`` runtime-sized)."""
    k = ir.Kernel(workgroup=(32,))
    x = k.read("x", ir.f32)
    out = k.output("out", ir.f32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] * factor
    return k.build()


@pytest.fixture(scope="module")
def host() -> BackendHost:
    return BackendHost(reference)


def chain() -> Sequence:
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.transient("t", ir.f32, N)
    b.transient("u", ir.f32, N)
    b.step(scale(), {"out": "t"})
    with b.loop(times=3):
        b.step(scale(), {"x": "t", "out": "u"})
        b.step(scale(), {"x": "u", "out": "t"})
    return b.build(returns=["t", "u"])


X = np.linspace(-3, 3, N, dtype=np.float32)


# -- running it --------------------------------------------------------------------------


def test_a_chain_runs_every_step_in_order_and_returns_the_named_buffers(host):
    run = host.dispatch_sequence(chain(), [X], {})
    t, u = run.outputs
    assert t.tobytes() == (X * np.float32(128)).tobytes()  # 1 + 2 * 3 doublings
    assert u.tobytes() == (X * np.float32(64)).tobytes()
    assert run.loops == [LoopRun(3, True)]


def test_a_flag_loop_stops_after_the_first_iteration_that_leaves_the_flag_zero(host):
    b = SequenceBuilder()
    b.input("start", ir.f32, 4)
    b.transient("v", ir.f32, 4)
    b.transient("flag", ir.u32, 1)
    b.step(scale(4, 1.0), {"x": "start", "out": "v"})
    with b.loop(until_zero="flag", max_iterations=50):
        b.step(halve_while_big())
    seq = b.build(returns=["v", "flag"])
    start = np.array([0.5, 3.0, 17.0, 1000.0], np.float32)
    run = host.dispatch_sequence(seq, [start], {})
    v, flag = run.outputs
    expect = start.copy()
    rounds = 0
    while (expect >= 1).any():
        expect = np.where(expect >= 1, expect * np.float32(0.5), expect)
        rounds += 1
    assert v.tobytes() == expect.tobytes() and flag.tolist() == [0]
    assert run.loops == [LoopRun(rounds, True)] and rounds == 10


def test_a_flag_loop_that_reaches_its_maximum_says_so_and_keeps_what_it_did(host):
    b = SequenceBuilder()
    b.transient("v", ir.f32, 1)
    b.constant("big", ir.f32, [2.0**20])
    b.transient("flag", ir.u32, 1)
    b.step(scale(1, 1.0), {"x": "big", "out": "v"})
    with b.loop(until_zero="flag", max_iterations=3):
        b.step(halve_while_big())
    run = host.dispatch_sequence(b.build(returns=["v", "flag"]), [], {})
    assert run.outputs[0].tolist() == [2.0**17] and run.outputs[1].tolist() == [1]
    assert run.loops == [LoopRun(3, False)]


def test_an_output_binding_is_zero_filled_as_a_dispatch_output_is(host):
    """A buffer bound to an output sees only what that step writes: elements it skips are
    zero, not what an earlier step left there."""
    k = ir.Kernel(workgroup=(32,))
    out = k.output("out", ir.u32, 8)
    with k.if_(ir.global_id(0) == 0):
        out[0] = ir.u32(7)
    first_only = k.build()
    b = SequenceBuilder()
    b.constant("ones", ir.u32, np.ones(8))
    b.transient("t", ir.u32, 8)
    b.step(_copy_u32(), {"src": "ones", "dst": "t"})
    b.step(first_only, {"out": "t"})
    assert host.dispatch_sequence(b.build(returns=["t"]), [], {}).outputs[0].tolist() == \
        [7, 0, 0, 0, 0, 0, 0, 0]


def _copy_u32() -> ir.Program:
    k = ir.Kernel(workgroup=(32,))
    src, dst = k.read("src", ir.u32), k.read_write("dst", ir.u32)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < src.len):
        dst[i] = src[i]
    return k.build()


def test_a_step_beyond_the_backends_limits_is_refused_naming_the_step(host):
    k = ir.Kernel(workgroup=(2048,))  # the reference takes 1024 invocations per workgroup
    out = k.output("out", ir.u32, 4)
    out[0] = ir.u32(1)
    b = SequenceBuilder()
    b.transient("out", ir.u32, 4)
    b.constant("c", ir.u32, [1, 2, 3, 4])
    b.step(_copy_u32(), {"src": "c", "dst": "out"})
    b.step(k.build())
    with pytest.raises(LaunchLimitError, match=r"step 1: backend 'reference': workgroup"):
        host.dispatch_sequence(b.build(returns=["out"]), [], {})


# -- bad input: each refused when built, with a Fix ------------------------------------------


def _refused(match: str, build) -> None:
    with pytest.raises(InvalidSequenceError, match=match) as err:
        build()
    assert "\nFix: " in str(err.value)


def test_a_sequence_of_zero_steps_is_refused():
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    _refused("has no steps", lambda: b.build(returns=["x"]))


def test_a_transient_read_before_any_step_writes_it_is_refused():
    b = SequenceBuilder()
    b.transient("t", ir.f32, N)
    b.transient("u", ir.f32, N)
    b.step(scale(), {"x": "t", "out": "u"})
    _refused(r"step 0 reads transient 't' \(as 'x'\) before any step writes it",
             lambda: b.build(returns=["u"]))


def test_a_read_in_a_loop_before_the_write_later_in_its_body_is_refused():
    b = SequenceBuilder()
    b.transient("t", ir.f32, N)
    b.transient("u", ir.f32, N)
    b.input("x", ir.f32, N)
    with b.loop(times=2):
        b.step(scale(), {"x": "u", "out": "t"})
        b.step(scale(), {"x": "x", "out": "u"})
    _refused("step 0 reads transient 'u'", lambda: b.build(returns=["t"]))


def test_sizes_that_disagree_between_steps_are_refused():
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.transient("t", ir.f32, N + 1)
    b.step(scale(), {"out": "t"})
    _refused(rf"binds 'out' of {N} elements to 't' of {N + 1}: the sizes disagree",
             lambda: b.build(returns=["t"]))


def test_a_dtype_mismatch_is_refused():
    b = SequenceBuilder()
    b.input("x", ir.u32, N)
    b.transient("t", ir.f32, N)
    b.step(scale(), {"out": "t"})
    _refused(r"binds 'x' \(f32\) to 'x' \(u32\)", lambda: b.build(returns=["t"]))


@pytest.mark.parametrize("kwargs, match", [
    ({"times": MAX_ITERATIONS + 1}, "times=1000001, not 1 to 1000000"),
    ({"times": 0}, "times=0"),
    ({"until_zero": "flag", "max_iterations": MAX_ITERATIONS + 1}, "max_iterations=1000001"),
    ({"times": 2, "until_zero": "flag"}, "exactly one of times= or until_zero="),
    ({}, "exactly one of times= or until_zero="),
    ({"until_zero": "nope"}, "waits on 'nope', which the sequence does not declare"),
    ({"until_zero": "x"}, "waits on 'x', an input the loop would overwrite"),
])
def test_a_loop_bound_past_the_maximum_or_malformed_is_refused(kwargs, match):
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.transient("t", ir.f32, N)
    b.transient("flag", ir.u32, 1)
    with b.loop(**kwargs):
        b.step(scale(), {"out": "t"})
    _refused(match, lambda: b.build(returns=["t"]))


def test_a_flag_loop_whose_body_never_writes_the_flag_is_refused():
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.transient("t", ir.f32, N)
    b.transient("flag", ir.u32, 1)
    with b.loop(until_zero="flag"):
        b.step(scale(), {"out": "t"})
    _refused("no step of its body writes it", lambda: b.build(returns=["t"]))


@pytest.mark.parametrize("declare, bind, match", [
    (lambda b: b.constant("x", ir.f32, np.zeros(N)), {"out": "x"}, "writes constant 'x'"),
])
def test_bad_bindings_are_refused(declare, bind, match):
    b = SequenceBuilder()
    declare(b)
    b.step(scale(), bind)
    _refused(match, lambda: b.build())


def test_one_buffer_bound_to_two_buffers_of_a_step_that_writes_one_is_refused():
    b = SequenceBuilder()
    b.transient("x", ir.f32, N)
    b.constant("c", ir.f32, np.zeros(N))
    b.step(scale(), {"x": "c", "out": "x"})
    b.step(_copy_f32(), {"src": "x", "dst": "x"})
    _refused("step 1 binds 'x' to both 'src' and 'dst', and writes one of them",
             lambda: b.build(returns=["x"]))


def _copy_f32() -> ir.Program:
    k = ir.Kernel(workgroup=(32,))
    src, dst = k.read("src", ir.f32), k.read_write("dst", ir.f32)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < src.len):
        dst[i] = src[i]
    return k.build()


def test_unknown_bind_keys_and_bad_returns_are_refused():
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    _refused(r"bind names \['y'\]", lambda: b.step(scale(), {"y": "x"}))
    b.transient("t", ir.f32, N)
    b.step(scale(), {"out": "t"})
    _refused("returns names 'nope'", lambda: b.build(returns=["nope"]))
    _refused("returns names 't' twice", lambda: b.build(returns=["t", "t"]))


@pytest.mark.parametrize("name, count, match", [
    ("1bad", 4, "not an identifier"), ("ok", 0, "count 0"), ("ok", 2**32, "count 4294967296"),
])
def test_bad_buffer_declarations_are_refused(name, count, match):
    b = SequenceBuilder()
    b.transient(name, ir.f32, count)
    _refused(match, lambda: b.build())


def test_a_step_before_its_buffers_are_declared_is_refused():
    """Its grid would be inferred from buffers nobody declared (and silently too small)."""
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    _refused(r"binds \['out'\], not declared \(yet\)", lambda: b.step(scale()))


@pytest.mark.parametrize("grid", [(0, 1, 1), (1, 1), (2**32, 1, 1), ("a", 1, 1), (1.5, 1, 1)])
def test_a_grid_that_is_not_three_workgroup_counts_is_refused(grid):
    seq = chain()
    bad = Step(seq.items[0].program, seq.items[0].bindings, grid)
    _refused("launches grid", lambda: Sequence(seq.buffers, (bad,), seq.returns).check())
    if len(grid) == 3:  # the builder pads shorter grids, and refuses the same axes
        b = SequenceBuilder()
        b.input("x", ir.f32, N)
        b.transient("t", ir.f32, N)
        b.step(scale(), {"out": "t"}, grid=grid[:1])
        _refused("launches grid", lambda: b.build(returns=["t"]))


def test_a_run_of_more_dispatches_than_the_bound_is_refused():
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.transient("t", ir.f32, N)
    with b.loop(times=MAX_ITERATIONS):
        for _ in range(17):
            b.step(scale(), {"out": "t"})
    _refused("one run would make 17000000 dispatches, more than 16777216",
             lambda: b.build(returns=["t"]))


def test_a_sequence_too_large_to_send_is_refused_when_built(monkeypatch):
    from vyre_core.sequence import model

    monkeypatch.setattr(model, "MAX_WIRE_BYTES", 64)
    _refused(r"bytes as sent to a worker, over 64", chain)


def test_something_that_is_not_a_step_in_a_sequence_is_refused():
    seq = chain()
    _refused("holds a str where a step", lambda: Sequence(seq.buffers, ("step",),
                                                          seq.returns).check())


def test_the_host_checks_inputs_and_resident_names_itself(host):
    seq = chain()
    _refused(r"takes 1 input\(s\), got 2", lambda: host.dispatch_sequence(seq, [X, X], {}))
    with pytest.raises(InvalidInputError, match="dtype float64"):
        host.dispatch_sequence(seq, [X.astype(np.float64)], {})
    _refused(r"resident handles for \['r'\]", lambda: host.dispatch_sequence(seq, [X],
                                                                          {"r": 1}))


def test_two_resident_names_on_one_buffer_are_refused_by_the_host(host):
    b = SequenceBuilder()
    b.resident("a", ir.f32, N)
    b.resident("b", ir.f32, N)
    b.step(scale(), {"x": "a", "out": "b"})
    handle = host.allocate_resident(N * 4)
    _refused("one resident buffer is bound to two names",
             lambda: host.dispatch_sequence(b.build(), [], {"a": handle, "b": handle}))


def test_a_returned_resident_nobody_wrote_is_a_copy_not_a_live_view(host):
    b = SequenceBuilder()
    b.resident("r", ir.f32, 2)
    b.transient("t", ir.f32, 2)
    b.step(scale(2), {"x": "r", "out": "t"})
    handle = host.allocate_resident(8)
    host.upload_resident(handle, np.ones(2, np.float32).tobytes())
    returned = host.dispatch_sequence(b.build(returns=["r"]), [], {"r": handle}).outputs[0]
    host.upload_resident(handle, np.full(2, 5, np.float32).tobytes())
    assert returned.tolist() == [1.0, 1.0]


def test_inputs_that_do_not_match_the_declared_inputs_are_refused():
    seq = chain()
    _refused(r"takes 1 input\(s\), got 2", lambda: seq.bind_inputs([X, X]))
    with pytest.raises(Exception, match="dtype float64"):
        seq.bind_inputs([X.astype(np.float64)])


# -- bytes and identity ------------------------------------------------------------------------


def test_the_wire_form_round_trips_and_names_each_program_once():
    seq = chain()
    again = Sequence.from_wire(seq.to_wire())
    assert again == seq and again.fingerprint() == seq.fingerprint()
    body = msgpack.unpackb(seq.to_wire()[5:])
    assert len(body[1]) == 1  # five steps of one program: its bytes appear once
    other = SequenceBuilder()
    other.input("x", ir.f32, N)
    other.transient("t", ir.f32, N)
    other.step(scale(factor=3.0), {"out": "t"})
    assert other.build(returns=["t"]).fingerprint() != seq.fingerprint()


@pytest.mark.parametrize("data", [
    b"", b"VYSQ", b"VYSQ\x02" + msgpack.packb([]), b"VYSQ\x02\xc1",
    b"VYSQ\x01" + msgpack.packb([[], [], [], []]),                      # format 1
    b"VYSQ\x02" + msgpack.packb([[], [], [], []]),                      # no steps
    b"VYSQ\x02" + msgpack.packb([[["x", 99, 4, 0, None]], [], [], []]),  # bad dtype tag
    b"VYSQ\x02" + msgpack.packb([[], [b"junk"], [[0, 0, [], [1, 1, 1]]], []]),
    b"VYSQ\x02" + msgpack.packb([[], [], [[0, 5, [], [1, 1, 1]]], []]),   # no such program
    b"VYSQ\x02" + msgpack.packb("text"),
    b"VYSQ\x02" + msgpack.packb([[[["x"], 2, 4, 2, None]], [], [], []]),  # a list as a name
])
def test_malformed_bytes_are_refused_cleanly(data):
    """Every malformation is an InvalidSequenceError (never a TypeError, never a hang)."""
    with pytest.raises(InvalidSequenceError, match=r"malformed|no steps"):
        Sequence.from_wire(data)


def test_bytes_not_in_canonical_form_are_refused():
    """One sequence has one byte form: an unused program, or a step naming its program by
    a negative index, is refused rather than given a second fingerprint."""
    body = msgpack.unpackb(chain().to_wire()[5:])
    unused = [body[0], [*body[1], body[1][0]], body[2], body[3]]
    with pytest.raises(InvalidSequenceError, match="canonical"):
        Sequence.from_wire(b"VYSQ\x02" + msgpack.packb(unused, use_bin_type=True))
    body[2][0][1] = -1
    with pytest.raises(InvalidSequenceError, match="program index"):
        Sequence.from_wire(b"VYSQ\x02" + msgpack.packb(body, use_bin_type=True))


# -- config -----------------------------------------------------------------------------------


def test_a_sequence_config_with_per_step_launch_fields_is_refused():
    from vyre_core.driver.calls import _sequence_config
    from vyre_core.errors import InvalidConfigError

    for config in (DispatchConfig(grid_override=(4,)), DispatchConfig(fixpoint_iterations=3),
                   DispatchConfig(workgroup_override=(8,))):
        with pytest.raises(InvalidConfigError, match="belong to its steps"):
            _sequence_config(config)


# -- iteration numbers, nested loops, inputs in place, dim= (issue 35) ----------------------



@pytest.mark.parametrize("case", SEQUENCE_CASES, ids=[c.name for c in SEQUENCE_CASES])
def test_sequence_cases_run_in_process_with_numpys_bytes(host, case):
    """(Each fails on main before this commit: nested loops, iteration numbers and
    inputs written in place were refused.)"""
    run = host.dispatch_sequence(case.sequence, list(case.inputs), {})
    assert [o.tobytes() for o in run.outputs] == [e.tobytes() for e in case.expected]
    assert tuple(run.loops) == case.loops


def test_a_buffer_named_like_a_loops_number_is_refused_with_a_fix():
    """Failed before this commit (a hostile test): a transient 'iteration_0' beside a
    loop's number was refused as 'declared twice', a name the user gave once."""
    b = SequenceBuilder()
    b.transient("iteration_0", ir.u32, 1)
    b.transient("out", ir.u32, 4)
    with b.loop(times=4) as k:
        b.step(mark_iteration(), {"k": k, "out": "out"}, dim=1)
    with pytest.raises(InvalidSequenceError, match="transient buffer 'iteration_0': names "
                       "iteration_<n> are the loops' iteration numbers") as err:
        b.build(returns=["out"])
    assert "Give the buffer another name" in err.value.fix


def test_an_iteration_number_read_outside_its_loop_is_refused_with_a_fix():
    b = SequenceBuilder()
    b.transient("out", ir.u32, 4)
    with b.loop(times=4) as k:
        b.step(mark_iteration(), {"k": k, "out": "out"}, dim=1)
    b.step(mark_iteration(), {"k": k, "out": "out"}, dim=1)
    with pytest.raises(InvalidSequenceError, match="step 1 reads iteration number "
                       "'iteration_0' \\(as 'k'\\) outside its loop") as err:
        b.build(returns=["out"])
    assert "only in steps inside that with-block" in err.value.fix
    b = SequenceBuilder()  # an inner loop's number, read by the outer loop only
    b.transient("out", ir.u32, 4)
    with b.loop(times=2):
        with b.loop(times=2) as j:
            b.step(mark_iteration(), {"k": j, "out": "out"}, dim=1)
        b.step(mark_iteration(), {"k": j, "out": "out"}, dim=1)
    _refused("step 1 reads iteration number 'iteration_1'", lambda: b.build())


def test_an_iteration_number_is_never_written_returned_or_waited_on():
    k = ir.Kernel(workgroup=(1,))
    k.output("out", ir.u32, 1)[0] = ir.u32(1)
    writes = k.build()
    b = SequenceBuilder()
    b.transient("t", ir.u32, 4)
    with b.loop(times=2) as n:
        b.step(writes, {"out": n})
    _refused("step 0 writes iteration 'iteration_0'", lambda: b.build())
    b = SequenceBuilder()
    b.transient("out", ir.u32, 4)
    with b.loop(times=2) as n:
        b.step(mark_iteration(), {"k": n}, dim=1)
    _refused("returns names 'iteration_0', a loop's iteration number",
             lambda: b.build(returns=[n]))


def test_a_loop_whose_number_nobody_reads_keeps_none_and_the_wire_form_of_before():
    """A number costs a buffer only where a step reads it: the sequence is the same as one
    built without asking for it."""
    seq = chain()
    assert not any(b.role.value == "iteration" for b in seq.buffers)
    assert all(loop.index is None for loop in seq.loops())


def test_loops_nest_four_deep_and_a_fifth_is_refused():
    def nest(depth):
        b = SequenceBuilder()
        b.transient("out", ir.u32, 2)
        loops = [b.loop(times=2) for _ in range(depth)]
        for loop in loops:
            loop.__enter__()
        b.step(mark_iteration(), {"k": "iteration_0"}, dim=1)
        for loop in reversed(loops):
            loop.__exit__(None, None, None)
        return b.build(returns=["out"])

    seq = nest(4)
    assert Sequence.from_wire(seq.to_wire()) == seq
    with pytest.raises(InvalidSequenceError, match="loops nest 5 deep, more than 4") as err:
        nest(5)
    assert "unroll the innermost" in err.value.fix
    deep = msgpack.unpackb(nest(4).to_wire()[5:])
    item = deep[2][0]
    for _ in range(3):
        item = item[1][0]
    item[1] = [[1, list(item[1]), 2, None, None, None]]  # a fifth loop, inside the fourth
    with pytest.raises(InvalidSequenceError, match="deeper than 4"):
        Sequence.from_wire(b"VYSQ\x02" + msgpack.packb(deep, use_bin_type=True))


def test_the_dispatch_bound_counts_nested_iterations_multiplied():
    b = SequenceBuilder()
    b.transient("out", ir.u32, 2)
    with b.loop(times=5000), b.loop(times=4000) as k:
        b.step(mark_iteration(), {"k": k, "out": "out"}, dim=1)
    _refused("one run would make 20000000 dispatches, more than 16777216", lambda: b.build())


def test_a_nested_flag_loop_reports_its_iterations_over_the_run_and_any_miss(host):
    """An until_zero loop inside a times loop: one LoopRun per loop in the order their
    with-blocks open; the inner counts every iteration of every time it ran, and says
    it did not converge when one of its runs reached the maximum."""
    b = SequenceBuilder()
    b.constant("big", ir.f32, [2.0**20, 0.5])
    b.transient("v", ir.f32, 2)
    b.transient("flag", ir.u32, 1)
    with b.loop(times=3):
        b.step(scale(2, 1.0), {"x": "big", "out": "v"})
        with b.loop(until_zero="flag", max_iterations=4):
            b.step(halve_while_big())
    run = host.dispatch_sequence(b.build(returns=["v"]), [], {})
    assert run.loops == [LoopRun(3, True), LoopRun(12, False)]


def test_dim_gives_the_grid_and_refuses_grid_with_it():
    k = ir.Kernel(workgroup=(8, 4))
    k.output("out", ir.u32, 4)[0] = ir.u32(1)
    two_d = k.build()
    b = SequenceBuilder()
    b.transient("out", ir.u32, 4)
    b.step(two_d, dim=(20, 9))
    b.step(two_d, dim=3)
    assert [s.grid for _, s in b.build().steps()] == [(3, 3, 1), (1, 1, 1)]
    _refused("both grid= and dim=", lambda: b.step(two_d, grid=(1,), dim=4))
    with pytest.raises(InvalidSequenceError, match="dim=0 is not 1 to 3") as err:
        b.step(two_d, dim=0)
    assert "dim=n" in err.value.fix
