"""vyre_core.mathlib.fixed, fixed point of u32 limbs (the accurate path of ``atan2``), held
to Python's integers on the reference in this process: addition and subtraction exact
modulo 1, products within their truncation bound, shifts, the magnitude of a two's
complement fraction, a pair's limbs, and the rounding to odd onto a pair (its value's
rounding to 46 bits is the exact value's)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from vyre_core import ir
from vyre_core.mathlib import ff, fixed
from vyre_reference import run

LIMBS = 3
ONE = 1 << (32 * LIMBS)


def drawn(n: int, seed: int) -> list[int]:
    """96-bit integers: any bits, and runs of ones and zeros (carries through every limb)."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 2**32, (n, LIMBS), dtype=np.uint64)
    special = [0, 1, ONE - 1, 1 << 95, (1 << 64) - 1, ((1 << 32) - 1) << 32, 1 << 64]
    return special + [int(a) << 64 | int(b) << 32 | int(c) for a, b, c in words.tolist()]


def limbs_of(values: list[int], n: int = LIMBS) -> np.ndarray:
    """Each value's limbs as a column: shape (n, count), u32."""
    return np.array([[(v >> (32 * (n - 1 - i))) & 0xFFFFFFFF for v in values]
                     for i in range(n)], np.uint32)


def evaluate(build, operands: list[list[int]], n_in: list[int], n_out: int) -> list[int]:
    """``build(k, *fixed operands)`` (each operand's limb count in ``n_in``) over the
    operands, on the reference: the result's limbs read back as integers."""
    count = len(operands[0])
    k = ir.Kernel(workgroup=(64,))
    reads = [[k.read(f"a{j}_{i}", ir.u32) for i in range(n)] for j, n in enumerate(n_in)]
    outs = [k.output(f"out{i}", ir.u32, count) for i in range(n_out)]
    at = k.let("at", ir.global_id())
    values = [tuple(k.let(f"v{j}_{i}", r[at]) for i, r in enumerate(rs))
              for j, rs in enumerate(reads)]
    result = build(k, *values)
    for i, out in enumerate(outs):
        out[at] = result[i]
    arrays = [row for values, n in zip(operands, n_in, strict=True) for row in
              limbs_of(values, n)]
    got = run(k.build(), arrays)
    return [sum(int(got[i][c]) << (32 * (n_out - 1 - i)) for i in range(n_out))
            for c in range(count)]


@pytest.mark.fast
def test_addition_and_subtraction_are_exact_modulo_one():
    a, b = drawn(500, 1), drawn(500, 2)[::-1]
    pairs = list(zip(a, b, strict=True))
    assert evaluate(fixed.add, [a, b], [3, 3], 3) == [(x + y) % ONE for x, y in pairs]
    assert evaluate(fixed.sub, [a, b], [3, 3], 3) == [(x - y) % ONE for x, y in pairs]
    half = [v >> 1 if v >> 95 == 0 else v for v in a]  # two's complement fractions
    want = [ONE - v if v >> 95 else v for v in half]
    assert evaluate(fixed.magnitude, [half], [3], 3) == [w % ONE for w in want]


@pytest.mark.fast
@pytest.mark.parametrize("sizes", [(3, 3, 3), (3, 1, 3), (2, 2, 2), (3, 2, 3), (1, 1, 1)])
def test_products_are_below_the_exact_one_within_their_bound(sizes):
    la, lb, n = sizes
    a = [v >> (32 * (3 - la)) for v in drawn(400, 3)]
    b = [v >> (32 * (3 - lb)) for v in drawn(400, 4)[::-1]]
    got = evaluate(lambda k, x, y: fixed.mul(k, x, y, n), [a, b], [la, lb], n)
    for x, y, g in zip(a, b, got, strict=True):
        exact = Fraction(x * y, 1 << (32 * (la + lb - n)))  # in units of the last limb
        below = exact - g
        assert 0 <= below < 1 + Fraction(la + lb, 1 << 32), (hex(x), hex(y))


@pytest.mark.fast
def test_shifts_move_every_bit():
    a = drawn(300, 5)
    amounts = [i % 100 for i in range(len(a))]
    got = evaluate(lambda k, x, s: fixed.shr(k, x, s[0]), [a, amounts], [3, 1], 3)
    assert got == [v >> s for v, s in zip(a, amounts, strict=True)]
    shifts = [i % 96 for i in range(len(a))]
    got = evaluate(lambda k, x, s: fixed.shl(k, x, s[0]), [a, shifts], [3, 1], 3)
    assert got == [(v << s) % ONE for v, s in zip(a, shifts, strict=True)]
    small = [i % 9 for i in range(len(a))]
    got = evaluate(lambda k, x, s: fixed.shr(k, x, s[0], most=8), [a, small], [3, 1], 3)
    assert got == [v >> s for v, s in zip(a, small, strict=True)]


@pytest.mark.fast
def test_a_pair_becomes_its_limbs_and_limbs_a_pair_rounded_to_odd():
    rng = np.random.default_rng(6)
    hi = rng.uniform(0.5, 1.0, 300).astype(np.float32)
    lo = (hi * rng.uniform(-2.0**-24, 2.0**-24, 300)).astype(np.float32)
    pairs = [int(h) | int(lo_) << 32
             for h, lo_ in zip(hi.view(np.uint32), lo.view(np.uint32), strict=True)]

    def build(k, p):
        value = ff.FF(ir.bitcast(p[1], ir.f32), ir.bitcast(p[0], ir.f32))
        return (*fixed.from_pair(k, value), ir.lit(0, ir.u32))
    got = evaluate(build, [pairs], [2], 3)
    for h, lo_, g in zip(hi, lo, got, strict=True):
        exact = (Fraction(float(h)) + Fraction(float(lo_))) * (1 << 64)
        assert 0 <= exact - Fraction(g >> 32) < 1
    a = drawn(300, 7)[1:]  # (nonzero)

    def rounded(k, x, e):
        pair, scale = fixed.to_pair(k, x, ir.bitcast(e[0], ir.i32))
        return (ir.bitcast(pair.hi, ir.u32), ir.bitcast(pair.lo, ir.u32),
                ir.bitcast(scale, ir.u32))
    exponents = [(-96 - i) % (1 << 32) for i in range(len(a))]
    got = evaluate(rounded, [a, exponents], [3, 1], 3)
    for v, e, g in zip(a, exponents, got, strict=True):
        hi_, lo_, scale = (g >> 64, (g >> 32) & 0xFFFFFFFF, g & 0xFFFFFFFF)
        pair = (Fraction(float(np.uint32(hi_).view(np.float32)))
                + Fraction(float(np.uint32(lo_).view(np.float32))))
        pair *= Fraction(2) ** int(np.uint32(scale).view(np.int32))
        exact = Fraction(v) * Fraction(2) ** int(np.uint32(e).view(np.int32))
        quantum = Fraction(2) ** (v.bit_length() - 46 + int(np.uint32(e).view(np.int32)))
        assert pair // quantum == exact // quantum  # the same 46 leading bits
        assert (pair % quantum == 0) == (exact % quantum == 0)  # and the same exactness
