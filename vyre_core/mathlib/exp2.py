"""``2^x``, correctly rounded in f32 and f16 (docs/design-42.md, sections 2.4 and 8 step 5).

One float-float algorithm (f32 pairs, no f64, no ``fma``), so every backend that runs the
basic operations as written gives the same bits, and the exhaustive check of every f32
input (``vyre conform --exhaustive --all-inputs --op exp2``) proves them right once for
all:

- ``x`` is clamped to [-160, 140] (NaN taken to -160, its result replaced at the end):
  past either end every f32 result is 0 or infinity, and the clamped value gives it.
- ``n = round(64 x)`` (``64 x`` is exact), ``r = x - n / 64`` exact, ``|r| <= 2^-7``;
  ``2^x = 2^(n >> 6) * T_j * 2^r`` with ``j = n & 63`` and ``T_j = 2^(j / 64)`` read as
  a pair from two tables.
- ``2^r - 1 = e^s - 1`` with ``s = r ln 2`` as a pair (``two_prod``), ``s + s^2 / 2``
  with ``s_hi^2`` exact (``two_prod``), the rest ``s^2 / 2 (s / 3 + s^2 / 12 + s^3 / 60)``
  and the terms of ``s_lo`` in plain f32: absolute error about 2^-50.
- ``T (1 + p) = T_hi + T_hi p_hi + (the low terms)``, ``T_hi p_hi`` exact: a pair within
  about 2^-46 (relative, by the sizes of the f32 roundings of the low terms; the
  exhaustive run finds it wrong only where ``2^x`` lies within 2^-48 of a rounding
  boundary) of ``2^x``, at scale ``n >> 6``. Rounded once (subnormal results on their
  grid, overflow to infinity): to f32 by ``round_f32``, which does ``ff.round_ff``'s
  work for these pairs only, in a third of its operations; to f16 by ``ff.round_ff``,
  straight to f16 (never f16 of the rounded f32: design-42 section 4).

Integer ``x`` gives ``T = 1`` and ``r = 0``, so an exact power of two (``2^-150``, the
midpoint between 0 and the least subnormal, rounds to +0, ties to even). Every other
input has an irrational result; the f32 inputs whose pair lies too near a rounding
boundary to round right are listed in ``_EXCEPTION_INPUTS`` with their correct results, found
by running every f32 input against MPFR. No f16 input needs one (checked over all 65,536).
"""

from __future__ import annotations

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select, table
from vyre_core.ir.values import Val, bitcast, cast
from vyre_core.mathlib import exceptions, ff
from vyre_core.mathlib.ff import FF

F32, I32, U32 = DType.F32, DType.I32, DType.U32



# Made by ``tools/exp2_constants.py`` (gmpy2 at 200 bits, each part rounded
# once to f32): ``T_j = 2^(j / 64)`` as ``hi + lo``, hi = RN32(T_j), lo = RN32(T_j - hi);
# ln 2 the same way.
_T_HI = ff.from_bits([
    0x3F800000, 0x3F8164D2, 0x3F82CD87, 0x3F843A29, 0x3F85AAC3, 0x3F871F62, 0x3F88980F,
    0x3F8A14D5, 0x3F8B95C2, 0x3F8D1ADF, 0x3F8EA43A, 0x3F9031DC, 0x3F91C3D3, 0x3F935A2B,
    0x3F94F4F0, 0x3F96942D, 0x3F9837F0, 0x3F99E046, 0x3F9B8D3A, 0x3F9D3EDA, 0x3F9EF532,
    0x3FA0B051, 0x3FA27043, 0x3FA43516, 0x3FA5FED7, 0x3FA7CD94, 0x3FA9A15B, 0x3FAB7A3A,
    0x3FAD583F, 0x3FAF3B79, 0x3FB123F6, 0x3FB311C4, 0x3FB504F3, 0x3FB6FD92, 0x3FB8FBAF,
    0x3FBAFF5B, 0x3FBD08A4, 0x3FBF179A, 0x3FC12C4D, 0x3FC346CD, 0x3FC5672A, 0x3FC78D75,
    0x3FC9B9BE, 0x3FCBEC15, 0x3FCE248C, 0x3FD06334, 0x3FD2A81E, 0x3FD4F35B, 0x3FD744FD,
    0x3FD99D16, 0x3FDBFBB8, 0x3FDE60F5, 0x3FE0CCDF, 0x3FE33F89, 0x3FE5B907, 0x3FE8396A,
    0x3FEAC0C7, 0x3FED4F30, 0x3FEFE4BA, 0x3FF28177, 0x3FF5257D, 0x3FF7D0DF, 0x3FFA83B3,
    0x3FFD3E0C])
_T_LO = ff.from_bits([
    0x00000000, 0xB1C43FD0, 0xB34EA7A9, 0xB2F14C87, 0x334F9891, 0xB352C2E6, 0xB37EDA4B,
    0x336A92DE, 0xB260ABA1, 0x3336FCB7, 0xB3697465, 0x330628CD, 0x33675624, 0x32BC4F9C,
    0xB32E0212, 0x32DC8061, 0x33231B71, 0xB359BE90, 0xB30C5563, 0xB331A601, 0x33412342,
    0x31FB9715, 0x30C3125A, 0xB323EC33, 0xB32C9D5E, 0xB3162D36, 0xB3162B08, 0xB314AD82,
    0xB22DEAF6, 0xB3252DEB, 0xB37C5AA8, 0x32154889, 0x32CFE77A, 0xB266B974, 0x330EC5F7,
    0xB31BD983, 0xB3414FE8, 0xB3130B1A, 0xB2D6663E, 0xB2976DA2, 0x320AA837, 0xB2DD5119,
    0xB37323A2, 0xB006C6C2, 0x3228FC24, 0xB2944353, 0xB35C1DAA, 0xB3286024, 0xB2D4A58A,
    0xB2F61D41, 0xB3504A1C, 0xB37B43E3, 0xB21EAB59, 0x33657D15, 0xB2441BE6, 0x33207898,
    0xB24116DE, 0x3276CCA1, 0xB348464A, 0x32F167FF, 0x32292436, 0x336615A2, 0xB2923758,
    0x31CF486C])
_LN2_HI, _LN2_LO = ff.from_bits([0x3F317218, 0xB102E308])

#: The f32 inputs (their bits, sorted) whose pair rounds the wrong way, and their
#: correctly rounded results' bits (``exceptions.corrected``): 13 of 2^32, every one with
#: |x| < 0.1 (where most inputs with results other than 0, 1 and infinity lie) and 2^x within
#: 2^-48 (relative) of a rounding boundary. Made over every f32 input with the list
#: empty (``tools/math_exceptions.py exp2`` does it now; then a tool of its own, at commit
#: 44b0607 plus this file); every later version of this file is held to the same bytes on
#: all 2^32 inputs (``vyre conform --exhaustive --all-inputs --op exp2``).
_EXCEPTION_INPUTS = [
    0x33B8AA3B, 0x37E338EB, 0x383ECB1D, 0x3B429D37, 0x3B53AA14, 0x3C02A9AD, 0x3DC9ABE2,
    0xB4FDEA14, 0xB5160A52, 0xB63B8CF0, 0xB8D3D026, 0xBCAF4D02, 0xBCF3A937]
_EXCEPTION_RESULTS = [
    0x3F800001, 0x3F80009D, 0x3F800109, 0x3F804385, 0x3F804971, 0x3F80B5A3, 0x3F890AB5,
    0x3F7FFFFB, 0x3F7FFFF9, 0x3F7FFFDF, 0x3F7FFB69, 0x3F7C3B19, 0x3F7AC6B1]


def exp2_f32(k: Kernel, x: Val) -> Val:
    """``2^x`` correctly rounded to f32, for an f32 ``x``: NaN for NaN, +0 at and below
    -150, +inf from 128 up."""
    pair, scale = _core(k, x)
    rounded = round_f32(k, pair, scale)
    return select(x != x, x, exceptions.corrected(k, x, rounded, _EXCEPTION_INPUTS,
                                                  _EXCEPTION_RESULTS))


def exp2_f16(k: Kernel, x: Val) -> Val:
    """``2^x`` correctly rounded to f16, for an f16 ``x``: the f32 algorithm's pair
    rounded once to f16 (+0 at and below -25, +inf from 16 up, NaN for NaN)."""
    pair, scale = _core(k, cast(x, F32))
    return select(x != x, x, ff.round_ff(k, pair, scale, DType.F16))



def _core(k: Kernel, x: Val) -> tuple[FF, Val]:
    """``2^x = 2^scale * (hi + lo)`` for an f32 ``x``, the pair within about 2^-46 of it
    (relative) and ``hi`` in [0.99, 2)."""
    x = ff.let(k, select(x >= -160.0, select(x <= 140.0, x, 140.0), -160.0))
    n = ff.let(k, cast(ir.round(x * 64.0), I32))
    r = ff.let(k, x - cast(n, F32) * (1 / 64))
    # s = r ln 2 as a pair, |s| < 2^-7.5
    s = ff.two_prod(k, r, _LN2_HI)
    s_lo = ff.let(k, s.lo + r * _LN2_LO)
    return table_times_exp(k, FF(s.hi, s_lo), n), ff.let(k, n >> 6)


def table_times_exp(k: Kernel, s: FF, n: Val) -> FF:
    """``2^((n & 63) / 64) * e^(s.hi + s.lo)`` as a normalized pair, ``hi`` in [0.99, 2),
    within about 2^-46 (relative), for ``|s.hi| <= 2^-7.5`` and ``s.lo`` below 2^-27 (the
    core of ``exp2`` and ``exp``, one code for both). ``e^s - 1 = (e^s_hi - 1) + s_lo (1 +
    s_hi + s_hi^2/2)`` (to 2^-56), ``e^s_hi - 1 = s_hi + s_hi^2/2 (1 + s_hi/3 + s_hi^2/12
    + s_hi^3/60)`` (the next term, s^6/720, is below 2^-54), then ``T (1 + p) = T_hi +
    T_hi p_hi`` (exact, as a pair) ``+ T_hi p_lo + T_lo + T_lo p_hi``."""
    j = ff.let(k, cast(n & 63, U32))
    t_hi, t_lo = ff.let(k, table(_T_HI, j)), ff.let(k, table(_T_LO, j))
    square = ff.two_prod(k, s.hi, s.hi)
    half = ff.let(k, square.hi * 0.5)
    tail = half * (s.hi * (1 / 3 + s.hi * (1 / 12 + s.hi * (1 / 60))))
    rest = (square.lo * 0.5 + s.lo * (s.hi + half)) + tail
    p = ff.fast_two_sum(k, s.hi, half)
    p_lo = ff.let(k, p.lo + (s.lo + rest))
    product = ff.two_prod(k, t_hi, p.hi)
    low = ((product.lo + t_lo * p.hi) + t_hi * p_lo) + t_lo
    head = ff.fast_two_sum(k, t_hi, product.hi)
    return ff.fast_two_sum(k, head.hi, head.lo + low)


def round_f32(k: Kernel, x: FF, scale: Val) -> Val:
    """``ff.round_ff(k, x, scale)`` for ``_core``'s pairs (``hi`` in [0.99, 2), the pair
    normalized, ``scale`` in [-160, 140]) in a third of its operations (36 against 112;
    measured, round_ff is nearly half of the function's cost otherwise). A normal result
    is ``2^scale hi`` exactly, by two exact products (overflow gives infinity): ``hi`` is
    already the pair rounded to f32. Below the normal range (``scale <= -126``, results
    under 2^-125, whose quantum is 2^-149), the pair is scaled onto the integer grid of
    2^-149 (``H + L``, both exact) and ``H`` rounded to an integer, ties to even: ``L``,
    at most half an ulp of ``H``, changes that integer only where ``H`` is a midpoint
    (then ``L``'s sign decides), and the integer is the result's bits."""
    half = ff.let(k, scale >> 1)
    normal = (x.hi * ff.power_of_two(half)) * ff.power_of_two(scale - half)
    quanta = ff.let(k, ff.power_of_two(ir.min(scale + 149, 23)))
    big, little = ff.let(k, x.hi * quanta), ff.let(k, x.lo * quanta)
    nearest = ff.let(k, ir.round(big))
    off = ff.let(k, big - nearest)
    up = select(ir.logical_and(off == 0.5, little > 0.0), 1.0, 0.0)
    down = select(ir.logical_and(off == -0.5, little < 0.0), 1.0, 0.0)
    subnormal = bitcast(cast(nearest + up - down, U32), F32)
    return select(scale <= -126, subnormal, normal)
