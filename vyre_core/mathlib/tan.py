"""``tan x``, correctly rounded in f32 and f16 (docs/design-42.md, sections 2.4 and 8 step 11).

One float-float algorithm (f32 pairs, no f64, no ``fma``), as ``trig.py``'s ``sin`` and
``cos``, on their reduction: every backend runs the same operations, and the exhaustive
check of every f32 input (``vyre conform --exhaustive --all-inputs --op tan``) proves the
bytes right once for all. ``tan`` is odd: the pair is made for ``|x|`` and the sign put
back at the end (``tan(-0) = -0``).

- ``|x| = (n + f) pi / 64``, ``r = f pi / 64`` as a pair (``trig.reduced``: Payne and
  Hanek's from 0.0245, ``f``'s top 72 bits). ``tan`` has period ``pi`` (64 in ``n``), and
  ``tan(pi/2 + y) = -1 / tan y``: with ``i = ((n + 16) mod 32) - 16`` (-16 to 15), ``tan
  |x|`` is ``tan y`` or, where bit 5 of ``n + 16`` is set, ``-1 / tan y``, for ``y = i pi
  / 64 + r``, ``|y| <= 33 pi / 128``; and ``tan y = -tan(a pi / 64 - r)`` for ``i = -a <
  0``. So every input is ``+-tan(a pi / 64 + s)`` or its reciprocal, ``a`` from 0 to 16,
  ``s = +-r``.
- ``tan(a pi / 64 + s) = (T + t) / (1 - T t)``, ``T = tan(a pi / 64)`` a pair from a
  table of 17, ``t = tan s = s + s^3 P(s^2)``, ``P`` to ``s^8`` (the next term is below
  2^-72 of ``s``) with its ``1/3`` as a pair, the cube as a pair. The reciprocal is the
  same quotient upside down: one ``ff.div`` of the two pairs, swapped by a select. Near a
  pole (``a = 0``, ``T = 0``) it is ``1 / t`` exactly as the reduction left ``r``: the
  72 bits of ``f`` are what hold its relative error there (as at ``sin``'s zeros, proven
  by ``sin``'s exhaustive run). Elsewhere ``T >= tan(pi / 64) > 2 |t|``, so ``T + t``
  loses at most a bit, and ``1 - T t`` is within 2.5% of 1. The pair is within about
  2^-48 of ``tan |x|`` (relative; an estimate from the roundings' sizes: the exhaustive
  run is the proof).

The pair's last step is a ``fast_two_sum``, so its ``hi`` is its sum rounded to f32, the
one rounding wanted for f32 (no result is subnormal but for a subnormal ``x``, whose
pair is ``x`` and 0: its square underflows; ``tan x`` rounds to ``x`` up to 0x39B89BA2,
about 3.5e-4, and the pair's ``hi`` is ``x`` there, with ``x^3 / 3`` in its ``lo``);
f16 is the pair rounded once to f16 by ``ff.round_ff``. The f32 inputs whose pair
lies too near a rounding boundary are listed with their correct results, found by running
every f32 input against MPFR with the list empty (``tools/math_exceptions.py tan``).

Special values (docs/semantics.md, Floats): ``tan(+-0) = +-0``, NaN for NaN and ``+-inf``.
"""

from __future__ import annotations

from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select, table
from vyre_core.ir.values import Val, bitcast, cast
from vyre_core.mathlib import exceptions, ff, trig
from vyre_core.mathlib.ff import FF

F32, U32 = DType.F32, DType.U32


# Made by ``tools/tan_constants.py`` (gmpy2 at 400 bits, each pair's parts rounded once to
# f32): tan(a pi / 64), a = 0..16, as pairs; the series' 1/3 as a pair, then 2/15, 17/315,
# 62/2835 and 1382/155925 in f32.
_TAN_HI = ff.from_bits([
    0x00000000, 0x3D49393C, 0x3DC9B5DC, 0x3E17E564, 0x3E4BAFAF, 0x3E803FD4, 0x3E9B5042,
    0x3EB73250, 0x3ED413CD, 0x3EF22870, 0x3F08D5B9, 0x3F1970C4, 0x3F2B0DC1, 0x3F3DDCCF,
    0x3F521801, 0x3F68065E, 0x3F800000])
_TAN_LO = ff.from_bits([
    0x00000000, 0x30A3B116, 0x3145B2DA, 0xB1C59F9C, 0x2F2A62B0, 0xB2279D95, 0xB22A39C2,
    0xB202879B, 0xB1C0621A, 0x325273E8, 0xB25EF963, 0x32904800, 0x32AB7F99, 0x32D2990D,
    0x32AE4285, 0x326709A6, 0x00000000])
_THIRD_HI, _THIRD_LO = ff.from_bits([0x3EAAAAAB, 0xB22AAAAB])
_C5, _C7, _C9, _C11 = ff.from_bits([
    0x3E088889, 0x3D5D0DD1, 0x3CB327A4, 0x3C11371B])

#: The positive f32 inputs (their bits, sorted) whose pair rounds the wrong way, and their
#: correctly rounded results' bits (``exceptions.corrected``): 22 of 2^31; each one's
#: negative is misrounded too, the mirror image (tan is odd, and so is this code, which
#: reads only ``|x|`` and the sign), so the list is looked up with ``|x|``. Made over every
#: f32 input with the list empty (``tools/math_exceptions.py tan``, cpu: 44 inputs, every
#: one's mirror among them).
_EXCEPTION_INPUTS = [
    0x3E19205E, 0x408174DD, 0x48632AA3, 0x4872B9FA, 0x4F823D5F, 0x505B24EC, 0x53EBC27A,
    0x56807D7F, 0x575852F8, 0x5C1785A1, 0x5D5873AE, 0x5FFD33A4, 0x613D28D9, 0x61FE289F,
    0x624684EF, 0x67A2943D, 0x68058F5D, 0x757E45C4, 0x75CCFAAA, 0x76EB0BDC, 0x7A98D2C2,
    0x7B97B9EC]
_EXCEPTION_RESULTS = [
    0x3E1A4733, 0x3FA29B31, 0xBF4F824B, 0xC12F32DD, 0xBE75D279, 0xBF8FD6DF, 0x3E6AEB2B,
    0x4273CDB3, 0xBFC0E1DA, 0x3F0570DF, 0x3EA6BFED, 0x3FD06C8C, 0x3EC05657, 0xBCB3073D,
    0x3FB4F1DF, 0xBFCD73CB, 0x3E9076C9, 0xBE2D3B59, 0x3E4E4673, 0x4019EB75, 0x3F4AEF73,
    0x3E2E5B04]


def tan_f32(k: Kernel, x: Val) -> Val:
    """``tan x`` correctly rounded to f32, for an f32 ``x``."""
    sign = ff.let(k, bitcast(x, U32) & 0x80000000)
    magnitude = exceptions.corrected(k, abs(x), core(k, x).hi, _EXCEPTION_INPUTS,
                                     _EXCEPTION_RESULTS)
    return trig.special(x, bitcast(bitcast(magnitude, U32) ^ sign, F32))


def tan_f16(k: Kernel, x: Val) -> Val:
    """``tan x`` correctly rounded to f16, for an f16 ``x``: the f32 algorithm's pair
    rounded once to f16."""
    wide = ff.let(k, cast(x, F32))
    pair = core(k, wide)
    negative = ff.let(k, (bitcast(wide, U32) & 0x80000000) != 0)  # (-0 too)
    signed = FF(select(negative, -pair.hi, pair.hi), select(negative, -pair.lo, pair.lo))
    return trig.special(x, ff.round_ff(k, signed, 0, DType.F16))


def core(k: Kernel, x: Val) -> FF:
    """``tan |x|`` as a normalized pair, for a finite f32 ``x`` (module docstring)."""
    r, n = trig.reduced(k, x)
    shifted = ff.let(k, n + 16)
    i = ff.let(k, shifted & 31)  # (the docstring's i, plus 16)
    below = ff.let(k, i < 16)
    a = select(below, 16 - i, i - 16)
    s = FF(ff.let(k, select(below, -r.hi, r.hi)), ff.let(k, select(below, -r.lo, r.lo)))
    reciprocal = ff.let(k, (shifted & 32) != 0)
    big = FF(ff.let(k, table(_TAN_HI, a)), ff.let(k, table(_TAN_LO, a)))
    t = _tan_series(k, s)
    product = ff.mul(k, big, t)
    over = ff.add(k, big, t)
    under = ff.add_float(k, FF(-product.hi, -product.lo), 1.0)
    value = ff.div(k, FF(ff.let(k, select(reciprocal, under.hi, over.hi)),
                         ff.let(k, select(reciprocal, under.lo, over.lo))),
                   FF(ff.let(k, select(reciprocal, over.hi, under.hi)),
                      ff.let(k, select(reciprocal, over.lo, under.lo))))
    negate = ff.let(k, below != reciprocal)
    return FF(select(negate, -value.hi, value.hi), select(negate, -value.lo, value.lo))


def _tan_series(k: Kernel, s: FF) -> FF:
    """``tan s`` as a pair, for ``|s| <= pi / 128`` (a pair): ``s + s^3 P(s^2)``."""
    z = ff.two_prod(k, s.hi, s.hi)
    tail = z.hi * (_C5 + z.hi * (_C7 + z.hi * (_C9 + z.hi * _C11)))
    p = ff.fast_two_sum(k, _THIRD_HI, tail)
    p = FF(p.hi, ff.let(k, p.lo + _THIRD_LO))
    cube = ff.mul_float(k, z, s.hi)
    cube = FF(cube.hi, ff.let(k, cube.lo + z.hi * s.lo * 3.0))
    t = ff.mul(k, cube, p)
    head = ff.fast_two_sum(k, s.hi, t.hi)
    return ff.fast_two_sum(k, head.hi, head.lo + (s.lo + t.lo))
