"""``tanh x`` in f64, one algorithm for the reference and cpu (docs/design-42.md, section
5), built as ``exp_f64.py`` is (IEEE f64 basic operations, integer operations and
bitcasts, no ``fma``: the same bytes on every backend that runs the IR as written), on
``a = |x|`` (the sign put back on the bits, so ``tanh(-0) = -0``):

- ``a < 0.125``: the series ``a + a^3 (c3 + a^2 (c5 + ...))`` to ``a^25`` (coefficients
  from exact rationals, ``tools/f64_constants.py``; relative truncation error below
  2^-70), ``a^3`` as a pair (``ff.two_prod``), ``c3 = -1/3`` as a pair, the rest in plain
  f64: relative error about 2^-67.
- otherwise (``a`` clamped to 22, where every result is 1): ``E = e^(-2a)`` unrounded from
  ``exp_f64``'s core (a pair within about 2^-70), ``(1 - E) / (1 + E)`` in float-float
  (``ff.add``, ``ff.div``): ``1 - E >= 0.22``, so about 2^-67 relative.

Correctly rounded except where the exact result lies within about 2^-67 (relative) of a
rounding boundary; measured against MPFR in docs/semantics.md ("Floats"). NaN for NaN.
"""

from __future__ import annotations

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select
from vyre_core.ir.values import Val, bitcast, lit
from vyre_core.mathlib import exp_f64, ff
from vyre_core.mathlib.exp_f64 import from_bits
from vyre_core.mathlib.ff import FF

F64, U64 = DType.F64, DType.U64

#: Below it, the series; above, the quotient of exponentials.
_SERIES_BELOW = 0.125

# Made by ``tools/f64_constants.py``: tanh's Taylor coefficients at x^3 (as a pair), x^5,
# ..., x^25, each rounded once to f64.
(_C3_HI, _C3_LO) = from_bits([
    0xBFD5555555555555, 0xBC75555555555555])
_SERIES = from_bits([
    0x3FC1111111111111, 0xBFABA1BA1BA1BA1C, 0x3F9664F4882C10FA, 0xBF8226E355E6C23D,
    0x3F6D6D3D0E157DE0, 0xBF57DA36452B75E3, 0x3F43558248036744, 0xBF2F57D7734D1664,
    0x3F1967E18AFCAFAD, 0xBF0497D8EEA25259, 0x3EF0B132D39A6050])


def tanh_f64(k: Kernel, x: Val) -> Val:
    """``tanh x`` in f64: NaN for NaN, +-1 from about 19.06 on, odd (``-0`` for ``-0``)."""
    a = ff.let(k, ir.min(abs(x), 22.0))
    t = select(a < _SERIES_BELOW, _series(k, a), _quotient(k, a))
    signed = bitcast(bitcast(t, U64) | (bitcast(x, U64) & 0x8000000000000000), F64)
    return select(x != x, x, signed)


def _series(k: Kernel, a: Val) -> Val:
    square = ff.two_prod(k, a, a)
    rest = _SERIES[-1]
    for c in reversed(_SERIES[:-1]):
        rest = c + square.hi * rest
    tail = ff.fast_two_sum(k, _C3_HI, square.hi * rest)
    coefficient = FF(tail.hi, ff.let(k, tail.lo + _C3_LO))
    cube = ff.mul_float(k, square, a)
    term = ff.mul(k, cube, coefficient)
    s = ff.fast_two_sum(k, a, term.hi)
    return s.hi + (s.lo + term.lo)


def _quotient(k: Kernel, a: Val) -> Val:
    head_hi, low, e = exp_f64.exp_parts(k, *exp_f64.reduced(k, a * -2.0))
    scale = exp_f64.power_of_two(e)
    big = ff.fast_two_sum(k, head_hi * scale, (low.hi + low.lo) * scale)
    one = FF(lit(1.0, F64), lit(0.0, F64))
    minus = FF(-big.hi, -big.lo)
    q = ff.div(k, ff.add(k, one, minus), ff.add(k, one, big))
    return q.hi
