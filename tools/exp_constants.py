"""Development tool for vyre_core/mathlib/exp.py (not product code; needs the ``test``
extra's gmpy2): the source of exp.py's constants from MPFR at 200 bits. ``64 / ln 2``
rounded once to f32 (only to pick ``n``, which need not be the nearest); ``ln 2 / 64`` in
three parts for Cody and Waite's reduction: the first rounded to 10 significant bits, so
``n * C1`` is exact for every ``|n| < 2^14``, the second the rest rounded to f32, the
third what remains rounded to f32. (2^(j/64) is exp2.py's table:
``tools/exp2_constants.py``.)

    python tools/exp_constants.py

(Its exception list comes from ``tools/math_exceptions.py exp``.)
"""

from __future__ import annotations

import gmpy2
from math_constants import BINARY32, bits  # (tools/ is the script's folder)


def constants() -> str:
    with gmpy2.context(precision=200):
        step = gmpy2.log(2) / 64
        inverse = 64 / gmpy2.log(2)
    with gmpy2.context(precision=10):
        c1 = gmpy2.mpfr(step)
    with gmpy2.context(precision=200):
        rest = step - c1
    with gmpy2.context(BINARY32):
        c2 = gmpy2.mpfr(rest)
    with gmpy2.context(precision=200):
        c3 = rest - c2
    words = [bits(inverse), bits(c1), bits(c2), bits(c3)]
    return ("_INV_STEP, _STEP_1, _STEP_2, _STEP_3 = ff.from_bits([\n    "
            + ", ".join(f"0x{w:08X}" for w in words) + "])")


if __name__ == "__main__":
    print(constants())
