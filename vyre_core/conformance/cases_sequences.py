"""Sequence cases: a loop's iteration number, loops inside loops, an input updated in
place and returned, a step only some backends claim. Expected values by plain numpy (or
by hand)."""

from __future__ import annotations

import numpy as np

from vyre_core import ir
from vyre_core.contract.types import LoopRun
from vyre_core.sequence import SequenceBuilder

from .base import SequenceCase


def mark_iteration() -> ir.Program:
    """out[k] += k + 1 in one invocation, ``k`` a loop's iteration number (a u32 uniform)."""
    k = ir.Kernel(workgroup=(1,))
    it = k.uniform("k", ir.u32)
    out = k.read_write("out", ir.u32)
    out[it[0]] = out[it[0]] + it[0] + 1
    return k.build()


def mark_cell(cols: int) -> ir.Program:
    """out[i * cols + j] += 100 * i + j + 1 in one invocation, ``i`` and ``j`` the
    iteration numbers of two loops."""
    k = ir.Kernel(workgroup=(1,))
    i, j = k.uniform("i", ir.u32), k.uniform("j", ir.u32)
    out = k.read_write("out", ir.u32)
    cell = k.let("cell", i[0] * cols + j[0])
    out[cell] = out[cell] + i[0] * 100 + j[0] + 1
    return k.build()


def relax_through(n: int) -> ir.Program:
    """One Floyd–Warshall round in place: d[i][j] = min(d[i][j], d[i][k] + d[k][j]) over
    an n x n u32 matrix, ``k`` a loop's iteration number, one invocation per cell
    (dim=(n, n)). Row and column k do not change in round k, so in place is exact."""
    kern = ir.Kernel(workgroup=(8, 8))
    k = kern.uniform("k", ir.u32)
    d = kern.read_write("d", ir.u32, n * n)
    i = kern.let("i", ir.global_id(0))
    j = kern.let("j", ir.global_id(1))
    with kern.if_((i < n) & (j < n)):
        through = kern.let("through", d[i * n + k[0]] + d[k[0] * n + j])
        with kern.if_(through < d[i * n + j]):
            d[i * n + j] = through
    return kern.build()


def halve_while_big() -> ir.Program:
    """v[i] /= 2 where v[i] >= 1; flag[0] = 1 while any element is still >= 1."""
    k = ir.Kernel(workgroup=(32,))
    v = k.read_write("v", ir.f32)
    flag = k.read_write("flag", ir.u32, 1)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < v.len), k.if_(v[i] >= 1.0):
        v[i] = v[i] * 0.5
        with k.if_(v[i] >= 1.0):
            flag[0] = ir.u32(1)
    return k.build()


def seed_scaled(n: int) -> ir.Program:
    """v[i] = x[i] * (k + 1), ``k`` a loop's iteration number."""
    kern = ir.Kernel(workgroup=(32,))
    k = kern.uniform("k", ir.u32)
    x = kern.read("x", ir.f32)
    v = kern.output("v", ir.f32, count=n)
    i = kern.let("i", ir.global_id(0))
    with kern.if_(i < x.len):
        v[i] = x[i] * (k[0] + 1).cast(ir.f32)
    return kern.build()


def store_row(cols: int) -> ir.Program:
    """rows[k * cols + i] = v[i], ``k`` a loop's iteration number."""
    kern = ir.Kernel(workgroup=(32,))
    k = kern.uniform("k", ir.u32)
    v = kern.read("v", ir.f32)
    rows = kern.read_write("rows", ir.f32)
    i = kern.let("i", ir.global_id(0))
    with kern.if_(i < cols):
        rows[k[0] * cols + i] = v[i]
    return kern.build()


def double_in_place() -> ir.Program:
    """x[i] = x[i] * 2 + 1 over u32, in place."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read_write("x", ir.u32)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        x[i] = x[i] * 2 + 1
    return k.build()


def halve_plus_iteration() -> ir.Program:
    """v[i] = v[i] * 0.5 + k over f64, in place, ``k`` a loop's iteration number."""
    kern = ir.Kernel(workgroup=(64,))
    k = kern.uniform("k", ir.u32)
    v = kern.read_write("v", ir.f64)
    i = kern.let("i", ir.global_id(0))
    with kern.if_(i < v.len):
        v[i] = v[i] * 0.5 + k[0].cast(ir.f64)
    return kern.build()


def _iteration_number() -> SequenceCase:
    n = 10
    b = SequenceBuilder()
    b.transient("out", ir.u32, n)
    with b.loop(times=n) as k:
        b.step(mark_iteration(), {"k": k}, dim=1)
    expected = np.arange(1, n + 1, dtype=np.uint32)
    return SequenceCase("seq_iteration_number", b.build(returns=["out"]), (), (expected,),
                        (LoopRun(n, True),))


def floyd_warshall_in_numpy(d: np.ndarray, n: int) -> np.ndarray:
    d = d.reshape(n, n).copy()
    for k in range(n):
        d = np.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])
    return d.reshape(-1)


def _floyd_warshall() -> SequenceCase:
    """The iteration number, an input updated in place and returned, and dim=."""
    n = 11
    rng = np.random.default_rng(35)
    far = np.uint32(1 << 20)  # (no sum of two overflows)
    d = np.where(rng.random((n, n)) < 0.3, rng.integers(1, 50, (n, n)), far).astype(np.uint32)
    np.fill_diagonal(d, 0)
    b = SequenceBuilder()
    b.input("d", ir.u32, n * n)
    with b.loop(times=n) as k:
        b.step(relax_through(n), {"k": k}, dim=(n, n))
    return SequenceCase("seq_floyd_warshall_in_place", b.build(returns=["d"]),
                        (d.reshape(-1),), (floyd_warshall_in_numpy(d, n),), (LoopRun(n, True),))


def _times_in_times() -> SequenceCase:
    rows, cols = 3, 4
    b = SequenceBuilder()
    b.transient("out", ir.u32, rows * cols)
    with b.loop(times=rows) as i, b.loop(times=cols) as j:
        b.step(mark_cell(cols), {"i": i, "j": j}, dim=1)
    expected = np.array([100 * i + j + 1 for i in range(rows) for j in range(cols)], np.uint32)
    return SequenceCase("seq_times_in_times", b.build(returns=["out"]), (), (expected,),
                        (LoopRun(rows, True), LoopRun(rows * cols, True)))


def _flag_loop_in_times() -> SequenceCase:
    """An until_zero loop inside a times loop, each outer iteration seeding it anew."""
    outer, cols = 3, 4
    x = np.array([0.5, 3.0, 17.0, 100.0], np.float32)
    b = SequenceBuilder()
    b.input("x", ir.f32, cols)
    b.transient("v", ir.f32, cols)
    b.transient("flag", ir.u32, 1)
    b.transient("rows", ir.f32, outer * cols)
    with b.loop(times=outer) as k:
        b.step(seed_scaled(cols), {"k": k})
        with b.loop(until_zero="flag", max_iterations=100):
            b.step(halve_while_big())
        b.step(store_row(cols), {"k": k})
    rows, inner = [], 0
    for k in range(outer):
        v = x * np.float32(k + 1)
        while True:
            inner += 1
            big = v >= 1
            v = np.where(big, v * np.float32(0.5), v)
            if not (v >= 1).any():
                break
        rows.append(v)
    return SequenceCase("seq_flag_loop_in_times", b.build(returns=["rows"]), (x,),
                        (np.concatenate(rows),), (LoopRun(outer, True), LoopRun(inner, True)))


def _input_updated_in_place() -> SequenceCase:
    x = np.arange(100, dtype=np.uint32)
    b = SequenceBuilder()
    b.input("x", ir.u32, x.size)
    with b.loop(times=3):
        b.step(double_in_place())
    expected = ((x * 2 + 1) * 2 + 1) * 2 + 1
    return SequenceCase("seq_input_updated_in_place", b.build(returns=["x"]), (x,),
                        (expected,), (LoopRun(3, True),))


def _f64_step() -> SequenceCase:
    """A step that needs f64: the sequence is claimed only where every step is (a backend
    without f64 must refuse it whole). Every value is exact in f64."""
    x = np.arange(16, dtype=np.float64) * 0.25 - 1.5
    b = SequenceBuilder()
    b.input("v", ir.f64, x.size)
    with b.loop(times=4) as k:
        b.step(halve_plus_iteration(), {"k": k})
    expected = x.copy()
    for k in range(4):
        expected = expected * 0.5 + k
    return SequenceCase("seq_f64_step", b.build(returns=["v"]), (x,), (expected,),
                        (LoopRun(4, True),))


CASES: list[SequenceCase] = [_iteration_number(), _floyd_warshall(), _times_in_times(),
                             _flag_loop_in_times(), _input_updated_in_place(), _f64_step()]
