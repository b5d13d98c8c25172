"""Development tool for vyre_core/mathlib/atan2.py (not product code; needs the ``test``
extra's gmpy2): the source of atan2.py's constants, from MPFR at 200 bits, each part
rounded once to f32: ``atan(j / 64)`` for j = 0..64 as pairs, pi and pi/2 as three
floats (each the rest rounded once), and -1/3 as a pair; for the accurate path, fixed
point words (``vyre_core/mathlib/fixed.py``), each value rounded once to its last bit:
``atan(j / 64)`` as three words (96 fraction bits), pi/2 and pi with 94 fraction bits,
and the series' ``1 / (2i + 3)`` for i = 0..6 with 96.

    python tools/atan2_constants.py
"""

from __future__ import annotations

import gmpy2
from math_constants import bits, hex_list, pair  # (tools/ is the script's folder)


def triple(v: gmpy2.mpfr) -> tuple[int, int, int]:
    """``v`` as three f32 words: each the rest so far rounded once."""
    hi, mid = pair(v)
    with gmpy2.context(precision=200):
        rest = v - gmpy2.mpfr(_f32(hi)) - gmpy2.mpfr(_f32(mid))
    return hi, mid, bits(rest)


def _f32(word: int) -> float:
    import numpy as np
    return float(np.uint32(word).view(np.float32))


def fixed(v: gmpy2.mpfr, fraction_bits: int) -> int:
    """``v 2^fraction_bits`` rounded to the nearest integer."""
    with gmpy2.context(precision=400):
        return int(gmpy2.rint(v * gmpy2.mpfr(2) ** fraction_bits))


def words(value: int) -> list[int]:
    """A 96-bit integer as three u32 words, the most significant first."""
    return [(value >> shift) & 0xFFFFFFFF for shift in (64, 32, 0)]


def accurate() -> str:
    with gmpy2.context(precision=400):
        atans = [w for j in range(65) for w in words(fixed(gmpy2.atan(gmpy2.mpfr(j) / 64), 96))]
        pi = gmpy2.const_pi()
        places = [fixed(pi / 2, 94), fixed(pi, 94)]
        series = [fixed(1 / gmpy2.mpfr(2 * i + 3), 96) for i in range(7)]
    return "\n".join([
        hex_list("_ATAN_WORDS", atans, "np.array") .replace("])", "], np.uint32)"),
        f"_HALF_PI_FIXED, _PI_FIXED = {', '.join(f'0x{v:024X}' for v in places)}",
        "_SERIES = (\n    " + ",\n    ".join(f"0x{v:024X}" for v in series) + ")"])


def constants() -> str:
    with gmpy2.context(precision=200):
        atans = [pair(gmpy2.atan(gmpy2.mpfr(j) / 64)) for j in range(65)]
        pi = gmpy2.const_pi()
        words = [*triple(pi), *triple(pi / 2)]
        third = pair(-gmpy2.mpfr(1) / 3)
    return "\n".join([
        hex_list("_ATAN_HI", [h for h, _ in atans], "ff.from_bits"),
        hex_list("_ATAN_LO", [lo for _, lo in atans], "ff.from_bits"),
        "_PI_1, _PI_2, _PI_3, _HALF_PI_1, _HALF_PI_2, _HALF_PI_3 = ff.from_bits([\n    "
        + ", ".join(f"0x{w:08X}" for w in words) + "])",
        f"_MINUS_THIRD_HI, _MINUS_THIRD_LO = ff.from_bits([0x{third[0]:08X}, "
        f"0x{third[1]:08X}])"])


if __name__ == "__main__":
    print(constants())
    print(accurate())
