"""Development tool for vyre_core/mathlib/atan2.py (not product code; needs the ``test``
extra's gmpy2): f32 pairs ``(y, x)`` whose ``atan2`` lies very near a rounding boundary
of f32 (a midpoint of two neighbours), those that the fast path's rounding test leaves
to the accurate path, for tests/test_mathlib_atan2.py.

For drawn midpoints ``z`` of every binade from 2^-25 to pi (uniformly in each, the same
count in each), the best rational approximation ``p / s`` of ``tan z`` (or ``cot z``
above pi/4), scaled into [1/2, 2), with ``p`` and ``s`` below 2^24 (the last convergent
of its continued fraction: CORE-MATH's way to its atan2f worst cases, there over every
25-bit ``z`` from 2^-7), placed in the quadrant of ``z``: ``atan2`` of that pair is
``z`` to about 2^-48. The pairs kept are those whose result is within 2^-16 ULP of the
midpoint (past the fast path's bound, 2^-43 relative, about 2^-19 ULP), with how many of
its bits after the rounding bit are the same, hardest first. CORE-MATH's list covers
results from 2^-7 on; this search reaches below it (down to 2^-25; below that the result
is the quotient's rounding, atan2.py's docstring).

    python tools/atan2_hard_pairs.py [midpoints per binade] [pairs kept] [seed]

``--check FILE`` instead runs the library's f32 ``atan2`` (the reference, in this process)
over the pairs of a CORE-MATH worst-case file (``atan2f.wc``: ``y,x`` a line, C99 hex
floats, ``inf`` and ``nan``; ``#`` comments) in every sign and order, the accurate path
alone as well, against MPFR, and prints how many it misrounds (run from the repository
root, with tests/ on the path for the test's helpers).

    PYTHONPATH=tests python tools/atan2_hard_pairs.py --check atan2f.wc
"""

from __future__ import annotations

import sys
from fractions import Fraction

import gmpy2
import numpy as np

_LIMIT = 1 << 24
_PRECISION = 200


def best_ratio(c: Fraction) -> tuple[int, int]:
    """The last convergent ``p / s`` of ``c`` (in [1/2, 2)) with both below 2^24."""
    p0, s0, p1, s1 = 0, 1, 1, 0
    rest = c
    while True:
        a = rest.numerator // rest.denominator
        p2, s2 = a * p1 + p0, a * s1 + s0
        if p2 >= _LIMIT or s2 >= _LIMIT:
            return p1, s1
        p0, s0, p1, s1 = p1, s1, p2, s2
        frac = rest - a
        if frac == 0:
            return p1, s1
        rest = 1 / frac


def pair_near(z: gmpy2.mpfr) -> tuple[np.float32, np.float32] | None:
    """An f32 pair whose ``atan2`` is ``z`` (in (0, pi)) to about 2^-48, or None."""
    half_pi = gmpy2.const_pi() / 2
    mirror = z > half_pi
    angle = gmpy2.const_pi() - z if mirror else z  # (x < 0 for z above pi/2)
    steep = angle > half_pi / 2
    c = 1 / gmpy2.tan(angle) if steep else gmpy2.tan(angle)
    shift = -int(gmpy2.floor(gmpy2.log2(c)))  # c 2^shift in [1, 2)
    num, den = (c * gmpy2.mpfr(2) ** shift).as_integer_ratio()
    p, s = best_ratio(Fraction(int(num), int(den)))
    if p == 0:
        return None
    small, large = np.float32(p * 2.0**-shift), np.float32(s)
    y, x = (large, small) if steep else (small, large)
    return (y, -x) if mirror else (y, x)


def same_bits(y: np.float32, x: np.float32) -> float:
    """How many bits after the f32 rounding bit of ``atan2(y, x)`` equal that bit's
    neighbours (log2 of 1 / its distance from the nearest midpoint, in half ULPs)."""
    v = abs(gmpy2.atan2(gmpy2.mpfr(float(y)), gmpy2.mpfr(float(x))))
    e = int(gmpy2.floor(gmpy2.log2(v)))
    ulp = gmpy2.mpfr(2) ** (max(e, -126) - 23)
    off = v / ulp - gmpy2.floor(v / ulp) - gmpy2.mpfr(0.5)
    return float(-gmpy2.log2(2 * abs(off))) if off != 0 else float("inf")


def search(per_binade: int, seed: int) -> list[tuple[int, int, float]]:
    """The pairs found (f32 bits of ``y`` and ``x``, and ``same_bits``), hardest first."""
    rng = np.random.default_rng(seed)
    found = {}
    with gmpy2.context(precision=_PRECISION):
        for e in range(-25, 2):
            for k in rng.integers(1 << 23, 1 << 24, per_binade):
                z = gmpy2.mpfr(2 * int(k) + 1) * gmpy2.mpfr(2) ** (e - 24)
                if z >= gmpy2.const_pi():
                    continue
                near = pair_near(z)
                if near is None:
                    continue
                bits = same_bits(*near)
                if bits >= 16:
                    y, x = (int(np.float32(v).view(np.uint32)) for v in near)
                    found[y, x] = bits
    return sorted(((y, x, b) for (y, x), b in found.items()), key=lambda t: -t[2])


def check(path: str) -> str:
    """The misrounded count of each check of the pairs in ``path`` (``--check``)."""
    from test_mathlib_atan2 import accurate_only, mpfr_atan2, on_reference, signs

    from vyre_core.mathlib import atan2

    def value(text: str) -> float:
        word = text.strip().lstrip("+")
        sign, word = (-1.0, word[1:]) if word.startswith("-") else (1.0, word)
        if word in ("nan", "snan"):
            return float("nan")
        return sign * (float("inf") if word == "inf" else float.fromhex(word))
    with open(path) as listed:
        rows = [line.split(",") for line in listed if line.strip() and line[0] != "#"]
    y, x = (np.array([value(r[i]) for r in rows], np.float32).view(np.uint32) for i in (0, 1))
    y, x = signs(np.concatenate([y, x]), np.concatenate([x, y]), 0x80000000)
    want = mpfr_atan2(y, x, 32)
    lines = [f"{len(rows)} pairs, {y.size} with their signs and orders"]
    for name, function in (("atan2_f32", atan2.atan2_f32), ("the accurate path", accurate_only)):
        wrong = np.flatnonzero(on_reference(function, 32, y, x) != want)
        lines.append(f"{name}: {wrong.size} misrounded " + " ".join(
            f"({int(y[i]):08x}, {int(x[i]):08x})" for i in wrong[:8]))
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check"]:
        print(check(sys.argv[2]))
        sys.exit()
    per, keep, seed = (int(a) for a in [*sys.argv[1:], *("10000", "384", "42")[len(sys.argv) - 1:]])
    pairs = search(per, seed)[:keep]
    print(f"# {len(pairs)} pairs, same bits after the rounding bit: "
          f"{pairs[0][2]:.1f} to {pairs[-1][2]:.1f}")
    print("HARD_PAIRS = [\n    " + ",\n    ".join(
        ", ".join(f"(0x{y:08X}, 0x{x:08X})" for y, x, _ in pairs[i:i + 3])
        for i in range(0, len(pairs), 3)) + "]")
