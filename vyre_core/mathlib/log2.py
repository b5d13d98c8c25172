"""``log2 x``, correctly rounded in f32 and f16 (docs/design-42.md, sections 2.4 and 8 step 6).

One float-float algorithm (f32 pairs, no f64, no ``fma``), as ``exp2.py``: every backend
runs the same operations, and the exhaustive check of every f32 input (``vyre conform
--exhaustive --all-inputs --op log2``) proves the bytes right once for all.

- ``x = 2^e m``, a subnormal ``x`` normalized by integer operations (``clz`` and a shift
  of its bits), never by a float multiply; ``m`` in [1, 2).
- ``j = round(128 (m - 1))`` (0 to 128) picks ``c_j``, about ``1 / m``; from ``j = 53``
  (``m`` past about sqrt(2)) the exponent takes one more and the table's ``-log2 c_j`` one
  less, so ``x`` near 1 (below as above) has ``e = 0`` and nothing cancels. ``c_0 = 1``
  and ``c_128 = 1/2``: near 1, ``r = m - 1`` or ``m / 2 - 1``, exactly.
- ``r = m c_j - 1`` exactly as a pair (``two_prod``; ``m c_j - 1`` is exact in its high
  part), ``|r| <= 2^-8``.
- ``ln(1 + r) = R - R^2/2 + R^3 (1/3 - R/4 + R^2 (1/5 - R/6 + R^2/7)) + rho (1 - R + R^2)``
  for ``r = R + rho``: ``R^2`` and ``R^3`` exact as pairs, ``1/3 - R/4`` as a pair, the
  rest in f32; times ``1/ln 2`` as a pair (``ff.mul``).
- ``log2 x = e + (-log2 c_j) + log2(1 + r)``: the table's pair and the polynomial's added
  in float-float, then the integer ``e``: a normalized pair within about 2^-47 (relative)
  of ``log2 x``, exact where ``x`` is a power of two (``r = 0``, ``c_j = 1``).

The f32 result is the pair's ``hi``: the last step is a ``fast_two_sum``, whose ``hi`` is
the exact sum ``hi + lo`` rounded to nearest even, which is the one rounding wanted (no
result is subnormal: the least nonzero ``|log2 x|`` is about 2^-23.5). f16 is the same
pair rounded once to f16 by ``ff.round_ff``. The f32 inputs whose pair lies too near a
rounding boundary to round right are listed with their correct results in
``_EXCEPTION_INPUTS``, found by running every f32 input against MPFR with the list empty.

Special values (docs/semantics.md, Floats): NaN for NaN and below zero, ``-inf`` for
``+-0``, ``+inf`` for ``+inf``; ``log2 1 = +0``.
"""

from __future__ import annotations

import numpy as np

from vyre_core.ir import builder as ir
from vyre_core.ir.builder import Kernel, Val, bitcast, cast, select, table
from vyre_core.ir.dtypes import DType
from vyre_core.mathlib import exceptions, ff
from vyre_core.mathlib.ff import FF

F32, I32, U32 = DType.F32, DType.I32, DType.U32


def _f32(bits: list[int]) -> np.ndarray:
    return np.array(bits, np.uint32).view(np.float32)


# Made by ``tools/log2_constants.py`` (gmpy2 at 200 bits, each part rounded once to f32):
# ``c_j = RN32(1 / (1 + j / 128))``; ``-log2(c_j)`` (less 1 from ``j = 53``) as ``hi + lo``;
# 1/3 and 1/ln 2 the same way.
_C = _f32([
    0x3F800000, 0x3F7E03F8, 0x3F7C0FC1, 0x3F7A232D, 0x3F783E10, 0x3F76603E, 0x3F74898D,
    0x3F72B9D6, 0x3F70F0F1, 0x3F6F2EB7, 0x3F6D7304, 0x3F6BBDB3, 0x3F6A0EA1, 0x3F6865AC,
    0x3F66C2B4, 0x3F652598, 0x3F638E39, 0x3F61FC78, 0x3F607038, 0x3F5EE95C, 0x3F5D67C9,
    0x3F5BEB62, 0x3F5A740E, 0x3F5901B2, 0x3F579436, 0x3F562B81, 0x3F54C77B, 0x3F53680D,
    0x3F520D21, 0x3F50B6A0, 0x3F4F6475, 0x3F4E168A, 0x3F4CCCCD, 0x3F4B8728, 0x3F4A4588,
    0x3F4907DA, 0x3F47CE0C, 0x3F46980C, 0x3F4565C8, 0x3F443730, 0x3F430C31, 0x3F41E4BC,
    0x3F40C0C1, 0x3F3FA030, 0x3F3E82FA, 0x3F3D6910, 0x3F3C5264, 0x3F3B3EE7, 0x3F3A2E8C,
    0x3F392144, 0x3F381703, 0x3F370FBB, 0x3F360B61, 0x3F3509E7, 0x3F340B41, 0x3F330F63,
    0x3F321643, 0x3F311FD4, 0x3F302C0B, 0x3F2F3ADE, 0x3F2E4C41, 0x3F2D602B, 0x3F2C7692,
    0x3F2B8F6A, 0x3F2AAAAB, 0x3F29C84A, 0x3F28E83F, 0x3F280A81, 0x3F272F05, 0x3F2655C4,
    0x3F257EB5, 0x3F24A9CF, 0x3F23D70A, 0x3F23065E, 0x3F2237C3, 0x3F216B31, 0x3F20A0A1,
    0x3F1FD80A, 0x3F1F1166, 0x3F1E4CAD, 0x3F1D89D9, 0x3F1CC8E1, 0x3F1C09C1, 0x3F1B4C70,
    0x3F1A90E8, 0x3F19D723, 0x3F191F1A, 0x3F1868C8, 0x3F17B426, 0x3F17012E, 0x3F164FDA,
    0x3F15A025, 0x3F14F209, 0x3F144581, 0x3F139A86, 0x3F12F114, 0x3F124925, 0x3F11A2B4,
    0x3F10FDBC, 0x3F105A38, 0x3F0FB824, 0x3F0F177A, 0x3F0E7835, 0x3F0DDA52, 0x3F0D3DCB,
    0x3F0CA29C, 0x3F0C08C1, 0x3F0B7034, 0x3F0AD8F3, 0x3F0A42F8, 0x3F09AE41, 0x3F091AC7,
    0x3F088889, 0x3F07F781, 0x3F0767AB, 0x3F06D905, 0x3F064B8A, 0x3F05BF37, 0x3F053408,
    0x3F04A9FA, 0x3F042108, 0x3F039930, 0x3F03126F, 0x3F028CC0, 0x3F020821, 0x3F01848E,
    0x3F010204, 0x3F008081, 0x3F000000])
_T_HI = _f32([
    0x80000000, 0x3C37F28B, 0x3CB73CB3, 0x3D08E68D, 0x3D35D690, 0x3D626FCC, 0x3D8759C9,
    0x3D9D5182, 0x3DB31FB7, 0x3DC8C50D, 0x3DDE420E, 0x3DF3975C, 0x3E0462C4, 0x3E0EE690,
    0x3E195751, 0x3E23B551, 0x3E2E00D1, 0x3E383A17, 0x3E42615F, 0x3E4C76EA, 0x3E567AEF,
    0x3E606DB6, 0x3E6A4F70, 0x3E74205F, 0x3E7DE0B5, 0x3E83C856, 0x3E88983F, 0x3E8D602E,
    0x3E92203D, 0x3E96D887, 0x3E9B8925, 0x3EA03234, 0x3EA4D3C2, 0x3EA96DEF, 0x3EAE00D1,
    0x3EB28C80, 0x3EB71110, 0x3EBB8E97, 0x3EC0052D, 0x3EC474E2, 0x3EC8DDD3, 0x3ECD4011,
    0x3ED19BAF, 0x3ED5F0C3, 0x3EDA3F60, 0x3EDE8798, 0x3EE2C97E, 0x3EE70525, 0x3EEB3A9E,
    0x3EEF69FF, 0x3EF39355, 0x3EF7B6B5, 0x3EFBD42A, 0xBF000A1B, 0xBEFC0258, 0xBEF7F630,
    0xBEF3EFB1, 0xBEEFEEC6, 0xBEEBF360, 0xBEE7FD74, 0xBEE40CED, 0xBEE021C1, 0xBEDC3BE5,
    0xBED85B40, 0xBED47FCD, 0xBED0A977, 0xBECCD838, 0xBEC90C02, 0xBEC544BF, 0xBEC1826C,
    0xBEBDC4F8, 0xBEBA0C56, 0xBEB6587A, 0xBEB2A959, 0xBEAEFEE7, 0xBEAB5916, 0xBEA7B7DF,
    0xBEA41B2F, 0xBEA08301, 0xBE9CEF46, 0xBE995FF9, 0xBE95D504, 0xBE924E6B, 0xBE8ECC18,
    0xBE8B4E03, 0xBE87D425, 0xBE845E6F, 0xBE80ECDE, 0xBE7AFEC6, 0xBE742BEA, 0xBE6D6112,
    0xBE669E35, 0xBE5FE33A, 0xBE593016, 0xBE5284A8, 0xBE4BE0EA, 0xBE4544C5, 0xBE3EB027,
    0xBE382301, 0xBE319D42, 0xBE2B1EE2, 0xBE24A7C5, 0xBE1E37D7, 0xBE17CF19, 0xBE116D6E,
    0xBE0B12C9, 0xBE04BF21, 0xBDFCE4A9, 0xBDF058D8, 0xBDE3DA8B, 0xBDD769D3, 0xBDCB0653,
    0xBDBEB02F, 0xBDB2671E, 0xBDA62B00, 0xBD99FBE1, 0xBD8DD98A, 0xBD81C3EF, 0xBD6B75DB,
    0xBD537CEB, 0xBD3B9C9B, 0xBD23D4F5, 0xBD0C25DA, 0xBCE91D95, 0xBCBA1FA1, 0xBC8B512E,
    0xBC3963D7, 0xBBB90785, 0x00000000])
_T_LO = _f32([
    0x00000000, 0x2FF99438, 0x306AD8AC, 0x30CADF72, 0x300750F2, 0x2F35B3E5, 0x317E79DF,
    0x312CD04F, 0x306CF2ED, 0xAF2C94EB, 0x3154346D, 0x3083AA10, 0xB10EAF75, 0xB1520CA0,
    0xB0F487D8, 0xB0F70766, 0x30B9A3C9, 0x2F734C64, 0x31688963, 0x315F1EA8, 0x30ABF127,
    0xAF93FEB0, 0x301698BB, 0x31A31134, 0x30769053, 0x321A7904, 0xB16EE805, 0x3225FE21,
    0xB2124974, 0x31A70A6A, 0x31F61CAF, 0xB2783C69, 0xB23482BD, 0xB00E0286, 0x3267132D,
    0x32078BB4, 0x31EA47EE, 0x3238C330, 0xB14D2C47, 0xB1DA9009, 0x324447DD, 0x319D7097,
    0x3243372A, 0x325F47B9, 0xB1408AE1, 0x324877B5, 0xB251152D, 0x313468F4, 0xB25F7A4B,
    0xB26A072A, 0xB25F74C4, 0x301AC6BB, 0x31521CB5, 0x32F52674, 0xB27C4B57, 0x3278E1C2,
    0x319A3B82, 0xB136C08A, 0xB214AE10, 0x30194125, 0x32638D7E, 0xB22FFC4A, 0x31BE244D,
    0xB19A6125, 0x2FA8CDC6, 0xB2535993, 0x31A0A393, 0x31D0D2AB, 0xB23027B0, 0x326FC226,
    0xB0AEEB1B, 0x30EDACE2, 0xB1B8BBB9, 0xB1B0E45C, 0x31D2FDBA, 0xB2404DE5, 0xB21A14F2,
    0xB20072C1, 0xB1C62728, 0xB246A56C, 0x313677CB, 0xB224F59A, 0xB1C74A8A, 0xB162965D,
    0xB227938C, 0x3215EAF8, 0x315DCF63, 0x320CAF00, 0xAE5C2CC2, 0x313592B1, 0xB1F29E72,
    0x31D934C4, 0xB13CB0A8, 0xB1FA9021, 0xAF24A044, 0xB1D0C207, 0x31AC096A, 0xB06A71A3,
    0xB1479F7A, 0xAF1CE812, 0xB00A7A0B, 0x31B39E92, 0x31855773, 0xB1A7954E, 0x318DF6F2,
    0xB1BC1889, 0xB13A5FE1, 0x31017CDB, 0x313825EF, 0x2F23AED8, 0x30FCA071, 0x30A0D266,
    0x30C0CBB7, 0x315ECFEC, 0x30A8D681, 0xB021FAC5, 0xB13C1251, 0xB1773284, 0x30E89A88,
    0xB0F1D16B, 0x306F63BB, 0xB035BB7B, 0x30E9BF96, 0xAFE744BD, 0x2F2E60B8, 0xAF2741BD,
    0xAF965380, 0xAEF0E9CC, 0x00000000])
_THIRD_HI, _THIRD_LO = _f32([0x3EAAAAAB, 0xB22AAAAB])
_INV_LN2_HI, _INV_LN2_LO = _f32([0x3FB8AA3B, 0x32A57060])


#: The first ``j`` whose significand is read as half of it, the exponent one higher.
_HALVED_FROM = 53

#: The f32 inputs (their bits, sorted) whose pair rounds the wrong way, and their correctly
#: rounded results' bits (``exceptions.corrected``): 48 of 2^32, two significands
#: (0x554996 and 0x7FC006, whose ``log2 m`` lies extremely close to an f32 midpoint in its
#: fraction) at the exponents where that fraction sets the last bit. Made over every f32
#: input with the list emptied (``tools/math_exceptions.py log2``, cpu).
_EXCEPTION_INPUTS = [
    0x2FD54996, 0x30554996, 0x30D54996, 0x31554996, 0x31D54996, 0x32554996, 0x32D54996,
    0x33554996, 0x33D54996, 0x34554996, 0x34D54996, 0x35554996, 0x35D54996, 0x36554996,
    0x36D54996, 0x37554996, 0x37FFC006, 0x387FC006, 0x38FFC006, 0x397FC006, 0x39FFC006,
    0x3A7FC006, 0x3AFFC006, 0x3B7FC006, 0x43FFC006, 0x447FC006, 0x44FFC006, 0x457FC006,
    0x45FFC006, 0x467FC006, 0x46FFC006, 0x477FC006, 0x47D54996, 0x48554996, 0x48D54996,
    0x49554996, 0x49D54996, 0x4A554996, 0x4AD54996, 0x4B554996, 0x4BD54996, 0x4C554996,
    0x4CD54996, 0x4D554996, 0x4DD54996, 0x4E554996, 0x4ED54996, 0x4F554996]
_EXCEPTION_RESULTS = [
    0xC1FA1B55, 0xC1F21B55, 0xC1EA1B55, 0xC1E21B55, 0xC1DA1B55, 0xC1D21B55, 0xC1CA1B55,
    0xC1C21B55, 0xC1BA1B55, 0xC1B21B55, 0xC1AA1B55, 0xC1A21B55, 0xC19A1B55, 0xC1921B55,
    0xC18A1B55, 0xC1821B55, 0xC17005C5, 0xC16005C5, 0xC15005C5, 0xC14005C5, 0xC13005C5,
    0xC12005C5, 0xC11005C5, 0xC10005C5, 0x410FFA3B, 0x411FFA3B, 0x412FFA3B, 0x413FFA3B,
    0x414FFA3B, 0x415FFA3B, 0x416FFA3B, 0x417FFA3B, 0x4185E4AB, 0x418DE4AB, 0x4195E4AB,
    0x419DE4AB, 0x41A5E4AB, 0x41ADE4AB, 0x41B5E4AB, 0x41BDE4AB, 0x41C5E4AB, 0x41CDE4AB,
    0x41D5E4AB, 0x41DDE4AB, 0x41E5E4AB, 0x41EDE4AB, 0x41F5E4AB, 0x41FDE4AB]


def log2_f32(k: Kernel, x: Val) -> Val:
    """``log2 x`` correctly rounded to f32, for an f32 ``x``."""
    pair = _core(k, x)
    rounded = _special(k, x, pair.hi)
    return exceptions.corrected(k, x, rounded, _EXCEPTION_INPUTS, _EXCEPTION_RESULTS)


def log2_f16(k: Kernel, x: Val) -> Val:
    """``log2 x`` correctly rounded to f16, for an f16 ``x``: the f32 algorithm's pair
    rounded once to f16."""
    return _special(k, x, ff.round_ff(k, _core(k, cast(x, F32)), 0, DType.F16))


def _let(k: Kernel, value: Val) -> Val:
    return k.let(k.fresh_name("log2_"), value)


def _special(k: Kernel, x: Val, finite: Val) -> Val:
    """``finite`` for positive finite ``x``; NaN for NaN and below zero, ``-inf`` at
    ``+-0``, ``+inf`` at ``+inf`` (in ``x``'s type)."""
    nan, minus_inf = ir.lit(float("nan"), x.dtype), ir.lit(float("-inf"), x.dtype)
    return select(x > 0.0, select(x == float("inf"), x, finite),
                  select(x == 0.0, minus_inf, nan))


def _core(k: Kernel, x: Val) -> FF:
    """``log2 x`` as a normalized pair, for a positive finite f32 ``x`` (any other input
    is read as 1 and its result replaced by ``_special``)."""
    raw = _let(k, bitcast(x, U32))
    bits = _let(k, select(raw - 1 < 0x7F7FFFFF, raw, 0x3F800000))  # (0 wraps past)
    shift = _let(k, select(bits < 0x800000, ir.clz(bits) - 8, ir.lit(0, U32)))
    normal = _let(k, bits << shift)
    mantissa = _let(k, normal & 0x7FFFFF)
    j = _let(k, (mantissa + 0x8000) >> 16)
    e = cast(normal >> 23, I32) - cast(shift, I32) - 127 + cast(
        select(j >= _HALVED_FROM, ir.lit(1, U32), ir.lit(0, U32)), I32)
    m = bitcast(mantissa | 0x3F800000, F32)
    product = ff.two_prod(k, m, table(_C, j))
    r = ff.fast_two_sum(k, product.hi - 1.0, product.lo)
    big, rho = r.hi, r.lo
    square = ff.two_prod(k, big, big)
    half = _let(k, square.hi * -0.5)
    # R^3 (1/3 - R/4 + R^2 (1/5 - R/6 + R^2/7)), the cube and its first two terms as pairs
    inner = 0.2 + big * (-1 / 6 + big * (1 / 7))
    g = ff.fast_two_sum(k, _THIRD_HI, big * -0.25)
    g = FF(g.hi, _let(k, g.lo + (_THIRD_LO + square.hi * inner)))
    cube = ff.two_prod(k, square.hi, big)
    cube = FF(cube.hi, _let(k, cube.lo + square.lo * big))
    third = ff.mul(k, cube, g)
    head = ff.fast_two_sum(k, big, half)
    sum3 = ff.fast_two_sum(k, head.hi, third.hi)
    low = sum3.lo + ((head.lo + third.lo) + (square.lo * -0.5 + rho * (1.0 - big + square.hi)))
    ln = ff.fast_two_sum(k, sum3.hi, low)
    poly = ff.mul(k, ln, FF(ir.lit(float(_INV_LN2_HI), F32), ir.lit(float(_INV_LN2_LO), F32)))
    frac = ff.add(k, FF(_let(k, table(_T_HI, j)), _let(k, table(_T_LO, j))), poly)
    whole = ff.two_sum(k, cast(e, F32), frac.hi)
    return ff.fast_two_sum(k, whole.hi, whole.lo + frac.lo)
