"""``x^y`` (C's ``pow``) in f32 and f16 from the math library's pieces (docs/design-42.md,
sections 2.4, 6 and 8).

One float-float algorithm (f32 pairs, no f64, no ``fma``): the same bits from every
backend that runs the basic operations as written. ``|x|^y = 2^(y log2 |x|)``:

- ``L = log2 |x|`` as a pair by log2.py's ``_core`` (within about 2^-47 of it, relative;
  exact where ``|x|`` is a power of two).
- ``t = y L`` as a pair: ``y L_hi`` exactly (``two_prod``) plus ``y L_lo``; its error is
  about ``|t| 2^-47``. ``t`` is clamped to [-160, 140] (past either end every f32 result
  is 0 or infinity; NaN and the infinities taken there too, their results replaced).
- ``2^t`` as exp2.py does it, from a pair: ``n = round(64 t_hi)``, ``r = (t_hi - n / 64)
  + t_lo`` (the difference exact), ``s = r ln 2`` as a pair, then exp2's
  ``table_times_exp`` (``2^((n & 63) / 64) e^s``, about 2^-46): a pair ``P`` at scale
  ``n >> 6`` within ``E = 2^-46 + |t| ln 2 2^-47`` of ``|x|^y`` (relative), so within
  ``err = 2^-43 + |t| 2^-45`` absolutely (``P_hi`` below 2; the bound taken 4 times over).

The rounding (``_rounded``): ``P - err`` and ``P + err`` are rounded once each (to f32
by exp2's ``round_f32``, to f16 by ``ff.round_ff``, subnormal results on their grid).
Where the two agree (CORE-MATH's ``ub == lb`` test, as ``ff.decided``), that is the
correctly rounded result of every value within ``err`` of ``P``, ``|x|^y`` among them.
Where they differ, a rounding boundary lies within ``err`` of ``|x|^y``: the result is
the one of the two neighbours whose significand is even, which is right where ``|x|^y``
is exactly that boundary, a midpoint (an exact case: ``(1 + 2^-12)^2 = 1 + 2^-11 +
2^-24``, ``(257^2)^1.5 = 257^3``, a power of two halfway below the least subnormal).
Exact results that are representable need no such step: ``P`` lies within ``err`` of them
and every boundary is half an ulp away. So the rule is right on every pair whose ``|x|^y``
is either exactly a midpoint or farther than ``err`` from every boundary.

- **f16** (every pair of f16 operands, 2^32, is checked against the oracle:
  ``vyre conform --exhaustive --all-inputs --op pow --dtype f16``): with ``|t| <= 26``
  where a result is neither 0 nor infinity, ``err`` is about 2^-40, and f16 rounding
  boundaries lie 2^-12 apart (relative). The exhaustive run finds the rule right on every
  pair: the undecided ones are exact midpoints, or round as a tie would.
- **f32** (``pow_f32``): the same rule is correct rounding wherever ``|x|^y`` is not
  within ``err`` (up to 2^-37.7 at ``|t|`` = 150) of an f32 rounding boundary without
  being exactly on it. Pairs that are need an accurate path (``log2 |x|`` and ``2^t`` to
  about 2^-70 in triple-float, then the same test; what is still undecided a midpoint):
  not written yet. Measured without it: 4 of 769,271 ordinary pairs (``x`` in [1/4, 4),
  ``|t| < 126``) misrounded. So ``pow_f32`` is not registered (``library._WRITTEN_BY``)
  and ``ir.pow`` in f32 is still each backend's own code.

Special values (docs/semantics.md, Floats, C's ``pow``, as the oracle computes them):
``pow(x, +-0) = pow(1, y) = 1`` (NaN included), else NaN for a NaN operand;
``pow(-1, +-inf) = 1``; ``pow(x, +-inf)`` +inf or +0 by ``|x| > 1`` and ``y``'s sign;
``pow(+-0, y)`` and ``pow(+-inf, y)`` +0 or +inf, ``x``'s sign kept for an odd integer
``y``; a negative finite ``x`` to a non-integer ``y`` NaN, to an odd integer negative.
"""

from __future__ import annotations

from vyre_core.ir import builder as ir
from vyre_core.ir.builder import Kernel, Val, bitcast, cast, select
from vyre_core.ir.dtypes import DType
from vyre_core.mathlib import exp2, ff, log2
from vyre_core.mathlib.ff import FF

F32, I32, U32 = DType.F32, DType.I32, DType.U32

#: ``t``'s range: beyond it every f32 (and f16) result is 0 or infinity (as exp2's).
_LOW, _HIGH = -160.0, 140.0


def pow_f32(k: Kernel, x: Val, y: Val) -> Val:
    """``x^y`` rounded to f32 by ``_rounded``'s rule (correct rounding except where the
    pair is undecided and the exact value is not a midpoint: see the module's docstring),
    with C's special values."""
    return _pow(k, x, y, F32)


def pow_f16(k: Kernel, x: Val, y: Val) -> Val:
    """``x^y`` correctly rounded to f16, for f16 operands: the f32 algorithm's pair rounded
    once to f16 (never f16 of the rounded f32), with C's special values."""
    return _pow(k, cast(x, F32), cast(y, F32), DType.F16)


def _pow(k: Kernel, x: Val, y: Val, dtype: DType) -> Val:
    """``pow(x, y)`` for f32 ``x`` and ``y`` (f16 operands widened exactly), rounded to
    ``dtype``."""
    x, y = ff.let(k, x), ff.let(k, y)
    ux, uy = ff.let(k, bitcast(x, U32)), ff.let(k, bitcast(y, U32))
    ax, ay = ff.let(k, ux & 0x7FFFFFFF), ff.let(k, uy & 0x7FFFFFFF)
    kind = _integer_kind(k, ay)
    odd_negative = ff.let(k, ir.logical_and(kind == 1, ux > 0x7FFFFFFF))
    pair, scale, err = _core(k, bitcast(ax, F32), y)
    magnitude = _rounded(k, pair, scale, err, dtype)
    finite = select(odd_negative, -magnitude, magnitude)
    one, nan = ir.lit(1.0, dtype), ir.lit(float("nan"), dtype)
    inf, zero = ir.lit(float("inf"), dtype), ir.lit(0.0, dtype)
    y_negative = uy > 0x7FFFFFFF
    # y = +-inf: +inf or +0 by whether |x| > 1 and y's sign (|x| = 1 is 1)
    infinite_y = select(ax == 0x3F800000, one, select(
        (ax > 0x3F800000) != y_negative, inf, zero))
    # x = +-0 or +-inf: +0 or +inf, x's sign for an odd integer y
    edge = select((ax == 0x7F800000) != y_negative, inf, zero)
    edge = select(odd_negative, -edge, edge)
    return select(ir.logical_or(ay == 0, ux == 0x3F800000), one, select(
        ir.logical_or(ax > 0x7F800000, ay > 0x7F800000), nan, select(
            ay == 0x7F800000, infinite_y, select(
                ir.logical_or(ax == 0, ax == 0x7F800000), edge, select(
                    ir.logical_and(ux > 0x7FFFFFFF, kind == 0), nan, finite)))))


def _integer_kind(k: Kernel, ay: Val) -> Val:
    """0 where ``|y|`` (its bits ``ay``, finite) is not an integer, 1 an odd one, 2 an even
    one (zero and every float from 2^24 are even)."""
    shift = ff.let(k, ir.min(ir.max(150 - cast(ay >> 23, I32), 0), 31))
    significand = ff.let(k, (ay & 0x7FFFFF) | 0x800000)
    fraction = significand & ((ir.lit(1, U32) << cast(shift, U32)) - 1)
    odd = ((significand >> cast(shift, U32)) & 1) == 1
    return ff.let(k, select(ay >= 0x4B800000, ir.lit(2, U32), select(
        ay < 0x3F800000, select(ay == 0, ir.lit(2, U32), ir.lit(0, U32)), select(
            fraction != 0, ir.lit(0, U32), select(odd, ir.lit(1, U32), ir.lit(2, U32))))))


def _core(k: Kernel, ax: Val, y: Val) -> tuple[FF, Val, Val]:
    """``ax^y = 2^scale * (hi + lo)`` for a positive finite f32 ``ax`` and finite ``y``
    (other operands give some pair, replaced by ``_pow``), the pair within ``E`` of it
    (the module's docstring) and ``hi`` in [0.99, 2); with the bound ``err`` on its
    absolute error."""
    big_l = log2._core(k, ax)
    product = ff.two_prod(k, y, big_l.hi)
    t = ff.fast_two_sum(k, product.hi, product.lo + y * big_l.lo)
    # (decided on the product: where it overflows, the pair's sum is NaN)
    inside = ff.let(k, ir.logical_and(product.hi >= _LOW, product.hi <= _HIGH))
    t_hi = ff.let(k, select(inside, t.hi, select(product.hi > 0.0, _HIGH, _LOW)))
    t_lo = select(inside, t.lo, 0.0)
    n = ff.let(k, cast(ir.round(t_hi * 64.0), I32))
    r = ff.two_sum(k, t_hi - cast(n, F32) * (1 / 64), t_lo)
    s = ff.two_prod(k, r.hi, exp2._LN2_HI)
    s_lo = ff.let(k, s.lo + (r.lo * exp2._LN2_HI + r.hi * exp2._LN2_LO))
    pair = exp2.table_times_exp(k, FF(s.hi, s_lo), n)
    err = ff.let(k, abs(t_hi) * 2.0**-45 + 2.0**-43)
    return pair, ff.let(k, n >> 6), err


def _rounded(k: Kernel, pair: FF, scale: Val, err: Val, dtype: DType) -> Val:
    """The pair at ``scale`` rounded to ``dtype`` by the module docstring's rule: the
    rounding of ``pair -+ err`` where the two agree, else the even one of the two."""
    below = _round(k, ff.fast_two_sum(k, pair.hi, pair.lo - err), scale, dtype)
    above = _round(k, ff.fast_two_sum(k, pair.hi, pair.lo + err), scale, dtype)
    bits = U32 if dtype is F32 else DType.U16
    low_bits = ff.let(k, bitcast(below, bits))
    even = (cast(low_bits, U32) & 1) == 0
    return select(ir.logical_or(low_bits == bitcast(above, bits), even), below, above)


def _round(k: Kernel, pair: FF, scale: Val, dtype: DType) -> Val:
    """``2^scale`` times the pair rounded once to ``dtype``: exp2's cheaper ``round_f32``
    for f32 (its pairs are these: ``hi`` in [0.99, 2), ``scale`` in [-160, 140])."""
    if dtype is F32:
        return ff.let(k, exp2.round_f32(k, pair, scale))
    return ff.let(k, ff.round_ff(k, pair, scale, dtype))
