"""``x^y`` (C's ``pow``) in f64, one algorithm for the reference and cpu (docs/design-42.md,
section 5), built as ``exp_f64.py`` and ``log_f64.py`` are (IEEE f64 basic operations,
integer operations and bitcasts, no ``fma``: the same bytes on every backend that runs the
IR as written). The structure is ARM optimized-routines' ``pow``: ``|x|^y = e^(y ln|x|)``
with ``ln|x|`` to well beyond f64, times ``y`` as a pair, ``exp``'s core from a pair
argument, one rounding at the end:

- ``ln|x| = n ln 2 + (-ln c_i) + ln(1 + r)`` (``_log``): ``log_f64``'s reduction and
  table (``r = z invc_i - 1`` exactly as a pair, ``|r| <= 2^-7``; ``-ln c_i`` a pair, the
  table's tail), and ``ln(1 + r) = r - r^2/2 + r^3 Q(r)``, ``Q = 1/3 - r/4 + r^2 (1/5 -
  r/6 + ... + r^8/13)`` (Taylor; with its coefficients' roundings below 2^-84 relative,
  ``tools/f64_constants.py`` checks it), where ``log_f64`` stops at f64 for the ``r^3``
  term: here ``r^2``, ``r^3`` and ``Q`` are pairs (``Q``'s tail from ``r^2/5`` on in
  plain f64), so ``ln|x|`` comes out as a pair within about 2^-84 of it, relative. It has
  to be: ``y ln|x|`` is up to 745 where a result is neither 0 nor infinity, and an error
  ``d`` in it is an error ``d`` in the result, relative (here below 2^-74).
- ``t = y ln|x|`` as a pair: ``y L_hi`` exactly by ``ff.two_prod``, plus ``y L_lo``;
  clamped to [-746, 710] (past either end every result is 0 or infinity), decided on the
  product's head, which overflows to infinity where the pair would be NaN.
- ``e^t``: ``exp_f64``'s reduction with ``t_lo`` joined to its low part (``k =
  round(t_hi 128 / ln 2)``, ``r = (t_hi - k C1) + (t_lo - k C2)`` as a pair), then
  ``exp_f64.exp_parts``: a pair within about 2^-70 of ``|x|^y`` (relative), rounded once
  by ``exp_f64.rounded`` (subnormal results on their grid, overflow to infinity).

Where ``y`` is 1, 2, 1/2 or -1 the result is one IEEE operation instead (``|x|``, ``x x``,
``sqrt |x|``, ``1 / |x|``, then the sign), each correctly rounded: the commonest
exponents, and the ones with the hardest cases (``sqrt`` of the largest finite lies
2^-110 below a midpoint).

Exact results: a representable ``x^y`` (``3^3``, ``10^15``, ``2^-1074``) is half an ulp
from every rounding boundary, so the pair rounds to it. A midpoint (``x^y`` of exactly 54
significant bits, or an odd multiple of 2^-1075) must round to even, and the pair lies
on either side of it. Such an ``x^y`` needs ``x = a 2^b`` (``a`` odd) and ``y = c 2^-d``
with ``a`` a perfect ``2^d``-th power, so ``d <= 5`` (``a < 2^53``), ``y > 0``, and
``a^y`` (its odd part) of 54 bits, unless it is subnormal; or ``x`` a power of two and
``x^y = 2^-1075``. Where ``x`` and ``y`` are so (``_may_tie``), the pair is first rounded
to a multiple of 2^-66 (``_GRID``, at ``exp_parts``' scale, where every f64 and every
midpoint lies): a midpoint, within 2^-69.3 of the pair on 5,000 exact cases
(tests/test_mathlib_f64.py's exact families), becomes exact, and the one rounding takes
it to even. A pair of that class whose ``x^y`` is not a midpoint yet lies within 2^-67
of one (an irrational ``x^y``, ``y`` not an integer: one in about 2^14 of them) is
rounded as if it were, right half the time.

Correctly rounded except there and where the exact result lies within about 2^-70
(relative) of a rounding boundary; measured against MPFR in docs/semantics.md
("Floats"). Special values are C's (docs/semantics.md, as ``pow.py``'s for f32):
``pow(x, +-0) = pow(1, y) = 1`` (NaN included), else NaN for a NaN operand;
``pow(-1, +-inf) = 1``; ``pow(x, +-inf)`` +inf or +0 by ``|x| > 1`` and ``y``'s sign;
``pow(+-0, y)`` and ``pow(+-inf, y)`` +0 or +inf, ``x``'s sign kept for an odd integer
``y``; a negative finite ``x`` to a non-integer ``y`` NaN, to an odd integer negative.
"""

from __future__ import annotations

import numpy as np

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select, table
from vyre_core.ir.values import Val, bitcast, cast, lit
from vyre_core.mathlib import exp_f64, ff, log_f64
from vyre_core.mathlib.ff import FF

F64, I64, U64 = DType.F64, DType.I64, DType.U64

#: ``(-1)^(n+1) / n`` for n = 5..13, each rounded once to f64: ``Q``'s tail.
_TAYLOR = tuple(np.float64((-1) ** (n + 1)) / np.float64(n) for n in range(5, 14))
#: ``t``'s range: beyond it every result is 0 or infinity (``exp_f64``'s clamp).
_LOW, _HIGH = -746.0, 710.0
#: Where ``_may_tie`` holds, the pair (at ``exp_parts``'s scale, its head in [0.99, 2.01))
#: is rounded to a multiple of this first: every f64 and every midpoint between two is
#: one there, and a pair within half of it (2^-67, 4 times the pair's error) of one
#: becomes that value exactly.
_GRID = 2.0**-66


def pow_f64(k: Kernel, x: Val, y: Val) -> Val:
    """``x^y`` rounded once to f64 (see the module's docstring), with C's special values."""
    x, y = ff.let(k, x), ff.let(k, y)
    ax, ay = ff.let(k, abs(x)), ff.let(k, abs(y))
    integer = ff.let(k, ir.trunc(y) == y)
    half = ff.let(k, y * 0.5)
    negative_x = (bitcast(x, U64) >> 63) == 1  # (-0 too: pow(-0, -1) = -inf)
    odd_negative = ff.let(k, ir.logical_and(ir.logical_and(integer, ir.trunc(half) != half),
                                            negative_x))
    one, nan = lit(1.0, F64), lit(float("nan"), F64)
    # one IEEE operation where there is one (each correctly rounded): y = 1, 2, 1/2, -1;
    # |x| = 1 before _magnitude, whose y ln|x| is NaN for a huge y there
    magnitude = ff.let(k, select(ax == 1.0, one, select(y == 1.0, ax, select(
        y == 2.0, ax * ax, select(y == 0.5, ir.sqrt(ax), select(
            y == -1.0, 1.0 / ax, _magnitude(k, ax, y)))))))
    finite = select(odd_negative, -magnitude, magnitude)
    inf, zero = lit(float("inf"), F64), lit(0.0, F64)
    y_negative = y < 0.0
    # y = +-inf: +inf or +0 by whether |x| > 1 and y's sign (|x| = 1 is 1)
    infinite_y = select(ax == 1.0, one, select((ax > 1.0) != y_negative, inf, zero))
    # x = +-0 or +-inf: +0 or +inf, x's sign for an odd integer y
    edge = select((ax == inf) != y_negative, inf, zero)
    edge = select(odd_negative, -edge, edge)
    return select(ir.logical_or(y == 0.0, x == 1.0), one, select(
        ir.logical_or(x != x, y != y), nan, select(
            ay == inf, infinite_y, select(
                ir.logical_or(ax == 0.0, ax == inf), edge, select(
                    ir.logical_and(x < 0.0, ir.logical_not(integer)), nan, finite)))))


def _magnitude(k: Kernel, ax: Val, y: Val) -> Val:
    """``ax^y`` rounded once, for a positive finite ``ax`` and a finite nonzero ``y``
    (other operands give some value, replaced by ``pow_f64``)."""
    big_l = _log(k, ax)
    product = ff.two_prod(k, y, big_l.hi)
    inside = ff.let(k, ir.logical_and(product.hi >= _LOW, product.hi <= _HIGH))
    t_hi = ff.let(k, select(inside, product.hi, select(product.hi > 0.0, lit(_HIGH, F64),
                                                            lit(_LOW, F64))))
    t_lo = ff.let(k, select(inside, product.lo + y * big_l.lo, 0.0))
    n = ff.let(k, ir.round(t_hi * exp_f64._INV_STEP))
    r = ff.two_sum(k, t_hi - n * exp_f64._STEP_1, t_lo - n * exp_f64._STEP_2)
    head_hi, low, e = exp_f64.exp_parts(k, r, cast(n, I64))
    # a possible midpoint: the pair first rounded to a multiple of _GRID (its head is one)
    snap = ff.let(k, _may_tie(k, ax, y, t_hi))
    snapped = FF(ff.let(k, select(snap, ir.round(low.hi * (1 / _GRID)) * _GRID, low.hi)),
                 ff.let(k, select(snap, lit(0.0, F64), low.lo)))
    return exp_f64.rounded(k, head_hi, snapped, e)


def _log(k: Kernel, ax: Val) -> FF:
    """``ln ax`` as a pair (relative error about 2^-84), for a positive finite ``ax``."""
    n, i, r = log_f64.reduction(k, ax)
    square = ff.two_prod(k, r.hi, r.hi)
    r2 = ff.fast_two_sum(k, square.hi, square.lo + 2.0 * (r.hi * r.lo))
    tail = _TAYLOR[-1]
    for c in reversed(_TAYLOR[:-1]):
        tail = c + r.hi * tail
    third = ff.fast_two_sum(k, log_f64._THIRD_HI, r.hi * -0.25)
    q = ff.fast_two_sum(k, third.hi, third.lo + (
        (log_f64._THIRD_LO + r.lo * -0.25) + r2.hi * tail))
    cubic = ff.mul(k, ff.mul(k, r, r2), q)
    head = ff.fast_two_sum(k, r.hi, r2.hi * -0.5)
    series = ff.fast_two_sum(k, head.hi, cubic.hi)
    low = (head.lo + series.lo) + ((r.lo + r2.lo * -0.5) + cubic.lo)
    table_sum = ff.two_sum(k, n * log_f64._LN2_1, table(log_f64._LN_C_HI, i))
    total = ff.two_sum(k, table_sum.hi, series.hi)
    rest = total.lo + (table_sum.lo + ((table(log_f64._LN_C_LO, i) + n * log_f64._LN2_2)
                                       + low))
    return ff.fast_two_sum(k, total.hi, rest)


def _may_tie(k: Kernel, ax: Val, y: Val, t: Val) -> Val:
    """Whether ``ax^y`` may be a midpoint (the module's docstring): ``ax = a 2^b`` with
    ``a`` odd of ``span + 1`` bits; ``y > 0`` a multiple of 1/32 with ``a^y`` of 54 bits
    (``2^(span y) <= a^y < 2^((span + 1) y)``) or a result about subnormal (``t`` below
    -708, ``x^y`` below 2^-1021.4), ``a`` not 1; or ``ax`` a power of two and ``x^y``
    below 2^-1073.4 (``t < -744``), where the only midpoint is 2^-1075."""
    bits = ff.let(k, bitcast(ax, U64))
    significand = ff.let(k, select(bits >= (1 << 52), (bits & ((1 << 52) - 1)) | (1 << 52),
                                   bits))
    lowest = significand & (~significand + 1)
    # (the exponents of its highest and lowest set bits, read off the f64s they make)
    span = ff.let(k, cast(cast((bitcast(cast(significand, F64), U64) >> 52) - (
        bitcast(cast(lowest, F64), U64) >> 52), I64), F64))
    dyadic = ir.logical_and(y > 0.0, ir.round(y * 32.0) == y * 32.0)
    bits_54 = ir.logical_and(span * y < 54.0, (span + 1.0) * y > 53.0)
    odd_part = ir.logical_and(ir.logical_and(span >= 1.0, dyadic),
                              ir.logical_or(bits_54, t < -708.0))
    return ir.logical_or(odd_part, ir.logical_and(span == 0.0, t < -744.0))
