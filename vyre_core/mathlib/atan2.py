"""``atan2(y, x)``, correctly rounded in f16 and f32 (docs/design-42.md, sections 2.4 and
8 step 12): a float-float value of it (f16's, and f32's fast path), and for the f32 pairs
whose rounding that value leaves in doubt, an accurate path in fixed point.

One float-float algorithm (f32 pairs, no f64, no ``fma``), as ``exp2.py``: every backend
runs the same operations, so the bytes are the same everywhere whatever they are, and the
exhaustive check of every f16 pair (``vyre conform --exhaustive --all-inputs --op atan2
--dtype f16``, 2^32 pairs) proves them right once for all.

- Special operands are mapped onto finite ones with the same C result (docs/semantics.md,
  Floats; the oracle's): an infinite operand becomes 1 (of its sign) and the other, if
  finite, 0 (of its sign); NaN in either gives the canonical NaN at the end.
- ``n = min(|y|, |x|)``, ``d = max(|y|, |x|)`` (compared as bits), each read as
  ``2^e m`` with ``m`` in [1, 2) by integer operations (a subnormal normalized by ``clz``,
  never by a float multiply); ``q = n / d = 2^(e_n - e_d) (m_n / m_d)`` and
  ``m_n / m_d`` as a pair: its quotient, the exact remainder (``two_prod``), the
  remainder divided once more (relative error 2^-48).
- ``q < 2^-12``: ``atan q = q (1 - c)``, ``c = q^2/3 - q^4/5`` in f32 (the next term is
  below 2^-55), kept at the scale ``2^(e_n - e_d)``, so a subnormal result keeps every
  bit ``ff.round_ff`` needs, and a quotient that is exactly a rounding midpoint rounds
  toward zero, as ``atan q < q`` does (``q^2`` is taken no smaller than 2^-100 so that
  ``c`` never underflows to 0: f32 quotients reach 2^-277).
- Otherwise ``j = round(64 q)``, ``atan q = atan(j/64) + atan u``, ``u = (q - j/64) /
  (1 + q j/64)`` (``|u| <= 2^-7``, the numerator exact, the denominator a pair,
  ``ff.div``), ``atan u = u + u P``, ``P = -u^2/3 + u^4 (1/5 - u^2/7 + u^4/9)`` (the
  first term as pairs, the rest in f32; the series' next term is below 2^-77 of u),
  ``atan(j/64)`` a pair from two tables.
- The quadrant: ``pi/2 - a`` where ``|y| > |x|``, ``pi - a`` or ``pi/2 + a`` for a
  negative ``x`` (its sign bit: -0 too), pi and pi/2 as three floats. ``a <= pi/4``
  against ``pi/2`` or ``pi``: nothing cancels. Then the sign of ``y``.

The pair's error, relative: the quotient 2^-48, ``ff.div``'s 16u^2 = 2^-44 on ``u`` (at
most about ``|a|`` in size), the table's rounding 2^-49, each ``ff.add`` 3u^2: below
``_FAST_ERROR`` = 2^-43 in all. f16 rounds it once (``ff.round_ff``): 2^-43 against f16's
11 bits leaves only pairs within 2^-43 of an f16 rounding boundary in doubt, and the
exhaustive run finds none misrounded (no exception list). In f32 the same pair is the
fast path: where ``ff.decided`` passes at ``_FAST_ERROR`` its f32 rounding is the true
value's (tests/test_mathlib_atan2.py holds the pair to the bound). The rest (about 2^-19
of the pairs: within 2^-43 of an f32 midpoint, and the exact ties of ``atan q ~ q``)
take the accurate path, an IR ``If`` (per lane on cpu and wgpu), in fixed point of three
u32 words (``fixed.py``: integer operations, exact on every backend, no branches):

- ``m = n / d`` by long division of the 24-bit significands, 8 bits a pass (an integer
  word and 96 fraction bits, truncated).
- ``j >= 1`` (``j`` the fast path's): ``q = m 2^de`` with 96 fraction bits, ``u = (q -
  t) / (1 + q t)`` (``t = j / 64``) by four passes of ``v + (|q - t| - v (1 + q t)) r``,
  ``r`` a float reciprocal (each pass leaves 2^-23 of the error), the series below in
  ``u``, then ``atan(j/64) +- atan |u|`` with the table as three words.
- ``j = 0`` (``q < 2^-7``, tiny ones included): the series in ``x = m / 2`` with ``w =
  q^2`` (``x^2`` shifted by ``-2 (de + 1)``, 0 past 96 bits), scaled by ``2^(de + 1)``:
  96 bits of the result's own scale, so subnormal results lose nothing.
- The series ``x (1 - w/3 + ... + w^6/15)`` (``w <= 2^-14``: the next term is below
  2^-98), nested in one loop of nine products; each product has its last bit set, so the
  result is below ``x`` even where ``w`` is 0 (an exact tie of ``atan q ~ q`` rounds down).
- The quadrant as above, pi/2 and pi with 94 fraction bits; the value rounded to odd onto
  a pair (``fixed.to_pair``: its top 48 bits, every lower bit ORed into the last), which
  ``ff.round_ff`` rounds once, as the fast path's.

The accurate value's error, counted in units of 2^-96 (each truncation 1, the
quotient's 2, the passes' 2^-92 and their truncations 9 on ``u``, the series' 3, the
table's 1/2, the shift to 94 bits 4): below 2^-92 absolute where ``j >= 1`` (results at
least ``atan(1/64) - atan(1/128) > 2^-7``) and placed (results above pi/4), and below
2^-92 of the scaled value where ``j = 0``: relative, below 2^-85 everywhere (measured:
2^-87 over 248,000 pairs, hard ones included). What that proves:

- Results from 2^-7 to pi: CORE-MATH's search of every 25-bit value there (its
  ``atan2f.wc``: all pairs with 44 or more identical bits after the rounding bit, 52 at
  most) puts every true value at least 2^-78 (relative) from a midpoint, well past the
  2^-85: each such pair rounds correctly.
- ``q < 2^-25``: a quotient ``N / (D 2^-de)`` of 24-bit integers is either a midpoint
  (then ``atan q`` lies below it by ``q^3/3``, and the path's result is below ``x``) or
  at least 2^-50 (relative) from every midpoint, while ``q - atan q < 2^-75 q``: proven.
- Results from 2^-25 to 2^-7 (``q`` there, no quadrant): a sampled claim. No exhaustive
  search covers them; ``tools/atan2_hard_pairs.py`` finds pairs within 2^-44 ULP of a
  midpoint there (continued fractions of ``tan`` at drawn midpoints), all correct, and a
  misrounding needs about 60 identical bits: among the 2^47 quotients of each of those
  18 binades, odds near 2^-9 that one has them.

Exact results (0, and the signed zeros and pi-multiples of C's special cases) come from
the fast path, whose pair is exact there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select, table
from vyre_core.ir.values import Val, bitcast, cast, lit
from vyre_core.mathlib import ff, fixed
from vyre_core.mathlib.ff import FF
from vyre_core.mathlib.fixed import Fixed

F32, I32, U32 = DType.F32, DType.I32, DType.U32


# Made by ``tools/atan2_constants.py`` (gmpy2 at 200 bits, each part rounded once to f32):
# ``atan(j / 64)`` as ``hi + lo``; pi and pi/2 as three floats; -1/3 as a pair.
_ATAN_HI = ff.from_bits([
    0x00000000, 0x3C7FFAAB, 0x3CFFEAAE, 0x3D3FDC0C, 0x3D7FAADE, 0x3D9FACF8, 0x3DBF70C1,
    0x3DDF1CF6, 0x3DFEADD5, 0x3E0F0FD8, 0x3E1EB777, 0x3E2E4C09, 0x3E3DCBDA, 0x3E4D3547,
    0x3E5C86BB, 0x3E6BBEAF, 0x3E7ADBB0, 0x3E84EE2D, 0x3E8C5FAD, 0x3E93C1B9, 0x3E9B13BA,
    0x3EA25522, 0x3EA9856D, 0x3EB0A420, 0x3EB7B0CA, 0x3EBEAB02, 0x3EC5926A, 0x3ECC66AA,
    0x3ED32776, 0x3ED9D489, 0x3EE06DA6, 0x3EE6F29A, 0x3EED6338, 0x3EF3BF5C, 0x3EFA06E8,
    0x3F001CE4, 0x3F032BF5, 0x3F0630A3, 0x3F092AED, 0x3F0C1AD4, 0x3F0F005D, 0x3F11DB8F,
    0x3F14AC73, 0x3F177314, 0x3F1A2F81, 0x3F1CE1C9, 0x3F1F89FE, 0x3F222833, 0x3F24BC7D,
    0x3F2746F3, 0x3F29C7AC, 0x3F2C3EC1, 0x3F2EAC4C, 0x3F311069, 0x3F336B32, 0x3F35BCC5,
    0x3F38053E, 0x3F3A44BC, 0x3F3C7B5E, 0x3F3EA941, 0x3F40CE86, 0x3F42EB4B, 0x3F44FFB0,
    0x3F470BD5, 0x3F490FDB])
_ATAN_LO = ff.from_bits([
    0x00000000, 0xAF0891AD, 0xAF8AD13B, 0x30061B45, 0xB08D3021, 0x3167C55A, 0x30C05E22,
    0xAFC87C1E, 0xB0AA7A12, 0xB11F791B, 0x318C6627, 0xB0609ECB, 0x31BCE5B0, 0x3196C862,
    0xB1D6D9F6, 0xAFDFA8CA, 0xB15A6FE4, 0xB20279CA, 0x3142FC5E, 0x2FAFDE8B, 0xB20F8143,
    0xB213D50F, 0xB1D5C657, 0x314273F8, 0x30F26F78, 0x32363B3F, 0xB1D6BC9B, 0x31A9AD63,
    0x317308FF, 0xB11668E5, 0x3214EC9F, 0x314B04D4, 0x31AC376A, 0xB068A5CC, 0x32354141,
    0xB2C3E5BF, 0xB2B24CF3, 0xB2149785, 0xB20085AB, 0x328BE7C1, 0x32BDEFEB, 0x31B3279B,
    0xB259EE3A, 0x3200D979, 0xB1CC7211, 0xB1CAFA3A, 0xB26C2D21, 0xB210D495, 0x31C9A7B8,
    0xB209227F, 0xB20EDF3C, 0xB08CD045, 0x3262D363, 0xB2EA2847, 0xB25B83EF, 0xB2DF4C26,
    0x322F08C6, 0x32FBA8E1, 0xB1A8B3A8, 0x3289FA09, 0xB28EA75B, 0xB28933D4, 0xB0A80E08,
    0x3299CC06, 0xB2BBBD2E])
_PI_1, _PI_2, _PI_3, _HALF_PI_1, _HALF_PI_2, _HALF_PI_3 = ff.from_bits([
    0x40490FDB, 0xB3BBBD2E, 0xA7772CED, 0x3FC90FDB, 0xB33BBD2E, 0xA6F72CED])
_MINUS_THIRD_HI, _MINUS_THIRD_LO = ff.from_bits([0xBEAAAAAB, 0x322AAAAB])
# The accurate path's fixed point (the same tool, each rounded once to its last bit):
# ``atan(j / 64)`` as three words with 96 fraction bits, pi/2 and pi with 94, the
# series' ``1 / (2i + 3)`` with 96.
_ATAN_WORDS = np.array([
    0x00000000, 0x00000000, 0x00000000, 0x03FFEAAB, 0x776E5356, 0xEF9E3159, 0x07FF556E,
    0xEA5D892A, 0x13BCEBBB, 0x0BFDC0C2, 0x186D14FC, 0xF220E10D, 0x0FFAADDB, 0x967EF4E3,
    0x6CB2792E, 0x13F59F0E, 0x7C559D6B, 0x1338A178, 0x17EE1826, 0x02F10E8C, 0x126ACFCF,
    0x1BE39EBE, 0x6F07C37D, 0xEE3CA681, 0x1FD5BA9A, 0xAC2F6DC6, 0x5912F314, 0x23C3F5F6,
    0x086E4DC9, 0x6F4DD64A, 0x27ADDDD1, 0x8CC4D8B0, 0xD1D86749, 0x2B93023C, 0x7D84D3BE,
    0xAD534FFC, 0x2F72F697, 0x9CB6044D, 0x1EC2D3E2, 0x334D51D2, 0xD90C4C39, 0xEC03CF68,
    0x3721AEA5, 0x24C14408, 0xBD886970, 0x3AEFABBE, 0x40AE6CE3, 0x2468A9A3, 0x3EB6EBF2,
    0x5901BAC5, 0x5B71E7BD, 0x4277165F, 0x618D8962, 0xE47390CC, 0x462FD68C, 0x2FC5E098,
    0x6523A459, 0x49E0DC81, 0x5FBD16F8, 0x8322C920, 0x4D89DCDC, 0x1FAF2F34, 0xE2D5DA4C,
    0x512A90DB, 0x0ABC26A2, 0xA1BC3AA5, 0x54C2B665, 0x4735276D, 0x4CDBFBBE, 0x5852100C,
    0x273F8658, 0xDA8EA8EE, 0x5BD86507, 0x937BC239, 0xC5519091, 0x5F55812D, 0x8ECFDD69,
    0xC885C2B2, 0x62C934E5, 0x286C95B6, 0xD0BA3749, 0x66335515, 0x35AC619E, 0x6C988FD1,
    0x6993BB0F, 0x308FF2DB, 0x213E4AF5, 0x6CEA4476, 0x9971B1AE, 0x187B1CA5, 0x7036D325,
    0x3B27BE33, 0xE318F6CB, 0x73794D0C, 0xB04D425D, 0x305BBE71, 0x76B19C15, 0x86ED3DA2,
    0xB7F222F6, 0x79DFADFC, 0x5D68D10E, 0x53DC1BF3, 0x7D03742D, 0x50505F2E, 0x33691E3F,
    0x801CE39E, 0x0D205C99, 0xA6D6C6C5, 0x832BF4A6, 0xD9867E2A, 0x4B6A09CB, 0x8630A2DA,
    0xDA1ED065, 0xD3E84ED5, 0x892AECDF, 0xDE9547B5, 0x094478FC, 0x8C1AD445, 0xF3E09B8C,
    0x439D8018, 0x8F005D5E, 0xF7F59F9B, 0x5C835E16, 0x91DB8F16, 0x64F350E2, 0x10E4F9C1,
    0x94AC72C9, 0x847186F6, 0x18C4F394, 0x97731420, 0x365E538B, 0xABD3FE1A, 0x9A2F80E6,
    0x71BDDA20, 0x4226F8E2, 0x9CE1C8E6, 0xA0B8CDB9, 0xF799C4E8, 0x9F89FDC4, 0xF4B7A1EC,
    0xF8B49264, 0xA22832DB, 0xCADAAE08, 0x92FE9C08, 0xA4BC7D19, 0x34F70924, 0x19A87F2A,
    0xA746F2DD, 0xB7602294, 0x67B7D66F, 0xA9C7ABDC, 0x4830F5C8, 0x916A84B6, 0xAC3EC0FB,
    0x997DD6A1, 0xA36273A5, 0xAEAC4C38, 0xB4D8C080, 0x14725E2F, 0xB110688A, 0xEBDC6F6A,
    0x43D65789, 0xB36B31C9, 0x1F043691, 0x59014174, 0xB5BCC490, 0x59ECC4AF, 0xF8F3CEE7,
    0xB8053E2B, 0xC2319E73, 0xCB2DA552, 0xBA44BC7D, 0xD470782F, 0x654C2CB1, 0xBC7B5DEA,
    0xE98AF280, 0xD4113007, 0xBEA94144, 0xFD049AAC, 0x1043C5E7, 0xC0CE85B8, 0xAC526640,
    0x89DD62C4, 0xC2EB4ABB, 0x661628B5, 0xB373FE46, 0xC4FFAFFA, 0xBF8FBD54, 0x8CB43D11,
    0xC70BD54C, 0xE602EE13, 0xE7D54FBD, 0xC90FDAA2, 0x2168C234, 0xC4C6628C], np.uint32)
_HALF_PI_FIXED, _PI_FIXED = 0x6487ED5110B4611A62633146, 0xC90FDAA22168C234C4C6628C
_SERIES = (
    0x555555555555555555555555,
    0x333333333333333333333333,
    0x249249249249249249249249,
    0x1C71C71C71C71C71C71C71C7,
    0x1745D1745D1745D1745D1746,
    0x13B13B13B13B13B13B13B13B,
    0x111111111111111111111111)

#: The quotients below ``2^_SMALL`` (their exponent difference) take the short series.
_SMALL = -12

#: The pair's error bound, relative (module docstring; the tests hold the pair to it).
_FAST_ERROR = 2.0**-43

_ONE, _INF = 0x3F800000, 0x7F800000


def atan2_f16(k: Kernel, y: Val, x: Val) -> Val:
    """``atan2(y, x)`` correctly rounded to f16, for f16 ``y`` and ``x``: the f32
    algorithm's pair rounded once to f16."""
    pair, scale, _ = _core(k, cast(y, F32), cast(x, F32))
    return _nan(y, x, ff.round_ff(k, pair, scale, DType.F16))


def atan2_f32(k: Kernel, y: Val, x: Val) -> Val:
    """``atan2(y, x)`` correctly rounded to f32: the pair rounded once where
    ``ff.decided`` says that is the true value's rounding at ``_FAST_ERROR`` (a zero
    pair is exact), else the accurate path's fixed-point value rounded once."""
    pair, scale, parts = _core(k, y, x)
    hi, lo, at = (k.let(k.fresh_name("m"), v) for v in (pair.hi, pair.lo, scale))
    sure = ir.logical_or(ff.decided(k, pair, abs(pair.hi) * _FAST_ERROR, scale),
                         pair.hi == 0.0)
    with k.if_(ir.logical_not(sure)):
        exact, exact_scale = _accurate(k, parts)
        sign = ff.let(k, parts.minus << 31)
        k.assign(hi, bitcast(bitcast(exact.hi, U32) ^ sign, F32))
        k.assign(lo, bitcast(bitcast(exact.lo, U32) ^ sign, F32))
        k.assign(at, exact_scale)
    return _nan(y, x, ff.round_ff(k, FF(hi, lo), at))


def _nan(y: Val, x: Val, finite: Val) -> Val:
    """``finite``, or NaN (the canonical one) where ``y`` or ``x`` is NaN."""
    return select(ir.logical_or(y != y, x != x), lit(float("nan"), y.dtype), finite)


def _unpack(k: Kernel, bits: Val) -> tuple[Val, Val]:
    """A positive finite f32's bits as ``(m, e)``, the value ``2^e m`` with ``m`` in
    [1, 2) (zero reads as ``m = 1``), by integer operations only."""
    shift = ff.let(k, select(bits < 0x800000, ir.clz(bits) - 8, lit(0, U32)))
    normal = ff.let(k, bits << shift)
    m = bitcast((normal & 0x7FFFFF) | 0x3F800000, F32)
    return ff.let(k, m), ff.let(k, cast(normal >> 23, I32) - cast(shift, I32))


@dataclass(frozen=True)
class _Parts:
    """What the accurate path takes from the fast one: the operands' magnitudes as
    bits, ``n <= d`` (``n / d = 2^de m``), the table's index ``j``, and the placing as
    u32 bits (1 where |y| > |x|, where x's sign bit is set, where y's is)."""

    n_bits: Val
    d_bits: Val
    de: Val
    j: Val
    swap: Val
    negative: Val
    minus: Val


def _core(k: Kernel, y: Val, x: Val) -> tuple[FF, Val, _Parts]:
    """``atan2(y, x) = 2^scale (hi + lo)`` for f32 ``y`` and ``x`` (a NaN gives some
    pair, replaced by the caller), within ``_FAST_ERROR`` of it, relative, and what the
    accurate path needs."""
    by, bx = ff.let(k, bitcast(y, U32)), ff.let(k, bitcast(x, U32))
    ay, ax = ff.let(k, by & 0x7FFFFFFF), ff.let(k, bx & 0x7FFFFFFF)
    y_inf, x_inf = ff.let(k, ay == _INF), ff.let(k, ax == _INF)
    ay = ff.let(k, select(y_inf, lit(_ONE, U32), select(x_inf, lit(0, U32), ay)))
    ax = ff.let(k, select(x_inf, lit(_ONE, U32), select(y_inf, lit(0, U32), ax)))
    swap = ff.let(k, ay > ax)
    n_bits, d_bits = ff.let(k, select(swap, ax, ay)), ff.let(k, select(swap, ay, ax))
    n_m, n_e = _unpack(k, n_bits)
    d_m, d_e = _unpack(k, d_bits)
    zero = ff.let(k, n_bits == 0)
    n_m = ff.let(k, select(zero, 0.0, n_m))
    de = ff.let(k, select(zero, lit(0, I32), n_e - d_e))
    # m = n_m / d_m as a pair: the remainder n_m - mh d_m is exact
    mh = ff.let(k, n_m / d_m)
    p = ff.two_prod(k, mh, d_m)
    m = ff.fast_two_sum(k, mh, ((n_m - p.hi) - p.lo) / d_m)
    small = ff.let(k, de < _SMALL)
    a_small = _tiny(k, m, de)
    a_norm, j = _reduced(k, m, ff.let(k, ir.max(de, _SMALL)))
    a = FF(ff.let(k, select(small, a_small.hi, a_norm.hi)),
           ff.let(k, select(small, a_small.lo, a_norm.lo)))
    a_scale = ff.let(k, select(small, de, lit(0, I32)))
    negative = ff.let(k, (bx >> 31) == 1)
    direct = ff.let(k, ir.logical_and(ir.logical_not(swap), ir.logical_not(negative)))
    # the quadrant: C + s a, C in {pi/2, pi}, s = -1 where swap differs from negative
    flip = ff.let(k, swap != negative)
    unscale = ff.power_of_two(ir.max(a_scale, -126))
    shown = FF(ff.let(k, a.hi * unscale), ff.let(k, a.lo * unscale))
    signed = FF(select(flip, -shown.hi, shown.hi), select(flip, -shown.lo, shown.lo))
    c1, c2, c3 = (ff.let(k, select(swap, half, whole)) for half, whole in (
        (_HALF_PI_1, _PI_1), (_HALF_PI_2, _PI_2), (_HALF_PI_3, _PI_3)))
    placed = ff.add(k, FF(c1, c2), signed)
    placed = ff.fast_two_sum(k, placed.hi, placed.lo + c3)
    hi = ff.let(k, select(direct, a.hi, placed.hi))
    lo = ff.let(k, select(direct, a.lo, placed.lo))
    scale = ff.let(k, select(direct, a_scale, lit(0, I32)))
    minus = ff.let(k, (by >> 31) == 1)
    pair = FF(ff.let(k, select(minus, -hi, hi)), ff.let(k, select(minus, -lo, lo)))
    return pair, scale, _Parts(n_bits, d_bits, de, j, ff.let(k, (ax - ay) >> 31),
                               ff.let(k, bx >> 31), ff.let(k, by >> 31))


def _tiny(k: Kernel, m: FF, de: Val) -> FF:
    """``atan q / 2^de`` for ``q = 2^de m < 2^-12``: ``m (1 - c)``."""
    q = ff.let(k, m.hi * ff.power_of_two(ir.max(de, -50)))
    q2 = ff.let(k, q * q)
    c = q2 * (1 / 3) - q2 * q2 * 0.2
    return ff.fast_two_sum(k, m.hi, m.lo - m.hi * c)


def _reduced(k: Kernel, m: FF, de: Val) -> tuple[FF, Val]:
    """``atan q`` for ``q = 2^de m`` in [2^-13, 1] (``de`` in [-12, 0]), and the
    table's index ``j = round(64 q)`` it used."""
    scale = ff.power_of_two(de)
    qh, ql = ff.let(k, m.hi * scale), ff.let(k, m.lo * scale)
    j = ff.let(k, cast(ir.round(qh * 64.0), U32))
    t = ff.let(k, cast(j, F32) * (1 / 64))
    num = ff.two_sum(k, qh - t, ql)  # (qh - t exact: Sterbenz)
    prod = ff.two_prod(k, qh, t)
    one = ff.fast_two_sum(k, 1.0, prod.hi)
    den = ff.fast_two_sum(k, one.hi, one.lo + (prod.lo + ql * t))
    u = ff.div(k, num, den)
    sq = ff.two_prod(k, u.hi, u.hi)
    s = FF(sq.hi, ff.let(k, sq.lo + 2.0 * u.hi * u.lo))
    first = ff.mul(k, s, FF(lit(float(_MINUS_THIRD_HI), F32),
                            lit(float(_MINUS_THIRD_LO), F32)))
    z = sq.hi
    rest = z * z * (0.2 + z * (-1 / 7 + z * (1 / 9)))
    poly = ff.fast_two_sum(k, first.hi, first.lo + rest)
    angle = ff.add(k, u, ff.mul(k, u, poly))
    return ff.add(k, FF(ff.let(k, table(_ATAN_HI, j)), ff.let(k, table(_ATAN_LO, j))),
                  angle), j


def _accurate(k: Kernel, p: _Parts) -> tuple[FF, Val]:
    """``|atan2(y, x)| = 2^scale (hi + lo)`` from fixed-point values of 96 bits, ``lo``
    rounded to odd (module docstring: the accurate path)."""
    quotient = _divide(k, _significand(p.n_bits), _significand(p.d_bits))  # m = n / d
    scaled = ff.let(k, fixed.is_zero(p.j))
    x_start = fixed.shr(k, quotient, ff.let(k, fixed.pick(scaled, lit(1, U32), cast(
        ir.min(-p.de, 8), U32))), most=8)[1:]
    # j >= 1: x = u = (q - t) / (1 + q t), t = j / 64; j = 0: x = m / 2
    u, u_negative = _reduced_u(k, x_start, p.j)
    x = fixed.either(k, scaled, x_start, u)
    sigma = ff.let(k, cast(fixed.pick(scaled, cast(p.de + 1, U32), lit(0, U32)), I32))
    square = fixed.mul(k, x, x, 3)
    w = fixed.shr(k, square, ff.let(k, cast(ir.min(-2 * sigma, 96), U32)))  # u^2 or q^2
    s = _series(k, x, w)
    t = tuple(ff.let(k, table(_ATAN_WORDS, 3 * p.j + i)) for i in range(3))
    a = fixed.either(k, scaled, s, fixed.either(k, u_negative, fixed.sub(k, t, s),
                                                 fixed.add(k, t, s)))  # atan q = 2^sigma a
    shown = fixed.shr(k, a, ff.let(k, cast(2 - sigma, U32)))  # 94 fraction bits
    place = tuple(ff.let(k, fixed.pick(p.swap, lit(h, U32), lit(w_, U32))) for h, w_ in
                  zip(_words(_HALF_PI_FIXED), _words(_PI_FIXED), strict=True))
    placed = fixed.either(k, p.swap ^ p.negative, fixed.sub(k, place, shown),
                          fixed.add(k, place, shown))
    direct = ff.let(k, (p.swap | p.negative) ^ 1)
    exponent = cast(fixed.pick(direct, cast(sigma - 96, U32), lit(-94 & 0xFFFFFFFF, U32)),
                    I32)
    return fixed.to_pair(k, fixed.either(k, direct, a, placed), ff.let(k, exponent))


def _words(value: int) -> list[int]:
    """A 96-bit constant's three u32 words, the most significant first."""
    return [(value >> shift) & 0xFFFFFFFF for shift in (64, 32, 0)]


def _significand(bits: Val) -> Val:
    """A positive f32's significand as a 24-bit integer (a subnormal's normalized)."""
    return ((bits << (ir.max(ir.clz(bits), 8) - 8)) & 0x7FFFFF) | 0x800000


def _variable(k: Kernel, value: Val) -> Val:
    """A variable a loop assigns to, starting at ``value``."""
    return k.let(k.fresh_name("m"), value)


def _divide(k: Kernel, n: Val, d: Val) -> Fixed:
    """``n / d`` for 24-bit integers with their top bit set: an integer word (0 or 1)
    and three fraction words, truncated. Long division, 8 bits a pass: the remainder
    stays below ``d < 2^24``, so ``remainder * 2^8`` fits a word."""
    d = ff.let(k, d)
    whole = ff.let(k, ((n - d) >> 31) ^ 1)
    rest = _variable(k, n - whole * d)
    words = [_variable(k, lit(0, U32)) for _ in range(3)]
    with k.loop(k.fresh_name("m"), 0, 12):
        shifted = ff.let(k, rest << 8)
        digit = ff.let(k, shifted // d)
        k.assign(rest, shifted - digit * d)
        k.assign(words[0], (words[0] << 8) | (words[1] >> 24))
        k.assign(words[1], (words[1] << 8) | (words[2] >> 24))
        k.assign(words[2], (words[2] << 8) | digit)
    return (whole, *words)


def _reduced_u(k: Kernel, q: Fixed, j: Val) -> tuple[Fixed, Val]:
    """``|u|`` for ``u = (q - t) / (1 + q t)``, ``t = j / 64``, and whether ``u < 0``:
    from 0, ``_NEWTON`` passes of ``v + (|q - t| - v (1 + q t)) r``, ``r`` a float
    within 2^-23 of ``1 / (1 + q t)``, each taking the error to 2^-23 of what it was
    (``j = 64``'s ``t = 1`` is 0 modulo 1: ``t - q`` is still right)."""
    diff = fixed.sub(k, q, (ff.let(k, j << 26), lit(0, U32), lit(0, U32)))
    negative = ff.let(k, fixed.negative(diff))
    half_num = fixed.shr(k, fixed.magnitude(k, diff), 1)
    # half the denominator, (1 + q t) / 2 = 1/2 + q j / 128, in [1/2, 1)
    half_den = fixed.add(k, fixed.const(1 << 95, 3), fixed.mul(k, q, (ff.let(k, j << 25),), 3))
    r = ff.let(k, cast(0.5 / cast(half_den[0] >> 8, F32) * 2.0**56, U32))  # 1 / (2 half)
    v = [_variable(k, lit(0, U32)) for _ in range(3)]
    with k.loop(k.fresh_name("m"), 0, _NEWTON):
        rest = fixed.sub(k, half_num, fixed.mul(k, tuple(v), half_den, 3))  # half of it
        down = ff.let(k, fixed.negative(rest))
        step = fixed.mul(k, fixed.magnitude(k, rest), (r,), 3)
        step = fixed.add(k, step, step)
        for vi, new in zip(v, fixed.either(k, down, fixed.sub(k, tuple(v), step),
                                           fixed.add(k, tuple(v), step)), strict=True):
            k.assign(vi, new)
    return tuple(v), negative


#: The passes ``_reduced_u`` makes: 4 x 23 bits, from 2^-7 (``|u|``) to below 2^-96.
_NEWTON = 4


#: The series' nested sums, one pass each: ``b = c - (f b)`` with ``c = 1/(2i + 3)`` for
#: i = 6 down to 0 (``f = w``), then ``c = 0`` with ``f = w`` and with ``f = x``.
_PASSES = 9
_SERIES_WORDS = np.array([w for c in (*_SERIES[::-1], 0, 0) for w in _words(c)], np.uint32)


def _series(k: Kernel, x: Fixed, w: Fixed) -> Fixed:
    """``x (1 - w/3 + w^2/5 - ... + w^6/15)`` for ``w <= 2^-14``, below it, by nested
    sums modulo 1 in one loop: ``b_i = 1/(2i + 3) - w b_(i+1)`` (each in (0, 1)), then
    ``1 - w b_0`` (0 - w b_0 modulo 1), then ``-x (1 - w b_0)``, negated. Each product
    has its last bit set, so it is never 0: ``1 - w b_0 < 1`` even where ``w`` is 0, and
    the result is below ``x`` wherever ``x``'s last bit is 0, as at every rounding
    boundary (``atan q < q``: a quotient that is a boundary rounds down)."""
    b = [_variable(k, lit(0, U32)) for _ in range(3)]
    with k.loop(k.fresh_name("m"), 0, _PASSES) as i:
        f = fixed.either(k, ff.let(k, fixed.is_zero(i ^ (_PASSES - 1))), x, w)
        part = fixed.mul(k, f, tuple(b), 3)
        c = tuple(ff.let(k, table(_SERIES_WORDS, 3 * i + n)) for n in range(3))
        for bi, v in zip(b, fixed.sub(k, c, (*part[:2], part[2] | 1)), strict=True):
            k.assign(bi, v)
    return fixed.sub(k, fixed.const(0, 3), tuple(b))
