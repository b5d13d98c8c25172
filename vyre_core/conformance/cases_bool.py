"""bool values: logic ops, buffers stored as u32 words (any non-zero word loads as true),
and select on every core type."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import MIN, arr, case_of, map_case

u32, i32, f32, b_ = ir.u32, ir.i32, ir.f32, ir.bool_

# Raw words: 5 & 2 is 0 as integers but true & true as bools.
A_WORDS = arr(u32, [0, 0, 1, 1, 5, 0, 7])
B_WORDS = arr(u32, [0, 1, 0, 1, 2, 0x80000000, 1])
A, B = A_WORDS != 0, B_WORDS != 0


def _bool_words_case():
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", b_)
    rw = k.read_write("rw", b_)
    copy = k.output("copy", b_, count=6)
    as_u32 = k.output("as_u32", u32, count=6)
    inverted = k.output("inverted", b_, count=6)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        copy[i] = x[i]
        as_u32[i] = x[i].cast(u32)
        inverted[i] = ~x[i]
        rw[i] = ~rw[i]
    words = arr(u32, [0, 1, 7, 0xFFFFFFFF, 2, 0])
    rw_words = arr(u32, [3, 0, 1, 0x100, 0, 0x80000000])
    return case_of("bool_buffer_words", k, [words, rw_words], [
        [0, 1, 0, 0, 1, 0],        # rw: not of (true, false, true, true, false, true)
        [0, 1, 1, 1, 1, 0],        # copy: stores write 1 or 0
        [0, 1, 1, 1, 1, 0],        # as_u32
        [1, 0, 0, 0, 0, 1],        # inverted
    ])


C = arr(u32, [0, 1, 9, 0, 0x80000000])
SEL_U = arr(u32, [1, 2, 3, 4, 5]), arr(u32, [10, 20, 30, 40, 50])
SEL_I = arr(i32, [-1, -2, MIN, 4, 5]), arr(i32, [7, 8, 9, -10, 11])
SEL_F = arr(f32, [0.5, -1.5, 2.25, 3.0, 4.0]), arr(f32, [-0.5, 1.5, -2.25, -3.0, -4.0])
COND = C != 0

CASES = [
    map_case("bool_logic_ops", [("a", b_, A_WORDS), ("b", b_, B_WORDS)], [
        ("and", b_, lambda a, b: a & b, A & B),
        ("or", b_, lambda a, b: a | b, A | B),
        ("xor", b_, lambda a, b: a ^ b, A ^ B),
        ("eq", b_, lambda a, b: a == b, A == B),
        ("ne", b_, lambda a, b: a != b, A != B),
        ("logical_and", b_, ir.logical_and, A & B),
        ("logical_or", b_, ir.logical_or, A | B),
        ("not", b_, lambda a, b: ir.logical_not(a), ~A),
        ("not_op", b_, lambda a, b: ~b, ~B),
        ("select", b_, lambda a, b: ir.select(a, b, ~b), np.where(A, B, ~B)),
    ]),
    _bool_words_case(),
    map_case("select_core_types", [
        ("c", b_, C), ("ua", u32, SEL_U[0]), ("ub", u32, SEL_U[1]), ("ia", i32, SEL_I[0]),
        ("ib", i32, SEL_I[1]), ("fa", f32, SEL_F[0]), ("fb", f32, SEL_F[1]),
    ], [
        ("u", u32, lambda c, ua, ub, ia, ib, fa, fb: ir.select(c, ua, ub),
         np.where(COND, *SEL_U)),
        ("i", i32, lambda c, ua, ub, ia, ib, fa, fb: ir.select(c, ia, ib),
         np.where(COND, *SEL_I)),
        ("f", f32, lambda c, ua, ub, ia, ib, fa, fb: ir.select(c, fa, fb),
         np.where(COND, *SEL_F)),
        ("b", b_, lambda c, ua, ub, ia, ib, fa, fb: ir.select(~c, ia < ib, fa < fb),
         np.where(~COND, SEL_I[0] < SEL_I[1], SEL_F[0] < SEL_F[1])),
        ("lit", i32, lambda c, ua, ub, ia, ib, fa, fb: ir.select(c, ir.i32(-5), ir.i32(6)),
         np.where(COND, -5, 6)),
    ]),
]
