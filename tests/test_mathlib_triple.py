"""vyre_core.mathlib.triple, the triple-float kit of pow's accurate path, held to its rules
against exact rationals on the reference in this process: ``renormalize`` is exact for
any magnitudes (cancellation included) and puts the rounded sum first; ``add``,
``add_float``, ``mul_float`` and ``mul`` stay within their stated relative errors (2^-69,
2^-69, 2^-69 and 2^-67) on random loosely normalized triples and pairs, and their results
are triples again (``|mid| <= ulp(hi)``, ``|lo| <= ulp(mid)``, loosely). (The same IR runs
on every backend inside ``pow``: tests/test_mathlib_pow.py.)"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from vyre_core import ir
from vyre_core.mathlib import triple
from vyre_core.mathlib.ff import FF
from vyre_core.mathlib.triple import TF
from vyre_reference import run

N = 4096
F32 = ir.f32


def program(block, inputs: int, outputs: int) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    buffers = [k.read(f"in{j}", F32) for j in range(inputs)]
    outs = [k.output(f"out{j}", F32, N) for j in range(outputs)]
    i = k.let("i", ir.global_id())
    values = [k.let(f"v{j}", b[i]) for j, b in enumerate(buffers)]
    for out, value in zip(outs, block(k, *values), strict=True):
        out[i] = value
    return k.build()


def exact(*parts) -> list[Fraction]:
    return [sum((Fraction(float(p[i])) for p in parts), Fraction(0)) for i in range(N)]


def triples(rng: np.random.Generator, negative: bool = True) -> list[np.ndarray]:
    """Random normalized triples over a wide exponent range (each word the rest of a
    random 72-bit value), half of them pairs (``lo`` zero)."""
    hi = (rng.uniform(1, 2, N) * 2.0 ** rng.integers(-30, 30, N)).astype(np.float32)
    if negative:
        hi *= rng.choice(np.array([-1, 1], np.float32), N)
    mid = (hi.astype(np.float64) * rng.uniform(-2**-24, 2**-24, N)).astype(np.float32)
    lo = (mid.astype(np.float64) * rng.uniform(-2**-24, 2**-24, N)).astype(np.float32)
    lo[: N // 2] = 0
    return [hi, mid, lo]


def assert_within(got: list[np.ndarray], want: list[Fraction], bound: float) -> None:
    """Each triple ``got`` within ``bound`` of ``want`` (relative), and loosely normalized."""
    values = exact(*got)
    worst = max(abs(v - w) / abs(w) for v, w in zip(values, want, strict=True) if w)
    assert worst <= Fraction(bound), f"relative error 2^{np.log2(float(worst)):.1f}"
    hi, mid, lo = (np.abs(g.astype(np.float64)) for g in got)
    assert np.all(mid <= np.spacing(hi.astype(np.float32)) * 1.01)
    assert np.all(lo <= np.spacing(np.maximum(mid, 2.0**-140).astype(np.float32)) * 1.01)


@pytest.mark.fast
def test_renormalize_is_exact_for_any_magnitudes():
    """Three floats of any sizes and signs, cancelling ones among them: the triple is
    their exact sum, its ``hi`` the sum of the first two rounded where the third is
    small, and normalized."""
    rng = np.random.default_rng(1)
    a = (rng.uniform(-2, 2, N) * 2.0 ** rng.integers(-20, 20, N)).astype(np.float32)
    b = np.where(rng.random(N) < 0.3, -a, (a * rng.uniform(-1, 1, N)
                                           * 2.0 ** rng.integers(-30, 0, N))).astype(
        np.float32)
    c = (rng.uniform(-1, 1, N) * 2.0 ** rng.integers(-60, 0, N)).astype(np.float32)
    got = run(program(lambda k, x, y, z: tuple(vars(triple.renormalize(k, x, y, z))
                                               .values()), 3, 3), [a, b, c])
    assert exact(*got) == exact(a, b, c)
    hi, mid, lo = got
    assert np.all(hi == (np.float64(hi) + mid + lo).astype(np.float32))
    assert np.all(np.abs(mid) <= np.abs(np.spacing(hi)) / 2)


@pytest.mark.fast
def test_add_and_add_float_within_their_bounds():
    rng = np.random.default_rng(2)
    a, b = triples(rng), triples(rng)
    larger = np.abs(a[0]) >= np.abs(b[0])  # (x the larger, as add requires)
    x = [np.where(larger, u, v) for u, v in zip(a, b, strict=True)]
    y = [np.where(larger, v, u) for u, v in zip(a, b, strict=True)]
    same = np.sign(x[0]) == np.sign(y[0])  # (no cancellation: the bound is relative)
    y = [np.where(same, v, -v).astype(np.float32) for v in y]
    got = run(program(lambda k, *v: tuple(vars(triple.add(k, TF(*v[:3]), TF(*v[3:])))
                                          .values()), 6, 3), [*x, *y])
    assert_within(got, exact(*x, *y), 2.0**-69)
    c = (np.sign(x[0]) * 2.0 ** rng.integers(31, 40, N)).astype(np.float32)
    got = run(program(lambda k, *v: tuple(vars(triple.add_float(k, TF(*v[:3]), v[3]))
                                          .values()), 4, 3), [*x, c])
    assert_within(got, exact(*x, c), 2.0**-69)


@pytest.mark.fast
def test_products_within_their_bounds():
    """``mul_float``, ``mul`` of two triples and of a pair by a triple (pow's Horner
    steps)."""
    rng = np.random.default_rng(3)
    x, y = triples(rng), triples(rng)
    f = (rng.uniform(-2, 2, N) * 2.0 ** rng.integers(-20, 20, N)).astype(np.float32)
    got = run(program(lambda k, *v: tuple(vars(triple.mul_float(k, TF(*v[:3]), v[3]))
                                          .values()), 4, 3), [*x, f])
    assert_within(got, [a * Fraction(float(b)) for a, b in zip(exact(*x), f, strict=True)],
                  2.0**-69)
    got = run(program(lambda k, *v: tuple(vars(triple.mul(k, TF(*v[:3]), TF(*v[3:])))
                                          .values()), 6, 3), [*x, *y])
    assert_within(got, [a * b for a, b in zip(exact(*x), exact(*y), strict=True)], 2.0**-67)
    got = run(program(lambda k, *v: tuple(vars(triple.mul(k, FF(*v[:2]), TF(*v[2:])))
                                          .values()), 5, 3), [*x[:2], *y])
    assert_within(got, [a * b for a, b in zip(exact(*x[:2]), exact(*y), strict=True)],
                  2.0**-67)
