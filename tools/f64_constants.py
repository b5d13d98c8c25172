"""Development tool for the f64 functions of the math library (vyre_core/mathlib/
exp_f64.py; not product code; needs the ``test`` extra's gmpy2): the source of their
tables and constants, from MPFR at 200 bits, each rounded once to f64, and the checks
of the rules the modules' docstrings state about them.

    python tools/f64_constants.py

It prints the constants as they stand in the modules (bits, exact whatever Python's
float parsing) and fails if a claimed property does not hold.
"""

from __future__ import annotations

import gmpy2
import numpy as np

#: MPFR's binary64: 53 bits, subnormals on their grid (m * 2^e, m in [1/2, 1)).
BINARY64 = gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True)
WIDE = gmpy2.context(precision=200)

#: exp_f64's table size: 2^(j / N) for j in 0..N-1.
N = 128


def f64(v: gmpy2.mpfr) -> float:
    """``v`` rounded once to f64."""
    with gmpy2.context(BINARY64):
        return float(gmpy2.mpfr(v))


def bits(v: float) -> int:
    return int(np.float64(v).view(np.uint64))


def hex_list(name: str, values: list[float]) -> str:
    """``name = _from_bits([0x..., ...])``, four words a row."""
    words = [f"0x{bits(v):016X}" for v in values]
    rows = [", ".join(words[i:i + 4]) for i in range(0, len(words), 4)]
    return f"{name} = _from_bits([\n    " + ",\n    ".join(rows) + "])"


def significant_bits(v: float) -> int:
    m, _ = float(v).as_integer_ratio()
    return m.bit_length()


def exp_constants() -> str:
    """``2^(j/N) = T_j (1 + tail_j)``; ``N / ln 2``; ``ln 2 / N = C1 + C2`` with ``C1``
    of at most 34 significant bits (so ``k C1`` is exact for ``|k| < 2^19``); ``ln 2`` as
    a pair (for exp2)."""
    with gmpy2.context(WIDE):
        exact = [gmpy2.exp2(gmpy2.mpfr(j) / N) for j in range(N)]
        table = [f64(t) for t in exact]
        tails = [f64(t / gmpy2.mpfr(h) - 1) for t, h in zip(exact, table, strict=True)]
        ln2 = gmpy2.log(2)
        step = ln2 / N
        c1 = float(gmpy2.mpfr(round(step * 2**41)) / 2**41)
        c2 = f64(step - c1)
        inv = f64(N / ln2)
        ln2_hi = f64(ln2)
        ln2_lo = f64(ln2 - ln2_hi)
    assert significant_bits(c1) <= 34, significant_bits(c1)
    assert all(abs(t) < 2.0**-53 for t in tails)
    return "\n".join([hex_list("_T", table), hex_list("_TAIL", tails),
                      hex_list("_INV_STEP, _STEP_1, _STEP_2, _LN2_HI, _LN2_LO",
                               [inv, c1, c2, ln2_hi, ln2_lo])])


def check_exp_polynomial() -> float:
    """The truncation error of ``e^r - 1 - r = r^2 (1/2 + r/6 + ... + r^4/720)`` (Taylor,
    each coefficient rounded once to f64) for ``|r| <= ln 2 / 256 + 2^-20``, exactly
    evaluated at 2001 points: its largest absolute value, as a power of two."""
    coefficients = [f64(gmpy2.mpfr(1) / gmpy2.fac(n)) for n in range(2, 7)]
    worst = 0.0
    with gmpy2.context(WIDE):
        bound = gmpy2.log(2) / 256 + gmpy2.mpfr(2) ** -20
        for i in range(-1000, 1001):
            r = bound * i / 1000
            poly = gmpy2.mpfr(0)
            for c in reversed(coefficients):
                poly = poly * r + c
            worst = max(worst, abs(float(gmpy2.expm1(r) - r - r * r * poly)))
    return float(np.log2(worst))


if __name__ == "__main__":
    print(exp_constants())
    print(f"# exp polynomial: truncation error below 2^{check_exp_polynomial():.2f}")
