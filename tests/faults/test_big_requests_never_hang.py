"""Big requests either run or are refused with the limit named; none is left waiting.

A program well under the documented 8 MiB wire limit (its header is over 1 MiB) runs in a
real worker; a label or a program past its limit, inputs over ``max_message_bytes``, and
outputs over it are refused with a Fix, quickly, and the pool keeps serving.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import vyre_core
from vyre_core import DispatchConfig, Timeouts, Transport, ir
from vyre_core.errors import InvalidConfigError, InvalidInputError, ValidationError

from .support import PROGRAM, assert_saxpy, driver, inputs, saxpy, worker

#: How long a call that must not hang is given before the test calls it hung.
ANSWER_WITHIN = 60.0
OUT = 1024  # u32 elements of the stores program's output


def stores(count: int) -> tuple[ir.Program, bytes]:
    """``count`` stores of distinct constants into one output (unvalidated), and the bytes
    the output holds afterwards: the last value stored at each element."""
    k = ir.Kernel(workgroup=(1,))
    out = k.output("out", ir.u32, count=OUT)
    values = (np.arange(count, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    for s, value in enumerate(values.tolist()):
        out[s % OUT] = ir.lit(value, ir.u32)
    expected = np.zeros(OUT, dtype=np.uint32)
    expected[np.arange(count - OUT, count) % OUT] = values[-OUT:]  # the last store wins
    return k.build(validate=False), expected.tobytes()


@pytest.mark.timeout(120)
def test_program_of_60000_statements_runs_exactly() -> None:
    program, expected = stores(60_000)
    program.check()
    wire = program.to_wire()
    assert 2**20 < len(wire) < 8 * 2**20  # over the old 1 MiB header cap, under the limit
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        pending = drv.dispatch_async(program, [], backend="reference",
                                     config=DispatchConfig(grid_override=(1, 1, 1)))
        outputs = pending.result(timeout=ANSWER_WITHIN)
        assert len(outputs) == 1
        assert outputs[0].tobytes() == expected


@pytest.mark.timeout(90)
def test_megabyte_label_is_refused_with_the_label_limit() -> None:
    with pytest.raises(InvalidConfigError) as info:
        DispatchConfig(label="x" * 2**20)
    error = info.value
    assert "over the 256" in error.cause
    assert "256 characters" in error.fix
    assert "Fix:" in str(error)


@pytest.mark.timeout(60)
def test_program_past_the_wire_limits_is_refused_before_any_worker() -> None:
    program, _ = stores(70_000)  # 70,000 statements in one block: over 65,536
    with pytest.raises(ValidationError) as info:
        program.check()
    codes = [f["code"] for f in info.value.findings]
    assert "V026" in codes, codes
    v026 = next(f for f in info.value.findings if f["code"] == "V026")
    assert "wire form" in v026["cause"] and v026["fix"]
    assert "V026" in str(info.value) and "Fix:" in str(info.value)

    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        with pytest.raises(ValidationError) as info:
            drv.dispatch(program, [], backend="reference",
                         config=DispatchConfig(grid_override=(1, 1, 1)))
        assert "V026" in [f["code"] for f in info.value.findings]
        assert drv.status()["pools"]["reference"]["state"] == "not started"


@pytest.mark.timeout(90)
def test_inputs_over_max_message_bytes_are_refused_at_submit(vyre_stalls) -> None:
    limit = 4096
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5),
                          transport=Transport(max_message_bytes=limit)) as drv:
        data = inputs(1)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="reference"), data)
        before = worker(drv, backend="reference")

        n = 1024  # two inputs of 4 KiB each: 8196 bytes in all
        big = inputs(2, n)
        start = time.monotonic()
        with pytest.raises(InvalidInputError) as info:
            drv.dispatch(saxpy(n), big, backend="reference")
        assert time.monotonic() - start < 5.0 + vyre_stalls.since(start), vyre_stalls
        error = info.value
        assert f"max_message_bytes={limit}" in error.cause
        assert str(2 * n * 4 + 4) in error.cause
        assert "max_message_bytes" in error.fix and "Fix:" in str(error)

        data = inputs(3)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="reference"), data)
        after = worker(drv, backend="reference")
        assert (after["pid"], after["generation"]) == (before["pid"], before["generation"])
        assert drv.status()["pools"]["reference"]["restarts"] == 0


def counting(count: int) -> ir.Program:
    """``out[i] = i`` over ``count`` u32 elements, with no inputs at all."""
    k = ir.Kernel(workgroup=(64,))
    out = k.output("out", ir.u32, count=count)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < out.len):
        out[i] = i
    return k.build()


@pytest.mark.timeout(90)
def test_outputs_over_max_message_bytes_fail_fast_and_the_worker_stays(vyre_stalls) -> None:
    limit = 4096
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5),
                          transport=Transport(max_message_bytes=limit)) as drv:
        small = counting(64)
        outputs = drv.dispatch(small, [], backend="reference")
        assert outputs[0].tobytes() == np.arange(64, dtype=np.uint32).tobytes()
        before = worker(drv, backend="reference")

        start = time.monotonic()
        with pytest.raises(InvalidInputError) as info:
            drv.dispatch(counting(16384), [], backend="reference")  # 64 KiB of outputs
        assert time.monotonic() - start < 5.0 + vyre_stalls.since(start), vyre_stalls
        error = info.value
        assert "outputs" in error.cause
        assert f"max_message_bytes={limit}" in error.cause and "65536" in error.cause
        assert "max_message_bytes" in error.fix and "Fix:" in str(error)

        data = inputs(4)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="reference"), data)
        after = worker(drv, backend="reference")
        assert (after["pid"], after["generation"]) == (before["pid"], before["generation"])
        status = drv.status()["pools"]["reference"]
        assert status["restarts"] == 0 and status["lost_messages"] == 0


def last_element() -> ir.Program:
    """``out[0] = x[len - 1]``: one big input, one word out (one workgroup)."""
    k = ir.Kernel(workgroup=(1,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, count=1)
    out[0] = x[x.len - 1]
    return k.build()


@pytest.mark.timeout(180)
def test_a_large_input_is_given_time_to_cross_to_its_worker() -> None:
    """Found by a hostile pass: a legal 600 MiB input with fast heartbeats was judged lost
    after three heartbeats (its transfer takes longer), failing the call and killing a
    healthy worker. A message now gets its size at 100 MB/s on top of that."""
    x = np.arange(384 * 2**20, dtype=np.uint32)  # 1.5 GiB: more than a second to cross
    with driver(timeouts={"heartbeat_interval": 0.05}) as drv:
        out = drv.dispatch(last_element(), [x], backend="reference")
        assert out[0].tobytes() == x[-1:].tobytes()
        status = drv.status()["pools"]["reference"]
        assert status["lost_messages"] == 0 and status["restarts"] == 0
