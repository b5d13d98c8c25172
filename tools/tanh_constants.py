"""Development tool for vyre_core/mathlib/tanh.py (not product code; needs the ``test``
extra's gmpy2): the source of tanh.py's series coefficients. ``tanh x = sum c_n x^(2n-1)``
with ``c_n = 2^(2n) (2^(2n) - 1) B_(2n) / (2n)!`` (B the Bernoulli numbers, exact
rationals here), ``c_2 = -1/3`` and ``c_3 = 2/15`` as f32 pairs (MPFR at 200 bits, each
part rounded once), ``c_4`` to ``c_7`` rounded once to f32.

    python tools/tanh_constants.py

(Its exception list comes from ``tools/math_exceptions.py tanh``.)
"""

from __future__ import annotations

from fractions import Fraction
from math import comb, factorial

import gmpy2
from math_constants import bits, pair  # (tools/ is the script's folder)


def bernoulli(n: int) -> Fraction:
    """B_n (B_1 = -1/2), from the recurrence sum_k C(n+1, k) B_k = 0."""
    b = [Fraction(1)]
    for m in range(1, n + 1):
        b.append(-sum(comb(m + 1, k) * b[k] for k in range(m)) / (m + 1))
    return b[n]


def coefficient(n: int) -> gmpy2.mpq:
    """The coefficient of x^(2n-1) in tanh x's series, exactly."""
    c = Fraction(4**n * (4**n - 1)) * bernoulli(2 * n) / factorial(2 * n)
    return gmpy2.mpq(c.numerator, c.denominator)


def constants() -> str:
    with gmpy2.context(precision=200):
        pairs = [pair(gmpy2.mpfr(coefficient(n))) for n in (2, 3)]
        tail = [bits(gmpy2.mpfr(coefficient(n))) for n in range(4, 8)]
    words = [w for p in pairs for w in p]
    return ("_C3_HI, _C3_LO, _C5_HI, _C5_LO = ff.from_bits([\n    "
            + ", ".join(f"0x{w:08X}" for w in words) + "])\n"
            "_C7, _C9, _C11, _C13 = ff.from_bits([\n    "
            + ", ".join(f"0x{w:08X}" for w in tail) + "])")


if __name__ == "__main__":
    print(constants())
