"""Atomics: contended final states (histogram, add/sub/min/max/and/or/xor on u32 and i32),
uncontended returned values (every op, exchange, compare_exchange), out-of-bounds atomics.
Values returned under contention are order-dependent and never asserted."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import MAX, MIN, UMAX, arr, case_of, wrap_i32

u32, i32, b_ = ir.u32, ir.i32, ir.bool_
OPS = ("add", "sub", "min", "max", "and", "or", "xor")


def atomic_histogram_contended():
    bins = 10
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", u32)
    hist = k.output("hist", u32, count=bins)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        hist.atomic_add(x[i], 1)        # values >= bins are out of bounds: dropped
    xs = (np.arange(500) * 7 + np.arange(500) // 13) % 12
    return case_of("atomic_histogram_contended", k, [arr(u32, xs)],
                   [np.bincount(xs[xs < bins], minlength=bins)], grid=(8,))


def _apply(op: str, old: int, v: int) -> int:
    """One atomic op on Python ints (the caller wraps to 32 bits)."""
    return {"add": old + v, "sub": old - v, "min": min(old, v), "max": max(old, v),
            "and": old & v, "or": old | v, "xor": old ^ v}[op]


def _final_state(name: str, dtype: ir.DType, init: list[int], values: np.ndarray):
    """Every invocation applies every op to one shared slot per op."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", dtype)
    state = k.read_write("state", dtype, count=len(OPS))
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        v = k.let("v", x[i])
        for slot, op in enumerate(OPS):
            state.atomic(op, slot, v)
    final = list(init)
    for v in values.tolist():
        final = [_apply(op, s, v) for op, s in zip(OPS, final, strict=True)]
    wrapped = [s % 2**32 for s in final] if dtype is u32 else wrap_i32(final)
    grid = (-(-len(values) // 64),)     # the 7-slot output alone would infer one workgroup
    return case_of(name, k, [arr(dtype, values), arr(dtype, init)], [wrapped], grid=grid)


def _returns_old(name: str, dtype: ir.DType, init: list[int], operands: list[int]):
    """Each invocation runs every op in turn on its own slot: returned values are exact."""
    k = ir.Kernel(workgroup=(64,))
    state = k.read_write("state", dtype)
    olds = k.output("olds", dtype, count=len(init) * len(OPS))
    i = k.let("i", ir.global_id(0))
    with k.if_(i < state.len):
        for n, (op, operand) in enumerate(zip(OPS, operands, strict=True)):
            old = state.atomic(op, i, ir.lit(operand, dtype), name=f"old_{op}")
            olds[i * len(OPS) + n] = old
    expected_olds, finals = [], []
    for s in init:
        for op, operand in zip(OPS, operands, strict=True):
            expected_olds.append(s)
            s = _apply(op, s, operand)
            s = s % 2**32 if dtype is u32 else int(wrap_i32([s])[0])
        finals.append(s)
    return case_of(name, k, [arr(dtype, init)], [finals, expected_olds])


def atomic_exchange_uncontended():
    k = ir.Kernel(workgroup=(64,))
    state = k.read_write("state", u32)
    olds = k.output("olds", u32, count=5)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < state.len):
        olds[i] = state.atomic("exchange", i, i * 7 + 1)
    return case_of("atomic_exchange_uncontended", k, [arr(u32, [10, 20, 30, 40, 50])],
                   [[1, 8, 15, 22, 29], [10, 20, 30, 40, 50]])


def atomic_compare_exchange_uncontended():
    k = ir.Kernel(workgroup=(64,))
    state = k.read_write("state", i32)
    guess = k.read("guess", i32)
    olds = k.output("olds", i32, count=6)
    swapped = k.output("swapped", b_, count=6)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < state.len):
        old = state.atomic("compare_exchange", i, i.cast(i32) * -10 - 1, comparand=guess[i])
        olds[i] = old
        swapped[i] = old == guess[i]
    init = [5, -6, 7, -8, 9, MIN]
    return case_of("atomic_compare_exchange_uncontended", k,
                   [arr(i32, init), arr(i32, [5, 6, 7, -8, 0, MIN])],
                   [[-1, -6, -21, -31, 9, -51], init, [1, 0, 1, 1, 0, 1]])


def atomic_out_of_bounds():
    k = ir.Kernel(workgroup=(64,))
    state = k.read_write("state", u32, count=4)
    olds = k.output("olds", u32, count=12)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < 4):
        far = k.let("far", i + state.len)
        olds[i * 3] = state.atomic_add(far, 10) + 7
        olds[i * 3 + 1] = state.atomic("exchange", far, 99) + 7
        olds[i * 3 + 2] = state.atomic("compare_exchange", far, 5, comparand=0) + 7
    return case_of("atomic_out_of_bounds", k, [arr(u32, [1, 2, 3, 4])],
                   [[1, 2, 3, 4], [7] * 12])


U_VALUES = (np.arange(300, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
I_VALUES = U_VALUES.view(np.int32)

CASES = [
    atomic_histogram_contended(),
    _final_state("atomic_final_state_u32", u32, [5, 1000000, UMAX, 0, UMAX, 0, 0xA5A5A5A5],
                 U_VALUES),
    _final_state("atomic_final_state_i32", i32, [-5, 0, MAX, MIN, -1, 0, 0x5A5A5A5A], I_VALUES),
    _returns_old("atomic_returns_old_u32", u32, [3, 100, 0xFFFFFFF0, 0, 0x12345678],
                 [5, 2, 50, 60, 0x100, 0x1F0, 3]),
    _returns_old("atomic_returns_old_i32", i32, [-3, 100, MIN, MAX, 0, -70],
                 [5, 200, -50, 60, 0x100, -16, -1]),
    atomic_exchange_uncontended(), atomic_compare_exchange_uncontended(), atomic_out_of_bounds(),
]
