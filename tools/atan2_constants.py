"""Development tool for vyre_core/mathlib/atan2.py (not product code; needs the ``test``
extra's gmpy2): the source of atan2.py's constants, from MPFR at 200 bits, each part
rounded once to f32: ``atan(j / 64)`` for j = 0..64 as pairs, pi and pi/2 as three
floats (each the rest rounded once), and -1/3 as a pair.

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
