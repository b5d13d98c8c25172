"""u32 and i32 operations: total arithmetic, wrap-around, division edges, shifts, compares."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import MAX, MIN, UMAX, arr, map_case, wrap_i32

u32, i32, b_ = ir.u32, ir.i32, ir.bool_


def _trunc_div(a: int, b: int) -> int:
    """C-style division with the total rules: x / 0 is all ones (-1 as a signed value)."""
    if b == 0:
        return -1
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _trunc_rem(a: int, b: int) -> int:
    return 0 if b == 0 else a - b * _trunc_div(a, b)


def _popcount(values: np.ndarray) -> list[int]:
    return [bin(int(v) & UMAX).count("1") for v in values]


# Bit operations worked out on Python ints, one element at a time (not the backends' way).

def _bits(v: int) -> int:
    return int(v) & UMAX


def _as(dtype: ir.DType, values: list[int]) -> list[int]:
    """32-bit patterns as values of ``dtype`` (i32: two's complement)."""
    return values if dtype is u32 else [v - 2**32 if v >= 2**31 else v for v in values]


def _clz(values: np.ndarray) -> list[int]:
    return [32 - _bits(v).bit_length() for v in values]


def _ctz(values: np.ndarray) -> list[int]:
    return [32 if _bits(v) == 0 else (_bits(v) & -_bits(v)).bit_length() - 1 for v in values]


def _reversed_bits(values: np.ndarray) -> list[int]:
    return [int(f"{_bits(v):032b}"[::-1], 2) for v in values]


def _rotl(values: np.ndarray, counts: np.ndarray) -> list[int]:
    out = []
    for v, n in zip(values, counts, strict=True):
        text = f"{_bits(v):032b}"
        n = int(n) % 32
        out.append(int(text[n:] + text[:n], 2))
    return out


def _mulhi(a: np.ndarray, b: np.ndarray) -> list[int]:
    return [(int(x) * int(y)) >> 32 for x, y in zip(a, b, strict=True)]


def _saturate(dtype: ir.DType, values: list[int]) -> list[int]:
    lo, hi = (0, UMAX) if dtype is u32 else (MIN, MAX)
    return [min(max(v, lo), hi) for v in values]


def _bit_ops(dtype: ir.DType, a: np.ndarray, b: np.ndarray, s: np.ndarray):
    """The bit-counting, rotating, high-multiply and saturating ops of ``dtype``."""
    name = dtype.value
    pairs = list(zip(a.tolist(), b.tolist(), strict=True))
    return map_case(f"{name}_bit_ops", [("a", dtype, a), ("b", dtype, b), ("s", u32, s)], [
        ("clz", dtype, lambda a, b, s: ir.clz(a), _clz(a)),
        ("ctz", dtype, lambda a, b, s: ir.ctz(a), _ctz(a)),
        ("bit_reverse", dtype, lambda a, b, s: ir.bit_reverse(a), _as(dtype, _reversed_bits(a))),
        ("rotl", dtype, lambda a, b, s: ir.rotl(a, s), _as(dtype, _rotl(a, s))),
        ("rotr", dtype, lambda a, b, s: ir.rotr(a, s), _as(dtype, _rotl(a, (32 - s % 32) % 32))),
        ("mulhi", dtype, lambda a, b, s: ir.mulhi(a, b), _mulhi(a, b)),
        ("add_sat", dtype, lambda a, b, s: ir.add_sat(a, b),
         _saturate(dtype, [x + y for x, y in pairs])),
        ("sub_sat", dtype, lambda a, b, s: ir.sub_sat(a, b),
         _saturate(dtype, [x - y for x, y in pairs])),
    ])


def _compares(a: np.ndarray, b: np.ndarray) -> list:
    return [
        ("eq", b_, lambda x, y: x == y, a == b), ("ne", b_, lambda x, y: x != y, a != b),
        ("lt", b_, lambda x, y: x < y, a < b), ("le", b_, lambda x, y: x <= y, a <= b),
        ("gt", b_, lambda x, y: x > y, a > b), ("ge", b_, lambda x, y: x >= y, a >= b),
    ]


UA = arr(u32, [0, 1, 2, 7, 100, 12345, 0x7FFFFFFF, 0x80000000, UMAX, 0xDEADBEEF, 3000000000,
               65536])
UB = arr(u32, [0, 3, 0, 2, 7, 0x10000, 1, UMAX, 2, 0x1234, 4000000000, 65536])
UNZ = np.maximum(UB, 1)
SHIFT = arr(u32, [0, 1, 5, 31, 32, 33, 63, 4, 0xFFFFFFFF, 16, 8, 12])

IA = arr(i32, [0, 1, -1, 7, -7, 100, -100, MIN, MAX, 123456789, -987654321, 46341])
IB = arr(i32, [0, 3, 0, -2, 2, -7, 9, -1, -1, 1000, 3, 46341])
IA64, IB64 = IA.astype(np.int64), IB.astype(np.int64)

CASES = [
    map_case("u32_arith", [("a", u32, UA), ("b", u32, UB)], [
        ("add", u32, lambda a, b: a + b, UA + UB),
        ("sub", u32, lambda a, b: a - b, UA - UB),
        ("mul", u32, lambda a, b: a * b, UA * UB),
        ("div", u32, lambda a, b: a / b, np.where(UB == 0, UMAX, UA // UNZ)),
        ("rem", u32, lambda a, b: a % b, np.where(UB == 0, 0, UA % UNZ)),
        ("min", u32, ir.min, np.minimum(UA, UB)),
        ("max", u32, ir.max, np.maximum(UA, UB)),
        ("select", u32, lambda a, b: ir.select(a > b, a, b + 1), np.where(UA > UB, UA, UB + 1)),
    ]),
    map_case("u32_bitwise_shift", [("a", u32, UA), ("b", u32, UB), ("s", u32, SHIFT)], [
        ("and", u32, lambda a, b, s: a & b, UA & UB),
        ("or", u32, lambda a, b, s: a | b, UA | UB),
        ("xor", u32, lambda a, b, s: a ^ b, UA ^ UB),
        ("shl", u32, lambda a, b, s: a << s, UA << (SHIFT & 31)),
        ("shr", u32, lambda a, b, s: a >> s, UA >> (SHIFT & 31)),
        ("bit_not", u32, lambda a, b, s: ~a, ~UA),
        ("popcount", u32, lambda a, b, s: ir.popcount(a), _popcount(UA)),
        ("abs", u32, lambda a, b, s: abs(a), UA),
    ]),
    map_case("u32_compare", [("a", u32, UA), ("b", u32, UB)], _compares(UA, UB)),
    map_case("i32_arith", [("a", i32, IA), ("b", i32, IB)], [
        ("add", i32, lambda a, b: a + b, wrap_i32(IA64 + IB64)),
        ("sub", i32, lambda a, b: a - b, wrap_i32(IA64 - IB64)),
        ("mul", i32, lambda a, b: a * b, wrap_i32(IA64 * IB64)),
        ("div", i32, lambda a, b: a / b,
         wrap_i32([_trunc_div(int(x), int(y)) for x, y in zip(IA, IB, strict=True)])),
        ("rem", i32, lambda a, b: a % b,
         wrap_i32([_trunc_rem(int(x), int(y)) for x, y in zip(IA, IB, strict=True)])),
        ("min", i32, ir.min, np.minimum(IA, IB)),
        ("max", i32, ir.max, np.maximum(IA, IB)),
        ("neg", i32, lambda a, b: -a, wrap_i32(-IA64)),
        ("abs", i32, lambda a, b: abs(a), wrap_i32(np.abs(IA64))),
        ("select", i32, lambda a, b: ir.select(a < b, a, -b),
         np.where(IA < IB, IA, wrap_i32(-IB64))),
    ]),
    map_case("i32_bitwise_shift", [("a", i32, IA), ("b", i32, IB), ("s", u32, SHIFT)], [
        ("and", i32, lambda a, b, s: a & b, IA & IB),
        ("or", i32, lambda a, b, s: a | b, IA | IB),
        ("xor", i32, lambda a, b, s: a ^ b, IA ^ IB),
        ("shl", i32, lambda a, b, s: a << s, (IA.view(np.uint32) << (SHIFT & 31)).view(np.int32)),
        ("shr", i32, lambda a, b, s: a >> s, IA >> (SHIFT & 31).astype(np.int32)),
        ("bit_not", i32, lambda a, b, s: ~a, ~IA),
        ("popcount", i32, lambda a, b, s: ir.popcount(a), _popcount(IA)),
    ]),
    map_case("i32_compare", [("a", i32, IA), ("b", i32, IB)], _compares(IA, IB)),
    # Hand-worked edge tables from docs/semantics.md.
    map_case("u32_wraparound", [
        ("a", u32, arr(u32, [UMAX, 0, 0x10000, UMAX, 0x80000000])),
        ("b", u32, arr(u32, [1, 1, 0x10000, UMAX, 0x80000000])),
    ], [
        ("add", u32, lambda a, b: a + b, [0, 1, 0x20000, 0xFFFFFFFE, 0]),
        ("sub", u32, lambda a, b: a - b, [0xFFFFFFFE, UMAX, 0, 0, 0]),
        ("mul", u32, lambda a, b: a * b, [UMAX, 0, 0, 1, 0]),
    ]),
    map_case("i32_wraparound", [
        ("a", i32, arr(i32, [MAX, MIN, MIN, 65536, MAX, -1])),
        ("b", i32, arr(i32, [1, 1, MIN, 65536, 2, MIN])),
    ], [
        ("add", i32, lambda a, b: a + b, [MIN, MIN + 1, 0, 131072, MIN + 1, MAX]),
        ("sub", i32, lambda a, b: a - b, [MAX - 1, MAX, 0, 0, MAX - 2, MAX]),
        ("mul", i32, lambda a, b: a * b, [MAX, MIN, 0, 0, -2, MIN]),
        ("neg", i32, lambda a, b: -a, [MIN + 1, MIN, MIN, -65536, MIN + 1, 1]),
        ("abs", i32, lambda a, b: abs(a), [MAX, MIN, MIN, 65536, MAX, 1]),
    ]),
    map_case("u32_div_rem_by_zero", [
        ("a", u32, arr(u32, [7, 0, UMAX, 7, UMAX, 100, 5])),
        ("b", u32, arr(u32, [0, 0, 0, 2, 1, UMAX, 7])),
    ], [
        ("div", u32, lambda a, b: a / b, [UMAX, UMAX, UMAX, 3, UMAX, 0, 0]),
        ("rem", u32, lambda a, b: a % b, [0, 0, 0, 1, 0, 100, 5]),
    ]),
    map_case("i32_div_rem_truncating", [
        ("a", i32, arr(i32, [7, -7, 7, -7, 5, -5, 0, MIN, MIN, MIN, MAX, -1])),
        ("b", i32, arr(i32, [2, 2, -2, -2, 0, 0, 0, -1, 1, 0, -1, MIN])),
    ], [
        ("div", i32, lambda a, b: a / b, [3, -3, -3, 3, -1, -1, -1, MIN, MIN, -1, -MAX, 0]),
        ("rem", i32, lambda a, b: a % b, [1, -1, 1, -1, 0, 0, 0, 0, 0, 0, 0, -1]),
    ]),
    map_case("shift_amount_masked", [
        ("x", u32, arr(u32, [1, 1, 1, 0x80000000, 0xF0, 0xF0, 0xDEADBEEF, UMAX])),
        ("s", u32, arr(u32, [31, 32, 33, 31, 36, 64, 0, 63])),
        ("y", i32, arr(i32, [-8, -8, -1, MIN, MIN, 1, 0x40000000, -16])),
        ("t", u32, arr(u32, [1, 33, 31, 31, 32, 31, 1, 36])),
    ], [
        ("u_shl", u32, lambda x, s, y, t: x << s,
         [0x80000000, 1, 2, 0, 0xF00, 0xF0, 0xDEADBEEF, 0x80000000]),
        ("u_shr", u32, lambda x, s, y, t: x >> s, [0, 1, 0, 1, 0xF, 0xF0, 0xDEADBEEF, 1]),
        ("i_shl", i32, lambda x, s, y, t: y << t, [-16, -16, MIN, 0, MIN, MIN, MIN, -256]),
        ("i_shr", i32, lambda x, s, y, t: y >> t, [-4, -4, -1, -1, MIN, 0, 0x20000000, -1]),
        ("u_shl_lit33", u32, lambda x, s, y, t: x << 33,
         [2, 2, 2, 0, 0x1E0, 0x1E0, 0xBD5B7DDE, 0xFFFFFFFE]),
        ("i_shr_lit32", i32, lambda x, s, y, t: y >> 32,
         [-8, -8, -1, MIN, MIN, 1, 0x40000000, -16]),
    ]),
    map_case("int_unary_edges", [
        ("x", u32, arr(u32, [0, 1, UMAX, 0x80000000, 0xF0F0F0F0, 0x12345678])),
        ("y", i32, arr(i32, [0, -1, MIN, MAX, -2, 255])),
    ], [
        ("u_popcount", u32, lambda x, y: ir.popcount(x), [0, 1, 32, 1, 16, 13]),
        ("i_popcount", i32, lambda x, y: ir.popcount(y), [0, 32, 1, 31, 31, 8]),
        ("u_bit_not", u32, lambda x, y: ~x,
         [UMAX, 0xFFFFFFFE, 0, 0x7FFFFFFF, 0x0F0F0F0F, 0xEDCBA987]),
        ("i_bit_not", i32, lambda x, y: ~y, [-1, 0, MAX, MIN, 1, -256]),
        ("u_abs", u32, lambda x, y: abs(x), [0, 1, UMAX, 0x80000000, 0xF0F0F0F0, 0x12345678]),
        ("i_abs", i32, lambda x, y: abs(y), [0, 1, MIN, MAX, 2, 255]),
        ("i_neg", i32, lambda x, y: -y, [0, 1, MIN, MIN + 1, 2, -255]),
    ]),
    _bit_ops(u32, UA, UB, SHIFT),
    _bit_ops(i32, IA, IB, SHIFT),
    map_case("bit_ops_edges", [
        ("x", u32, arr(u32, [0, 1, UMAX, 0x80000000, 0x00010000, 3])),
        ("y", i32, arr(i32, [0, -1, MIN, MAX, 1, -2])),
    ], [
        ("u_clz", u32, lambda x, y: ir.clz(x), [32, 31, 0, 0, 15, 30]),
        ("u_ctz", u32, lambda x, y: ir.ctz(x), [32, 0, 0, 31, 16, 0]),
        ("i_clz", i32, lambda x, y: ir.clz(y), [32, 0, 0, 1, 31, 0]),
        ("i_ctz", i32, lambda x, y: ir.ctz(y), [32, 0, 31, 0, 0, 1]),
        ("u_rev", u32, lambda x, y: ir.bit_reverse(x), [0, 0x80000000, UMAX, 1, 0x8000,
                                                        0xC0000000]),
        ("i_rev", i32, lambda x, y: ir.bit_reverse(y), [0, -1, 1, -2, MIN, 0x7FFFFFFF]),
        ("u_mulhi_self", u32, lambda x, y: ir.mulhi(x, x), [0, 0, 0xFFFFFFFE, 0x40000000, 1, 0]),
        ("i_mulhi_self", i32, lambda x, y: ir.mulhi(y, y), [0, 0, 0x40000000, 0x3FFFFFFF, 0,
                                                            0]),
        ("u_add_sat", u32, lambda x, y: ir.add_sat(x, x), [0, 2, UMAX, UMAX, 0x20000, 6]),
        ("i_add_sat", i32, lambda x, y: ir.add_sat(y, y), [0, -2, MIN, MAX, 2, -4]),
        ("u_sub_sat", u32, lambda x, y: ir.sub_sat(x, 2), [0, 0, UMAX - 2, 0x7FFFFFFE, 0xFFFE,
                                                           1]),
        ("i_sub_sat", i32, lambda x, y: ir.sub_sat(y, 2), [-2, -3, MIN, MAX - 2, -1, -4]),
    ]),
]
