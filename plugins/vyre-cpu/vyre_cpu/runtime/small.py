"""8- and 16-bit integers, computed exactly in i64 (the generated code casts each result
back), and the saturating float-to-integer conversion."""

from __future__ import annotations

import numpy as np
from numba import njit

from vyre_cpu.runtime.base import _FAST
from vyre_cpu.runtime.ints import bit_reverse_u32, clz_u32, ctz_u32, popcount_u32

# -- 8- and 16-bit integers: computed exactly in i64; the generated code casts each result
# to the type (numba's integer casts keep the low bits), which wraps it. ``w`` is the width,
# ``signed`` whether it is two's complement.


@njit(**_FAST)
def small_mask(w):
    return np.int64((1 << w) - 1)


@njit(**_FAST)
def small_range(w, signed):
    if signed:
        return -(np.int64(1) << np.int64(w - 1)), (np.int64(1) << np.int64(w - 1)) - 1
    return np.int64(0), small_mask(w)


@njit(**_FAST)
def small_div(a, b, w, signed):
    if b == 0:
        return np.int64(-1)  # (all ones, once cast)
    x, y = np.int64(a), np.int64(b)
    q = abs(x) // abs(y)
    return -q if (x < 0) != (y < 0) else q


@njit(**_FAST)
def small_rem(a, b, w, signed):
    if b == 0:
        return np.int64(0)
    return np.int64(a) - small_div(a, b, w, signed) * np.int64(b)


@njit(**_FAST)
def small_shl(a, b, w, signed):
    return np.int64(a) << np.int64(b & np.uint32(w - 1))


@njit(**_FAST)
def small_shr(a, b, w, signed):  # (a signed value is sign-extended: arithmetic)
    return np.int64(a) >> np.int64(b & np.uint32(w - 1))


@njit(**_FAST)
def small_rotl(a, b, w, signed):
    bits = np.int64(a) & small_mask(w)
    n = np.int64(b & np.uint32(w - 1))
    return (bits << n) | (bits >> ((w - n) & (w - 1)))


@njit(**_FAST)
def small_rotr(a, b, w, signed):
    return small_rotl(a, np.uint32((w - (b & np.uint32(w - 1))) & (w - 1)), w, signed)


@njit(**_FAST)
def small_mulhi(a, b, w, signed):
    return (np.int64(a) * np.int64(b)) >> np.int64(w)


@njit(**_FAST)
def small_add_sat(a, b, w, signed):
    lo, hi = small_range(w, signed)
    return min(max(np.int64(a) + np.int64(b), lo), hi)


@njit(**_FAST)
def small_sub_sat(a, b, w, signed):
    lo, hi = small_range(w, signed)
    return min(max(np.int64(a) - np.int64(b), lo), hi)


@njit(**_FAST)
def small_popcount(a, w, signed):
    return np.int64(popcount_u32(np.uint32(np.int64(a) & small_mask(w))))


@njit(**_FAST)
def small_clz(a, w, signed):
    return np.int64(clz_u32(np.uint32(np.int64(a) & small_mask(w)))) - (32 - w)


@njit(**_FAST)
def small_ctz(a, w, signed):
    return min(np.int64(ctz_u32(np.uint32(np.int64(a) & small_mask(w)))), np.int64(w))


@njit(**_FAST)
def small_bit_reverse(a, w, signed):
    return np.int64(bit_reverse_u32(np.uint32(np.int64(a) & small_mask(w)))) >> (32 - w)


@njit(**_FAST)
def float_to_int(x, lo, hi):
    """Truncate toward zero, then saturate to [lo, hi] (at most 32 bits); NaN gives 0."""
    if x != x:
        return np.int64(0)
    t = np.trunc(np.float64(x))
    if t <= np.float64(lo):
        return np.int64(lo)
    if t >= np.float64(hi):
        return np.int64(hi)
    return np.int64(t)
