"""What the math library's constant generators share (not product code; needs the
``test`` extra's gmpy2): the binary32 context, a value's f32 bits and its f32 pair, and
the source form of a list of words."""

from __future__ import annotations

import gmpy2
import numpy as np

BINARY32 = gmpy2.context(precision=24, emin=-148, emax=128, subnormalize=True)


def bits(v: gmpy2.mpfr) -> int:
    """The bits of ``v`` rounded once to f32."""
    with gmpy2.context(BINARY32):
        return int(np.float32(float(gmpy2.mpfr(v))).view(np.uint32))


def pair(v: gmpy2.mpfr) -> tuple[int, int]:
    """``v`` as an f32 pair's bits: ``hi`` rounded once, ``lo`` the rest rounded once."""
    with gmpy2.context(BINARY32):
        hi = gmpy2.mpfr(v)
    with gmpy2.context(precision=200):
        rest = v - hi
    return bits(hi), bits(rest)


def hex_list(name: str, values: list[int], call: str = "") -> str:
    """``name = call([0x..., ...])``, seven words a row, as the library's tables are."""
    words = [f"0x{v:08X}" for v in values]
    rows = [", ".join(words[i:i + 7]) for i in range(0, len(words), 7)]
    opening, closing = (f"{call}([", "])") if call else ("[", "]")
    return f"{name} = {opening}\n    " + ",\n    ".join(rows) + closing
