"""Triple-float arithmetic in the IR: a value as ``hi + mid + lo``, three f32 (72 bits of
significand), for the accurate paths that pairs (48 bits) cannot decide (docs/design-42.md,
section 2.3; pow.py's).

A triple here is loosely normalized: ``|mid|`` at most about ``ulp(hi)`` and ``|lo|``
about ``ulp(mid)``, which is what the error bounds below need (not Priest's strict
non-overlap, which would cost a renormalization per operation). Every transform is built
from ff.py's error-free ones, so each operation's only errors are the few roundings its
docstring names, each of order 2^-72 of the result. Like ff.py's, the bounds hold while
nothing overflows and no product's error falls below the normal range.
"""

from __future__ import annotations

from dataclasses import dataclass

from vyre_core.ir.builder import Kernel
from vyre_core.ir.values import Operand, Val, as_val
from vyre_core.mathlib import ff
from vyre_core.mathlib.ff import FF


@dataclass(frozen=True)
class TF:
    """``hi + mid + lo``, loosely normalized (the module's docstring)."""

    hi: Val
    mid: Val
    lo: Val


def constant(words) -> TF:
    """Three f32 words (``ff.from_bits`` of a generator's output) as a triple of
    literals."""
    return TF(*(as_val(w) for w in words))


def renormalize(k: Kernel, a: Operand, b: Operand, c: Operand) -> TF:
    """``a + b + c`` exactly, as a triple whose ``hi`` is the sum of ``a`` and ``b``
    rounded, for any magnitudes (so a difference that cancelled ``a`` comes out
    normalized): three ``two_sum``s and a ``fast_two_sum``, no rounding."""
    s = ff.two_sum(k, b, c)
    h = ff.two_sum(k, a, s.hi)
    m = ff.two_sum(k, h.lo, s.lo)
    top = ff.fast_two_sum(k, h.hi, m.hi)
    rest = ff.two_sum(k, top.lo, m.lo)
    return TF(top.hi, rest.hi, rest.lo)


def _settle(k: Kernel, hi: Val, mid: Val, low: Operand) -> TF:
    """``hi + mid + low`` as a triple, exactly, where ``|mid|`` is at most about
    ``ulp(hi)`` and ``low`` about ``ulp(mid)``: what the operations below end with."""
    top = ff.fast_two_sum(k, hi, mid)
    rest = ff.two_sum(k, top.lo, low)
    return TF(top.hi, rest.hi, rest.lo)


def add(k: Kernel, x: TF, y: TF | FF) -> TF:
    """``x + y`` for ``|x.hi| >= |y.hi|`` (or ``x.hi`` zero), a pair taken as a triple
    with ``lo`` zero. The high and middle words are summed exactly; only the low
    level ``(u + t) + (x.lo + y.lo)`` rounds: 3 roundings of terms below 2^-46 of the
    result's ``hi``, so a relative error below 2^-69 where nothing cancels."""
    s = ff.fast_two_sum(k, x.hi, y.hi)
    y_mid, y_lo = (y.lo, None) if isinstance(y, FF) else (y.mid, y.lo)
    t = ff.two_sum(k, x.mid, y_mid)
    u = ff.two_sum(k, s.lo, t.hi)
    low = ff.let(k, u.lo + t.lo)
    low = ff.let(k, low + (x.lo if y_lo is None else (x.lo + y_lo)))
    return _settle(k, s.hi, u.hi, low)


def add_float(k: Kernel, x: TF, c: Operand) -> TF:
    """``c + x`` for a float ``c`` with ``|c| >= |x.hi|``: one rounding, of ``u + x.lo``
    (terms below 2^-46 of the result)."""
    s = ff.fast_two_sum(k, c, x.hi)
    u = ff.two_sum(k, s.lo, x.mid)
    return _settle(k, s.hi, u.hi, ff.let(k, u.lo + x.lo))


def mul_float(k: Kernel, x: TF, y: Operand) -> TF:
    """``x * y`` for a float ``y``: ``hi y`` and ``mid y`` exactly, ``lo y`` in f32, then
    two roundings of terms below 2^-46 of the result: relative error below 2^-69."""
    p = ff.two_prod(k, x.hi, y)
    q = ff.two_prod(k, x.mid, y)
    u = ff.two_sum(k, p.lo, q.hi)
    return _settle(k, p.hi, u.hi, ff.let(k, (u.lo + q.lo) + x.lo * y))


def mul(k: Kernel, x: TF | FF, y: TF | FF) -> TF:
    """``x * y`` (a pair is a triple whose ``lo`` is zero, and costs less): the products
    of the high words with the high and middle words exactly (``two_prod``), the
    three products of order 2^-48 in f32, those of order 2^-72 dropped. Relative error
    below about 2^-67 (the dropped products, at most 2^-71, and the roundings of the low
    level's sum of six terms below 2^-47 each)."""
    x_mid, x_lo = (x.lo, None) if isinstance(x, FF) else (x.mid, x.lo)
    y_mid, y_lo = (y.lo, None) if isinstance(y, FF) else (y.mid, y.lo)
    p = ff.two_prod(k, x.hi, y.hi)
    q = ff.two_prod(k, x.hi, y_mid)
    r = ff.two_prod(k, x_mid, y.hi)
    s = ff.two_sum(k, q.hi, r.hi)
    u = ff.two_sum(k, p.lo, s.hi)
    low = (q.lo + r.lo) + x_mid * y_mid
    if y_lo is not None:
        low = low + x.hi * y_lo
    if x_lo is not None:
        low = low + x_lo * y.hi
    low = ff.let(k, low + (s.lo + u.lo))
    return _settle(k, p.hi, u.hi, low)
