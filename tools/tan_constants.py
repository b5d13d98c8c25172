"""Development tool for vyre_core/mathlib/tan.py (not product code; needs the ``test``
extra's gmpy2): the source of tan.py's constants from MPFR at 400 bits. ``tan(j pi / 64)``
for j = 0..16 as f32 pairs; the series ``tan r = sum c_n r^(2n-1)``, whose coefficients
are tanh's without the alternating sign (``tan r = -i tanh(i r)``: tanh_constants.py's
exact rationals), ``c_2 = 1/3`` as a pair, ``c_3`` to ``c_6`` rounded once to f32.

    python tools/tan_constants.py

(Its exception list comes from ``tools/math_exceptions.py tan``.)
"""

from __future__ import annotations

import gmpy2
from math_constants import bits, hex_list, pair  # (tools/ is the script's folder)
from tanh_constants import coefficient


def constants() -> str:
    with gmpy2.context(precision=400):
        pi = gmpy2.const_pi()
        tangents = [pair(gmpy2.tan(pi * j / 64)) for j in range(17)]
        third = pair(abs(gmpy2.mpfr(coefficient(2))))
        tail = [bits(abs(gmpy2.mpfr(coefficient(n)))) for n in range(3, 7)]
    return "\n".join([
        hex_list("_TAN_HI", [h for h, _ in tangents], "ff.from_bits"),
        hex_list("_TAN_LO", [lo for _, lo in tangents], "ff.from_bits"),
        f"_THIRD_HI, _THIRD_LO = ff.from_bits([0x{third[0]:08X}, 0x{third[1]:08X}])",
        "_C5, _C7, _C9, _C11 = ff.from_bits([\n    "
        + ", ".join(f"0x{w:08X}" for w in tail) + "])"])


if __name__ == "__main__":
    print(constants())
