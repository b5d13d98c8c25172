"""Development tool for vyre_core/mathlib/exp2.py (not product code; needs the ``test``
extra's gmpy2): the source of exp2.py's tables, 2^(j/64) and ln 2 as f32 pairs, from MPFR
at 200 bits, each part rounded once to f32.

    python tools/exp2_constants.py

(Its exception list comes from ``tools/math_exceptions.py exp2``.)
"""

from __future__ import annotations

import gmpy2
from math_constants import hex_list, pair  # (tools/ is the script's folder)


def constants() -> str:
    with gmpy2.context(precision=200):
        table = [pair(gmpy2.exp2(gmpy2.mpfr(j) / 64)) for j in range(64)]
        ln2 = pair(gmpy2.log(2))
    lines = [hex_list("_T_HI", [h for h, _ in table], "ff.from_bits"),
             hex_list("_T_LO", [lo for _, lo in table], "ff.from_bits"),
             f"_LN2_HI, _LN2_LO = ff.from_bits([0x{ln2[0]:08X}, 0x{ln2[1]:08X}])"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(constants())
