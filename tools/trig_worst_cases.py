"""Development tool for the tests of vyre_core/mathlib's f32 trigonometric functions (not
product code; needs the ``test`` extra's gmpy2): the f32 inputs nearest a multiple of
``pi/2``, the worst cases of the reduction (where ``sin`` or ``cos`` is nearly 0 and
``tan`` nearly 0 or a pole), the ``--count`` nearest in each binade from 1 up (below 1
no multiple but 0 is near).

    python tools/trig_worst_cases.py [--count 1]

For every significand ``m`` of a binade ``2^e``, ``m 2^e 2/pi`` modulo 1 in 64-bit
fixed point from 2/pi's bits (MPFR at 400 bits) by numpy's wrapping u64 products; the
nearest are then measured again with MPFR and printed as the inputs' bits with their
distance (``log2`` of ``|x 2/pi - k|``).
"""

from __future__ import annotations

import argparse

import gmpy2
import numpy as np
from math_constants import hex_list  # (tools/ is the script's folder)

WORDS = 8  # 2/pi's bits in u32 words: enough past the largest f32's 2^104


def nearest(e: int, count: int, two_over_pi: int) -> list[int]:
    """The ``count`` significands ``m`` (24 bits) whose ``m 2^(e - 23) 2/pi`` lies
    nearest an integer: the inputs' bits."""
    shift = 32 * WORDS - (e - 23)  # 2/pi's bits below the point of m 2^(e - 23) 2/pi
    frac = (two_over_pi >> max(shift - 96, 0)) << max(96 - shift, 0)  # 96 bits past it
    frac &= (1 << 96) - 1
    words = [np.uint64((frac >> (32 * i)) & 0xFFFFFFFF) for i in range(3)]
    m = np.arange(1 << 23, 1 << 24, dtype=np.uint64)
    with np.errstate(over="ignore"):
        top = ((m * words[2]) << np.uint64(32)) + m * words[1] + ((m * words[0]) >> np.uint64(32))
    distance = np.minimum(top, np.uint64(0) - top)
    best = np.argsort(distance, kind="stable")[:count]
    return [int(((e + 127) << 23) | (int(m[b]) & 0x7FFFFF)) for b in best]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1)
    args = parser.parse_args()
    with gmpy2.context(precision=400):
        two_over_pi = int(gmpy2.floor((2 / gmpy2.const_pi()) * gmpy2.mpfr(2) ** (32 * WORDS)))
    found = sorted(b for e in range(0, 128) for b in nearest(e, args.count, two_over_pi))
    with gmpy2.context(precision=400):
        for b in found:
            x = gmpy2.mpfr(float(np.uint32(b).view(np.float32)))
            q = x * 2 / gmpy2.const_pi()
            print(f"# 0x{b:08X}: 2^{float(gmpy2.log2(abs(q - gmpy2.rint(q)))):.1f}")
    print(hex_list("REDUCTION_WORST", found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
