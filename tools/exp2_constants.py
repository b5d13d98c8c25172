"""Development tool for vyre_core/mathlib/exp2.py (not product code; needs the ``test``
extra's gmpy2): the source of exp2.py's tables, 2^(j/64) and ln 2 as f32 pairs, from MPFR
at 200 bits, each part rounded once to f32.

    python tools/exp2_constants.py

(Its exception list comes from ``tools/math_exceptions.py exp2``.)
"""

from __future__ import annotations

import gmpy2
import numpy as np
from math_exceptions import hex_list  # (tools/ is the script's folder)

BINARY32 = gmpy2.context(precision=24, emin=-148, emax=128, subnormalize=True)


def constants() -> str:
    def pair(v: gmpy2.mpfr) -> tuple[int, int]:
        with gmpy2.context(BINARY32):
            hi = gmpy2.mpfr(v)
        with gmpy2.context(precision=200):
            rest = v - hi
        with gmpy2.context(BINARY32):
            lo = gmpy2.mpfr(rest)
        return tuple(int(np.float32(float(h)).view(np.uint32)) for h in (hi, lo))

    with gmpy2.context(precision=200):
        table = [pair(gmpy2.exp2(gmpy2.mpfr(j) / 64)) for j in range(64)]
        ln2 = pair(gmpy2.log(2))
    lines = [hex_list("_T_HI", [h for h, _ in table], "_f32"),
             hex_list("_T_LO", [lo for _, lo in table], "_f32"),
             f"_LN2_HI, _LN2_LO = _f32([0x{ln2[0]:08X}, 0x{ln2[1]:08X}])"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(constants())
