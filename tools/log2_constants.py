"""Development tool for vyre_core/mathlib/log2.py (not product code; needs the ``test``
extra's gmpy2): the source of log2.py's tables, from MPFR at 200 bits, each part rounded
once to f32: ``-log2(c_j)`` as a pair for the ``c_j ~ 1 / (1 + j / 128)`` that log2.py
computes (``reciprocal`` here: the same f32 operations), less 1 from ``j = 53`` on (there
the input's exponent takes the 1: its significand is read as if in [sqrt(1/2), sqrt(2))),
and 1/3 and 1/ln 2 as pairs.

    python tools/log2_constants.py

(Its exception list comes from ``tools/math_exceptions.py log2``.)
"""

from __future__ import annotations

import gmpy2
import numpy as np
from math_constants import hex_list, pair  # (tools/ is the script's folder)

#: The first cell (of 129, the significand in [1, 2) rounded to a multiple of 1/128) read
#: as half its value with the exponent one higher: 1 + 53/128 is the first centre above
#: sqrt(2) - 1/256.
HALVED_FROM = 53


def reciprocal(j: int) -> np.float32:
    """``c_j`` as log2.py's ``_reciprocal`` computes it, in the same f32 operations: two
    Newton steps for ``1 / m_j``, ``m_j = 1 + j / 128``, from a linear first guess (within
    2^-16 of it); 1 and 1/2 exactly at the ends."""
    f32 = np.float32
    if j in (0, 128):
        return f32(1.0) if j == 0 else f32(0.5)
    m = f32(j) * f32(1 / 128) + f32(1.0)
    y = f32(24 / 17) - m * f32(8 / 17)
    for _ in range(2):
        y = y * (f32(2.0) - m * y)
    return y


def constants() -> str:
    logs = []
    with gmpy2.context(precision=200):
        for j in range(129):
            c = gmpy2.mpfr(float(reciprocal(j)))
            logs.append(pair(-gmpy2.log2(c) - (1 if j >= HALVED_FROM else 0)))
        third, inv_ln2 = pair(gmpy2.mpfr(1) / 3), pair(1 / gmpy2.log(2))
    lines = [hex_list("_T_HI", [h for h, _ in logs], "ff.from_bits"),
             hex_list("_T_LO", [lo for _, lo in logs], "ff.from_bits"),
             f"_THIRD_HI, _THIRD_LO = ff.from_bits([0x{third[0]:08X}, 0x{third[1]:08X}])",
             f"_INV_LN2_HI, _INV_LN2_LO = ff.from_bits([0x{inv_ln2[0]:08X}, 0x{inv_ln2[1]:08X}])"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(constants())
