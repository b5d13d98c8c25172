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
    """``name = from_bits([0x..., ...])``, four words a row."""
    words = [f"0x{bits(v):016X}" for v in values]
    rows = [", ".join(words[i:i + 4]) for i in range(0, len(words), 4)]
    return f"{name} = from_bits([\n    " + ",\n    ".join(rows) + "])"


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


#: log_f64's reduction: ``x = 2^k z`` with z in [OFFSET, 2 OFFSET) (ARM's choice, so that
#: x near 1 has k = 0), cut into N cells by the 7 bits below the exponent of ``bits(x) -
#: bits(OFFSET)``; the cells either side of 1 (79 and 80) take ``c = 1``.
OFFSET = 0x3FE6000000000000
ONE_CELLS = (79, 80)


def log_constants() -> str:
    """Per cell ``i``: ``invc_i = RN(1 / c_i)`` for ``c_i`` the cell's middle (1 in the
    cells either side of 1), ``-ln(invc_i)`` and ``-log2(invc_i)`` as pairs; ln 2 as
    ``L1 + L2`` with ``L1`` of at most 42 significant bits (``k L1`` exact for
    ``|k| < 2^11``); 1 / ln 2 as a pair."""
    invc, ln_pairs, log2_pairs, reach = [], [], [], 0.0
    with gmpy2.context(WIDE):
        for i in range(N):
            low = float(np.uint64(OFFSET + (i << 45)).view(np.float64))
            high = float(np.uint64(OFFSET + ((i + 1) << 45)).view(np.float64))
            inv = 1.0 if i in ONE_CELLS else f64(2 / (gmpy2.mpfr(low) + gmpy2.mpfr(high)))
            reach = max(reach, abs(low * inv - 1), abs(high * inv - 1))
            invc.append(inv)
            for pairs, value in ((ln_pairs, -gmpy2.log(gmpy2.mpfr(inv))),
                                 (log2_pairs, -gmpy2.log2(gmpy2.mpfr(inv)))):
                hi = f64(value)
                pairs.append((hi, f64(value - hi)))
        ln2 = gmpy2.log(2)
        l1 = float(gmpy2.mpfr(round(ln2 * 2**42)) / 2**42)
        l2 = f64(ln2 - l1)
        inv_hi = f64(1 / ln2)
        inv_lo = f64(1 / ln2 - inv_hi)
    assert significant_bits(l1) <= 42 and reach <= 2.0**-7, (l1, reach)
    return "\n".join([
        hex_list("_INVC", invc), hex_list("_LN_C_HI", [h for h, _ in ln_pairs]),
        hex_list("_LN_C_LO", [lo for _, lo in ln_pairs]),
        hex_list("_LOG2_C_HI", [h for h, _ in log2_pairs]),
        hex_list("_LOG2_C_LO", [lo for _, lo in log2_pairs]),
        hex_list("_LN2_1, _LN2_2, _INV_LN2_HI, _INV_LN2_LO", [l1, l2, inv_hi, inv_lo]),
        f"# |r| = |z invc - 1| at most 2^{np.log2(reach):.3f}"])


#: 1/3 as a pair (log_f64's first coefficient past r^2/2).
def _pair(v: gmpy2.mpfr) -> tuple[float, float]:
    """``v`` as an f64 pair: rounded once, and the rest rounded once."""
    hi = f64(v)
    with gmpy2.context(WIDE):
        return hi, f64(v - hi)


with gmpy2.context(WIDE):
    THIRD = _pair(gmpy2.mpfr(1) / 3)


def check_log_polynomial() -> float:
    """The truncation error of ``ln(1 + r) = r - r^2/2 + r^3 (1/3 - r/4 + ... + r^8/11)``
    (Taylor, each coefficient rounded once to f64 but 1/3, a pair: its rounding alone
    would be 2^-69.6 of the result at ``r = 2^-7``), relative, for ``|r| <= 2^-7``, at
    2001 points: its largest value, as a power of two."""
    coefficients = [f64(gmpy2.mpfr((-1) ** (n + 1)) / n) for n in range(3, 12)]
    with gmpy2.context(WIDE):
        coefficients[0] = gmpy2.mpfr(THIRD[0]) + gmpy2.mpfr(THIRD[1])
    worst = 0.0
    with gmpy2.context(WIDE):
        for i in range(-1000, 1001):
            r = gmpy2.mpfr(2) ** -7 * i / 1000
            if r == 0:
                continue
            poly = gmpy2.mpfr(0)
            for c in reversed(coefficients):
                poly = poly * r + c
            approx = r - r * r / 2 + r**3 * poly
            worst = max(worst, abs(float((gmpy2.log1p(r) - approx) / gmpy2.log1p(r))))
    return float(np.log2(worst))


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


def tanh_series(terms: int) -> list:
    """The Taylor coefficients of tanh at x^3, x^5, ... (``terms`` of them), exactly: the
    series of sinh divided by that of cosh, in rationals."""
    from fractions import Fraction
    from math import factorial
    size = 2 * terms + 4
    sinh = [Fraction(1, factorial(n)) if n % 2 else Fraction(0) for n in range(size)]
    cosh = [Fraction(0) if n % 2 else Fraction(1, factorial(n)) for n in range(size)]
    quotient = []
    for n in range(size):
        quotient.append(sinh[n] - sum(quotient[i] * cosh[n - i] for i in range(n)))
    return [quotient[n] for n in range(3, size, 2)][:terms]


#: tanh_f64's threshold: below it, the series; above, (1 - e^-2a) / (1 + e^-2a).
TANH_SERIES_BELOW = 0.125


def tanh_constants() -> str:
    """tanh's series coefficients from x^3 on, rounded once to f64 (the first, -1/3, as a
    pair), enough of them that the truncation is below 2^-70 (relative) for ``|x| <=
    TANH_SERIES_BELOW``: checked against MPFR at 2001 points."""
    exact = tanh_series(12)
    with gmpy2.context(WIDE):
        third = _pair(gmpy2.mpfr(exact[0].numerator) / exact[0].denominator)
        rest = [f64(gmpy2.mpfr(c.numerator) / c.denominator) for c in exact[1:]]
        worst = 0.0
        for i in range(1, 2001):
            a = gmpy2.mpfr(TANH_SERIES_BELOW) * i / 2000
            poly = gmpy2.mpfr(0)
            for c in reversed(rest):
                poly = poly * a * a + c
            approx = a + a**3 * (gmpy2.mpfr(third[0]) + third[1] + a * a * poly)
            worst = max(worst, abs(float((gmpy2.tanh(a) - approx) / gmpy2.tanh(a))))
    assert worst < 2.0**-70, np.log2(worst)
    return "\n".join([hex_list("_C3_HI, _C3_LO", list(third)), hex_list("_SERIES", rest),
                      f"# tanh series: relative truncation error below 2^{np.log2(worst):.2f}"])


#: trig_f64's reduction: by pi/32 (64 steps a turn); Cody and Waite below 2^19, Payne
#: and Hanek from there (binary exponents E of x = m 2^E, m < 2^53, from -33 to 971).
TRIG_CODY_WAITE_BELOW = 2.0**19
TRIG_E_MIN, TRIG_E_MAX = -33, 971
#: ``floor(2^TRIG_BITS 32/pi)`` holds every window (``TRIG_E_MAX + 186`` bits below the
#: point).
TRIG_BITS = TRIG_E_MAX + 186


def trig_constants() -> str:
    """``sin(j pi/32)`` for j = 0..63 as pairs (and ``cos(j pi/32)``, checked to be the
    same pairs 16 cells on, as trig_f64 takes them); pi/32 as a pair and
    as P1 + P2 + P3 (30 significant bits each, so ``k P_i`` is exact for ``k < 2^23``)
    + P4; and the bits of 32/pi, ``floor(2^TRIG_BITS 32/pi)``, of which Payne and
    Hanek's windows are slices: for each E, ``G(E) = floor(2^(E + 186) 32/pi) mod 2^192``
    (checked against its own computation), so that ``m G(E) 2^-186`` is ``x 32/pi``
    less a multiple of 64, short of it by under ``m 2^-186``."""
    with gmpy2.context(precision=1600):
        pi = gmpy2.const_pi()
        step = pi / 32
        sines = [_pair(gmpy2.sin(step * j)) for j in range(64)]
        cosines = [_pair(gmpy2.cos(step * j)) for j in range(64)]
        parts, rest = [], step
        for _ in range(3):
            e = int(gmpy2.floor(gmpy2.log2(abs(rest))))
            part = float(gmpy2.mpfr(round(rest * 2 ** (29 - e))) / 2 ** (29 - e))
            parts.append(part)
            rest = rest - part
        parts.append(f64(rest))
        step_pair = _pair(step)
        windows = [int(gmpy2.floor(gmpy2.mpfr(2) ** (e + 186) * 32 / pi)) % 2**192
                   for e in range(TRIG_E_MIN, TRIG_E_MAX + 1)]
        whole = int(gmpy2.floor(gmpy2.mpfr(2) ** TRIG_BITS * 32 / pi))
    assert all(significant_bits(p) <= 30 for p in parts[:3])
    # trig_f64 takes its cosines from its sines, 16 cells on: the same pairs
    assert [bits(v) for pair in cosines for v in pair] == [
        bits(v) for pair in sines[16:] + sines[:16] for v in pair]
    assert len(windows) <= 1024
    # every window is a slice of the bits of 32/pi (trig_f64 cuts them at import)
    assert windows == [(whole >> (TRIG_BITS - e - 186)) % 2**192
                       for e in range(TRIG_E_MIN, TRIG_E_MAX + 1)]
    digits = f"{whole:X}"
    rows = [f'    "{digits[i:i + 80]}"' for i in range(0, len(digits), 80)]
    return "\n".join([
        hex_list("_SIN_HI", [h for h, _ in sines]), hex_list("_SIN_LO", [lo for _, lo in sines]),
        hex_list("_STEP_HI, _STEP_LO, _P1, _P2, _P3, _P4", [*step_pair, *parts]),
        "_32_OVER_PI = int(\n" + "\n".join(rows) + ", 16)"])


def atan2_constants() -> str:
    """``atan(i/64)`` for i = 0..64, pi and pi/2, each as a pair (atan2_f64's table and
    quadrant constants)."""
    with gmpy2.context(precision=400):
        table = [_pair(gmpy2.atan(gmpy2.mpfr(i) / 64)) for i in range(65)]
        pi = gmpy2.const_pi()
        constants = [*_pair(pi), *_pair(pi / 2)]
    return "\n".join([hex_list("_ATAN_HI", [h for h, _ in table]),
                      hex_list("_ATAN_LO", [lo for _, lo in table]),
                      hex_list("_PI_HI, _PI_LO, _HALF_PI_HI, _HALF_PI_LO", constants)])


def check_pow_log_polynomial() -> float:
    """The truncation error of pow_f64's ``ln(1 + r) = r - r^2/2 + r^3 Q(r)``, ``Q = 1/3 -
    r/4 + r^2 (1/5 - r/6 + ... + r^8/13)`` (1/3 as a pair, the others rounded once to
    f64), relative, for ``|r| <= 2^-7``, at 2001 points: its largest value, as a power of
    two."""
    tail = [f64(gmpy2.mpfr((-1) ** (n + 1)) / n) for n in range(5, 14)]
    worst = 0.0
    with gmpy2.context(WIDE):
        third = gmpy2.mpfr(THIRD[0]) + gmpy2.mpfr(THIRD[1])
        for i in range(-1000, 1001):
            r = gmpy2.mpfr(2) ** -7 * i / 1000
            if r == 0:
                continue
            poly = gmpy2.mpfr(0)
            for c in reversed(tail):
                poly = poly * r + c
            approx = r - r * r / 2 + r**3 * (third - r / 4 + r * r * poly)
            worst = max(worst, abs(float((gmpy2.log1p(r) - approx) / gmpy2.log1p(r))))
    return float(np.log2(worst))


#: cases_float's ``f64_transcendental_more`` operands (``px``, ``py``).
MORE_X = [2.0, -2.0, -2.0, 0.5, 10.0, 1.5, -0.0, 0.0, 1.0, -1.0, 4.0, 0.75, -3.0, 5.5]
MORE_Y = [10.0, 3.0, 0.5, -3.0, -2.5, 7.25, -1.0, 0.0, float("nan"), float("inf"), 0.5,
          -0.0, -2.0, 1.0]


def transcendental_more() -> str:
    """MPFR's correctly rounded f64 results of ``f64_transcendental_more``
    (vyre_core/conformance/cases_float.py): ``tan tanh exp2 log2`` of ``px``, ``pow(px,
    py)``, ``atan2(py, px)``, as bits (NaN the canonical one)."""
    def of(fn, *args: float) -> int:
        with gmpy2.context(BINARY64):
            value = float(fn(*map(gmpy2.mpfr, args)))
        return 0x7FF8000000000000 if value != value else bits(value)
    rows = {name: [of(fn, x) for x in MORE_X] for name, fn in (
        ("tan", gmpy2.tan), ("tanh", gmpy2.tanh), ("exp2", gmpy2.exp2),
        ("log2", gmpy2.log2))}
    rows["pow"] = [of(lambda a, b: a**b, x, y) for x, y in zip(MORE_X, MORE_Y, strict=True)]
    rows["atan2"] = [of(gmpy2.atan2, y, x) for x, y in zip(MORE_X, MORE_Y, strict=True)]
    return "\n".join(f'    "{name}": [' + ", ".join(f"0x{v:016X}" for v in values) + "],"
                     for name, values in rows.items())


if __name__ == "__main__":
    print(exp_constants())
    print(f"# exp polynomial: truncation error below 2^{check_exp_polynomial():.2f}")
    print(log_constants())
    print(hex_list("_THIRD_HI, _THIRD_LO", list(THIRD)))
    print(f"# log polynomial: relative truncation error below 2^{check_log_polynomial():.2f}")
    print(tanh_constants())
    print(trig_constants())
    print(atan2_constants())
    print(f"# pow's ln(1 + r): relative truncation error below 2^{check_pow_log_polynomial():.2f}")
    print("# f64_transcendental_more, MPFR's bits:")
    print(transcendental_more())
