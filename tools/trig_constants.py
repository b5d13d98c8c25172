"""Development tool for vyre_core/mathlib/trig.py (not product code; needs the ``test``
extra's gmpy2): the source of trig.py's constants from MPFR at 400 bits. The bits of
``2/pi`` after the point in u32 words, after one word of zeros (the reduction's window may
start up to 31 bits before the point); ``sin(j pi / 64)`` for j = 0..32 as f32 pairs
(``cos(j pi / 64)`` is entry ``32 - j``); ``pi / 64`` and ``1/6`` as pairs.

    python tools/trig_constants.py

(Their exception lists come from ``tools/math_exceptions.py sin`` and ``... cos``.)
"""

from __future__ import annotations

import gmpy2
from math_constants import hex_list, pair  # (tools/ is the script's folder)

#: Words of 2/pi: the window of 128 bits starts at most at bit 104 - 1 after the point
#: (the largest f32 exponent) and is read from five words.
WORDS = 8


def constants() -> str:
    with gmpy2.context(precision=400):
        pi = gmpy2.const_pi()
        scaled = int(gmpy2.floor((2 / pi) * gmpy2.mpfr(2) ** (32 * WORDS)))
        sines = [pair(gmpy2.sin(pi * j / 64)) for j in range(33)]
        step, sixth = pair(pi / 64), pair(gmpy2.mpfr(1) / 6)
    words = [0] + [(scaled >> (32 * (WORDS - 1 - i))) & 0xFFFFFFFF for i in range(WORDS)]
    lines = [hex_list("_TWO_OVER_PI", words, "np.array")[:-1] + ", np.uint32)",
             hex_list("_SIN_HI", [h for h, _ in sines], "ff.from_bits"),
             hex_list("_SIN_LO", [lo for _, lo in sines], "ff.from_bits"),
             f"_STEP_HI, _STEP_LO = ff.from_bits([0x{step[0]:08X}, 0x{step[1]:08X}])",
             f"_SIXTH_HI, _SIXTH_LO = ff.from_bits([0x{sixth[0]:08X}, 0x{sixth[1]:08X}])"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(constants())
