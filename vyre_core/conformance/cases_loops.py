"""Loops beyond ``for`` by one: steps (up to 2**32-1, near the top of the u32 range,
where a wrapping counter would run forever), while loops that end by their condition and
by their bound, break and continue per invocation and in nested loops, a few invocations
looping long after the rest have left, and barriers in loops that every invocation
leaves together."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import UMAX, arr, case_of

u32 = ir.u32
STEPS = (1, 2, 7, 2**31, UMAX)
#: (start, end) pairs of at most a few dozen passes at step 1, most near the top of u32.
BOUNDS = [(0, 10), (3, 3), (10, 0), (UMAX - 5, UMAX), (UMAX - 20, UMAX - 1), (UMAX - 1, UMAX),
          (5, 6), (UMAX, UMAX)]
#: Steps that cross the whole u32 range in a few passes.
WIDE_STEPS = (2**30, 2**31, 2**31 + 1, UMAX - 1, UMAX)


def _passes(lo: int, hi: int, step: int) -> tuple[int, int]:
    """(sum of the variable's values mod 2**32, pass count) of one stride loop."""
    values = range(lo, hi, step)
    return sum(values) % 2**32, len(values)


def stride_loops_near_the_top_of_u32():
    k = ir.Kernel(workgroup=(64,))
    lo, hi = k.read("lo", u32), k.read("hi", u32)
    outs = [(k.output(f"sum{n}", u32, count=len(BOUNDS)),
             k.output(f"passes{n}", u32, count=len(BOUNDS))) for n in range(len(STEPS))]
    i = k.let("i", ir.global_id(0))
    with k.if_(i < lo.len):
        for n, step in enumerate(STEPS):
            acc, count = k.let(f"acc{n}", ir.u32(0)), k.let(f"count{n}", ir.u32(0))
            with k.loop(f"j{n}", lo[i], hi[i], step=step) as j:
                k.assign(acc, acc + j)
                k.assign(count, count + 1)
            outs[n][0][i], outs[n][1][i] = acc, count
    los, his = [b[0] for b in BOUNDS], [b[1] for b in BOUNDS]
    expected = []
    for step in STEPS:
        found = [_passes(a, b, step) for a, b in BOUNDS]
        expected += [[s for s, _ in found], [c for _, c in found]]
    return case_of("stride_loops_near_the_top_of_u32", k, [arr(u32, los), arr(u32, his)],
                   expected)


def stride_loops_across_the_whole_u32_range():
    k = ir.Kernel(workgroup=(4,))
    lo = k.read("lo", u32)
    outs = [k.output(f"passes{n}", u32, count=3) for n in range(len(WIDE_STEPS))]
    i = k.let("i", ir.global_id(0))
    with k.if_(i < lo.len):
        for n, step in enumerate(WIDE_STEPS):
            count = k.let(f"count{n}", ir.u32(0))
            with k.loop(f"j{n}", lo[i], UMAX, step=step):
                k.assign(count, count + 1)
            outs[n][i] = count
    los = [0, 1, 2**31]
    return case_of("stride_loops_across_the_whole_u32_range", k, [arr(u32, los)],
                   [[len(range(a, UMAX, step)) for a in los] for step in WIDE_STEPS])


def _constant_step_kernel() -> ir.Kernel:
    k = ir.Kernel(workgroup=(8,))
    step = k.constant("STEP", u32, 3, low=1)
    out = k.output("out", u32, count=8)
    i = k.let("i", ir.global_id(0))
    count = k.let("count", ir.u32(0))
    with k.loop("j", i, 40, step=step):
        k.assign(count, count + 1)
    out[i] = count
    return k


def stride_loop_with_a_constant_step():
    return case_of("stride_loop_with_a_constant_step", _constant_step_kernel(), [],
                   [[len(range(i, 40, 3)) for i in range(8)]])


def stride_loop_with_the_largest_constant_step():
    return case_of("stride_loop_with_the_largest_constant_step", _constant_step_kernel(), [],
                   [[1] * 8], constants={"STEP": UMAX})


def while_ends_by_condition_or_bound():
    """Collatz: the loop ends when v reaches 1, or after BOUND passes (27 needs 111)."""
    bound = 100
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", u32)
    steps, last = k.output("steps", u32, count=6), k.output("last", u32, count=6)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        v, n = k.let("v", x[i]), k.let("n", ir.u32(0))
        with k.while_(v != 1, max_trips=bound):
            k.assign(v, ir.select(v % 2 == 0, v / 2, v * 3 + 1))
            k.assign(n, n + 1)
        steps[i], last[i] = n, v
    xs = [1, 2, 3, 7, 27, 97]
    want_steps, want_last = [], []
    for value in xs:
        count = 0
        while value != 1 and count < bound:
            value, count = (value // 2 if value % 2 == 0 else 3 * value + 1), count + 1
        want_steps.append(count)
        want_last.append(value)
    return case_of("while_ends_by_condition_or_bound", k, [arr(u32, xs)],
                   [want_steps, want_last])


def break_and_continue_per_invocation():
    """Each invocation skips multiples of its m, stops past its limit; the inner loop's
    break leaves only the inner loop; a continue that skips a while loop's increment
    runs it to its bound."""
    k = ir.Kernel(workgroup=(64,))
    m, limit = k.read("m", u32), k.read("limit", u32)
    flat, nested, spun = (k.output(name, u32, count=6) for name in ("flat", "nested", "spun"))
    i = k.let("i", ir.global_id(0))
    with k.if_(i < m.len):
        acc = k.let("acc", ir.u32(0))
        with k.loop("j", 0, 50) as j:
            with k.if_(j % m[i] == 0):
                k.continue_()
            with k.if_(j > limit[i]):
                k.break_()
            k.assign(acc, acc + j)
        flat[i] = acc
        pairs = k.let("pairs", ir.u32(0))
        with k.loop("a", 0, 6) as a, k.loop("b", 0, 6) as b:
            with k.if_(b > a + m[i]):
                k.break_()
            k.assign(pairs, pairs + 1)
        nested[i] = pairs
        n, passes = k.let("n", ir.u32(0)), k.let("passes", ir.u32(0))
        with k.while_(n < 4, max_trips=9):
            k.assign(passes, passes + 1)
            with k.if_(n == m[i]):
                k.continue_()  # (n stays at m: the loop spins to its bound)
            k.assign(n, n + 1)
        spun[i] = passes
    ms, limits = [1, 2, 3, 5, 7, 60], [0, 10, 20, 49, 3, 100]

    def flat_sum(mm: int, lim: int) -> int:
        total = 0
        for j in range(50):
            if j % mm == 0:
                continue
            if j > lim:
                break
            total += j
        return total

    def pair_count(mm: int) -> int:
        return sum(min(6, a + mm + 1) for a in range(6))

    def spin(mm: int) -> int:
        n = count = 0
        while n < 4 and count < 9:
            count += 1
            if n == mm:
                continue
            n += 1
        return count

    return case_of("break_and_continue_per_invocation", k,
                   [arr(u32, ms), arr(u32, limits)],
                   [[flat_sum(a, b) for a, b in zip(ms, limits, strict=True)],
                    [pair_count(a) for a in ms], [spin(a) for a in ms]])


def few_invocations_loop_long_after_the_rest_leave():
    """Invocation 5 of 256 loops 3,000 passes and 77 loops 1,000, the rest leave at their
    third pass: a backend that runs lanes side by side goes on with those two alone."""
    lanes = 256
    k = ir.Kernel(workgroup=(64,))
    out = k.output("out", u32, count=lanes)
    i = k.let("i", ir.global_id(0))
    limit = k.let("limit", ir.select(i == 5, ir.u32(3000), ir.select(i == 77, ir.u32(1000),
                                                                      ir.u32(3))))
    acc = k.let("acc", ir.u32(0))
    with k.loop("j", 0, 4000) as j:
        with k.if_(j >= limit):
            k.break_()
        with k.if_(j % 3 == 1):
            k.continue_()
        k.assign(acc, acc + j * i)
    out[i] = acc
    want = [sum(j * n for j in range(3000 if n == 5 else 1000 if n == 77 else 3) if j % 3 != 1)
            % 2**32 for n in range(lanes)]
    return case_of("few_invocations_loop_long_after_the_rest_leave", k, [], [want],
                   grid=(lanes // 64,))


def barrier_in_loops_with_jumps_every_invocation_takes():
    """Each pass hands every invocation's value to its left neighbour through workgroup
    memory. A while loop runs to its bound (its condition is always true), a continue in
    a block ending each pass; two loops of 8 passes break at the end of their first (one
    from two blocks deep). Jumps every invocation takes keep the loop uniform, so its
    barriers are allowed."""
    rounds, wg = 5, 16
    k = ir.Kernel(workgroup=(wg,))
    x = k.read("x", u32)
    out = k.output("out", u32, count=2 * wg)
    shared = k.workgroup_buffer("shared", u32, wg)
    lid = k.let("lid", ir.local_id(0))
    v = k.let("v", x[ir.global_id(0)])

    def hand_left() -> None:
        shared[lid] = v
        k.barrier()
        k.assign(v, shared[(lid + 1) % wg])
        k.barrier()

    with k.while_(ir.lit(True), max_trips=rounds):
        hand_left()
        with k.block():
            k.continue_()
    with k.loop("r", 0, 8):
        hand_left()
        k.break_()
    with k.loop("q", 0, 8):
        hand_left()
        with k.block(), k.block():
            k.break_()
    out[ir.global_id(0)] = v
    xs = np.arange(2 * wg, dtype=np.uint32) * 3 + 1
    want = [xs[g * wg + (lane + rounds + 2) % wg] for g in range(2) for lane in range(wg)]
    return case_of("barrier_in_loops_with_jumps_every_invocation_takes", k, [xs], [want],
                   grid=(2,))


CASES = [
    stride_loops_near_the_top_of_u32(), stride_loops_across_the_whole_u32_range(),
    stride_loop_with_a_constant_step(),
    stride_loop_with_the_largest_constant_step(), while_ends_by_condition_or_bound(),
    break_and_continue_per_invocation(), few_invocations_loop_long_after_the_rest_leave(),
    barrier_in_loops_with_jumps_every_invocation_takes(),
]
