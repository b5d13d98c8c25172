"""Loops whose bound differs between lanes on the reference interpreter (issue 13): once
few lanes still run, the rest of the loop runs on those lanes alone. Every result is
compared as exact bytes with the interpreter not compacting (the same lockstep
semantics, every lane carried to the end) and, where it is simple, with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import vyre_reference.interpreter as interpreter
from vyre_core import ir
from vyre_reference import run

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

N = 4096


def uncompacted(program: ir.Program, inputs: list[np.ndarray], monkeypatch) -> list[bytes]:
    with monkeypatch.context() as patch:
        patch.setattr(interpreter, "COMPACT_MIN_LANES", 1 << 62)
        return [out.tobytes() for out in run(program, inputs)]


def skewed(seed: int, n: int = N) -> np.ndarray:
    """Mostly 0-3 trips, a few lanes with hundreds."""
    rng = np.random.default_rng(seed)
    trips = rng.integers(0, 4, n, dtype=np.uint32)
    trips[rng.choice(n, 7, replace=False)] = rng.integers(100, 400, 7, dtype=np.uint32)
    return trips


def sum_below() -> ir.Program:
    """out[i] = 0 + 1 + ... + (x[i] - 1)."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, N)
    i = k.let("i", ir.global_id(0))
    acc = k.let("acc", ir.lit(0, ir.u32))
    with k.if_(i < x.len):
        with k.loop("j", 0, x[i]) as j:
            k.assign(acc, acc + j)
        out[i] = acc
    return k.build()


def test_a_skewed_loop_matches_numpy_and_the_uncompacted_run(monkeypatch) -> None:
    x = skewed(1)
    (got,) = run(sum_below(), [x])
    wide = x.astype(np.uint64)
    assert got.tobytes() == (wide * (wide - 1) // 2).astype(np.uint32).tobytes()
    assert [got.tobytes()] == uncompacted(sum_below(), [x], monkeypatch)


def everything_in_a_loop() -> ir.Program:
    """A 2-D grid; inside a lane-dependent loop: ids of every kind, workgroup memory, a
    return from some lanes part way, an atomic whose old values are kept, a nested loop,
    and stores of each lane's own results."""
    k = ir.Kernel(workgroup=(8, 4))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, 4 * N)
    counter = k.read_write("counter", ir.u32, count=1)
    tile = k.workgroup_buffer("tile", ir.u32, 32)
    gx, gy = k.let("gx", ir.global_id(0)), k.let("gy", ir.global_id(1))
    lane = k.let("lane", gy * 64 + gx)
    slot = k.let("slot", ir.local_id(1) * 8 + ir.local_id(0))
    acc = k.let("acc", ir.lit(0, ir.u32))
    seen = k.let("seen", ir.lit(0, ir.u32))
    with k.if_(lane < x.len):
        with k.loop("j", 0, x[lane]) as j:
            tile[slot] = j + ir.workgroup_id(0) + ir.workgroup_id(1) * 7
            k.assign(acc, acc + tile[slot] * (lane % 5 + 1))
            with k.loop("m", 0, j % 3) as m:
                k.assign(acc, acc ^ (m + lane))
            with k.if_(ir.logical_and(j == 9, lane % 3 == 0)):
                out[4 * lane + 3] = acc
                k.ret()
            k.assign(seen, counter.atomic_add(0, 1))
        out[4 * lane] = acc
        out[4 * lane + 1] = seen
        out[4 * lane + 2] = gx * 1000 + gy
    return k.build()


@pytest.mark.parametrize("seed", range(6))
def test_ids_memory_returns_atomics_and_nested_loops_agree_exactly(seed, monkeypatch) -> None:
    x = skewed(seed)
    inputs = [x, np.zeros(1, np.uint32)]
    got = [out.tobytes() for out in run(everything_in_a_loop(), inputs)]
    assert got == uncompacted(everything_in_a_loop(), inputs, monkeypatch)


def test_compaction_saves_the_work_of_finished_lanes(monkeypatch) -> None:
    """Counted, not timed: statements executed for how many lanes in all."""
    x = skewed(3)
    done: list[int] = []
    block = interpreter._Dispatch.block

    def counting(self, stmts, mask):
        done.append(self.lanes * len(stmts))
        return block(self, stmts, mask)

    monkeypatch.setattr(interpreter._Dispatch, "block", counting)
    run(sum_below(), [x])
    compacted = sum(done)
    done.clear()
    uncompacted(sum_below(), [x], monkeypatch)
    assert compacted * 20 < sum(done)
