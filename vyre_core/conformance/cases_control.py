"""Control flow: nested if/else, loops with per-invocation and empty ranges, early return
inside a loop inside an if, bounds evaluated once, scoped blocks, nested loops."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import MAX, MIN, UMAX, arr, case_of, wrap_i32

u32, i32 = ir.u32, ir.i32


def nested_if_else():
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", i32)
    out = k.output("out", u32, count=9)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        v = k.let("v", x[i])
        with k.if_(v < 0):
            with k.if_(v < -100):
                out[i] = 1
            with k.else_():
                out[i] = 2
        with k.else_():
            with k.if_(v == 0):
                out[i] = 3
            with k.else_():
                with k.if_(v > 100):
                    out[i] = 4
                with k.else_():
                    out[i] = 5
    xs = arr(i32, [-500, -100, -1, 0, 1, 100, 101, MIN, MAX])
    return case_of("nested_if_else", k, [xs], [[1, 2, 2, 3, 5, 5, 4, 1, 4]])


def loop_per_invocation_bounds():
    k = ir.Kernel(workgroup=(64,))
    lo = k.read("lo", u32)
    hi = k.read("hi", u32)
    total = k.output("total", u32, count=8)
    trips = k.output("trips", u32, count=8)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < lo.len):
        acc = k.let("acc", ir.u32(0))
        n = k.let("n", ir.u32(0))
        with k.loop("j", lo[i], hi[i]) as j:
            k.assign(acc, acc + j)
            k.assign(n, n + 1)
        total[i] = acc
        trips[i] = n
    los = [0, 0, 3, 5, 7, 10, 0, UMAX]
    his = [0, 1, 6, 5, 3, 14, 100, 0]
    return case_of("loop_per_invocation_bounds", k, [arr(u32, los), arr(u32, his)], [
        [sum(range(a, b)) for a, b in zip(los, his, strict=True)],
        [len(range(a, b)) for a, b in zip(los, his, strict=True)],
    ])


def loop_start_ge_end_runs_zero_times():
    k = ir.Kernel(workgroup=(64,))
    out = k.output("out", u32, count=4)
    i = k.let("i", ir.global_id(0))
    count = k.let("count", ir.u32(0))
    for start, end in ((5, 3), (7, 7), (UMAX, 0), (0, 0)):
        with k.loop(f"j_{start}_{end}", start, end):
            k.assign(count, count + 100)
    with k.loop("after", 0, 3):
        k.assign(count, count + 1)
    out[i] = count + i
    return case_of("loop_start_ge_end_runs_zero_times", k, [], [[3, 4, 5, 6]])


def early_return_in_loop_in_if():
    k = ir.Kernel(workgroup=(64,))
    out = k.output("out", u32, count=12)
    trace = k.output("trace", u32, count=12)
    i = k.let("i", ir.global_id(0))
    acc = k.let("acc", ir.u32(0))
    trace[i] = 1
    with k.if_(i % 2 == 0), k.loop("j", 0, 5) as j:
        k.assign(acc, acc + j)
        with k.if_(j == i / 2):
            out[i] = acc
            k.ret()
    trace[i] = 2
    out[i] = acc + 500
    expected, traced = [], []
    for inv in range(12):
        returned_at = inv // 2 if inv % 2 == 0 and inv // 2 < 5 else None
        if returned_at is not None:
            expected.append(sum(range(returned_at + 1)))
            traced.append(1)
        else:
            expected.append(500 + (sum(range(5)) if inv % 2 == 0 else 0))
            traced.append(2)
    return case_of("early_return_in_loop_in_if", k, [], [expected, traced])


def loop_bounds_evaluated_once():
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", u32)
    out = k.output("out", u32, count=5)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        n = k.let("n", x[i])
        trips = k.let("trips", ir.u32(0))
        with k.loop("j", 0, n):
            k.assign(n, n + 1)
            k.assign(trips, trips + 1)
        out[i] = trips * 1000 + n
    xs = [0, 1, 2, 5, 9]
    return case_of("loop_bounds_evaluated_once", k, [arr(u32, xs)],
                   [[v * 1000 + 2 * v for v in xs]])


def scoped_blocks_and_assign():
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", i32)
    first = k.output("first", i32, count=6)
    second = k.output("second", i32, count=6)
    branch = k.output("branch", i32, count=6)
    i = k.let("i", ir.global_id(0))
    with k.if_(i >= x.len):
        k.ret()
    with k.block():
        t = k.let("t", x[i] * 2)
        first[i] = t
    with k.block():
        t = k.let("t", x[i] + 7)        # same name in a sibling scope
        second[i] = t
    v = k.let("v", ir.i32(0))
    with k.if_(x[i] > 5):
        k.assign(v, x[i])
    with k.else_():
        k.assign(v, -x[i])
    branch[i] = v
    xs = np.array([-3, 0, 5, 6, 100, MIN], dtype=np.int64)
    return case_of("scoped_blocks_and_assign", k, [arr(i32, xs)],
                   [wrap_i32(xs * 2), wrap_i32(xs + 7), wrap_i32(np.where(xs > 5, xs, -xs))])


def nested_loops_matmul_i32():
    rows, inner, cols = 4, 3, 5
    k = ir.Kernel(workgroup=(64,))
    a = k.read("a", i32, count=rows * inner)
    b = k.read("b", i32, count=inner * cols)
    c = k.output("c", i32, count=rows * cols)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < rows * cols):
        r = k.let("r", i / cols)
        col = k.let("col", i % cols)
        acc = k.let("acc", ir.i32(0))
        with k.loop("m", 0, inner) as m:
            k.assign(acc, acc + a[r * inner + m] * b[m * cols + col])
        c[i] = acc
    am = np.arange(rows * inner, dtype=np.int64).reshape(rows, inner) - 5
    bm = (np.arange(inner * cols, dtype=np.int64).reshape(inner, cols) * 7) % 11 - 4
    return case_of("nested_loops_matmul_i32", k, [arr(i32, am), arr(i32, bm)],
                   [wrap_i32(am @ bm)])


def collatz_steps():
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", u32)
    steps = k.output("steps", u32, count=7)
    i = k.let("i", ir.global_id(0))
    with k.if_(i >= x.len):
        k.ret()
    v = k.let("v", x[i])
    steps[i] = UMAX
    with k.loop("s", 0, 1000) as s:
        with k.if_(v == 1):
            steps[i] = s
            k.ret()
        k.assign(v, ir.select(v % 2 == 0, v / 2, v * 3 + 1))
    xs = [1, 2, 3, 6, 7, 27, 97]

    def count(n: int) -> int:
        s = 0
        while n != 1:
            n, s = (n // 2 if n % 2 == 0 else 3 * n + 1), s + 1
        return s

    return case_of("collatz_steps", k, [arr(u32, xs)], [[count(n) for n in xs]])


CASES = [
    nested_if_else(), loop_per_invocation_bounds(), loop_start_ge_end_runs_zero_times(),
    early_return_in_loop_in_if(), loop_bounds_evaluated_once(), scoped_blocks_and_assign(),
    nested_loops_matmul_i32(), collatz_steps(),
]
