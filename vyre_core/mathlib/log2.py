"""``log2 x``, correctly rounded in f32 and f16 (docs/design-42.md, sections 2.4 and 8 step 6).

One float-float algorithm (f32 pairs, no f64, no ``fma``), as ``exp2.py``: every backend
runs the same operations, and the exhaustive check of every f32 input (``vyre conform
--exhaustive --all-inputs --op log2``) proves the bytes right once for all.

- ``x = 2^e m``, a subnormal ``x`` normalized by integer operations (``clz`` and a shift
  of its bits), never by a float multiply; ``m`` in [1, 2).
- ``j = round(128 (m - 1))`` (0 to 128) gives ``c_j``, about ``1 / m`` (computed, not
  read: ``_reciprocal``); from ``j = 53`` (``m`` past about sqrt(2)) the exponent takes
  one more and the table's ``-log2 c_j`` one less, so ``x`` near 1 (below as above) has
  ``e = 0`` and nothing cancels. ``c_0 = 1`` and ``c_128 = 1/2``: near 1, ``r = m - 1``
  or ``m / 2 - 1``, exactly.
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

Cost (``vyre bench --only math.log2_``, 4 Mi f32, alternating with main's code on the
shared 2-core machine): cpu about 32 ms against today's 10 to 18, wgpu (lavapipe) about
175 ms against 62 to 70: over the issue's 2x there. Then most of it was tables: wgpu
gave every invocation its own copy of each (this function's 258 words and the exception
list's 112 cost about as much as its 290 operations), so ``c_j`` is computed. wgpu's
tables are one storage buffer now (BENCHMARKS.md, session 26): a read is one load, no
copy, and this function gained about 25% from it.

Special values (docs/semantics.md, Floats): NaN for NaN and below zero, ``-inf`` for
``+-0``, ``+inf`` for ``+inf``; ``log2 1 = +0``.
"""

from __future__ import annotations

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select, table
from vyre_core.ir.values import Val, bitcast, cast, lit
from vyre_core.mathlib import exceptions, ff
from vyre_core.mathlib.ff import FF

F32, I32, U32 = DType.F32, DType.I32, DType.U32



# Made by ``tools/log2_constants.py`` (gmpy2 at 200 bits, each part rounded once to f32):
# ``-log2(c_j)`` (less 1 from ``j = 53``) as ``hi + lo`` for ``_reciprocal``'s ``c_j``;
# 1/3 and 1/ln 2 the same way.
_T_HI = ff.from_bits([
    0x80000000, 0x3C382A86, 0x3CB75250, 0x3D08EEC4, 0x3D35DC84, 0x3D627433, 0x3D875B40,
    0x3D9D529A, 0x3DB3206F, 0x3DC8C589, 0x3DDE4272, 0x3DF3978E, 0x3E0462D0, 0x3E0EE696,
    0x3E195751, 0x3E23B557, 0x3E2E00CB, 0x3E383A17, 0x3E426159, 0x3E4C76E4, 0x3E567AF6,
    0x3E606DB6, 0x3E6A4F77, 0x3E742066, 0x3E7DE0C3, 0x3E83C856, 0x3E889842, 0x3E8D6035,
    0x3E922044, 0x3E96D895, 0x3E9B893E, 0x3EA03250, 0x3EA4D3E6, 0x3EA96E1E, 0x3EAE0110,
    0x3EB28CCA, 0x3EB71165, 0x3EBB8EFC, 0x3EC0059D, 0x3EC47566, 0x3EC8DE6F, 0x3ECD40C0,
    0x3ED19C73, 0x3ED5F19F, 0x3EDA4054, 0x3EDE88A2, 0x3EE2CAA4, 0x3EE70661, 0x3EEB3BF3,
    0x3EEF6B6A, 0x3EF394DA, 0x3EF7B84D, 0x3EFBD5E0, 0xBF000938, 0xBEFC007D, 0xBEF7F445,
    0xBEF3EDAF, 0xBEEFECB4, 0xBEEBF148, 0xBEE7FB4C, 0xBEE40ABD, 0xBEE01F8B, 0xBEDC39A3,
    0xBED858FB, 0xBED47D85, 0xBED0A735, 0xBECCD5FB, 0xBEC909CB, 0xBEC5428E, 0xBEC18045,
    0xBEBDC2D8, 0xBEBA0A49, 0xBEB6567D, 0xBEB2A770, 0xBEAEFD0D, 0xBEAB5751, 0xBEA7B62F,
    0xBEA41999, 0xBEA08180, 0xBE9CEDDA, 0xBE995EA3, 0xBE95D3C9, 0xBE924D46, 0xBE8ECB09,
    0xBE8B4D10, 0xBE87D348, 0xBE845DA9, 0xBE80EC2F, 0xBE7AFD8E, 0xBE742AE2, 0xBE6D6027,
    0xBE669D6F, 0xBE5FE292, 0xBE592F8B, 0xBE528430, 0xBE4BE086, 0xBE45447E, 0xBE3EAFEA,
    0xBE3822D8, 0xBE319D2E, 0xBE2B1ED8, 0xBE24A7B0, 0xBE1E37D7, 0xBE17CF19, 0xBE116D63,
    0xBE0B12C9, 0xBE04BF17, 0xBDFCE4A9, 0xBDF058C2, 0xBDE3DA8B, 0xBDD769BD, 0xBDCB0668,
    0xBDBEB019, 0xBDB2671E, 0xBDA62B16, 0xBD99FBE1, 0xBD8DD974, 0xBD81C3D9, 0xBD6B7582,
    0xBD537BE0, 0xBD3B9B35, 0xBD23D2DA, 0xBD0C22AE, 0xBCE914BE, 0xBCBA138F, 0xBC8B40C9,
    0xBC3938E6, 0xBBB8976E, 0x00000000])
_T_LO = ff.from_bits([
    0x00000000, 0xAF201D84, 0x2FDB0E59, 0xAF4E5942, 0xB0C2048A, 0x30A9E31F, 0x2FE9DBF4,
    0x311F1961, 0x2FF34FA1, 0xB17B03DD, 0xAFA2056F, 0x310643DB, 0x31F7EE75, 0x311B6421,
    0xB0F487D8, 0x31A72112, 0xB1CD8F2E, 0x2F734C64, 0xB1B5DE00, 0xB1D1A8A8, 0xB1796CDB,
    0xAF93FEB0, 0xB14D6A22, 0x31013CB1, 0xB16FD221, 0x321A7904, 0x3235AC7C, 0x321FE070,
    0xB20151E4, 0x32239F05, 0x31B00CA7, 0x31C14469, 0xB21201F0, 0x31A73E31, 0xB26F72A3,
    0xB1FDE05A, 0x3203F226, 0xB1DB100A, 0x31A37DF0, 0xB268C59C, 0xB2315364, 0x324AF89B,
    0xB1B6834C, 0x319E3F0C, 0x31B10E60, 0xB2583DE5, 0xB1EE8645, 0xB2248646, 0xB1F39ECD,
    0xB23D6B42, 0xB1E42724, 0xB26192A8, 0x3225788D, 0xB1964548, 0x325651A7, 0x3246B8F0,
    0x3272C02A, 0xB26B4056, 0x324A4FD1, 0x31F193E2, 0xB196D831, 0x3219EC57, 0x3249D93E,
    0x314EE85D, 0x321C50B8, 0x31E57AFD, 0x30BA39E5, 0x32020D88, 0xB1E3EDCA, 0x318534F0,
    0x3279A280, 0xB13ABA39, 0x320C466E, 0x31B20914, 0xB1E86E38, 0xB2307A1F, 0xB0812012,
    0x32522CA5, 0x31EE9C8B, 0xB257E8FA, 0x323D4832, 0x322C0AF2, 0x321BEB70, 0x2F054BC9,
    0x324C1610, 0x31A4C3BB, 0xB15ABF93, 0xB1FEF4D0, 0xB1C2EF40, 0x31A6F99C, 0x31D06BAF,
    0xB0DA78F4, 0x31DC9AA8, 0x2DA920BC, 0x30C14D53, 0x31054025, 0x2FE61ADC, 0xB1462AC9,
    0xB1E0AA7B, 0x31EAD5C2, 0x317B48C9, 0xAD1EE8D3, 0x31855773, 0xB1A7954E, 0xB186C046,
    0xB1BC1889, 0x31BC4354, 0x31017CDB, 0xB1389E48, 0x2F23AED8, 0xB1161F04, 0xB1495206,
    0xB0AF6888, 0x315ECFEC, 0x31303050, 0xB021FAC5, 0xB13B81E5, 0xB1487792, 0x3038624B,
    0xB05A11EF, 0x2EB6E2D6, 0xB0A934B6, 0xAEDAA0C1, 0x2D2B962A, 0x303014E1, 0x3066C9E2,
    0x2EA73ABD, 0x2E4D63A9, 0x00000000])
_THIRD_HI, _THIRD_LO = ff.from_bits([0x3EAAAAAB, 0xB22AAAAB])
_INV_LN2_HI, _INV_LN2_LO = ff.from_bits([0x3FB8AA3B, 0x32A57060])


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
    rounded = special(k, x, pair.hi)
    return exceptions.corrected(k, x, rounded, _EXCEPTION_INPUTS, _EXCEPTION_RESULTS)


def log2_f16(k: Kernel, x: Val) -> Val:
    """``log2 x`` correctly rounded to f16, for an f16 ``x``: the f32 algorithm's pair
    rounded once to f16."""
    return special(k, x, ff.round_ff(k, _core(k, cast(x, F32)), 0, DType.F16))



def special(k: Kernel, x: Val, finite: Val) -> Val:
    """``finite`` for positive finite ``x``; NaN for NaN and below zero, ``-inf`` at
    ``+-0``, ``+inf`` at ``+inf`` (in ``x``'s type): ``log2``'s and ``log``'s alike."""
    nan, minus_inf = lit(float("nan"), x.dtype), lit(float("-inf"), x.dtype)
    return select(x > 0.0, select(x == float("inf"), x, finite),
                  select(x == 0.0, minus_inf, nan))


def _reciprocal(k: Kernel, j: Val) -> Val:
    """``c_j``, within 2^-16 of ``1 / (1 + j / 128)`` (two Newton steps from a linear
    guess), 1 and 1/2 exactly at the ends: computed rather than read from a table, which
    cost wgpu more than these operations when its tables were per-invocation copies.
    ``tools/log2_constants.py``'s ``reciprocal`` is the same f32 operations, for
    ``-log2 c_j``."""
    m = ff.let(k, cast(j, F32) * (1 / 128) + 1.0)
    y = ff.let(k, (24 / 17) - m * (8 / 17))
    for _ in range(2):
        y = ff.let(k, y * (2.0 - m * y))
    return ff.let(k, select(j == 0, 1.0, select(j == 128, 0.5, y)))


def _core(k: Kernel, x: Val) -> FF:
    """``log2 x`` as a normalized pair, for a positive finite f32 ``x`` (any other input
    is read as 1 and its result replaced by ``special``)."""
    e, j, r = reduce(k, x)
    ln = log1p(k, r)
    poly = ff.mul(k, ln, FF(lit(float(_INV_LN2_HI), F32), lit(float(_INV_LN2_LO), F32)))
    frac = ff.add(k, minus_log2_reciprocal(k, j), poly)
    whole = ff.two_sum(k, cast(e, F32), frac.hi)
    return ff.fast_two_sum(k, whole.hi, whole.lo + frac.lo)


def minus_log2_reciprocal(k: Kernel, j: Val) -> FF:
    """``-log2 c_j`` (less 1 from the halved cells on) as a pair, read from the tables."""
    return FF(ff.let(k, table(_T_HI, j)), ff.let(k, table(_T_LO, j)))


def reduce(k: Kernel, x: Val) -> tuple[Val, Val, FF]:
    """``x = 2^e m / c_j (1 + r)`` for a positive finite f32 ``x`` (any other input is
    read as 1): ``e`` (i32, one higher from the halved cells on), the cell ``j`` (u32, 0
    to 128, ``c_j`` by ``_reciprocal``) and ``r = m c_j - 1`` exactly as a normalized
    pair, ``|r| <= 2^-8`` (the reduction of ``log2`` and ``log``, one code for both)."""
    raw = ff.let(k, bitcast(x, U32))
    bits = ff.let(k, select(raw - 1 < 0x7F7FFFFF, raw, 0x3F800000))  # (0 wraps past)
    shift = ff.let(k, select(bits < 0x800000, ir.clz(bits) - 8, lit(0, U32)))
    normal = ff.let(k, bits << shift)
    mantissa = ff.let(k, normal & 0x7FFFFF)
    j = ff.let(k, (mantissa + 0x8000) >> 16)
    e = cast(normal >> 23, I32) - cast(shift, I32) - 127 + cast(
        select(j >= _HALVED_FROM, lit(1, U32), lit(0, U32)), I32)
    m = bitcast(mantissa | 0x3F800000, F32)
    product = ff.two_prod(k, m, _reciprocal(k, j))
    return e, j, ff.fast_two_sum(k, product.hi - 1.0, product.lo)


def log1p(k: Kernel, r: FF) -> FF:
    """``ln(1 + r)`` as a normalized pair for ``reduce``'s ``r`` (``|r| <= 2^-8``):
    ``R - R^2/2 + R^3 (1/3 - R/4 + R^2 (1/5 - R/6 + R^2/7)) + rho (1 - R + R^2)`` for
    ``r = R + rho``, ``R^2`` and ``R^3`` exact as pairs, ``1/3 - R/4`` as a pair, the rest
    in f32; relative error about 2^-48, and exactly 0 at ``r = 0``."""
    big, rho = r.hi, r.lo
    square = ff.two_prod(k, big, big)
    half = ff.let(k, square.hi * -0.5)
    # R^3 (1/3 - R/4 + R^2 (1/5 - R/6 + R^2/7)), the cube and its first two terms as pairs
    inner = 0.2 + big * (-1 / 6 + big * (1 / 7))
    g = ff.fast_two_sum(k, _THIRD_HI, big * -0.25)
    g = FF(g.hi, ff.let(k, g.lo + (_THIRD_LO + square.hi * inner)))
    cube = ff.two_prod(k, square.hi, big)
    cube = FF(cube.hi, ff.let(k, cube.lo + square.lo * big))
    third = ff.mul(k, cube, g)
    head = ff.fast_two_sum(k, big, half)
    sum3 = ff.fast_two_sum(k, head.hi, third.hi)
    low = sum3.lo + ((head.lo + third.lo) + (square.lo * -0.5 + rho * (1.0 - big + square.hi)))
    return ff.fast_two_sum(k, sum3.hi, low)
