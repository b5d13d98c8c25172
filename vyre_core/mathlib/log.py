"""``ln x``, correctly rounded in f32 and f16 (docs/design-42.md, sections 2.4 and 8).

log2.py's reduction, table and series (imported, not copied), scaled by ln 2 (exp2.py's
pair), so the same bits come from every backend that runs the basic operations as written
(f32 pairs, no f64, no ``fma``):

- ``x = 2^e m / c_j (1 + r)`` by ``log2.reduce`` (subnormal ``x`` normalized with integer
  operations; ``r`` exact as a pair, ``|r| <= 2^-8``; ``e = 0`` and ``c_j`` 1 or 1/2 for
  ``x`` near 1, below as above, so nothing cancels there) and ``ln(1 + r)`` as a pair by
  ``log2.log1p`` (relative error about 2^-48).
- ``ln x = (e - log2 c_j) ln 2 + ln(1 + r)``: ``e - log2 c_j`` from log2.py's table
  (``minus_log2_reciprocal``) as a pair (``e + T_hi`` exact by ``two_sum``, ``T_lo``
  added to its low part), times ln 2 as a pair (``ff.mul``), plus the series' pair
  (``ff.add``): a normalized pair within about 2^-48 (relative) of ``ln x``, exactly +0
  at ``x = 1`` (``e = 0``, ``T_0 = -0``, ``r = 0``). Sharing log2's table keeps this
  function to log2's table words (each costs every wgpu invocation on lavapipe): a table
  of ``-ln c_j`` and ``e ln 2`` in three parts (tried) gave 59 exceptions too, at about
  the same cost.

The f32 result is the pair's ``hi`` (the last step is a ``fast_two_sum``: ``hi`` is the
exact sum rounded to nearest even, the one rounding wanted; no result is subnormal, the
least nonzero ``|ln x|`` being about 2^-24). f16 is the same pair rounded once to f16 by
``ff.round_ff``. ``x = 1`` is the only finite input with a rational result (Lindemann);
the f32 inputs whose pair lies too near a rounding boundary are listed with their correct
results in ``_EXCEPTION_INPUTS``, found by running every f32 input against MPFR
(``tools/math_exceptions.py log`` with the list empty). No constant is log's own.

Cost (``vyre bench --only math.log_``, 4 Mi f32, against main's code in turns on the
shared, loaded 2-core machine): about log2's; over the issue's 2x on wgpu (lavapipe),
where log2's 258 table words are about a third of it (docs/design-42.md section 8).

Special values (docs/semantics.md, Floats), as ``log2``'s: NaN for NaN and below zero,
``-inf`` for ``+-0``, ``+inf`` for ``+inf``; ``ln 1 = +0``.
"""

from __future__ import annotations

from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.values import Val, cast, lit
from vyre_core.mathlib import exceptions, exp2, ff, log2
from vyre_core.mathlib.ff import FF

F32 = DType.F32



#: The f32 inputs (their bits, sorted) whose pair rounds the wrong way, and their correctly
#: rounded results' bits (``exceptions.corrected``): 59 of 2^32, most with large ``|ln x|``
#: (where the pair's last roundings, about 2^-48 of the result, are largest against its
#: ulp). Made over every f32 input with the list emptied (``tools/math_exceptions.py log``,
#: cpu).
_EXCEPTION_INPUTS = [
    0x03D2F29F, 0x04366D72, 0x07C060FA, 0x0B265D7B, 0x0F61FF63, 0x111C87F8, 0x12F3C073,
    0x1344CD4B, 0x13B2D101, 0x145CB6D4, 0x14D745EB, 0x16A57EA8, 0x18B06F2A, 0x1AB7C313,
    0x22925AD4, 0x2423C085, 0x25F12E61, 0x2758EEC4, 0x28D6AF22, 0x29FD22F8, 0x2D05C0B6,
    0x2D6F4A4E, 0x30A201DC, 0x3418949B, 0x37974BDC, 0x39C31348, 0x3C413D3A, 0x3FD364D7,
    0x404DC250, 0x4056EE45, 0x41178FEB, 0x46067543, 0x4612274F, 0x4665A9A6, 0x46CA6C75,
    0x4BF70DB3, 0x4C08FF78, 0x4C5D65A5, 0x4C723804, 0x4CA8A9EE, 0x4E85F412, 0x4FE4AB24,
    0x50DFEF2E, 0x51E8644F, 0x5A9007C2, 0x5B98E163, 0x5BE9C85F, 0x5D8B2D5B, 0x5EE8984E,
    0x633E130D, 0x64E27FA3, 0x65D890D3, 0x6BE8CF96, 0x6E7054F2, 0x6F31A8EC, 0x7405DEE8,
    0x79E7EC37, 0x7A708B30, 0x7DBDFE04]
_EXCEPTION_RESULTS = [
    0xC2A55B2D, 0xC2A442A9, 0xC29A733A, 0xC291095F, 0xC2855565, 0xC28085DF, 0xC276F4DD,
    0xC2750A2B, 0xC272A687, 0xC26F092F, 0xC26C5CF5, 0xC262531B, 0xC256FA6F, 0xC24BB9A1,
    0xC220462D, 0xC21781D1, 0xC20DA3FB, 0xC205BF23, 0xC1FAF0E9, 0xC1EE8859, 0xC1CCD1E3,
    0xC1C82A99, 0xC1A4786F, 0xC17C447F, 0xC12EC533, 0xC0FCAF65, 0xC08E158F, 0x3F006EF3,
    0x3F957B37, 0x3F9B103B, 0x400FE5E7, 0x4110F651, 0x41124BF1, 0x41198725, 0x41229929,
    0x418A5849, 0x418B2C45, 0x418F034B, 0x418FBB5F, 0x419261B3, 0x41A6B811, 0x41B6166F,
    0x41C102B7, 0x41CC65C5, 0x42163117, 0x421BF9B9, 0x421DACA7, 0x4226B0B1, 0x422E4A21,
    0x42466F73, 0x424F7453, 0x4254D1F9, 0x4276616F, 0x42822F73, 0x42845A89, 0x4291A68D,
    0x42A1FFB7, 0x42A3754B, 0x42ACB0BF]


def log_f32(k: Kernel, x: Val) -> Val:
    """``ln x`` correctly rounded to f32, for an f32 ``x``."""
    rounded = log2.special(k, x, _core(k, x).hi)
    return exceptions.corrected(k, x, rounded, _EXCEPTION_INPUTS, _EXCEPTION_RESULTS)


def log_f16(k: Kernel, x: Val) -> Val:
    """``ln x`` correctly rounded to f16, for an f16 ``x``: the f32 algorithm's pair
    rounded once to f16."""
    return log2.special(k, x, ff.round_ff(k, _core(k, cast(x, F32)), 0, DType.F16))



def _core(k: Kernel, x: Val) -> FF:
    """``ln x`` as a normalized pair, for a positive finite f32 ``x`` (any other input is
    read as 1 and its result replaced by ``log2.special``)."""
    e, j, r = log2.reduce(k, x)
    t = log2.minus_log2_reciprocal(k, j)
    whole = ff.two_sum(k, cast(e, F32), t.hi)
    whole = ff.fast_two_sum(k, whole.hi, whole.lo + t.lo)
    scaled = ff.mul(k, whole, FF(lit(float(exp2._LN2_HI), F32),
                                 lit(float(exp2._LN2_LO), F32)))
    return ff.add(k, scaled, log2.log1p(k, r))
