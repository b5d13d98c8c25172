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
- **f32** (``pow_f32``): the same rule would misround the pairs within ``err`` (up to
  2^-37.7 at ``|t|`` = 150) of an f32 rounding boundary ``B`` that are not on it (86 of
  the 2^24-pair sample). So where the two roundings differ, an accurate path runs, under
  an IR ``if`` (``_rounded_f32``: the pair's rule is the result elsewhere, and a backend
  that branches pays for it only on those pairs, about one in 2^13 ordinary ones):
  ``log2 |x|`` in triple-float (``triple.py``; log2.py's exact reduction, its table's
  third word, the series of ``log2(1 + r)`` to ``r^10`` by Horner in f32, pairs and
  triples), ``t = y log2 |x|`` as a triple, ``2^(t - n/64)`` (the fast path's ``n``, so
  the same scale) by its series to ``r^8`` and exp2's table's third word, and from that
  the distance ``d`` of ``|x|^y`` to ``B`` (its leading part exact). The bound on ``d``'s
  error is ``|t| 2^-64 + 2^-62`` (``_ACCURATE_ERR``): the kit's stated bounds summed over
  the path give about ``|t| 2^-65.3 + 2^-65.5``, and MPFR at 300 bits measures at most
  ``(|t| + 1) 2^-69.5`` on 40,000 pairs (random and near 1, ``|t|`` to 150). Where
  ``|d|`` exceeds the bound, ``d``'s sign picks ``below`` or ``above``: correct rounding.
  Where it does not, ``|x|^y`` is within 2^-62 or so of ``B``: an exact midpoint takes
  the even neighbour, and CORE-MATH's ``is_exact`` rules say which pairs can be one
  (``_may_be_exact``: ``|x|`` a power of two, or ``y`` with at most 4 significant bits);
  any other pair takes ``d``'s sign, the better guess. This last step is a sampled
  claim, not a proof (2^64 pairs cannot all be run): a pair that is not exact and lies
  within the accurate path's actual error (about 2^-70) of ``B`` would be misrounded;
  about 2^60 pairs give ordinary results and the chance is about 2^-46 each, half of
  them on the wrong side, so of the order of 2^13 such pairs may exist in all; none is
  in the 2^24-pair sample or among the undecided pairs tools/pow_hard_pairs.py finds.
  CORE-MATH's powf closes this gap with a double-double accurate path (about 2^-100) and
  a search for the worst cases; triple-float from f32 would need a fourth word for that.

Special values (docs/semantics.md, Floats, C's ``pow``, as the oracle computes them):
``pow(x, +-0) = pow(1, y) = 1`` (NaN included), else NaN for a NaN operand;
``pow(-1, +-inf) = 1``; ``pow(x, +-inf)`` +inf or +0 by ``|x| > 1`` and ``y``'s sign;
``pow(+-0, y)`` and ``pow(+-inf, y)`` +0 or +inf, ``x``'s sign kept for an odd integer
``y``; a negative finite ``x`` to a non-integer ``y`` NaN, to an odd integer negative.
"""

from __future__ import annotations

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select, table
from vyre_core.ir.values import Val, bitcast, cast, lit
from vyre_core.mathlib import exp2, ff, log2, triple
from vyre_core.mathlib.ff import FF
from vyre_core.mathlib.triple import TF

F32, I32, U32 = DType.F32, DType.I32, DType.U32

#: ``t``'s range: beyond it every f32 (and f16) result is 0 or infinity (as exp2's).
_LOW, _HIGH = -160.0, 140.0

# Made by ``tools/pow_constants.py`` (gmpy2 at 200 bits, each word the rest so far rounded
# once to f32): the third words of log2.py's and exp2.py's tables; the accurate path's
# series coefficients, ``a_k = (-1)^(k+1) / (k ln 2)`` for ``log2(1 + r)`` and ``b_k =
# ln(2)^k / k!`` for ``2^r``, in three words, pairs or floats as each term needs.
_LOG2_T_3 = ff.from_bits([
    0x00000000, 0xA0F29701, 0x2327E1A8, 0x21C5699E, 0x2429ADD9, 0x23A28CF5, 0x21A09487,
    0x2429502F, 0x2214B81A, 0x23F85573, 0xA1ACC8A1, 0xA3837A14, 0x255E63A0, 0x24C4584A,
    0x22034A9B, 0xA535A99C, 0x25062FFC, 0x225EB5CD, 0xA4F18AA6, 0xA37726B4, 0xA40D9618,
    0xA35414E6, 0x24498DE6, 0x228FAD49, 0x24A871CD, 0x2584FB8C, 0x25F23BDB, 0x237B0D58,
    0xA4AB467C, 0x259476B5, 0x249F3B01, 0x24F4A663, 0xA5FB4E77, 0x25215438, 0xA58767F3,
    0xA41A6F6C, 0x251BD51D, 0xA5733AC3, 0x252D56B4, 0x249CD55D, 0x25D5E360, 0x258B199A,
    0x2339156F, 0x2562DBCA, 0x2493543A, 0xA5B685E3, 0x245A3795, 0x25F33D79, 0xA4916887,
    0xA426DC08, 0x2509A18C, 0xA591DD6D, 0x256381AB, 0x24CF575B, 0xA5BCD40E, 0x2582237F,
    0x25DD8263, 0x25E3B248, 0xA5915379, 0x241FA0EC, 0xA49B9348, 0x259DAA11, 0x25A51648,
    0xA49F394F, 0xA5CA89BC, 0xA52B4DB7, 0x2402B9D7, 0xA5C35601, 0x24672468, 0xA4D766B8,
    0x23A60626, 0xA4133EBE, 0xA5785DE5, 0xA501B07F, 0x2447D456, 0xA5521D1A, 0xA322389E,
    0x2470C811, 0x252196FA, 0xA587E291, 0x25B2BEAF, 0x24EBC49B, 0x25917CC7, 0xA2BFE2C6,
    0x2506613C, 0xA52B57B1, 0xA4A701B3, 0xA4CAD31E, 0xA4D0BBE7, 0x22FE71E2, 0xA570FB81,
    0x2444077D, 0xA52EBAFE, 0x203064BD, 0x2352B409, 0x2424E26D, 0x22DA79D5, 0x24630134,
    0x2421ACB8, 0xA54C9851, 0xA30703FB, 0x1F44A968, 0x24146166, 0xA4FBB9DA, 0xA5155CF8,
    0xA54C4500, 0xA4DE9BB1, 0xA49B29C0, 0xA3E7CED2, 0x220FB441, 0xA43B6757, 0xA44FB997,
    0xA38267E0, 0x2486165D, 0xA4BC16C9, 0xA28322FD, 0x24636C7F, 0xA462E753, 0xA3D2B8ED,
    0x23A5C229, 0x21B732A5, 0x23B371B5, 0x22535BE1, 0xA0771326, 0x22F5E07E, 0x239FE1BA,
    0x223C5BCC, 0x21B1BD32, 0x00000000])
_EXP2_T_3 = ff.from_bits([
    0x00000000, 0x256E6F7D, 0x26875CF9, 0x230C35F2, 0xA51D6747, 0x260081D1, 0x2524EBBF,
    0xA4997DFD, 0xA5919042, 0x26A796D3, 0xA6B0FF49, 0x26C771DD, 0xA6F327C1, 0xA636A166,
    0x259612E9, 0x26500247, 0x26A5BD1B, 0xA533637A, 0xA6AB1D75, 0x26DD4379, 0x260D6D05,
    0xA2F79B49, 0x2244DBD0, 0x239E0D1E, 0x26E3A873, 0x26D5A67B, 0x25EF8542, 0xA6B3226A,
    0x25AC6498, 0xA6F22C83, 0x26963E1F, 0x251127DA, 0xA65BDD34, 0xA586EF8F, 0x267748DC,
    0xA6E8122D, 0x26DAFAA2, 0x26041741, 0x2622B3E2, 0xA65FC6F9, 0xA524583B, 0xA5EA33EC,
    0x269E8A04, 0x2339E921, 0x23E3E236, 0xA6535949, 0xA65D2F6F, 0xA53C14DC, 0xA6285E33,
    0x263DAFF4, 0x26DD54F6, 0x26091EE8, 0x2408832C, 0xA696BBD9, 0x258A81E6, 0xA68E5E1C,
    0xA55A25FA, 0x25B84601, 0xA5A34B9B, 0xA5EC6176, 0x25C2C7BA, 0x26EEE3FA, 0x24CE9F09,
    0x243A42A0])
_A1 = ff.from_bits([0x3FB8AA3B, 0x32A57060, 0xA5F44418])
_A2 = ff.from_bits([0xBF38AA3B, 0xB2257060, 0x25744418])
_A3 = ff.from_bits([0x3EF6384F, 0xB1717F01, 0x24BA4FE1])
_A4_6 = ff.from_bits([0xBEB8AA3B, 0xB1A57060, 0x3E93BB63, 0xB2710640, 0xBE76384F, 0x30F17F01])
_A7_10 = ff.from_bits([0x3E530BB1, 0xBE38AA3B, 0x3E24258A, 0xBE13BB63])
_B1 = ff.from_bits([0x3F317218, 0xB102E308, 0xA4CA86C4])
_B2 = ff.from_bits([0x3E75FDF0, 0xAF7A74E3, 0x22A1BC5B])
_B3_5 = ff.from_bits([0x3D635847, 0xB08FB5F4, 0x3C1D955B, 0x2FFBA4E7, 0x3AAEC3FF, 0x2DF14CE6])
_B6_8 = ff.from_bits([0x39218489, 0x377FE5FE, 0x35B16011])



def pow_f32(k: Kernel, x: Val, y: Val) -> Val:
    """``x^y`` correctly rounded to f32 (the fast path's pair, and the accurate path where
    it leaves the rounding undecided; sampled, not proven over every pair: the module's
    docstring), with C's special values."""
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
    pair, n, err = _core(k, bitcast(ax, F32), y)
    if dtype is F32:
        magnitude = _rounded_f32(k, pair, n, err, ax, y, uy)
    else:
        magnitude = _rounded(k, pair, n >> 6, err, dtype)
    finite = select(odd_negative, -magnitude, magnitude)
    one, nan = lit(1.0, dtype), lit(float("nan"), dtype)
    inf, zero = lit(float("inf"), dtype), lit(0.0, dtype)
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
    fraction = significand & ((lit(1, U32) << cast(shift, U32)) - 1)
    odd = ((significand >> cast(shift, U32)) & 1) == 1
    return ff.let(k, select(ay >= 0x4B800000, lit(2, U32), select(
        ay < 0x3F800000, select(ay == 0, lit(2, U32), lit(0, U32)), select(
            fraction != 0, lit(0, U32), select(odd, lit(1, U32), lit(2, U32))))))


def _core(k: Kernel, ax: Val, y: Val) -> tuple[FF, Val, Val]:
    """``ax^y = 2^scale * (hi + lo)`` for a positive finite f32 ``ax`` and finite ``y``
    (other operands give some pair, replaced by ``_pow``), the pair within ``E`` of it
    (the module's docstring) and ``hi`` in [0.99, 2); with ``n`` (i32, ``scale = n >>
    6``) and the bound ``err`` on the pair's absolute error."""
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
    return pair, n, err


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


def _rounded_f32(k: Kernel, pair: FF, n: Val, err: Val, ax: Val, y: Val, uy: Val) -> Val:
    """``_rounded``'s f32 result where the pair decides it; where it does not (the two
    roundings differ, so the boundary between them lies within ``err`` of ``|x|^y``),
    the accurate path's under an ``if``: the side of that boundary ``|x|^y`` lies on,
    from ``_distance`` (within ``_ACCURATE_ERR``), and the even neighbour where the
    distance is within that bound of 0 and ``|x|^y`` can be exactly the boundary."""
    scale = ff.let(k, n >> 6)
    below = _round(k, ff.fast_two_sum(k, pair.hi, pair.lo - err), scale, F32)
    above = _round(k, ff.fast_two_sum(k, pair.hi, pair.lo + err), scale, F32)
    low_bits, high_bits = ff.let(k, bitcast(below, U32)), ff.let(k, bitcast(above, U32))
    even = (low_bits & 1) == 0
    result = k.let(k.fresh_name("pow"), select(
        ir.logical_or(low_bits == high_bits, even), below, above))
    with k.if_(low_bits != high_bits):
        d, t = _distance(k, ax, y, n, low_bits)
        bound = abs(t) * _ACCURATE_ERR[0] + _ACCURATE_ERR[1]
        side = select(d > 0.0, above, below)
        k.assign(result, select(ir.logical_or(abs(d) > bound, ir.logical_not(
            _may_be_exact(k, ax, uy))), side, result))
    return result


#: The accurate path's error bound on ``|x|^y`` at the pair's scale (``2^t`` in [0.99, 2)):
#: ``|t| * _ACCURATE_ERR[0] + _ACCURATE_ERR[1]`` (the module's docstring).
_ACCURATE_ERR = (2.0**-64, 2.0**-62)


def _may_be_exact(k: Kernel, ax: Val, uy: Val) -> Val:
    """False where ``|x|^y`` cannot be a midpoint of f32 (nor exactly representable), by
    CORE-MATH's ``is_exact`` rules for powf: an exact ``|x|^y`` other than ``|x| = 1`` needs
    ``|x|`` a power of two, or ``y = n 2^f`` with an odd ``n`` up to 15 (``m^n`` must fit in
    25 bits for an odd ``m >= 3``), whose low 20 significand bits are zero."""
    power_of_two = select(ax < 0x800000, ax & (ax - 1), ax & 0x7FFFFF) == 0
    return ir.logical_or(power_of_two, (uy & 0xFFFFF) == 0)


def _distance(k: Kernel, ax: Val, y: Val, n: Val, low_bits: Val) -> tuple[Val, Val]:
    """``|x|^y - B`` at the pair's scale, within ``_ACCURATE_ERR``'s bound, and ``t``, where
    ``B`` is the boundary above the f32 (or 0) whose bits are ``low_bits``: ``log2 |x|``
    and ``2^(t - n/64)`` in triple-float (``_log2_accurate``, ``_exp2_accurate``), then
    the difference from ``B``, whose leading part is exact."""
    t = triple.mul_float(k, _log2_accurate(k, ax), y)
    value = _exp2_accurate(k, t, n)
    exponent = ff.let(k, low_bits >> 23)
    significand = select(exponent == 0, low_bits, (low_bits & 0x7FFFFF) | 0x800000)
    # the result's quantum at the pair's scale (the boundary is half of it above)
    quantum = ff.let(k, ff.power_of_two(cast(ir.max(exponent, 1), I32) - 150 - (n >> 6)))
    lead = (value.hi - cast(significand, F32) * quantum) - quantum * 0.5
    s = ff.two_sum(k, lead, value.mid)
    return ff.let(k, s.hi + (s.lo + value.lo)), t.hi


def _log2_accurate(k: Kernel, ax: Val) -> TF:
    """``log2 ax`` for a positive finite f32 ``ax`` as a triple: log2.py's reduction
    (``ax = 2^e m / c_j (1 + r)``, ``r`` exact as a pair), ``-log2 c_j`` in three words,
    ``log2(1 + r) = r (a_1 + r (a_2 + ...))`` to ``a_10`` (the rest below 2^-83 of it):
    Horner in f32 from ``a_10`` to ``a_7``, in pairs to ``a_4``, in triples to ``a_1``
    (each level where its rounding stays below about 2^-72 of the sum)."""
    e, j, r = log2.reduce(k, ax)
    h = ff.let(k, float(_A7_10[3]))
    for c in _A7_10[2::-1]:
        h = ff.let(k, r.hi * h + c)
    pair = ff.add(k, FF(lit(_A4_6[4]), lit(_A4_6[5])), ff.mul_float(k, r, h))
    for at in (2, 0):
        pair = ff.add(k, FF(lit(_A4_6[at]), lit(_A4_6[at + 1])), ff.mul(k, r, pair))
    series = triple.add(k, triple.constant(_A3), triple.mul(k, r, pair))
    for a in (_A2, _A1):
        series = triple.add(k, triple.constant(a), triple.mul(k, r, series))
    poly = triple.mul(k, r, series)
    cell = TF(*(ff.let(k, table(words, j)) for words in (log2._T_HI, log2._T_LO, _LOG2_T_3)))
    return triple.add_float(k, triple.add(k, cell, poly), cast(e, F32))


def _exp2_accurate(k: Kernel, t: TF, n: Val) -> TF:
    """``2^(t - 64 (n >> 6) / 64)`` as a triple (``hi`` in [0.99, 2), the pair's scale),
    ``n`` the fast path's: ``r = t - n/64`` (the first difference exact, ``|r|`` at most
    about 1/128), ``2^r = 1 + r (b_1 + r (b_2 + ...))`` to ``b_8`` (the rest below 2^-75):
    Horner in f32 from ``b_8`` to ``b_6``, in pairs to ``b_3``, in triples to ``b_1``;
    times ``2^((n & 63) / 64)`` in three words."""
    r = triple.renormalize(k, t.hi - cast(n, F32) * (1 / 64), t.mid, t.lo)
    h = ff.let(k, float(_B6_8[2]))
    for c in _B6_8[1::-1]:
        h = ff.let(k, r.hi * h + c)
    head = FF(r.hi, r.mid)
    pair = ff.add(k, FF(lit(_B3_5[4]), lit(_B3_5[5])), ff.mul_float(k, head, h))
    for at in (2, 0):
        pair = ff.add(k, FF(lit(_B3_5[at]), lit(_B3_5[at + 1])),
                      ff.mul(k, head, pair))
    series = triple.add(k, triple.constant(_B2), triple.mul(k, r, pair))
    series = triple.add(k, triple.constant(_B1), triple.mul(k, r, series))
    power = triple.add_float(k, triple.mul(k, r, series), 1.0)
    j = ff.let(k, cast(n & 63, U32))
    cell = TF(*(ff.let(k, table(words, j)) for words in (exp2._T_HI, exp2._T_LO, _EXP2_T_3)))
    return triple.mul(k, cell, power)
