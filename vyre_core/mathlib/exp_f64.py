"""``e^x`` and ``2^x`` in f64, one algorithm for the reference and cpu (docs/design-42.md,
section 5; issue 42: "for f64, one algorithm, shared by the reference and cpu so their
bytes are identical, with its error documented").

Every operation is an IEEE f64 basic operation (each rounded once, to nearest even, on
both backends), an integer operation or a bitcast, and no ``fma``: the bytes are the same
on every backend that runs the IR as written, whatever the error. The structure is that
of ARM's optimized-routines ``exp``/``exp2`` (a table of ``2^(j/128)`` carried as a value
and a tail, a short polynomial, an explicit subnormal rounding), carried one step further
in float-float so that nearly every result is the correctly rounded one:

- ``x`` is clamped to [-746, 710] (``exp``) or [-1076, 1025] (``exp2``); NaN is taken to
  the low end and its result replaced at the end: past either end every result is 0 or
  infinity, and the clamped value gives it.
- ``k = round(x 128 / ln 2)`` (``round(128 x)`` for ``exp2``), ``r = x - k ln 2 / 128`` as a
  pair ``r_hi + r_lo`` (Cody and Waite: ``ln 2 / 128 = C1 + C2``, ``C1`` of 34 bits, so
  ``k C1`` and ``x - k C1`` are exact; ``k C2`` rounded once; absolute error about 2^-77;
  ``exp2``: ``x - k / 128`` exact, times ``ln 2`` as a pair by ``ff.two_prod``),
  ``|r_hi| <= ln 2 / 256``, and ``e^x = 2^(k >> 7) T_j (1 + tail_j) e^r``, ``j = k & 127``.
- ``e^r - 1 = r + r^2 (1/2 + r/6 + r^2/24 + r^3/120 + r^4/720)``: Taylor, truncation
  error below 2^-72 (``tools/f64_constants.py`` checks it); ``r_hi`` plus the rest by
  ``ff.fast_two_sum``, ``r_lo`` and the tail added to the low part.
- ``T (1 + m)`` for that pair ``m``: ``T m_hi`` exact by ``ff.two_prod``, ``T + T m_hi``
  by ``ff.fast_two_sum``, the low terms in plain f64: a pair within about 2^-70 of
  ``2^-(k >> 7) e^x`` (relative), in [0.99, 2.01).
- Rounded once: a normal result is the pair rounded to f64, times ``2^(k >> 7)`` as two
  exact powers of two (overflow to infinity); a result below 2^-1022 is the pair scaled
  to ``w < 1`` and rounded as ``1 + w`` (its quantum, 2^-52, is then the subnormal
  quantum 2^-1074 times 2^1022), then ``(RN(1 + w) - 1) 2^-1022``, both exact (ARM's
  trick: no double rounding).

Correctly rounded except where the exact result lies within about 2^-70 (relative) of a
rounding boundary; measured against MPFR in docs/semantics.md ("Floats").
"""

from __future__ import annotations

import numpy as np

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select, table
from vyre_core.ir.values import Val, bitcast, cast, lit
from vyre_core.mathlib import ff
from vyre_core.mathlib.ff import FF

F64, I64, U32, U64 = DType.F64, DType.I64, DType.U32, DType.U64


def from_bits(bits: list[int]) -> np.ndarray:
    """The f64 values of these bit patterns: how the f64 functions write their constants
    (exact, whatever Python's float parsing)."""
    return np.array(bits, np.uint64).view(np.float64)


# Made by ``tools/f64_constants.py`` (gmpy2 at 200 bits, each rounded once to f64):
# ``T_j = RN(2^(j/128))``, ``tail_j = RN(2^(j/128) / T_j - 1)``; 128 / ln 2; ln 2 / 128 as
# ``C1 + C2``; ln 2 as a pair.
_T = from_bits([
    0x3FF0000000000000, 0x3FF0163DA9FB3335, 0x3FF02C9A3E778061, 0x3FF04315E86E7F85,
    0x3FF059B0D3158574, 0x3FF0706B29DDF6DE, 0x3FF0874518759BC8, 0x3FF09E3ECAC6F383,
    0x3FF0B5586CF9890F, 0x3FF0CC922B7247F7, 0x3FF0E3EC32D3D1A2, 0x3FF0FB66AFFED31B,
    0x3FF11301D0125B51, 0x3FF12ABDC06C31CC, 0x3FF1429AAEA92DE0, 0x3FF15A98C8A58E51,
    0x3FF172B83C7D517B, 0x3FF18AF9388C8DEA, 0x3FF1A35BEB6FCB75, 0x3FF1BBE084045CD4,
    0x3FF1D4873168B9AA, 0x3FF1ED5022FCD91D, 0x3FF2063B88628CD6, 0x3FF21F49917DDC96,
    0x3FF2387A6E756238, 0x3FF251CE4FB2A63F, 0x3FF26B4565E27CDD, 0x3FF284DFE1F56381,
    0x3FF29E9DF51FDEE1, 0x3FF2B87FD0DAD990, 0x3FF2D285A6E4030B, 0x3FF2ECAFA93E2F56,
    0x3FF306FE0A31B715, 0x3FF32170FC4CD831, 0x3FF33C08B26416FF, 0x3FF356C55F929FF1,
    0x3FF371A7373AA9CB, 0x3FF38CAE6D05D866, 0x3FF3A7DB34E59FF7, 0x3FF3C32DC313A8E5,
    0x3FF3DEA64C123422, 0x3FF3FA4504AC801C, 0x3FF4160A21F72E2A, 0x3FF431F5D950A897,
    0x3FF44E086061892D, 0x3FF46A41ED1D0057, 0x3FF486A2B5C13CD0, 0x3FF4A32AF0D7D3DE,
    0x3FF4BFDAD5362A27, 0x3FF4DCB299FDDD0D, 0x3FF4F9B2769D2CA7, 0x3FF516DAA2CF6642,
    0x3FF5342B569D4F82, 0x3FF551A4CA5D920F, 0x3FF56F4736B527DA, 0x3FF58D12D497C7FD,
    0x3FF5AB07DD485429, 0x3FF5C9268A5946B7, 0x3FF5E76F15AD2148, 0x3FF605E1B976DC09,
    0x3FF6247EB03A5585, 0x3FF6434634CCC320, 0x3FF6623882552225, 0x3FF68155D44CA973,
    0x3FF6A09E667F3BCD, 0x3FF6C012750BDABF, 0x3FF6DFB23C651A2F, 0x3FF6FF7DF9519484,
    0x3FF71F75E8EC5F74, 0x3FF73F9A48A58174, 0x3FF75FEB564267C9, 0x3FF780694FDE5D3F,
    0x3FF7A11473EB0187, 0x3FF7C1ED0130C132, 0x3FF7E2F336CF4E62, 0x3FF80427543E1A12,
    0x3FF82589994CCE13, 0x3FF8471A4623C7AD, 0x3FF868D99B4492ED, 0x3FF88AC7D98A6699,
    0x3FF8ACE5422AA0DB, 0x3FF8CF3216B5448C, 0x3FF8F1AE99157736, 0x3FF9145B0B91FFC6,
    0x3FF93737B0CDC5E5, 0x3FF95A44CBC8520F, 0x3FF97D829FDE4E50, 0x3FF9A0F170CA07BA,
    0x3FF9C49182A3F090, 0x3FF9E86319E32323, 0x3FFA0C667B5DE565, 0x3FFA309BEC4A2D33,
    0x3FFA5503B23E255D, 0x3FFA799E1330B358, 0x3FFA9E6B5579FDBF, 0x3FFAC36BBFD3F37A,
    0x3FFAE89F995AD3AD, 0x3FFB0E07298DB666, 0x3FFB33A2B84F15FB, 0x3FFB59728DE5593A,
    0x3FFB7F76F2FB5E47, 0x3FFBA5B030A1064A, 0x3FFBCC1E904BC1D2, 0x3FFBF2C25BD71E09,
    0x3FFC199BDD85529C, 0x3FFC40AB5FFFD07A, 0x3FFC67F12E57D14B, 0x3FFC8F6D9406E7B5,
    0x3FFCB720DCEF9069, 0x3FFCDF0B555DC3FA, 0x3FFD072D4A07897C, 0x3FFD2F87080D89F2,
    0x3FFD5818DCFBA487, 0x3FFD80E316C98398, 0x3FFDA9E603DB3285, 0x3FFDD321F301B460,
    0x3FFDFC97337B9B5F, 0x3FFE264614F5A129, 0x3FFE502EE78B3FF6, 0x3FFE7A51FBC74C83,
    0x3FFEA4AFA2A490DA, 0x3FFECF482D8E67F1, 0x3FFEFA1BEE615A27, 0x3FFF252B376BBA97,
    0x3FFF50765B6E4540, 0x3FFF7BFDAD9CBE14, 0x3FFFA7C1819E90D8, 0x3FFFD3C22B8F71F1])
_TAIL = from_bits([
    0x0000000000000000, 0x3C9B3B4F1A88BF6E, 0xBC7160139CD8DC5D, 0xBC905E7A108766D1,
    0x3C8CD2523567F613, 0xBC8BCE8023F98EFA, 0x3C60F74E61E6C861, 0x3C90A3E45B33D399,
    0x3C979AA65D837B6D, 0x3C8EB51A92FDEFFC, 0x3C3EBE3D702F9CD1, 0xBC6A033489906E0B,
    0xBC9556522A2FBD0E, 0xBC5080EF8C4EEA55, 0xBC91C923B9D5F416, 0x3C80D3E3E95C55AF,
    0xBC801B15EAA59348, 0xBC8F1FF055DE323D, 0x3C8B898C3F1353BF, 0xBC96D99C7611EB26,
    0x3C9AECF73E3A2F60, 0xBC8FE782CB86389D, 0x3C8A6F4144A6C38D, 0x3C807A05B0E4047D,
    0x3C968EFDE3A8A894, 0x3C875E18F274487D, 0x3C80472B981FE7F2, 0xBC96B87B3F71085E,
    0x3C82F7E16D09AB31, 0xBC3D219B1A6FBFFA, 0x3C8B3782720C0AB4, 0x3C6E149289CECB8F,
    0x3C834D754DB0ABB6, 0x3C864201E2AC744C, 0x3C8FDD395DD3F84A, 0xBC86A3803B8E5B04,
    0xBC924AEDCC4B5068, 0xBC9907F81B512D8E, 0xBC71D1E83E9436D2, 0xBC991919B3CE1B15,
    0x3C859F48A72A4C6D, 0xBC9312607A28698A, 0xBC58A78F4817895B, 0xBC7C2C9B67499A1B,
    0x3C4363ED60C2AC11, 0x3C9666093B0664EF, 0x3C6ECCE1DAA10379, 0x3C93FF8E3F0F1230,
    0x3C7690CEBB7AAFB0, 0x3C931DBDEB54E077, 0xBC8F94340071A38E, 0xBC87DECCDC93A349,
    0xBC78DEC6BD0F385F, 0xBC861246EC7B5CF6, 0x3C93350518FDD78E, 0x3C7B98B72F8A9B05,
    0x3C9063E1E21C5409, 0x3C34C7855019C6EA, 0x3C9432E62B64C035, 0xBC8CE44A6199769F,
    0xBC8C33C53BEF4DA8, 0xBC845378892BE9AE, 0xBC93CEDD78565858, 0x3C5710AA807E1964,
    0xBC93B3EFBF5E2228, 0xBC6A12AD8734B982, 0xBC6367EFB86DA9EE, 0xBC80DC3D54E08851,
    0xBC781F647E5A3ECF, 0xBC86EE4AC08B7DB0, 0xBC8619321E55E68A, 0x3C909CCB5E09D4D3,
    0xBC7B32DCB94DA51D, 0x3C94ECFD5467C06B, 0x3C65EBE1ABD66C55, 0xBC88A1C52FB3CF42,
    0xBC9369B6F13B3734, 0xBC805E843A19FF1E, 0xBC94D450D872576E, 0x3C90AD675B0E8A00,
    0x3C8DB72FC1F0EAB4, 0xBC65B6609CC5E7FF, 0x3C7BF68359F35F44, 0xBC93091FA71E3D83,
    0xBC5DA9B88B6C1E29, 0xBC6C23F97C90B959, 0xBC92434322F4F9AA, 0xBC85CA6CD7668E4B,
    0x3C71AFFC2B91CE27, 0x3C6DD235E10A73BB, 0xBC87C50422622263, 0x3C8B1C86E3E231D5,
    0xBC91BBD1D3BCBB15, 0x3C90CC319CEE31D2, 0x3C8469846E735AB3, 0xBC82DFCD978E9DB4,
    0x3C8C1A7792CB3387, 0xBC907B8F4AD1D9FA, 0xBC55C3D956DCAEBA, 0xBC90A40E3DA6F640,
    0xBC68D6F438AD9334, 0xBC91EEE26B588A35, 0x3C74FFD70A5FDDCD, 0xBC91BDFBFA9298AC,
    0x3C736EAE30AF0CB3, 0x3C8EE3325C9FFD94, 0x3C84E08FD10959AC, 0x3C63CDAF384E1A67,
    0x3C676B2C6C921968, 0xBC808A1883CCB5D2, 0xBC8FAD5D3FFFFA6F, 0xBC900DAE3875A949,
    0x3C74A385A63D07A7, 0xBC82919E2040220F, 0x3C8E5A50D5C192AC, 0x3C843A59AC016B4B,
    0xBC82D52107B43E1F, 0xBC892AB93B470DC9, 0x3C74B604603A88D3, 0x3C83C5EC519D7271,
    0xBC8FF7128FD391F0, 0xBC8DAE98E223747D, 0x3C8EC3BC41AA2008, 0x3C842B94C3A9EB32,
    0x3C8A64A931D185EE, 0xBC8E37BAE43BE3ED, 0x3C77893B4D91CD9D, 0x3C5305C14160CC89])
(_INV_STEP, _STEP_1, _STEP_2, _LN2_HI, _LN2_LO ) = from_bits([
    0x40671547652B82FE, 0x3F762E42FEF80000, 0x3D41CF79ABC9E3B4, 0x3FE62E42FEFA39EF,
    0x3C7ABC9E3B39803F])

#: ``1/n!`` for n = 2..6, each rounded once to f64 (1/2 and 1/24... as Python's division
#: rounds them: once, to nearest).
_TAYLOR = tuple(np.float64(1.0) / np.float64(f) for f in (2.0, 6.0, 24.0, 120.0, 720.0))


def exp_f64(k: Kernel, x: Val) -> Val:
    """``e^x`` in f64: NaN for NaN, +0 below about -745.13, +inf above about 709.78."""
    r, n = reduced(k, _clamped(k, x, -746.0, 710.0))
    return select(x != x, x, _scaled_exp(k, r, n))


def reduced(k: Kernel, x: Val) -> tuple[FF, Val]:
    """``x = n ln 2 / 128 + r``: ``r`` as a pair (absolute error about 2^-77) and ``n``
    (i64), for ``|x| <= 746`` (``exp``'s reduction; ``tanh_f64`` uses it too)."""
    n = ff.let(k, ir.round(x * _INV_STEP))
    return ff.two_sum(k, x - n * _STEP_1, -(n * _STEP_2)), cast(n, I64)


def exp2_f64(k: Kernel, x: Val) -> Val:
    """``2^x`` in f64: NaN for NaN, +0 at and below -1075, +inf from 1024 up; exact for
    integer ``x``."""
    xc = _clamped(k, x, -1076.0, 1025.0)
    n = ff.let(k, ir.round(xc * 128.0))
    t = ff.let(k, xc - n * (1 / 128))
    product = ff.two_prod(k, t, _LN2_HI)
    r = FF(product.hi, ff.let(k, product.lo + t * _LN2_LO))
    return select(x != x, x, _scaled_exp(k, r, cast(n, I64)))


def _clamped(k: Kernel, x: Val, low: float, high: float) -> Val:
    """``x`` within [low, high]; NaN taken to ``low``."""
    return ff.let(k, select(x >= low, select(x <= high, x, high), low))


def _scaled_exp(k: Kernel, r: FF, n: Val) -> Val:
    """``2^(n / 128) e^r`` rounded once to f64, for ``|r.hi| <= ln 2 / 256`` (just over),
    ``|r.lo|`` below 2^-60 and ``n`` (i64) in [-1076 128, 1025 128]."""
    return rounded(k, *exp_parts(k, r, n))


def rounded(k: Kernel, head_hi: Val, low: FF, e: Val) -> Val:
    """``2^e (head_hi + low.hi + low.lo)`` rounded once to f64, for ``exp_parts``'s
    results (``pow_f64`` rounds its pair here too): a normal result by ``sticky``, one
    below 2^-1022 on the subnormal grid, overflow to infinity."""
    half = ff.let(k, e >> 1)
    rounded = ff.let(k, head_hi + sticky(k, low))
    normal = (rounded * power_of_two(half)) * power_of_two(e - half)
    # below 2^-1022: w = the pair times 2^(e + 1022) < 1, rounded on the grid of 1 + w
    down = ff.let(k, power_of_two(ir.min(e + 1022, lit(0, I64))))
    w_hi = ff.let(k, head_hi * down)
    one_plus = ff.fast_two_sum(k, lit(1.0, F64), w_hi)
    w_low = ff.two_sum(k, one_plus.lo, low.hi * down)
    w_rounded = one_plus.hi + sticky(k, FF(w_low.hi, w_low.lo + low.lo * down))
    subnormal = (w_rounded - 1.0) * 2.0**-1022
    return select(ir.logical_and(e <= -1022, w_hi < 1.0), subnormal, normal)


def exp_parts(k: Kernel, r: FF, n: Val) -> tuple[Val, FF, Val]:
    """``2^(n / 128) e^r = 2^e (h + l.hi + l.lo)`` (``h``, ``l``, ``e``), within about
    2^-70 (relative), ``h`` in [0.99, 2.01) and ``|l| <= ulp(h)``, for the arguments of
    ``_scaled_exp`` (whose core it is; ``tanh_f64`` uses it unrounded)."""
    j = ff.let(k, cast(n & 127, U32))
    t, tail = ff.let(k, table(_T, j)), ff.let(k, table(_TAIL, j))
    c2, c3, c4, c5, c6 = _TAYLOR
    rest = ff.let(k, (r.hi * r.hi) * (c2 + r.hi * (c3 + r.hi * (c4 + r.hi * (c5 + r.hi * c6)))))
    m = ff.fast_two_sum(k, r.hi, rest)
    m_lo = ff.let(k, m.lo + r.lo * (1.0 + r.hi) + tail * (1.0 + m.hi))
    product = ff.two_prod(k, t, m.hi)
    head = ff.fast_two_sum(k, t, product.hi)
    low = ff.two_sum(k, head.lo, product.lo + t * m_lo)
    return head.hi, low, ff.let(k, n >> 7)


def sticky(k: Kernel, x: FF) -> Val:
    """``x.hi + x.lo`` rounded to odd (``x`` a pair from ``ff.two_sum``): ``x.hi`` where
    ``x.lo`` is 0 or ``x.hi``'s last bit is 1, else its neighbour towards ``x.lo``. Added
    to a value ``h`` with ``ulp(h) >= 4 ulp(x.hi)``, one rounding then gives ``RN(h + x.hi
    + x.lo)`` (round-to-odd's rule): a low part exactly half an ulp of ``h`` is a tie
    only where the whole sum is one (``e^(2^-53) = 1 + 2^-53 + 2^-107`` rounds up)."""
    bits = ff.let(k, bitcast(x.hi, U64))
    same_sign = ((bits ^ bitcast(x.lo, U64)) >> 63) == 0
    nudged = bitcast(select(same_sign, bits + 1, bits - 1), F64)
    odd = select(ir.logical_and(x.lo != 0.0, (bits & 1) == 0), nudged, x.hi)
    return select(x.hi == 0.0, x.lo, odd)  # (a zero high part: the low one is as sticky)


def power_of_two(e: Val) -> Val:
    """``2^e`` as an f64, for an i64 ``e`` in [-1022, 1023]."""
    return bitcast(bitcast(e + 1023, U64) << 52, F64)
