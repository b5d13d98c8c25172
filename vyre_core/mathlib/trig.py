"""``sin x`` and ``cos x``, correctly rounded in f32 and f16 (docs/design-42.md, sections
2.4 and 8 step 10).

One float-float algorithm (f32 pairs, no f64, no ``fma``) for both, as ``exp2.py``: every
backend runs the same operations, and the exhaustive check of every f32 input (``vyre
conform --exhaustive --all-inputs --op sin``, ``--op cos``) proves the bytes right once
for all.

- Reduction of ``|x|`` (``reduced``, which tan.py shares): ``|x| = (n + f) pi / 64``,
  ``n`` an integer (only its last 7 bits matter), ``|f| <= 1/2``, ``r = f pi / 64`` as a
  pair, ``|r| <= pi / 128``. Payne and Hanek's for every argument from 0.0245 up: ``|x| =
  m 2^e`` (``m`` the 24-bit significand) times the 128 bits of ``2/pi`` from its bit of
  weight ``2^-(e - 1)`` on (the bits before it give multiples of 128 in ``64 |x| / pi``),
  in u32 limbs (``mulhi`` gives each high word), leaves ``n`` mod 128 in the product's
  bits 121 to 127 and ``f`` in the bits below; ``f``'s top 72 bits as three exact f32 (a
  signed one, then two unsigned), summed as a pair, times ``pi / 64`` as a pair
  (``ff.mul``). Below 0.0245 (under ``pi / 128``), ``r = |x|`` exactly and ``n = 0``. No
  branch: both are computed and one is selected, the same work for every input.
- ``sin x = sin(|x| + pi)`` for ``x < 0`` (``n`` moved by 64) and ``cos x = sin(|x| +
  pi/2)`` (by 32): both are ``sin(q pi / 2 + j pi / 64 + r)``, ``q`` the bits 5 and 6 of
  ``n``, ``j`` its last 5: ``A cos r + B sin r`` where ``(A, B)`` is ``(S_j, C_j)`` for
  even ``q``, ``(C_j, -S_j)`` for odd, negated from ``q = 2``, ``S_j = sin(j pi / 64)`` a
  pair from a table of 33 (``C_j`` is entry ``32 - j``).
- ``sin r = r + r^3 P(r^2)``, ``P`` to ``r^6 / 362880`` with its ``-1/6`` as a pair, the
  cube as a pair; ``cos r = 1 + c``, ``c = -(r^2 + r^2 w) / 2``, ``w = -r^2/12 + r^4/360 -
  r^6/20160``, ``r^2`` and ``r^2 w`` as exact pairs (``two_prod``). Then
  ``A + (A c + B sin r)`` in pairs: within about 2^-49 of the value (relative; an
  estimate from the roundings' sizes: 75 of the 2^31 positive f32 inputs round the wrong
  way without the lists; the exhaustive run is the proof).

The pair's last step is a ``fast_two_sum``, so its ``hi`` is its sum rounded to f32, the
one rounding wanted for f32 (no result is subnormal: below 2^-12, ``sin x`` rounds to
``x`` itself and is taken so, and elsewhere ``|sin x|`` and ``|cos x|`` stay far above
2^-126). f16 is the pair rounded once to f16 by ``ff.round_ff``. The f32 inputs whose pair
lies too near a rounding boundary are listed with their correct results, found by running
every f32 input against MPFR with the lists empty (``tools/math_exceptions.py``).

Special values (docs/semantics.md, Floats): NaN for NaN and ``+-inf``; ``sin(+-0) = +-0``,
``cos(+-0) = 1``.
"""

from __future__ import annotations

import numpy as np

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select, table
from vyre_core.ir.values import Val, bitcast, cast, lit
from vyre_core.mathlib import exceptions, ff
from vyre_core.mathlib.ff import FF

F32, I32, U32 = DType.F32, DType.I32, DType.U32


# Made by ``tools/trig_constants.py`` (gmpy2 at 400 bits, each pair's parts rounded once
# to f32): the words of 2/pi after a word of zeros; sin(j pi / 64), j = 0..32, as pairs;
# pi / 64 and 1/6 as pairs.
_TWO_OVER_PI = np.array([
    0x00000000, 0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0, 0xDB629599, 0x3C439041,
    0xFE5163AB, 0xDEBBC561], np.uint32)
_SIN_HI = ff.from_bits([
    0x00000000, 0x3D48FB30, 0x3DC8BD36, 0x3E164083, 0x3E47C5C2, 0x3E78CFCC, 0x3E94A031,
    0x3EAC7CD4, 0x3EC3EF15, 0x3EDAE880, 0x3EF15AEA, 0x3F039C3D, 0x3F0E39DA, 0x3F187FC0,
    0x3F226799, 0x3F2BEB4A, 0x3F3504F3, 0x3F3DAEF9, 0x3F45E403, 0x3F4D9F02, 0x3F54DB31,
    0x3F5B941A, 0x3F61C598, 0x3F676BD8, 0x3F6C835E, 0x3F710908, 0x3F74FA0B, 0x3F7853F8,
    0x3F7B14BE, 0x3F7D3AAC, 0x3F7EC46D, 0x3F7FB10F, 0x3F800000])
_SIN_LO = ff.from_bits([
    0x00000000, 0xB0EF227F, 0xB07592F5, 0x31E8E614, 0xB0E5967D, 0xB11BD41D, 0x326D59F0,
    0xB2254E02, 0x31D5D52C, 0x321E15CC, 0xB1FF2139, 0xB25BA002, 0xB24A32E7, 0xB1C7A3F3,
    0x322123BB, 0xB2B73136, 0x324FE77A, 0x319AABEC, 0x32B15174, 0x327E70E8, 0x3290EA1A,
    0x32232DC8, 0xB2E7F425, 0xB2BC3389, 0x32F328D4, 0x321ED0DD, 0xB2939D22, 0xB20DB9E5,
    0x32FF75CB, 0xB0F75AE9, 0x31F44949, 0x31DE5B5F, 0x00000000])
_STEP_HI, _STEP_LO = ff.from_bits([0x3D490FDB, 0xB0BBBD2E])
_SIXTH_HI, _SIXTH_LO = ff.from_bits([0x3E2AAAAB, 0xB1AAAAAB])
#: Below this ``|x|`` (f32, under ``pi / 128``) the reduction is ``r = |x|``, ``n = 0``.
_SMALL = 0.0245
#: Below this ``|x|`` (2^-12) ``sin x`` rounds to ``x`` in f32 (``x^3 / 6`` is under a
#: quarter of ``x``'s ulp).
_TINY = 2.0**-12

#: The positive f32 inputs (their bits, sorted) whose pair rounds the wrong way, and their
#: correctly rounded results' bits (``exceptions.corrected``): 38 for sin, 37 for cos, of
#: 2^31; each one's negative is misrounded too, the mirror image (sin is odd, cos even,
#: and the code reads only ``|x|`` and the sign), so the lists are looked up with ``|x|``.
#: Made over every f32 input with the lists empty (``tools/math_exceptions.py sin``,
#: ``... cos``, cpu: 76 and 74 inputs, every one's mirror among them).
_SIN_EXCEPTION_INPUTS = [
    0x3A852018, 0x3DCF5597, 0x3EF3830F, 0x3FA0FA4E, 0x401F2100, 0x42D44528, 0x4605B1C7,
    0x46199998, 0x4967CB9B, 0x497D25C7, 0x4A987933, 0x4CF3E70E, 0x4DF947F3, 0x4F45DCAB,
    0x4FB56937, 0x55CAFB2A, 0x55DA572E, 0x5CDAA4F7, 0x5D937CE2, 0x616D8730, 0x61DFC847,
    0x6201BE80, 0x64E5A461, 0x653CEE8F, 0x6652A0DC, 0x67051B8D, 0x67A9242B, 0x6A3F60FF,
    0x6D734599, 0x6DCEA82E, 0x6E649053, 0x726FD58E, 0x729085EF, 0x7970A79D, 0x7A175DF8,
    0x7A5AACDB, 0x7A93D493, 0x7BCEBCDD]
_SIN_EXCEPTION_RESULTS = [
    0x3A852017, 0x3DCEFAF9, 0x3EEA6F45, 0x3F738CB1, 0x3F1BFC6F, 0xBF20C9A7, 0xBF7343E3,
    0xBEB1FA5D, 0x3EC9DF85, 0xBEB31EC5, 0xBF70F319, 0xBF3D38C3, 0xBF1F1F91, 0x3F3539DD,
    0xBF7FFCB7, 0xBF7E7A17, 0x3D9ED773, 0x3F7108DB, 0xBF757E8D, 0x3F67EF01, 0xBF0094DF,
    0x3D9D0AA3, 0xBE9D4F71, 0x3F30DF39, 0x3F388139, 0xBE7CCF49, 0xBF7FAB81, 0xBF79EE5F,
    0xBF5B5135, 0x3F40F5E1, 0xBEDF21A7, 0xBE03539F, 0xBF348B3D, 0x3F4207C3, 0xBE5B0933,
    0x3EDA83BB, 0x3F406F11, 0xBE26A9AF]
_COS_EXCEPTION_INPUTS = [
    0x3A0F1BBD, 0x3A544395, 0x3B434E12, 0x3CFCFBFF, 0x3DAC4FC0, 0x3FAA2672, 0x3FDB3C0E,
    0x4010A4BF, 0x42378DB8, 0x46F85A22, 0x4B511330, 0x4C46D929, 0x4E5B65FF, 0x4EB4D529,
    0x52D9D3FE, 0x52F88494, 0x543F6E04, 0x5922AA80, 0x5BAE7209, 0x5D173A7D, 0x5DA7AB87,
    0x5DF96A14, 0x5F18B878, 0x6094669A, 0x6115CB11, 0x6978E912, 0x6AA2E13A, 0x6F611333,
    0x75DA4C95, 0x768BD236, 0x7908CD73, 0x79F953B7, 0x7A38AB34, 0x7D378AEF, 0x7DB91687,
    0x7DBEB31D, 0x7E82FEA4]
_COS_EXCEPTION_RESULTS = [
    0x3F7FFFFD, 0x3F7FFFFB, 0x3F7FFFB5, 0x3F7FE0C1, 0x3F7F182D, 0x3E74E5B3, 0xBE10E4B3,
    0xBF22CEA3, 0xBEA87A07, 0xBF4232B9, 0x3F0EFFC7, 0xBD293D05, 0xBF62075D, 0xBDC9A075,
    0xBF5E187B, 0x3F5C5971, 0x3F0F0187, 0x3F08AEBF, 0xBE11D727, 0xBF7FF3BF, 0xBF73E8CB,
    0x3F37DEEF, 0x3F7F14BB, 0xBEE0428D, 0x3F78142F, 0xBD769CA5, 0x3F58445F, 0xBE319779,
    0x3F7AEABB, 0xBF2045FB, 0x3F798BB5, 0x3F6A411B, 0x3F7B3195, 0x3D98150F, 0x3EDFE26D,
    0xBF4FBAFD, 0xBE0D7DA7]


def sin_f32(k: Kernel, x: Val) -> Val:
    """``sin x`` correctly rounded to f32, for an f32 ``x``."""
    sign = ff.let(k, bitcast(x, U32) & 0x80000000)
    pair = _core(k, x, sign >> 25)  # (64 for x < 0: sin(|x| + pi) = -sin |x|)
    rounded = select(abs(x) < _TINY, x, pair.hi)
    # the list holds |x| and sin |x|: the flipped sign read, then put back
    flipped = exceptions.corrected(k, abs(x), _flip(rounded, sign), _SIN_EXCEPTION_INPUTS,
                                   _SIN_EXCEPTION_RESULTS)
    return special(x, _flip(flipped, sign))


def cos_f32(k: Kernel, x: Val) -> Val:
    """``cos x`` correctly rounded to f32, for an f32 ``x``."""
    pair = _core(k, x, lit(32, U32))
    # (the list holds |x|: cos is even, and so is this code, which reads only |x|)
    return special(x, exceptions.corrected(k, abs(x), pair.hi, _COS_EXCEPTION_INPUTS,
                                            _COS_EXCEPTION_RESULTS))


def sin_f16(k: Kernel, x: Val) -> Val:
    """``sin x`` correctly rounded to f16, for an f16 ``x``: the f32 algorithm's pair
    rounded once to f16 (``x`` itself at ``+-0``, for the sign)."""
    wide = ff.let(k, cast(x, F32))
    pair = _core(k, wide, (bitcast(wide, U32) & 0x80000000) >> 25)
    return special(x, select(x == 0.0, x, ff.round_ff(k, pair, 0, DType.F16)))


def cos_f16(k: Kernel, x: Val) -> Val:
    """``cos x`` correctly rounded to f16, for an f16 ``x``: the f32 algorithm's pair
    rounded once to f16."""
    pair = _core(k, cast(x, F32), lit(32, U32))
    return special(x, ff.round_ff(k, pair, 0, DType.F16))


def _flip(v: Val, sign: Val) -> Val:
    """The f32 ``v`` with its sign bit flipped where ``sign`` (u32) is 0x80000000."""
    return bitcast(bitcast(v, U32) ^ sign, F32)


def special(x: Val, finite: Val) -> Val:
    """``finite`` for finite ``x``, NaN for NaN and ``+-inf`` (in ``x``'s type)."""
    return select(abs(x) < float("inf"), finite, lit(float("nan"), x.dtype))


def _core(k: Kernel, x: Val, turn: Val) -> FF:
    """``sin(|x| + turn pi / 64)`` as a normalized pair, for a finite f32 ``x`` and a u32
    ``turn`` (0, 32 or 64)."""
    r, n = reduced(k, x)
    n = ff.let(k, n + turn)
    j = ff.let(k, n & 31)
    odd = ff.let(k, (n & 32) != 0)
    s_hi, s_lo = ff.let(k, table(_SIN_HI, j)), ff.let(k, table(_SIN_LO, j))
    c_hi, c_lo = ff.let(k, table(_SIN_HI, 32 - j)), ff.let(k, table(_SIN_LO, 32 - j))
    a = FF(ff.let(k, select(odd, c_hi, s_hi)), ff.let(k, select(odd, c_lo, s_lo)))
    b = FF(ff.let(k, select(odd, -s_hi, c_hi)), ff.let(k, select(odd, -s_lo, c_lo)))
    sine, cosine_less_1 = _sin_cos(k, r)
    value = ff.add(k, a, ff.add(k, ff.mul(k, a, cosine_less_1), ff.mul(k, b, sine)))
    negate = ff.let(k, (n & 64) != 0)
    return FF(select(negate, -value.hi, value.hi), select(negate, -value.lo, value.lo))


def _sin_cos(k: Kernel, r: FF) -> tuple[FF, FF]:
    """``sin r`` and ``cos r - 1`` as pairs, for ``|r| <= pi / 128`` (a pair)."""
    z = ff.two_prod(k, r.hi, r.hi)
    # sin r = r + r^3 P(r^2), P = -1/6 + r^2/120 - r^4/5040 + r^6/362880
    tail = z.hi * (1 / 120 + z.hi * (-1 / 5040 + z.hi * (1 / 362880)))
    p = ff.fast_two_sum(k, -_SIXTH_HI, tail)
    p = FF(p.hi, ff.let(k, p.lo - _SIXTH_LO))
    cube = ff.mul_float(k, z, r.hi)
    cube = FF(cube.hi, ff.let(k, cube.lo + z.hi * r.lo * 3.0))
    t = ff.mul(k, cube, p)
    head = ff.fast_two_sum(k, r.hi, t.hi)
    sine = ff.fast_two_sum(k, head.hi, head.lo + (r.lo + t.lo))
    # cos r - 1 = -(r^2 + r^2 w) / 2, w = -r^2/12 + r^4/360 - r^6/20160
    w = z.hi * (-1 / 12 + z.hi * (1 / 360 + z.hi * (-1 / 20160)))
    zw = ff.two_prod(k, z.hi, w)
    square = ff.fast_two_sum(k, z.hi, zw.hi)
    low = square.lo + ((z.lo + r.hi * r.lo * 2.0) + zw.lo)
    half = ff.fast_two_sum(k, square.hi, low)
    return sine, FF(ff.let(k, half.hi * -0.5), ff.let(k, half.lo * -0.5))


def reduced(k: Kernel, x: Val) -> tuple[FF, Val]:
    """``|x| = (n + f) pi / 64`` for a finite f32 ``x``: ``r = f pi / 64`` as a pair and
    ``n`` (u32, right modulo 128), by Payne and Hanek's method (module docstring)."""
    magnitude = ff.let(k, bitcast(x, U32) & 0x7FFFFFFF)
    ax = ff.let(k, bitcast(magnitude, F32))
    m = ff.let(k, (magnitude & 0x7FFFFF) | 0x800000)
    start = ff.let(k, ir.max(magnitude >> 23, lit(121, U32)) - 120)  # e + 30
    word, shift = ff.let(k, start >> 5), ff.let(k, start & 31)
    raw = [ff.let(k, table(_TWO_OVER_PI, word + i)) for i in range(5)]
    window = [ff.let(k, (raw[i] << shift) | ((raw[i + 1] >> 1) >> (31 - shift)))
              for i in range(4)]
    low = [ff.let(k, m * w) for w in window]
    high = [ff.let(k, ir.mulhi(m, w)) for w in window]
    one, zero = lit(1, U32), lit(0, U32)
    q1 = ff.let(k, high[3] + low[2])
    carry = select(q1 < high[3], one, zero)
    t2 = ff.let(k, high[2] + low[1])
    q2 = ff.let(k, t2 + carry)
    carry = select(t2 < high[2], one, zero) + select(q2 < t2, one, zero)
    q3 = ff.let(k, high[1] + low[0] + carry)
    g2 = ff.let(k, (q3 << 7) | (q2 >> 25))
    g1 = ff.let(k, (q2 << 7) | (q1 >> 25))
    g0 = (q1 << 7) | (low[3] >> 25)
    n = (q3 >> 25) + (g2 >> 31)
    top = cast(bitcast(g2, I32) >> 8, F32) * 2.0**-24
    middle = cast(((g2 & 0xFF) << 16) | (g1 >> 16), F32) * 2.0**-48
    bottom = cast(((g1 & 0xFFFF) << 8) | (g0 >> 24), F32) * 2.0**-72
    f = ff.add_float(k, ff.two_sum(k, top, middle), bottom)
    r = ff.mul(k, f, FF(lit(float(_STEP_HI), F32), lit(float(_STEP_LO), F32)))
    small = ff.let(k, ax < _SMALL)
    return (FF(ff.let(k, select(small, ax, r.hi)), ff.let(k, select(small, 0.0, r.lo))),
            ff.let(k, select(small, zero, n)))
