"""Development tool for vyre_core/mathlib/log.py (not product code; needs the ``test``
extra's gmpy2): the source of log.py's constants, from MPFR at 200 bits, each part rounded
once to f32: ``-ln(c_j)`` as a pair for the ``c_j`` that log2.py's reduction computes
(``log2_constants.reciprocal``: the same f32 operations), ``-ln(2 c_j)`` from
``j = HALVED_FROM`` on (there the input's exponent takes the 1), and ln 2 in three parts,
the first of 16 significant bits (so that ``e`` times it is exact for every exponent
``|e| < 2^8``), the others each the rest rounded once to f32.

    python tools/log_constants.py

(Its exception list comes from ``tools/math_exceptions.py log``.)
"""

from __future__ import annotations

import gmpy2
from log2_constants import HALVED_FROM, reciprocal  # (tools/ is the script's folder)
from math_constants import bits, hex_list, pair

#: The significant bits of ln 2's first part.
FIRST_BITS = 16


def constants() -> str:
    logs = []
    with gmpy2.context(precision=200):
        for j in range(129):
            c = gmpy2.mpfr(float(reciprocal(j))) * (2 if j >= HALVED_FROM else 1)
            logs.append(pair(-gmpy2.log(c)))
        ln2 = gmpy2.log(2)
    with gmpy2.context(precision=FIRST_BITS):
        first = gmpy2.mpfr(ln2)
    with gmpy2.context(precision=200):
        second, third = pair(ln2 - first)
    words = [bits(first), second, third]
    return "\n".join([hex_list("_T_HI", [h for h, _ in logs], "ff.from_bits"),
                      hex_list("_T_LO", [lo for _, lo in logs], "ff.from_bits"),
                      "_LN2_1, _LN2_2, _LN2_3 = ff.from_bits([" +
                      ", ".join(f"0x{w:08X}" for w in words) + "])"])


if __name__ == "__main__":
    print(constants())
