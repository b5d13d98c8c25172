"""32-bit integers: u32 as numba computes it, wrapping; i32 computed in i64 and
wrapped back to 32 bits. Division by zero, shifts past the width and the bit operations
as docs/semantics.md defines them."""

from __future__ import annotations

import numpy as np
from numba import njit

from vyre_cpu.runtime.base import _FAST

# -- u32 -----------------------------------------------------------------------------------


@njit(**_FAST)
def add_u32(a, b):
    return np.uint32((np.uint64(a) + np.uint64(b)) & np.uint64(0xFFFFFFFF))


@njit(**_FAST)
def sub_u32(a, b):
    return np.uint32((np.uint64(a) - np.uint64(b)) & np.uint64(0xFFFFFFFF))


@njit(**_FAST)
def mul_u32(a, b):
    return np.uint32((np.uint64(a) * np.uint64(b)) & np.uint64(0xFFFFFFFF))


@njit(**_FAST)
def div_u32(a, b):
    if b == 0:
        return np.uint32(0xFFFFFFFF)
    return np.uint32(np.uint64(a) // np.uint64(b))


@njit(**_FAST)
def rem_u32(a, b):
    if b == 0:
        return np.uint32(0)
    return np.uint32(np.uint64(a) % np.uint64(b))


@njit(**_FAST)
def reciprocal_u32(d):
    """``1 / d`` in f64 for ``div_u32_by`` and ``rem_u32_by`` (0 for 0, never used)."""
    return 1.0 / np.float64(d) if d != 0 else 0.0


@njit(**_FAST)
def div_u32_by(a, d, inv):
    """``div_u32(a, d)`` with ``inv = reciprocal_u32(d)``, for a divisor the whole
    dispatch shares: x86 has no vector integer division, so a loop of them runs one at a
    time, where this vectorises. ``a * inv`` is within 2**-19 of ``a / d`` (a < 2**32,
    53-bit mantissa), so its floor is the quotient or one off either way, which the
    remainder's sign and size correct: exact for every ``a`` and ``d``."""
    if d == 0:
        return np.uint32(0xFFFFFFFF)
    q = np.int64(np.float64(a) * inv)
    r = np.int64(a) - q * np.int64(d)
    if r < 0:
        q -= 1
    elif r >= np.int64(d):
        q += 1
    return np.uint32(q)


@njit(**_FAST)
def rem_u32_by(a, d, inv):
    """``rem_u32(a, d)`` with ``inv = reciprocal_u32(d)`` (see ``div_u32_by``)."""
    if d == 0:
        return np.uint32(0)
    r = np.int64(a) - np.int64(np.float64(a) * inv) * np.int64(d)
    if r < 0:
        r += np.int64(d)
    elif r >= np.int64(d):
        r -= np.int64(d)
    return np.uint32(r)


@njit(**_FAST)
def shl_u32(a, b):
    return np.uint32((np.uint64(a) << np.uint64(b & np.uint32(31))) & np.uint64(0xFFFFFFFF))


@njit(**_FAST)
def shr_u32(a, b):
    return np.uint32(np.uint64(a) >> np.uint64(b & np.uint32(31)))


@njit(**_FAST)
def not_u32(a):
    return np.uint32(np.uint64(a) ^ np.uint64(0xFFFFFFFF))


@njit(**_FAST)
def popcount_u32(a):
    x = np.uint64(a)
    x = x - ((x >> np.uint64(1)) & np.uint64(0x55555555))
    x = (x & np.uint64(0x33333333)) + ((x >> np.uint64(2)) & np.uint64(0x33333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F)
    return np.uint32(((x * np.uint64(0x01010101)) & np.uint64(0xFFFFFFFF)) >> np.uint64(24))


@njit(**_FAST)
def clz_u32(a):
    x = np.uint64(a)
    for shift in (1, 2, 4, 8, 16):  # smear the highest set bit down
        x = x | (x >> np.uint64(shift))
    return np.uint32(32) - popcount_u32(np.uint32(x))


@njit(**_FAST)
def ctz_u32(a):
    x = np.uint64(a)
    return popcount_u32(np.uint32(((x & (np.uint64(0x100000000) - x)) - np.uint64(1))
                                  & np.uint64(0xFFFFFFFF)))


@njit(**_FAST)
def bit_reverse_u32(a):
    x = np.uint64(a)
    for shift, mask in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF),
                        (16, 0x0000FFFF)):  # swap ever larger neighbouring groups of bits
        s, m = np.uint64(shift), np.uint64(mask)
        x = ((x >> s) & m) | ((x & m) << s)
    return np.uint32(x & np.uint64(0xFFFFFFFF))


@njit(**_FAST)
def rotl_u32(a, b):
    n = np.uint64(b & np.uint32(31))
    x = np.uint64(a)
    return np.uint32(((x << n) | (x >> ((np.uint64(32) - n) & np.uint64(31))))
                     & np.uint64(0xFFFFFFFF))


@njit(**_FAST)
def rotr_u32(a, b):
    return rotl_u32(a, np.uint32((np.uint32(32) - (b & np.uint32(31))) & np.uint32(31)))


@njit(**_FAST)
def mulhi_u32(a, b):
    return np.uint32((np.uint64(a) * np.uint64(b)) >> np.uint64(32))


@njit(**_FAST)
def add_sat_u32(a, b):
    return np.uint32(min(np.uint64(a) + np.uint64(b), np.uint64(0xFFFFFFFF)))


@njit(**_FAST)
def sub_sat_u32(a, b):
    return np.uint32(a - b) if a > b else np.uint32(0)


# -- i32 (computed in i64, wrapped back to 32 bits) -----------------------------------------


@njit(**_FAST)
def wrap_i32(x):
    """The low 32 bits of the integer ``x``, as i32."""
    return np.int32(np.uint32(np.int64(x) & np.int64(0xFFFFFFFF)))


@njit(**_FAST)
def add_i32(a, b):
    return wrap_i32(np.int64(a) + np.int64(b))


@njit(**_FAST)
def sub_i32(a, b):
    return wrap_i32(np.int64(a) - np.int64(b))


@njit(**_FAST)
def mul_i32(a, b):
    return wrap_i32(np.int64(a) * np.int64(b))


@njit(**_FAST)
def div_i32(a, b):
    if b == 0:
        return np.int32(-1)
    x, y = np.int64(a), np.int64(b)
    q = abs(x) // abs(y)
    if (x < 0) != (y < 0):
        q = -q
    return wrap_i32(q)  # (MIN / -1 wraps to MIN)


@njit(**_FAST)
def rem_i32(a, b):
    if b == 0:
        return np.int32(0)
    x, y = np.int64(a), np.int64(b)
    q = abs(x) // abs(y)
    if (x < 0) != (y < 0):
        q = -q
    return wrap_i32(x - q * y)


@njit(**_FAST)
def neg_i32(a):
    return wrap_i32(-np.int64(a))


@njit(**_FAST)
def abs_i32(a):
    return wrap_i32(abs(np.int64(a)))


@njit(**_FAST)
def shl_i32(a, b):
    bits = np.uint64(np.uint32(np.int64(a) & np.int64(0xFFFFFFFF)))
    return np.int32(np.uint32((bits << np.uint64(b & np.uint32(31))) & np.uint64(0xFFFFFFFF)))


@njit(**_FAST)
def shr_i32(a, b):
    return np.int32(np.int64(a) >> np.int64(b & np.uint32(31)))


@njit(**_FAST)
def not_i32(a):
    return wrap_i32(~np.int64(a))


@njit(**_FAST)
def popcount_i32(a):
    return np.int32(popcount_u32(np.uint32(np.int64(a) & np.int64(0xFFFFFFFF))))


@njit(**_FAST)
def _bits_i32(a):
    return np.uint32(np.int64(a) & np.int64(0xFFFFFFFF))


@njit(**_FAST)
def clz_i32(a):
    return np.int32(clz_u32(_bits_i32(a)))


@njit(**_FAST)
def ctz_i32(a):
    return np.int32(ctz_u32(_bits_i32(a)))


@njit(**_FAST)
def bit_reverse_i32(a):
    return np.int32(bit_reverse_u32(_bits_i32(a)))


@njit(**_FAST)
def rotl_i32(a, b):
    return np.int32(rotl_u32(_bits_i32(a), b))


@njit(**_FAST)
def rotr_i32(a, b):
    return np.int32(rotr_u32(_bits_i32(a), b))


@njit(**_FAST)
def mulhi_i32(a, b):
    return np.int32((np.int64(a) * np.int64(b)) >> np.int64(32))


@njit(**_FAST)
def add_sat_i32(a, b):
    return np.int32(min(max(np.int64(a) + np.int64(b), -2147483648), 2147483647))


@njit(**_FAST)
def sub_sat_i32(a, b):
    return np.int32(min(max(np.int64(a) - np.int64(b), -2147483648), 2147483647))
