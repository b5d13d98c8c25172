"""Development tool for vyre_core/mathlib/pow.py's accurate path (not product code; needs
the ``test`` extra's gmpy2): its constants from MPFR at 200 bits, each word the rest so
far rounded once to f32:

- the third words of log2.py's ``-log2 c_j`` table and of exp2.py's ``2^(j/64)`` table
  (their first two words are those modules' ``_T_HI`` and ``_T_LO``: the same roundings);
- ``log2(1 + r) = sum a_k r^k``, ``a_k = (-1)^(k+1) / (k ln 2)``: a_1..a_3 as three words,
  a_4..a_6 as pairs, a_7..a_10 as floats;
- ``2^r = sum b_k r^k``, ``b_k = ln(2)^k / k!``: b_1, b_2 as three words, b_3..b_5 as
  pairs, b_6..b_8 as floats.

    python tools/pow_constants.py
"""

from __future__ import annotations

import gmpy2
from atan2_constants import triple  # (tools/ is the script's folder)
from log2_constants import HALVED_FROM, reciprocal
from math_constants import bits, hex_list, pair


def _words(name: str, values: list[int]) -> str:
    return f"{name} = ff.from_bits([" + ", ".join(f"0x{v:08X}" for v in values) + "])"


def constants() -> str:
    with gmpy2.context(precision=200):
        logs = [triple(-gmpy2.log2(gmpy2.mpfr(float(reciprocal(j))))
                       - (1 if j >= HALVED_FROM else 0)) for j in range(129)]
        exps = [triple(gmpy2.exp2(gmpy2.mpfr(j) / 64)) for j in range(64)]
        ln2 = gmpy2.log(2)
        a = [(-1) ** (k + 1) / (k * ln2) for k in range(1, 11)]
        b = [ln2 ** k / gmpy2.fac(k) for k in range(1, 9)]
    lines = [hex_list("_LOG2_T_3", [w[2] for w in logs], "ff.from_bits"),
             hex_list("_EXP2_T_3", [w[2] for w in exps], "ff.from_bits"),
             _words("_A1", list(triple(a[0]))), _words("_A2", list(triple(a[1]))),
             _words("_A3", list(triple(a[2]))),
             _words("_A4_6", [w for v in a[3:6] for w in pair(v)]),
             _words("_A7_10", [bits(v) for v in a[6:10]]),
             _words("_B1", list(triple(b[0]))), _words("_B2", list(triple(b[1]))),
             _words("_B3_5", [w for v in b[2:5] for w in pair(v)]),
             _words("_B6_8", [bits(v) for v in b[5:8]])]
    return "\n".join(lines)


if __name__ == "__main__":
    print(constants())
