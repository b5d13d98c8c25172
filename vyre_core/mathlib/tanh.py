"""``tanh x``, correctly rounded in f32 and f16 (docs/design-42.md, sections 2.4 and 8 step 9).

One float-float algorithm (f32 pairs, no f64, no ``fma``), as ``exp2.py``: every backend
runs the same operations, and the exhaustive check of every f32 input (``vyre conform
--exhaustive --all-inputs --op tanh``) proves the bytes right once for all. ``tanh`` is
odd: the pair is made for ``a = |x|`` and the sign put back at the end (``tanh(-0) = -0``).

- ``a`` is clamped to at most 9.5 (infinity and NaN taken there, NaN's result replaced at
  the end): from about 9.0109 every f32 result is 1.
- ``a < 1/16``: the odd series ``a + a u``, ``u = z P(z)``, ``z = a^2`` exactly as a pair
  (``two_prod``), ``P = -1/3 + z (2/15 + z R)`` with ``-1/3`` and ``2/15`` as pairs and
  ``R`` (``c_7`` to ``c_13``; the next term is below 2^-65 of ``a``) in f32; ``z P`` by
  ``ff.mul``, ``a u_hi`` exact (``two_prod``). ``|u| < 2^-9.6``, so the pair is within
  about 2^-50 of ``tanh a``. Tiny ``a`` (whose products underflow) gives ``a`` itself,
  which is then the correctly rounded result (``a^3 / 3`` is far below half its ulp).
- Otherwise ``E = e^(-2a)`` (``-2a`` is exact) from exp.py's pair and scale (``E`` as a pair
  exactly, no result below 2^-28), then ``(1 - E) / (1 + E)``: the sums by
  ``ff.add_float``, the quotient by ``ff.div``. ``1 - E`` is at least 0.117, so ``E``'s
  error (about 2^-48) grows at most about 9 times in the quotient.

The f32 result is the pair's ``hi`` (both ways end in a ``fast_two_sum``, whose ``hi`` is
the pair's sum rounded to nearest even; no result is subnormal except ``a`` itself); f16
is the same pair rounded once to f16 by ``ff.round_ff``. The f32 inputs whose pair lies
too near a rounding boundary to round right are listed in ``_EXCEPTION_INPUTS`` (``|x|``
only: the sign is put back after the lookup) with their correct results, found by running
every f32 input against MPFR with the list empty (``tools/math_exceptions.py tanh``).

Special values (docs/semantics.md, Floats): ``tanh(+-0) = +-0``, ``tanh(+-inf) = +-1``,
NaN for NaN.
"""

from __future__ import annotations

from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select
from vyre_core.ir.values import Val, bitcast, cast
from vyre_core.mathlib import exceptions, exp, ff
from vyre_core.mathlib.ff import FF

F32, U32 = DType.F32, DType.U32



# Made by ``tools/tanh_constants.py`` (gmpy2, from the exact rational coefficients):
# -1/3 and 2/15 as ``hi + lo``, the next four coefficients in f32.
_C3_HI, _C3_LO, _C5_HI, _C5_LO = ff.from_bits([
    0xBEAAAAAB, 0x322AAAAB, 0x3E088889, 0xB1EEEEEF])
_C7, _C9, _C11, _C13 = ff.from_bits([
    0xBD5D0DD1, 0x3CB327A4, 0xBC11371B, 0x3B6B69E8])

#: Below this ``a``, the series; from it, ``e^(-2a)``.
_SERIES_BELOW = 1 / 16
#: From about 9.0109 every f32 result is 1; larger ``a`` (infinity too) is taken here.
_CLAMP = 9.5

#: The f32 inputs ``|x|`` (their bits, sorted) whose pair rounds the wrong way, and their
#: correctly rounded results' bits (``exceptions.corrected``): 3 magnitudes (6 of 2^32
#: inputs with their negatives), one from the series and two from the quotient. Made over
#: every f32 input with the list empty by ``tools/math_exceptions.py tanh`` (cpu, 256
#: chunks), which lists each with its negative: the positive half is the list.
_EXCEPTION_INPUTS = [0x3AC37DE2, 0x3DC95DB7, 0x40A6EF82]
_EXCEPTION_RESULTS = [0x3AC37DD9, 0x3DC8B83D, 0x3F7FFC25]


def tanh_f32(k: Kernel, x: Val) -> Val:
    """``tanh x`` correctly rounded to f32, for an f32 ``x``."""
    a = ff.let(k, abs(x))
    magnitude = exceptions.corrected(k, a, _core(k, a).hi, _EXCEPTION_INPUTS,
                                     _EXCEPTION_RESULTS)
    signed = bitcast(bitcast(magnitude, U32) | (bitcast(x, U32) & 0x80000000), F32)
    return select(x != x, x, signed)


def tanh_f16(k: Kernel, x: Val) -> Val:
    """``tanh x`` correctly rounded to f16, for an f16 ``x``: the f32 algorithm's pair
    rounded once to f16."""
    wide = ff.let(k, cast(x, F32))
    pair = _core(k, ff.let(k, abs(wide)))
    negative = ff.let(k, (bitcast(wide, U32) & 0x80000000) != 0)  # (-0 too)
    signed = FF(select(negative, -pair.hi, pair.hi), select(negative, -pair.lo, pair.lo))
    return select(x != x, x, ff.round_ff(k, signed, 0, DType.F16))



def _core(k: Kernel, a: Val) -> FF:
    """``tanh a`` as a normalized pair, for ``a = |x|`` (NaN read as ``_CLAMP``)."""
    a = ff.let(k, select(a <= _CLAMP, a, _CLAMP))
    small, large = _series(k, a), _quotient(k, a)
    below = ff.let(k, a < _SERIES_BELOW)
    return FF(ff.let(k, select(below, small.hi, large.hi)),
              ff.let(k, select(below, small.lo, large.lo)))


def _series(k: Kernel, a: Val) -> FF:
    """``tanh a`` for ``a < 1/16``: ``a + a z P(z)``, within about 2^-50 (relative)."""
    z = ff.two_prod(k, a, a)
    r = _C7 + z.hi * (_C9 + z.hi * (_C11 + z.hi * _C13))
    q = ff.fast_two_sum(k, _C5_HI, z.hi * r)
    q = FF(q.hi, ff.let(k, q.lo + _C5_LO))
    w = ff.mul(k, z, q)
    p = ff.fast_two_sum(k, _C3_HI, w.hi)
    p = FF(p.hi, ff.let(k, p.lo + (_C3_LO + w.lo)))
    u = ff.mul(k, z, p)
    head = ff.two_prod(k, a, u.hi)
    t = ff.fast_two_sum(k, a, head.hi)
    return ff.fast_two_sum(k, t.hi, t.lo + (head.lo + a * u.lo))


def _quotient(k: Kernel, a: Val) -> FF:
    """``tanh a = (1 - E) / (1 + E)``, ``E = e^(-2a)``, for ``a`` in [1/16, 9.5]."""
    pair, scale = exp.core(k, a * -2.0)
    power = ff.let(k, ff.power_of_two(scale))
    e = FF(ff.let(k, pair.hi * power), ff.let(k, pair.lo * power))
    return ff.div(k, ff.add_float(k, FF(-e.hi, -e.lo), 1.0), ff.add_float(k, e, 1.0))
