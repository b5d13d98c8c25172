"""``sin x``, ``cos x`` and ``tan x`` in f64, one algorithm for the reference and cpu
(docs/design-42.md, section 5), built as ``exp_f64.py`` is (IEEE f64 basic operations,
integer operations and bitcasts, no ``fma``: the same bytes on every backend that runs
the IR as written), on ``a = |x|`` (sin and tan odd, cos even):

- ``a = n pi/32 + r``, ``|r| <= pi/64``, ``r`` as a pair: below 2^19 by Cody and Waite
  (``pi/32 = P1 + P2 + P3 + P4``, the first three of 30 bits, so ``n P_i`` is exact for
  ``n < 2^23``: absolute error about 2^-120); from 2^19 on by Payne and Hanek in u64
  integers: ``a = m 2^E`` (``m < 2^53``), ``m`` times a 192-bit window of ``32/pi``
  chosen by ``E`` (tables of three words per exponent, cut from the bits of 32/pi)
  gives ``a 32/pi`` less a multiple of 64 exactly to 2^-133: its bits above the point
  are ``n mod 64``, the 186 below the fraction, read into a pair and times ``pi/32``
  (``ff.mul``).
- ``sin r`` and ``cos r`` as pairs: Taylor to ``r^11`` and ``r^12`` (truncation below
  2^-80), the ``r^3`` term of ``sin`` and ``r^2`` of ``cos`` in float-float, ``r``'s low
  part by the derivative; then, with ``j = n mod 64`` and ``sin(j pi/32)``, ``cos(j
  pi/32)`` as pairs from MPFR: ``sin a = S_j cos r + C_j sin r``, ``cos a = C_j cos r -
  S_j sin r`` (``ff.mul``, ``ff.add``; ``S_j = 0`` or ``C_j = 0`` exactly where the
  result can be small, so it keeps its relative accuracy), ``tan a`` their quotient by
  ``ff.div``; the pair's head is the result.
- ``|x| < 2^-27``: ``sin x = tan x = x``, ``cos x = 1`` (what they round to there, ``-0``
  kept); NaN for infinities and NaN.

Correctly rounded except where the exact result lies within about 2^-100 (relative) of a
rounding boundary, or (below 2^19) x lies within about 2^-55 of a multiple of pi/32 (the
reduction's 2^-120 then counts); measured against MPFR in docs/semantics.md ("Floats").
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
from vyre_core.mathlib.exp_f64 import from_bits
from vyre_core.mathlib.ff import FF

F64, I64, U32, U64 = DType.F64, DType.I64, DType.U32, DType.U64

#: Below it, Cody and Waite; from it, Payne and Hanek, whose windows cover the exponents
#: E of x = m 2^E (m < 2^53) from 2^19's to the largest finite's.
_CODY_WAITE_BELOW = 2.0**19
_E_MIN, _E_MAX = -33, 971
#: Below it, sin x = tan x = x and cos x = 1: what they round to (x^3/3 and x^2/2 are
#: under half an ulp there; from 2^-26.2 and 2^-26.5 on they are not).
_TINY = 2.0**-27
_INV_STEP = np.float64(32 / np.pi)  # (only picks n)

# Made by ``tools/f64_constants.py`` (gmpy2, each rounded once to f64; 32/pi's bits exact).
_SIN_HI = from_bits([
    0x0000000000000000, 0x3FB917A6BC29B42C, 0x3FC8F8B83C69A60B, 0x3FD294062ED59F06,
    0x3FD87DE2A6AEA963, 0x3FDE2B5D3806F63B, 0x3FE1C73B39AE68C8, 0x3FE44CF325091DD6,
    0x3FE6A09E667F3BCD, 0x3FE8BC806B151741, 0x3FEA9B66290EA1A3, 0x3FEC38B2F180BDB1,
    0x3FED906BCF328D46, 0x3FEE9F4156C62DDA, 0x3FEF6297CFF75CB0, 0x3FEFD88DA3D12526,
    0x3FF0000000000000, 0x3FEFD88DA3D12526, 0x3FEF6297CFF75CB0, 0x3FEE9F4156C62DDA,
    0x3FED906BCF328D46, 0x3FEC38B2F180BDB1, 0x3FEA9B66290EA1A3, 0x3FE8BC806B151741,
    0x3FE6A09E667F3BCD, 0x3FE44CF325091DD6, 0x3FE1C73B39AE68C8, 0x3FDE2B5D3806F63B,
    0x3FD87DE2A6AEA963, 0x3FD294062ED59F06, 0x3FC8F8B83C69A60B, 0x3FB917A6BC29B42C,
    0x8000000000000000, 0xBFB917A6BC29B42C, 0xBFC8F8B83C69A60B, 0xBFD294062ED59F06,
    0xBFD87DE2A6AEA963, 0xBFDE2B5D3806F63B, 0xBFE1C73B39AE68C8, 0xBFE44CF325091DD6,
    0xBFE6A09E667F3BCD, 0xBFE8BC806B151741, 0xBFEA9B66290EA1A3, 0xBFEC38B2F180BDB1,
    0xBFED906BCF328D46, 0xBFEE9F4156C62DDA, 0xBFEF6297CFF75CB0, 0xBFEFD88DA3D12526,
    0xBFF0000000000000, 0xBFEFD88DA3D12526, 0xBFEF6297CFF75CB0, 0xBFEE9F4156C62DDA,
    0xBFED906BCF328D46, 0xBFEC38B2F180BDB1, 0xBFEA9B66290EA1A3, 0xBFE8BC806B151741,
    0xBFE6A09E667F3BCD, 0xBFE44CF325091DD6, 0xBFE1C73B39AE68C8, 0xBFDE2B5D3806F63B,
    0xBFD87DE2A6AEA963, 0xBFD294062ED59F06, 0xBFC8F8B83C69A60B, 0xBFB917A6BC29B42C])
_SIN_LO = from_bits([
    0x0000000000000000, 0xBC3E2718D26ED688, 0xBC626D19B9FF8D82, 0xBC75D28DA2C4612D,
    0xBC672CEDD3D5A610, 0x3C5E0D891D3C6841, 0x3C8B25DD267F6600, 0x3C68076A2CFDC6B3,
    0xBC8BDD3413B26456, 0xBC82C5E12ED1336D, 0x3C39F630E8B6DAC8, 0xBC76E0B1757C8D07,
    0x3C7457E610231AC2, 0x3C8760B1E2E3F81E, 0x3C7562172A361FD3, 0xBC887DF6378811C7,
    0x0000000000000000, 0xBC887DF6378811C7, 0x3C7562172A361FD3, 0x3C8760B1E2E3F81E,
    0x3C7457E610231AC2, 0xBC76E0B1757C8D07, 0x3C39F630E8B6DAC8, 0xBC82C5E12ED1336D,
    0xBC8BDD3413B26456, 0x3C68076A2CFDC6B3, 0x3C8B25DD267F6600, 0x3C5E0D891D3C6841,
    0xBC672CEDD3D5A610, 0xBC75D28DA2C4612D, 0xBC626D19B9FF8D82, 0xBC3E2718D26ED688,
    0x8000000000000000, 0x3C3E2718D26ED688, 0x3C626D19B9FF8D82, 0x3C75D28DA2C4612D,
    0x3C672CEDD3D5A610, 0xBC5E0D891D3C6841, 0xBC8B25DD267F6600, 0xBC68076A2CFDC6B3,
    0x3C8BDD3413B26456, 0x3C82C5E12ED1336D, 0xBC39F630E8B6DAC8, 0x3C76E0B1757C8D07,
    0xBC7457E610231AC2, 0xBC8760B1E2E3F81E, 0xBC7562172A361FD3, 0x3C887DF6378811C7,
    0x0000000000000000, 0x3C887DF6378811C7, 0xBC7562172A361FD3, 0xBC8760B1E2E3F81E,
    0xBC7457E610231AC2, 0x3C76E0B1757C8D07, 0xBC39F630E8B6DAC8, 0x3C82C5E12ED1336D,
    0x3C8BDD3413B26456, 0xBC68076A2CFDC6B3, 0xBC8B25DD267F6600, 0xBC5E0D891D3C6841,
    0x3C672CEDD3D5A610, 0x3C75D28DA2C4612D, 0x3C626D19B9FF8D82, 0x3C3E2718D26ED688])
#: ``cos(j pi/32) = sin((j + 16) pi/32)``: the sine pairs 16 cells on (equal bit for bit to
#: MPFR's cosines rounded the same way: ``tools/f64_constants.py`` checks it).
_COS_HI, _COS_LO = np.roll(_SIN_HI, -16), np.roll(_SIN_LO, -16)
(_STEP_HI, _STEP_LO, _P1, _P2, _P3, _P4) = from_bits([
    0x3FB921FB54442D18, 0x3C51A62633145C07, 0x3FB921FB54800000, 0xBDCDE973DC800000,
    0xBBD9D9CCEB800000, 0xB9E1FC8F8CBB5BF7])
_32_OVER_PI = int(
    "145F306DC9C882A53F84EAFA3EA69BB81B6C52B3278872083FCA2C757BD778AC36E48DC74849BA5C"
    "00C925DD413A32439FC3BD63962534E7DD1046BEA5D768909D338E04D68BEFC827323AC7306A673E"
    "93908BF177BF250763FF12FFFBC0B301FDE5E2316B414DA3EDA6CFD9E4F96136E9E8C7ECD3CBFD45"
    "AEA4F758FD7CBE2F67A0E73EF14A525D4D7F6BF623F1ABA10AC", 16)
#: ``_32_OVER_PI`` is ``floor(2^_BITS 32/pi)``: enough bits for every window.
_BITS = _E_MAX + 186
_WINDOWS = [(_32_OVER_PI >> (_BITS - e - 186)) % 2**192 for e in range(_E_MIN, _E_MAX + 1)]
#: Payne and Hanek's windows, a 192-bit slice of 32/pi per exponent E of x = m 2^E (from
#: -33 to 971): ``G(E) = floor(2^(E + 186) 32/pi) mod 2^192``, as three u64 words, most
#: significant first (``tools/f64_constants.py`` checks them against their own
#: computation).
_WINDOW_2, _WINDOW_1, _WINDOW_0 = (
    np.array([(w >> shift) % 2**64 for w in _WINDOWS], np.uint64) for shift in (128, 64, 0))

#: Taylor coefficients, each rounded once to f64: sin's from r^5 (``_SIN_3`` is -1/6 as a
#: pair), cos's from r^4.
_SIN_3 = (np.float64(-1 / 6), np.float64(float(Fraction(-1, 6) - Fraction(-1 / 6))))
_SIN = tuple(np.float64(s) / np.float64(f) for s, f in ((1, 120), (-1, 5040), (1, 362880),
                                                       (-1, 39916800)))
_COS = tuple(np.float64(s) / np.float64(f) for s, f in (
    (1, 24), (-1, 720), (1, 40320), (-1, 3628800), (1, 479001600)))


def sin_f64(k: Kernel, x: Val) -> Val:
    """``sin x`` in f64."""
    s, _, a = _sin_cos(k, x)
    return _finish(x, a, _odd(s.hi, x), x)


def cos_f64(k: Kernel, x: Val) -> Val:
    """``cos x`` in f64."""
    _, c, a = _sin_cos(k, x)
    return _finish(x, a, c.hi, lit(1.0, F64))


def tan_f64(k: Kernel, x: Val) -> Val:
    """``tan x`` in f64."""
    s, c, a = _sin_cos(k, x)
    return _finish(x, a, _odd(ff.div(k, s, c).hi, x), x)


def _finish(x: Val, a: Val, y: Val, tiny: Val) -> Val:
    """``y``; ``tiny`` below 2^-27; NaN for infinities and NaN."""
    nan = lit(float("nan"), F64)
    return select(a < _TINY, tiny, select(a <= np.finfo(np.float64).max, y, nan))


def _odd(y: Val, x: Val) -> Val:
    """``y`` (of ``|x|``) with ``x``'s sign."""
    return select(x < 0.0, -y, y)


def _sin_cos(k: Kernel, x: Val) -> tuple[FF, FF, Val]:
    """``sin |x|`` and ``cos |x|`` as pairs, and ``|x|``."""
    a = ff.let(k, abs(x))
    small_r, small_j = _cody_waite(k, a)
    big_r, big_j = _payne_hanek(k, a)
    small = ff.let(k, a < _CODY_WAITE_BELOW)
    r = FF(ff.let(k, select(small, small_r.hi, big_r.hi)),
           ff.let(k, select(small, small_r.lo, big_r.lo)))
    j = ff.let(k, select(small, small_j, big_j))
    sin_r, cos_r = _sin_r(k, r), _cos_r(k, r)
    s_j = FF(ff.let(k, table(_SIN_HI, j)), ff.let(k, table(_SIN_LO, j)))
    c_j = FF(ff.let(k, table(_COS_HI, j)), ff.let(k, table(_COS_LO, j)))
    s = ff.add(k, ff.mul(k, s_j, cos_r), ff.mul(k, c_j, sin_r))
    minus = ff.mul(k, s_j, sin_r)
    c = ff.add(k, ff.mul(k, c_j, cos_r), FF(-minus.hi, -minus.lo))
    return s, c, a


def _cody_waite(k: Kernel, a: Val) -> tuple[FF, Val]:
    """``a = n pi/32 + r`` for ``a < 2^19``: ``r`` and ``n mod 64`` (u32)."""
    n = ff.let(k, ir.round(ir.min(a, _CODY_WAITE_BELOW) * _INV_STEP))
    first = ff.two_sum(k, (ir.min(a, _CODY_WAITE_BELOW) - n * _P1), -(n * _P2))
    second = ff.two_sum(k, first.hi, -(n * _P3))
    r = ff.two_sum(k, second.hi, (first.lo + second.lo) - n * _P4)
    return r, ff.let(k, cast(cast(n, I64) & 63, U32))


def _payne_hanek(k: Kernel, a: Val) -> tuple[FF, Val]:
    """``a = n pi/32 + r`` for ``a >= 2^19`` (finite): ``r`` and ``n mod 64`` (u32)."""
    bits = ff.let(k, bitcast(a, U64))
    m = ff.let(k, (bits & 0xFFFFFFFFFFFFF) | 0x10000000000000)
    e = cast(bits >> 52, I64) - (1075 + _E_MIN)
    at = ff.let(k, cast(ir.min(ir.max(e, lit(0, I64)), lit(_WINDOW_0.size - 1, I64)),
                        U32))
    g2, g1, g0 = (ff.let(k, table(w, at, U64)) for w in (_WINDOW_2, _WINDOW_1, _WINDOW_0))
    w0 = ff.let(k, m * g0)
    hi0 = ff.let(k, ir.mulhi(m, g0))
    w1 = ff.let(k, hi0 + m * g1)
    carry = select(w1 < hi0, lit(1, U64), lit(0, U64))
    w2 = ff.let(k, ir.mulhi(m, g1) + m * g2 + carry)
    # the point lies below bit 58 of w2: above it n mod 64, below it the fraction
    f2 = ff.let(k, w2 & 0x3FFFFFFFFFFFFFF)
    up = ff.let(k, (f2 >> 57) != 0)  # (a fraction of 1/2 or more: n + 1, r negative)
    borrow0 = w0 != 0
    n1 = ff.let(k, lit(0, U64) - w1 - select(borrow0, lit(1, U64), lit(0, U64)))
    borrow1 = ir.logical_or(w1 != 0, borrow0)
    n2 = (lit(1 << 58, U64) - f2 - select(borrow1, lit(1, U64), lit(0, U64)))
    m2 = ff.let(k, select(up, n2, f2))
    m1 = ff.let(k, select(up, n1, w1))
    m0 = ff.let(k, select(up, lit(0, U64) - w0, w0))
    # the fraction, in units of 2^-58 of a step: m2 + m1 2^-64 + m0 2^-128, as a pair
    head = ff.two_sum(k, cast(m2 >> 29, F64) * 2.0**29, cast(m2 & 0x1FFFFFFF, F64))
    part = ff.add_float(k, head, cast(m1 >> 32, F64) * 2.0**-32)
    part = ff.add_float(k, part, cast(m1 & 0xFFFFFFFF, F64) * 2.0**-64)
    part = ff.add_float(k, part, cast(m0 >> 32, F64) * 2.0**-96)
    r = ff.mul(k, FF(part.hi * 2.0**-58, part.lo * 2.0**-58),
               FF(lit(_STEP_HI, F64), lit(_STEP_LO, F64)))
    n = (w2 >> 58) + select(up, lit(1, U64), lit(0, U64))
    return (FF(ff.let(k, select(up, -r.hi, r.hi)), ff.let(k, select(up, -r.lo, r.lo))),
            ff.let(k, cast(n & 63, U32)))


def _sin_r(k: Kernel, r: FF) -> FF:
    """``sin r`` as a pair, ``|r| <= pi/64`` (relative error about 2^-100)."""
    square = ff.two_prod(k, r.hi, r.hi)
    rest = _SIN[-1]
    for c in reversed(_SIN[:-1]):
        rest = c + square.hi * rest
    coefficient = ff.fast_two_sum(k, _SIN_3[0], square.hi * rest)
    term = ff.mul(k, ff.mul_float(k, square, r.hi),
                  FF(coefficient.hi, ff.let(k, coefficient.lo + _SIN_3[1])))
    s = ff.fast_two_sum(k, r.hi, term.hi)
    return ff.fast_two_sum(k, s.hi, s.lo + (term.lo + r.lo * (1.0 - square.hi * 0.5)))


def _cos_r(k: Kernel, r: FF) -> FF:
    """``cos r`` as a pair, ``|r| <= pi/64`` (relative error about 2^-100)."""
    square = ff.two_prod(k, r.hi, r.hi)
    rest = _COS[-1]
    for c in reversed(_COS[:-1]):
        rest = c + square.hi * rest
    h = ff.fast_two_sum(k, lit(1.0, F64), square.hi * -0.5)
    low = (square.lo * -0.5 + (square.hi * square.hi) * rest) - r.lo * r.hi
    return ff.fast_two_sum(k, h.hi, h.lo + low)
