"""``atan2(y, x)`` in f64, one algorithm for the reference and cpu (docs/design-42.md,
section 5), built as ``exp_f64.py`` is (IEEE f64 basic operations, integer operations and
bitcasts, no ``fma``: the same bytes on every backend that runs the IR as written):

- C's special cases (zeros, infinities, NaN) by selects, as the f32 function has them.
- ``t = min(|x|, |y|) / max(|x|, |y|)`` as a pair: both scaled by the larger one's power
  of two (exactly), the quotient rounded, and its remainder by ``ff.two_prod`` (exact).
- ``atan t = atan(i/64) + atan u``, ``i = round(64 t)``, ``u = (t - i/64) / (1 + t i/64)``
  (``ff.div``; ``|u| <= 1/128``); ``atan u`` by Taylor to ``u^11`` (truncation below
  2^-84), its ``u^3`` term in float-float; ``atan(i/64)`` a pair from MPFR.
- ``pi/2 - atan t`` where ``|y| > |x|``, ``pi - that`` where ``x < 0`` (pairs, no
  cancellation: the results are at least pi/4), ``y``'s sign; the pair's head is the
  result.
- A quotient below 2^-900 with ``x > 0``: the quotient rounded once (IEEE division), and
  below 2^-1021 (the result subnormal or the least normals) rounded on the subnormal
  grid, toward zero at an exact midpoint (``atan t`` lies just below ``t``), from the
  quotient scaled by 2^1074 and its exact remainder.

Correctly rounded except where the exact result lies within about 2^-100 (relative) of a
rounding boundary; measured against MPFR in docs/semantics.md ("Floats").
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select, table
from vyre_core.ir.values import Val, bitcast, cast, lit
from vyre_core.mathlib import ff
from vyre_core.mathlib.exp_f64 import from_bits, power_of_two
from vyre_core.mathlib.ff import FF

F64, I64, U32, U64 = DType.F64, DType.I64, DType.U32, DType.U64

# Made by ``tools/f64_constants.py`` (gmpy2 at 400 bits, each part rounded once to f64).
_ATAN_HI = from_bits([
    0x0000000000000000, 0x3F8FFF555BBB729B, 0x3F9FFD55BBA97625, 0x3FA7FB818430DA2A,
    0x3FAFF55BB72CFDEA, 0x3FB3F59F0E7C559D, 0x3FB7EE182602F10F, 0x3FBBE39EBE6F07C3,
    0x3FBFD5BA9AAC2F6E, 0x3FC1E1FAFB043727, 0x3FC3D6EEE8C6626C, 0x3FC5C9811E3EC26A,
    0x3FC7B97B4BCE5B02, 0x3FC9A6A8E96C8626, 0x3FCB90D7529260A2, 0x3FCD77D5DF205736,
    0x3FCF5B75F92C80DD, 0x3FD09DC597D86362, 0x3FD18BF5A30BF178, 0x3FD278372057EF46,
    0x3FD362773707EBCC, 0x3FD44AA436C2AF0A, 0x3FD530AD9951CD4A, 0x3FD614840309CFE2,
    0x3FD6F61941E4DEF1, 0x3FD7D5604B63B3F7, 0x3FD8B24D394A1B25, 0x3FD98CD5454D6B18,
    0x3FDA64EEC3CC23FD, 0x3FDB3A911DA65C6C, 0x3FDC0DB4C94EC9F0, 0x3FDCDE53432C1351,
    0x3FDDAC670561BB4F, 0x3FDE77EB7F175A34, 0x3FDF40DD0B541418, 0x3FE0039C73C1A40C,
    0x3FE0657E94DB30D0, 0x3FE0C6145B5B43DA, 0x3FE1255D9BFBD2A9, 0x3FE1835A88BE7C13,
    0x3FE1E00BABDEFEB4, 0x3FE23B71E2CC9E6A, 0x3FE2958E59308E31, 0x3FE2EE628406CBCA,
    0x3FE345F01CCE37BB, 0x3FE39C391CD4171A, 0x3FE3F13FB89E96F4, 0x3FE445065B795B56,
    0x3FE4978FA3269EE1, 0x3FE4E8DE5BB6EC04, 0x3FE538F57B89061F, 0x3FE587D81F732FBB,
    0x3FE5D58987169B18, 0x3FE6220D115D7B8E, 0x3FE66D663923E087, 0x3FE6B798920B3D99,
    0x3FE700A7C5784634, 0x3FE748978FBA8E0F, 0x3FE78F6BBD5D315E, 0x3FE7D528289FA093,
    0x3FE819D0B7158A4D, 0x3FE85D69576CC2C5, 0x3FE89FF5FF57F1F8, 0x3FE8E17AA99CC05E,
    0x3FE921FB54442D18])
_ATAN_LO = from_bits([
    0x0000000000000000, 0xBC2220C39D4DFF50, 0xBC35EC431444912C, 0xBC086EF8F794F105,
    0xBC3C934D86D23F1D, 0x3C5AC4CE285DF847, 0xBC5CFB654C0C3D98, 0x3C5F7B8F29A05987,
    0xBC4CD37686760C17, 0xBC4B485914DACF8C, 0x3C661A3B0CE9281B, 0xBC5054AB2C010F3D,
    0x3C5347B0B4F881CA, 0x3C4CF601E7B4348E, 0x3C217B10D2E0E5AB, 0x3C6C648D1534597E,
    0x3C68AB6E3CF7AFBD, 0x3C762E47390CB865, 0x3C630CA4748B1BF9, 0xBC7077CDD36DFC81,
    0xBC6963A544B672D8, 0xBC75D5E43C55B3BA, 0xBC62566480884082, 0xBC7A725715711F00,
    0xBC7C63AAE6F6E918, 0x3C769C885C2B249A, 0x3C7B6D0BA3748FA8, 0x3C79E6C988FD0A77,
    0xBC724DEC1B50B7FF, 0x3C7AE187B1CA5040, 0xBC7CC1CE70934C34, 0xBC7A2CFA4418F1AD,
    0x3C7A2B7F222F65E2, 0x3C70E53DC1BF3435, 0xBC6A3992DC382A23, 0xBC8B32C949C9D593,
    0xBC7D5B495F6349E6, 0x3C5974FA13B5404F, 0xBC52BDAEE1C0EE35, 0x3C8C621CEC00C301,
    0xBC5928DF287A668F, 0x3C6C421C9F38224E, 0xBC709E73B0C6C087, 0x3C8C5D5E9FF0CF8D,
    0x3C81021137C71102, 0xBC82304331D8BF46, 0x3C7ECF8B492644F0, 0xBC7F76D0163F79C8,
    0x3C72419A87F2A458, 0x3C84A33DBEB3796C, 0xBC81BB74ABDA520C, 0xBC75E5C9D8C5A950,
    0x3C60028E4BC5E7CA, 0xBC62B785350EE8C1, 0xBC76EA6FEBE8BBBA, 0xBC8A80386188C50E,
    0xBC78C34D25AADEF6, 0x3C47B2A6165884A1, 0x3C8406A089803740, 0x3C8560821E2F3AA9,
    0xBC7BF76229D3B917, 0x3C66B66E7FC8B8C3, 0xBC855B9A5E177A1B, 0xBC7EC182AB042F61,
    0x3C81A62633145C07])
(_PI_HI, _PI_LO, _HALF_PI_HI, _HALF_PI_LO) = from_bits([
    0x400921FB54442D18, 0x3CA1A62633145C07, 0x3FF921FB54442D18, 0x3C91A62633145C07])

#: atan's Taylor coefficients: -1/3 as a pair, then 1/5, -1/7, 1/9, -1/11 (rounded once).
_THIRD = (np.float64(-1 / 3), np.float64(float(Fraction(-1, 3) - Fraction(-1 / 3))))
_ODD = tuple(np.float64(s) / np.float64(n) for s, n in ((1, 5), (-1, 7), (1, 9), (-1, 11)))
#: Below ``_SMALL`` (a quotient, with x > 0), ``atan t`` rounds as ``t`` does (``t^3 / 3``
#: is below 2^-1800 of it, and no quotient of doubles is that close to a midpoint of a
#: normal binade, where no quotient is one); below ``_TINY`` that rounding is on the
#: subnormal grid, where quotients can be midpoints (``_tiny``). The pair of ``_angle``
#: would not do there: ``ff.two_prod``'s partial products underflow.
_SMALL, _TINY = 2.0**-900, 2.0**-1021


def atan2_f64(k: Kernel, y: Val, x: Val) -> Val:
    """``atan2(y, x)`` in f64, C's special cases included."""
    ax, ay = ff.let(k, abs(x)), ff.let(k, abs(y))
    swap = ff.let(k, ay > ax)
    num, den = ff.let(k, select(swap, ax, ay)), ff.let(k, select(swap, ay, ax))
    quotient = ff.let(k, num / den)
    theta = _angle(k, num, den, swap, x)
    small = ir.logical_and(quotient < _SMALL, ir.logical_and(ir.logical_not(swap), x > 0.0))
    tiny = select(quotient < _TINY, _tiny(k, num, den), quotient)
    return _special(k, y, x, ax, ay, select(small, tiny, theta))


def _angle(k: Kernel, num: Val, den: Val, swap: Val, x: Val) -> Val:
    """``atan2(|y|, x)`` for finite nonzero operands (with ``x > 0``, a quotient of 2^-900
    or more)."""
    e = ff.let(k, cast((bitcast(den, U64) >> 52) & 0x7FF, I64) - 1023)
    down = ff.let(k, power_of_two(ir.max(-e, lit(-1022, I64))))
    n_s, d_s = ff.let(k, num * down), ff.let(k, den * down)
    q = ff.let(k, n_s / d_s)
    back = ff.two_prod(k, q, d_s)
    t = ff.fast_two_sum(k, q, ((n_s - back.hi) - back.lo) / d_s)
    c = ff.let(k, ir.round(t.hi * 64.0) * (1 / 64))
    numerator = ff.two_sum(k, t.hi - c, t.lo)
    product = ff.two_prod(k, t.hi, c)
    denominator = ff.add_float(k, FF(lit(1.0, F64), lit(0.0, F64)), product.hi)
    denominator = ff.add_float(k, denominator, product.lo + t.lo * c)
    u = ff.div(k, numerator, denominator)
    square = ff.two_prod(k, u.hi, u.hi)
    rest = _ODD[-1]
    for coefficient in reversed(_ODD[:-1]):
        rest = coefficient + square.hi * rest
    head = ff.fast_two_sum(k, _THIRD[0], square.hi * rest)
    term = ff.mul(k, ff.mul_float(k, square, u.hi), FF(head.hi, ff.let(k, head.lo + _THIRD[1])))
    s = ff.fast_two_sum(k, u.hi, term.hi)
    atan_u = ff.fast_two_sum(k, s.hi, s.lo + (term.lo + u.lo * (1.0 - square.hi)))
    i = ff.let(k, cast(ir.round(t.hi * 64.0), U32))
    a = ff.add(k, FF(ff.let(k, table(_ATAN_HI, i)), ff.let(k, table(_ATAN_LO, i))), atan_u)
    half = ff.add(k, FF(lit(_HALF_PI_HI, F64), lit(_HALF_PI_LO, F64)), FF(-a.hi, -a.lo))
    b = FF(ff.let(k, select(swap, half.hi, a.hi)), ff.let(k, select(swap, half.lo, a.lo)))
    behind = ff.add(k, FF(lit(_PI_HI, F64), lit(_PI_LO, F64)), FF(-b.hi, -b.lo))
    return select(x < 0.0, behind.hi, b.hi)


def _tiny(k: Kernel, num: Val, den: Val) -> Val:
    """``atan(num / den)`` for a quotient below 2^-1021: ``M = num / den 2^1074`` (below
    2^53: the result's bits) rounded to an integer, toward zero at an exact midpoint.
    ``M`` from both scaled by ``den``'s power of two (``num`` also by 2^1074; each in two
    steps: ``den`` is normal, ``e`` in [-53, 1023]), its remainder exact by
    ``ff.two_prod``."""
    e = ff.let(k, cast((bitcast(den, U64) >> 52) & 0x7FF, I64) - 1023)
    d_s = ff.let(k, (den * power_of_two(-(e >> 1))) * power_of_two((e >> 1) - e))
    up = ff.let(k, 1074 - e)
    half = ff.let(k, up >> 1)
    n_s = ff.let(k, (num * power_of_two(half)) * power_of_two(up - half))
    q = ff.let(k, n_s / d_s)
    back = ff.two_prod(k, q, d_s)
    rest = ff.let(k, (n_s - back.hi) - back.lo)  # (the sign of M - q)
    nearest = ff.let(k, ir.round(q))
    off = ff.let(k, q - nearest)
    n = select(ir.logical_and(off == 0.5, rest > 0.0), nearest + 1.0,
               select(ir.logical_and(off == -0.5, rest <= 0.0), nearest - 1.0, nearest))
    return bitcast(cast(n, U64), F64)


def _special(k: Kernel, y: Val, x: Val, ax: Val, ay: Val, general: Val) -> Val:
    """C's special cases (NaN, zeros, infinities: docs/semantics.md), else ``general``
    (``atan2(|y|, x)``); ``y``'s sign on either."""
    def const(v: float) -> Val:
        return lit(v, F64)

    inf = const(float("inf"))
    negative_x = ff.let(k, (bitcast(x, U64) >> 63) == 1)  # (-0 counts: atan2(0, -0) = pi)
    pi, half_pi = const(_PI_HI), const(_HALF_PI_HI)
    zero_y = select(negative_x, pi, const(0.0))
    inf_y = select(ax == inf, select(negative_x, const(float(np.float64(3 * np.pi / 4))),
                                     const(_PI_HI / 4)), half_pi)
    inf_x = select(negative_x, pi, const(0.0))
    magnitude = select(ay == 0.0, zero_y, select(ay == inf, inf_y, select(
        ax == inf, inf_x, select(ax == 0.0, half_pi, general))))
    signed = bitcast(bitcast(magnitude, U64) | (bitcast(y, U64) & 0x8000000000000000), F64)
    nan = const(float("nan"))
    return select(ir.logical_or(x != x, y != y), nan, signed)
