"""Development tool for the math library's f64 functions (not product code; needs the
``test`` extra's gmpy2): their error against MPFR, as docs/semantics.md ("Floats")
records it. For each function, the adversarial inputs of tests/test_mathlib_f64.py plus
``--size`` drawn inputs of each kind (random bits, uniform over the function's range,
log-uniform magnitudes of both signs) on the reference in this process: the count of
results that are not MPFR's correctly rounded ones, and the largest error in ULPs of the
result (against MPFR at 200 bits). ``atan2``: the tests' adversarial pairs and ``--size``
drawn pairs of each kind. ``pow``: the tests' adversarial pairs and exact ones, ``--size``
drawn pairs of each of its kinds (random bits, ``x`` in [0, 4] with ``y`` in [-40, 40],
results anywhere in the range, ``x`` near 1 with large ``y``) and ``--size`` of each of
these: integer ``y`` (``|x|`` log-uniform in [2^-20, 2^20]), ``|x^y|`` within a factor
2^8 of the overflow threshold, of the least normal, and of the least subnormal.

    python tools/f64_accuracy.py [--size 350000] [--seed 1] [name ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import gmpy2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_mathlib_f64 import (
    FUNCTIONS,
    adversarial,
    atan2_drawn,
    atan2_pairs,
    block,
    block2,
    drawn,
    mpfr,
    mpfr2,
    mpfr_pow,
    pow_drawn,
    pow_exact,
    pow_pairs,
)

from vyre_reference import run


def error_in_ulps(fn, x: float, got: float) -> float:
    """``|got - fn(x)| / ulp(got)``, ``fn(x)`` at 200 bits (the ulp of a subnormal is
    2^-1074)."""
    with gmpy2.context(precision=200):
        exact = fn(gmpy2.mpfr(x))
        ulp = max(abs(np.spacing(got)), 2.0**-1074) if np.isfinite(got) else np.inf
        return float(abs(gmpy2.mpfr(got) - exact) / gmpy2.mpfr(ulp))


def measure(name: str, size: int, seed: int) -> str:
    start = time.perf_counter()
    if name == "atan2":
        from vyre_core.mathlib.atan2_f64 import atan2_f64
        y, x = (np.concatenate(parts) for parts in zip(atan2_pairs(), atan2_drawn(seed, size),
                                                        strict=True))
        got = run(block2(atan2_f64, y.size), [y, x])[0]
        took = time.perf_counter() - start
        want, bits = mpfr2(gmpy2.atan2, y, x), y
        wrong = np.flatnonzero(got != want)
        worst = max((error_in_ulps(lambda v, at=at: gmpy2.atan2(v, gmpy2.mpfr(float(
            x.view(np.float64)[at]))), float(y.view(np.float64)[at]),
            float(got.view(np.float64)[at])) for at in wrong), default=0.0)
    elif name == "pow":
        from vyre_core.mathlib.pow_f64 import pow_f64
        x, y = (np.concatenate(parts) for parts in zip(
            pow_pairs(), pow_exact(), pow_drawn(seed, size), pow_more(seed, size), strict=True))
        got = run(block2(pow_f64, x.size), [x, y])[0]
        took = time.perf_counter() - start
        want, bits = mpfr_pow(x, y), x
        wrong = np.flatnonzero(got != want)
        worst = max((error_in_ulps(lambda v, at=at: v ** gmpy2.mpfr(float(
            y.view(np.float64)[at])), float(x.view(np.float64)[at]),
            float(got.view(np.float64)[at])) for at in wrong), default=0.0)
    else:
        function, _, fn, _, _ = FUNCTIONS[name]
        bits = np.concatenate([adversarial(name), drawn(name, seed, size)])
        got = run(block(function, bits.size), [bits])[0]
        took = time.perf_counter() - start
        want = mpfr(fn, bits)
        wrong = np.flatnonzero(got != want)
        values, results = bits.view(np.float64), got.view(np.float64)
        worst = max((error_in_ulps(fn, float(values[at]), float(results[at]))
                     for at in wrong), default=0.0)
    return (f"{name}: {bits.size} inputs, {wrong.size} misrounded "
            f"({wrong.size / bits.size:.2e}), largest error {max(worst, 0.5):.6f} ULP "
            f"(reference {took:.1f} s); first: " + ", ".join(
                f"{int(bits[at]):016x}" for at in wrong[:5]))


def pow_more(seed: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``size`` pairs of each: integer ``y`` (``|x|`` in [2^-20, 2^20], ``|x^y|`` inside
    the range), and ``|x^y|`` within a factor 2^8 of 2^1024, of 2^-1022 and of 2^-1074
    (``x`` log-uniform in [2^-30, 2^30], either sign for integer ``y``)."""
    rng = np.random.default_rng(seed + 1)
    base = np.exp2(rng.uniform(-20, 20, size)) * rng.choice([-1, 1], size)
    integer = np.round(rng.uniform(-740, 700, size) / np.log(np.abs(base)))
    xs, ys = [base], [integer]
    for edge in (1024, -1022, -1074):
        x = np.exp2(rng.uniform(-30, 30, size))
        xs.append(x)
        ys.append((edge + rng.uniform(-8, 8, size)) * np.log(2) / np.log(x))
    return (np.concatenate(xs).view(np.uint64), np.concatenate(ys).view(np.uint64))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=[*FUNCTIONS, "atan2", "pow"])
    parser.add_argument("--size", type=int, default=350_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for name in args.names:
        print(measure(name, args.size, args.seed), flush=True)


if __name__ == "__main__":
    main()
