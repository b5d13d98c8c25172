"""``atan2(y, x)``, correctly rounded in f16 (docs/design-42.md, sections 2.4 and 8 step
12), from a float-float value of it that is also the f32 function's fast path.

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
fast path: tests/test_mathlib_atan2.py holds it to ``_FAST_ERROR`` (where ``ff.decided``
passes at that bound, its f32 rounding is MPFR's). The f32 function is not in the library
yet: the pairs ``decided`` leaves (exact ties of ``atan q ~ q``, and within 2^-43 of a
midpoint: CORE-MATH's atan2f worst cases have 52 identical bits after the rounding bit,
so an accurate path needs about 2^-80) need an accurate path, not built.
"""

from __future__ import annotations

from vyre_core.ir import builder as ir
from vyre_core.ir.builder import Kernel, Val, bitcast, cast, select, table
from vyre_core.ir.dtypes import DType
from vyre_core.mathlib import ff
from vyre_core.mathlib.ff import FF

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

#: The quotients below ``2^_SMALL`` (their exponent difference) take the short series.
_SMALL = -12

#: The pair's error bound, relative (module docstring; the tests hold the pair to it).
_FAST_ERROR = 2.0**-43

_ONE, _INF = 0x3F800000, 0x7F800000


def atan2_f16(k: Kernel, y: Val, x: Val) -> Val:
    """``atan2(y, x)`` correctly rounded to f16, for f16 ``y`` and ``x``: the f32
    algorithm's pair rounded once to f16."""
    pair, scale = _core(k, cast(y, F32), cast(x, F32))
    return _nan(y, x, ff.round_ff(k, pair, scale, DType.F16))


def _nan(y: Val, x: Val, finite: Val) -> Val:
    """``finite``, or NaN (the canonical one) where ``y`` or ``x`` is NaN."""
    return select(ir.logical_or(y != y, x != x), ir.lit(float("nan"), y.dtype), finite)


def _unpack(k: Kernel, bits: Val) -> tuple[Val, Val]:
    """A positive finite f32's bits as ``(m, e)``, the value ``2^e m`` with ``m`` in
    [1, 2) (zero reads as ``m = 1``), by integer operations only."""
    shift = ff.let(k, select(bits < 0x800000, ir.clz(bits) - 8, ir.lit(0, U32)))
    normal = ff.let(k, bits << shift)
    m = bitcast((normal & 0x7FFFFF) | 0x3F800000, F32)
    return ff.let(k, m), ff.let(k, cast(normal >> 23, I32) - cast(shift, I32))


def _core(k: Kernel, y: Val, x: Val) -> tuple[FF, Val]:
    """``atan2(y, x) = 2^scale (hi + lo)`` for f32 ``y`` and ``x`` (a NaN gives some
    pair, replaced by the caller), within ``_FAST_ERROR`` of it, relative."""
    by, bx = ff.let(k, bitcast(y, U32)), ff.let(k, bitcast(x, U32))
    ay, ax = ff.let(k, by & 0x7FFFFFFF), ff.let(k, bx & 0x7FFFFFFF)
    y_inf, x_inf = ff.let(k, ay == _INF), ff.let(k, ax == _INF)
    ay = ff.let(k, select(y_inf, ir.lit(_ONE, U32), select(x_inf, ir.lit(0, U32), ay)))
    ax = ff.let(k, select(x_inf, ir.lit(_ONE, U32), select(y_inf, ir.lit(0, U32), ax)))
    swap = ff.let(k, ay > ax)
    n_bits, d_bits = ff.let(k, select(swap, ax, ay)), ff.let(k, select(swap, ay, ax))
    n_m, n_e = _unpack(k, n_bits)
    d_m, d_e = _unpack(k, d_bits)
    zero = ff.let(k, n_bits == 0)
    n_m = ff.let(k, select(zero, 0.0, n_m))
    de = ff.let(k, select(zero, ir.lit(0, I32), n_e - d_e))
    # m = n_m / d_m as a pair: the remainder n_m - mh d_m is exact
    mh = ff.let(k, n_m / d_m)
    p = ff.two_prod(k, mh, d_m)
    m = ff.fast_two_sum(k, mh, ((n_m - p.hi) - p.lo) / d_m)
    small = ff.let(k, de < _SMALL)
    a_small = _tiny(k, m, de)
    a_norm = _reduced(k, m, ff.let(k, ir.max(de, _SMALL)))
    a = FF(ff.let(k, select(small, a_small.hi, a_norm.hi)),
           ff.let(k, select(small, a_small.lo, a_norm.lo)))
    a_scale = ff.let(k, select(small, de, ir.lit(0, I32)))
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
    scale = ff.let(k, select(direct, a_scale, ir.lit(0, I32)))
    minus = ff.let(k, (by >> 31) == 1)
    return FF(ff.let(k, select(minus, -hi, hi)), ff.let(k, select(minus, -lo, lo))), scale


def _tiny(k: Kernel, m: FF, de: Val) -> FF:
    """``atan q / 2^de`` for ``q = 2^de m < 2^-12``: ``m (1 - c)``."""
    q = ff.let(k, m.hi * ff.power_of_two(ir.max(de, -50)))
    q2 = ff.let(k, q * q)
    c = q2 * (1 / 3) - q2 * q2 * 0.2
    return ff.fast_two_sum(k, m.hi, m.lo - m.hi * c)


def _reduced(k: Kernel, m: FF, de: Val) -> FF:
    """``atan q`` for ``q = 2^de m`` in [2^-13, 1] (``de`` in [-12, 0])."""
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
    first = ff.mul(k, s, FF(ir.lit(float(_MINUS_THIRD_HI), F32),
                            ir.lit(float(_MINUS_THIRD_LO), F32)))
    z = sq.hi
    rest = z * z * (0.2 + z * (-1 / 7 + z * (1 / 9)))
    poly = ff.fast_two_sum(k, first.hi, first.lo + rest)
    angle = ff.add(k, u, ff.mul(k, u, poly))
    return ff.add(k, FF(ff.let(k, table(_ATAN_HI, j)), ff.let(k, table(_ATAN_LO, j))), angle)
