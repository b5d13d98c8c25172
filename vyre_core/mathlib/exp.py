"""``e^x``, correctly rounded in f32 and f16 (docs/design-42.md, sections 2.4 and 8).

exp2.py's algorithm after one more reduction, with exp2.py's table of ``2^(j / 64)`` and
its final rounding (imported, not copied), so the same bits come from every backend that
runs the basic operations as written (f32 pairs, no f64, no ``fma``):

- ``x`` is clamped to [-105, 90] (NaN taken to -105, its result replaced at the end): past
  either end every f32 result is 0 (below about -103.97, where ``e^x`` is half the least
  subnormal) or infinity (above about 88.72), and the clamped value gives it.
- ``n = round(x * 64 / ln 2)`` (``|n| < 2^14``; ``64 / ln 2`` in f32 only picks ``n``),
  ``r = x - n ln 2 / 64`` by Cody and Waite: ``ln 2 / 64 = C1 + C2 + C3`` with ``C1`` of 10
  significant bits, so ``n C1`` is exact and so is ``x - n C1`` (the two lie within a
  factor 2 of each other, or ``n = 0``); ``n C2`` exactly as a pair (``two_prod``), taken
  off by ``two_sum``; ``n C3`` (below 2^-27) and the pair's low parts in plain f32. ``r``
  is a pair ``s_hi + s_lo``, ``|s_hi| <= ln 2 / 128`` (just over), absolute error about
  2^-51, ``|s_lo|`` below 2^-27. ``e^x = 2^(n >> 6) * T_j * e^r`` with ``j = n & 63``.
- ``T_j e^r`` by exp2.py's ``table_times_exp`` (the code ``2^x`` uses from its ``s = r
  ln 2``: absolute error about 2^-50; a pair within about 2^-46 of ``e^x``, relative),
  rounded once: to f32 by exp2's ``round_f32``, to f16 by ``ff.round_ff`` (straight to
  f16, never f16 of the rounded f32: design-42 section 4).

``e^0 = 1`` exactly (``n = 0``, ``r = 0``, ``T = 1``), the only finite input with a
rational result (Lindemann); the f32 inputs whose pair lies too near a rounding boundary
are listed in ``_EXCEPTION_INPUTS`` with their correct results, found by running every f32
input against MPFR (``tools/math_exceptions.py exp`` with the list empty).
"""

from __future__ import annotations

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select
from vyre_core.ir.values import Val, cast
from vyre_core.mathlib import exceptions, exp2, ff
from vyre_core.mathlib.ff import FF

F32, I32, U32 = DType.F32, DType.I32, DType.U32



# Made by ``tools/exp_constants.py`` (gmpy2 at 200 bits): 64 / ln 2 in f32; ln 2 / 64 as
# C1 (10 significant bits) + C2 + C3 (each the rest rounded once to f32).
_INV_STEP, _STEP_1, _STEP_2, _STEP_3 = ff.from_bits([
    0x42B8AA3B, 0x3C318000, 0xB65E8083, 0x28E7BCD6])

#: The f32 inputs (their bits, sorted) whose pair rounds the wrong way, and their
#: correctly rounded results' bits (``exceptions.corrected``): 11 of 2^32, made over every
#: f32 input with the list empty by ``tools/math_exceptions.py exp`` (cpu, 256 chunks).
#: The first, 2^-24: ``e^x = 1 + 2^-24 + 2^-49...``, just above a midpoint, and the pair
#: holds ``1 + 2^-24`` (2^-49 is below its low part's half ulp).
_EXCEPTION_INPUTS = [
    0x33800000, 0x383A3EF1, 0x39C6BE5B, 0x39E5BB1D, 0x40315B33, 0x4288942B, 0xBAE0E25C,
    0xBBF0EDF1, 0xBF81EADF, 0xC13D6631, 0xC16912CD]
_EXCEPTION_RESULTS = [
    0x3F800001, 0x3F800175, 0x3F800C6D, 0x3F800E5D, 0x417FA47D, 0x70B7A4C5, 0x3F7F8FA7,
    0x3F7E1FE9, 0x3EB98DC1, 0x36F28E33, 0x34FD331B]


def exp_f32(k: Kernel, x: Val) -> Val:
    """``e^x`` correctly rounded to f32, for an f32 ``x``: NaN for NaN, +0 below about
    -103.97, +inf above about 88.72."""
    pair, scale = core(k, x)
    rounded = exp2.round_f32(k, pair, scale)
    return select(x != x, x, exceptions.corrected(k, x, rounded, _EXCEPTION_INPUTS,
                                                  _EXCEPTION_RESULTS))


def exp_f16(k: Kernel, x: Val) -> Val:
    """``e^x`` correctly rounded to f16, for an f16 ``x``: the f32 algorithm's pair
    rounded once to f16 (+0 below about -17.33, +inf above about 11.09, NaN for NaN)."""
    pair, scale = core(k, cast(x, F32))
    return select(x != x, x, ff.round_ff(k, pair, scale, DType.F16))



def core(k: Kernel, x: Val) -> tuple[FF, Val]:
    """``e^x = 2^scale * (hi + lo)`` for an f32 ``x``, the pair within about 2^-46 of it
    (relative) and ``hi`` in [0.99, 2) (as exp2's ``_core``, for ``round_f32``; tanh.py
    reads ``e^(-2|x|)`` from it)."""
    x = ff.let(k, select(x >= -105.0, select(x <= 90.0, x, 90.0), -105.0))
    n = ff.let(k, cast(ir.round(x * _INV_STEP), I32))
    n_f = ff.let(k, cast(n, F32))
    nc2 = ff.two_prod(k, n_f, _STEP_2)
    s = ff.two_sum(k, x - n_f * _STEP_1, -nc2.hi)
    s_lo = ff.let(k, s.lo - (nc2.lo + n_f * _STEP_3))
    return exp2.table_times_exp(k, FF(s.hi, s_lo), n), ff.let(k, n >> 6)
