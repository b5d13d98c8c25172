"""Float-float arithmetic in the IR (docs/design-42.md, section 2.2).

A float-float value is a pair ``hi + lo`` of one float type, normalized: ``hi`` is the
sum rounded to the type, so ``|lo| <= ulp(hi) / 2``. An f32 pair carries 48 bits of
significand with f32's exponent range: what a correctly rounded f32 function needs on a
backend without f64 (wgpu).

Every block is a fixed sequence of the IR's basic operations (each rounded once, to
nearest even, on every backend), and binds what it makes with ``let``: a value used twice
is computed once, and the roundings are the written ones everywhere. The error-free
transforms are exact while nothing overflows and, for ``two_prod``, while the product's
error is not below the normal range (``|a * b| >= 2^-102`` in f32); the operations on
pairs have the relative errors their docstrings name, under the same conditions
(Joldes, Muller and Popescu, "Tight and rigorous error bounds for basic building blocks
of double-word arithmetic", 2017, for the algorithms). tests/test_mathlib_ff.py holds each
to its rule against exact rationals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select
from vyre_core.ir.nodes import Lit
from vyre_core.ir.values import Operand, Val, as_val, bitcast, cast, lit


@dataclass(frozen=True)
class FF:
    """``hi + lo``, normalized: ``hi`` is the sum rounded to their type."""

    hi: Val
    lo: Val


def let(k: Kernel, value: Val) -> Val:
    """``value`` bound to a fresh variable of ``k``: computed once, read as often as
    needed (every function of the library binds what it makes so)."""
    return k.let(k.fresh_name("m"), value)


def from_bits(bits: list[int]) -> np.ndarray:
    """The f32 values of these bit patterns: how the library writes its constants (exact,
    whatever Python's float parsing)."""
    return np.array(bits, np.uint32).view(np.float32)


def fast_two_sum(k: Kernel, a: Operand, b: Operand) -> FF:
    """``a + b`` exactly, as a pair, for ``|a| >= |b|`` (or ``a`` zero): 3 operations."""
    s = let(k, as_val(a) + b)
    return FF(s, let(k, b - (s - a)))


def two_sum(k: Kernel, a: Operand, b: Operand) -> FF:
    """``a + b`` exactly, as a pair, whatever their magnitudes (Knuth): 6 operations."""
    s = let(k, as_val(a) + b)
    b_part = let(k, s - a)
    return FF(s, let(k, (a - (s - b_part)) + (b - b_part)))


def split(k: Kernel, a: Operand) -> FF:
    """``a`` as ``hi + lo`` with each half short enough that the product of two halves is
    exact: f32 by clearing the low 12 significand bits (12 + 12 bits, no overflow for any
    finite ``a``); f64 by Veltkamp's method (26 + 26 bits, for ``|a| < 2^996``)."""
    v = as_val(a)
    if isinstance(v.node, Lit) and v.dtype in (DType.F32, DType.F64):
        return _split_constant(v.node)
    if v.dtype is DType.F32:
        hi = let(k, bitcast(bitcast(v, DType.U32) & 0xFFFFF000, DType.F32))
    elif v.dtype is DType.F64:
        c = let(k, v * lit(2.0**27 + 1, DType.F64))
        hi = let(k, c - (c - v))
    else:
        raise TypeError(f"split of a {v.dtype}: float-float arithmetic is written for f32 "
                        "and f64. Fix: compute in f32 and round the result to f16 with "
                        "round_ff(..., ir.f16)")
    return FF(hi, let(k, v - hi))


def _split_constant(c: Lit) -> FF:
    """``split`` of a literal, made here by the same operations, rounded the same way
    (numpy's f32 and f64 are IEEE's): the same halves, without their operations in
    every program."""
    if c.dtype is DType.F32:
        v = np.uint32(c.bits).view(np.float32)
        hi = np.uint32(c.bits & 0xFFFFF000).view(np.float32)
        return FF(lit(hi, DType.F32), lit(np.float32(v - hi), DType.F32))
    v = np.uint64(c.bits).view(np.float64)
    scaled = v * np.float64(2.0**27 + 1)
    hi = scaled - (scaled - v)
    return FF(lit(hi, DType.F64), lit(v - hi, DType.F64))


def two_prod(k: Kernel, a: Operand, b: Operand) -> FF:
    """``a * b`` exactly, as a pair (Dekker; no fused multiply-add, which the IR does not
    promise: docs/semantics.md): 17 operations."""
    p = let(k, as_val(a) * b)
    x, y = split(k, a), split(k, b)
    err = (((x.hi * y.hi - p) + x.hi * y.lo) + x.lo * y.hi) + x.lo * y.lo
    return FF(p, let(k, err))


def add_float(k: Kernel, x: FF, y: Operand) -> FF:
    """``x + y`` for a pair and a float, relative error at most ``2u^2`` (``u`` the unit
    roundoff, 2^-24 in f32)."""
    s = two_sum(k, x.hi, y)
    return fast_two_sum(k, s.hi, x.lo + s.lo)


def add(k: Kernel, x: FF, y: FF) -> FF:
    """``x + y``, relative error at most ``3u^2 / (1 - 4u)``, cancellation included."""
    s = two_sum(k, x.hi, y.hi)
    t = two_sum(k, x.lo, y.lo)
    v = fast_two_sum(k, s.hi, s.lo + t.hi)
    return fast_two_sum(k, v.hi, t.lo + v.lo)


def mul_float(k: Kernel, x: FF, y: Operand) -> FF:
    """``x * y`` for a pair and a float, relative error at most ``3u^2``."""
    c = two_prod(k, x.hi, y)
    return fast_two_sum(k, c.hi, c.lo + x.lo * y)


def mul(k: Kernel, x: FF, y: FF) -> FF:
    """``x * y``, relative error at most ``7u^2``."""
    c = two_prod(k, x.hi, y.hi)
    cross = x.hi * y.lo + x.lo * y.hi
    return fast_two_sum(k, c.hi, c.lo + cross)


def div(k: Kernel, x: FF, y: FF) -> FF:
    """``x / y``, relative error at most ``16u^2``: the quotient of the high parts,
    then the remainder ``x - q * y`` (exact in its leading part) divided once more."""
    q = let(k, x.hi / y.hi)
    r = mul_float(k, y, q)
    rest = (x.hi - r.hi) + (x.lo - r.lo)
    return fast_two_sum(k, q, rest / y.hi)


#: The formats ``round_ff`` rounds to: significand bits (the hidden one included), the
#: least normal exponent, exponent bits.
_FORMATS = {DType.F32: (24, -126, 8), DType.F16: (11, -14, 5)}


def round_ff(k: Kernel, x: FF, scale: Operand = 0, dtype: DType = DType.F32) -> Val:
    """``2^scale * (hi + lo)`` rounded once to ``dtype`` (f32 or f16), to nearest, ties to
    even: subnormal results on the format's own grid and overflow to infinity included,
    and the f16 result built from integers (no float conversion, whose rounding WGSL
    leaves to the device). ``x`` is a normalized f32 pair with ``hi`` finite (zero and
    subnormal included); ``scale`` any i32 (past +-1000 every such pair gives 0 or
    infinity, and it is taken as +-1000).

    Each part is read as its integer significand and scaled by powers of two onto the
    integer grid of the result's quantum (``H`` from ``hi``, ``L`` from ``lo``, both
    exactly, and no subnormal float is ever multiplied, so a device that flushes them
    gives the same). ``H`` is rounded to an integer, and ``L`` moves that integer only
    where ``H`` lies on or next to a midpoint: where ``H`` is one, ``lo``'s sign decides
    (``L`` itself may have underflowed), and where ``H + L`` is exactly one, the even
    neighbour is taken."""
    if x.hi.dtype is not DType.F32 or dtype not in _FORMATS:
        raise TypeError(f"round_ff rounds an f32 pair to f32 or f16, not a {x.hi.dtype} "
                        f"pair to {dtype}. Fix: compute the pair in f32")
    p, emin, ebits = _FORMATS[dtype]
    bias, inf_exponent = (1 << (ebits - 1)) - 1, (1 << ebits) - 1
    bits, lo_bits = let(k, bitcast(x.hi, DType.U32)), let(k, bitcast(x.lo, DType.U32))
    scale = let(k, ir.min(ir.max(as_val(scale, DType.I32), -1000), 1000))
    hi_m, hi_e = _significand(k, bits)
    lead = lit(31, DType.I32) - cast(ir.clz(hi_m), DType.I32)
    target = let(k, ir.max(lead + hi_e + scale, lit(emin, DType.I32)))
    shift = let(k, scale - target + (p - 1))  # (2^shift puts the result's quantum at 1)
    big = let(k, _scaled(k, hi_m, shift + hi_e))
    lo_m, lo_e = _significand(k, lo_bits)
    same = let(k, ((bits ^ lo_bits) & 0x80000000) == 0)
    size = let(k, _scaled(k, lo_m, shift + lo_e))
    little = let(k, select(same, size, -size))
    has_lo = let(k, lo_m != 0)
    nearest = let(k, ir.round(big))
    off = let(k, big - nearest)
    up_to, down_to = let(k, 0.5 - off), let(k, -0.5 - off)
    odd = let(k, (cast(nearest, DType.U32) & 1) == 1)
    up = select(up_to == 0.0, ir.logical_and(has_lo, same), ir.logical_or(
        little > up_to, ir.logical_and(little == up_to, odd)))
    down = select(down_to == 0.0, ir.logical_and(has_lo, ir.logical_not(same)), ir.logical_or(
        little < down_to, ir.logical_and(little == down_to, odd)))
    n = let(k, cast(select(big < 0.5, lit(0.0), select(
        up, nearest + 1.0, select(down, nearest - 1.0, nearest))), DType.U32))
    biased = let(k, ir.min(target + bias, lit(inf_exponent, DType.I32)))
    magnitude = select(n == 0, lit(0, DType.U32),
                       select(biased >= inf_exponent, lit(inf_exponent << (p - 1), DType.U32),
                              (cast(biased - 1, DType.U32) << (p - 1)) + n))
    if dtype is DType.F32:
        return bitcast(magnitude | (bits & 0x80000000), DType.F32)
    return bitcast(cast(magnitude | ((bits >> 16) & 0x8000), DType.U16), DType.F16)


def decided(k: Kernel, x: FF, err: Operand, scale: Operand = 0,
            dtype: DType = DType.F32) -> Val:
    """Whether every value within ``err`` of ``x`` rounds as ``x`` does (``round_ff``):
    where it holds, ``round_ff(x)`` is the correctly rounded result of any true value
    ``x`` is that close to (CORE-MATH's rounding test). ``err`` is f32, non-negative, far
    below ``|hi|``, and bounds the error plus the rounding of ``lo +- err`` (2^-24 of
    the larger of the two)."""
    below = round_ff(k, fast_two_sum(k, x.hi, x.lo - err), scale, dtype)
    above = round_ff(k, fast_two_sum(k, x.hi, x.lo + err), scale, dtype)
    bits = DType.U32 if dtype is DType.F32 else DType.U16
    return bitcast(below, bits) == bitcast(above, bits)


def _significand(k: Kernel, bits: Val) -> tuple[Val, Val]:
    """An f32's magnitude as ``m * 2^e``: its integer significand (the hidden one included
    where it is normal; 0 for zero) and the exponent of its last bit."""
    biased = let(k, (bits >> 23) & 0xFF)
    m = let(k, select(biased == 0, bits & 0x7FFFFF, (bits & 0x7FFFFF) | 0x800000))
    return m, let(k, cast(ir.max(biased, 1), DType.I32) - 150)


def _scaled(k: Kernel, m: Val, n: Val) -> Val:
    """``m * 2^n`` as an f32 (``m`` below 2^24: its conversion is exact), through two
    normal powers of two (``n`` taken in [-252, 126]: below, the result is under 2^-228)."""
    n = let(k, ir.min(ir.max(n, -252), 126))
    half = let(k, n >> 1)
    return (cast(m, DType.F32) * power_of_two(half)) * power_of_two(n - half)


def power_of_two(n: Val) -> Val:
    """``2^n`` as an f32, for ``n`` in [-126, 127]."""
    return bitcast(cast(n + 127, DType.U32) << 23, DType.F32)
