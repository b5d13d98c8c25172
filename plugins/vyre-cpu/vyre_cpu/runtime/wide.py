"""64-bit integers: numba's u64 and i64 arithmetic wraps; i64 goes through its u64 bits
where numba would not."""

from __future__ import annotations

import numpy as np
from numba import njit

from vyre_cpu.runtime.base import _FAST
from vyre_cpu.runtime.ints import bit_reverse_u32, clz_u32, ctz_u32, popcount_u32

# -- 64-bit integers: numba's u64 and i64 arithmetic wraps; i64 goes through its u64 bits
# where a signed operation could overflow.

_LOW = np.uint64(0xFFFFFFFF)
_HALF = np.uint64(32)


@njit(**_FAST)
def div_u64(a, b):
    if b == 0:
        return np.uint64(0xFFFFFFFFFFFFFFFF)
    return a // b


@njit(**_FAST)
def rem_u64(a, b):
    if b == 0:
        return np.uint64(0)
    return a % b


@njit(**_FAST)
def div_i64(a, b):
    if b == 0:
        return np.int64(-1)
    if b == -1:  # (MIN / -1 wraps to MIN; the hardware would trap)
        return np.int64(np.uint64(0) - np.uint64(a))
    q = a // b  # (floor: one up where it rounded a negative quotient down)
    if q * b != a and (a < 0) != (b < 0):
        q += 1
    return q


@njit(**_FAST)
def rem_i64(a, b):
    if b == 0 or b == -1:
        return np.int64(0)
    return a - div_i64(a, b) * b


@njit(**_FAST)
def shl_u64(a, b):
    return a << np.uint64(b & np.uint32(63))


@njit(**_FAST)
def shr_u64(a, b):
    return a >> np.uint64(b & np.uint32(63))


@njit(**_FAST)
def shl_i64(a, b):
    return np.int64(np.uint64(a) << np.uint64(b & np.uint32(63)))


@njit(**_FAST)
def shr_i64(a, b):
    return a >> np.int64(b & np.uint32(63))


@njit(**_FAST)
def neg_i64(a):
    return np.int64(np.uint64(0) - np.uint64(a))


@njit(**_FAST)
def abs_i64(a):
    return neg_i64(a) if a < 0 else a


@njit(**_FAST)
def popcount_u64(a):
    return np.uint64(popcount_u32(np.uint32(a & _LOW)) + popcount_u32(np.uint32(a >> _HALF)))


@njit(**_FAST)
def clz_u64(a):
    high = np.uint32(a >> _HALF)
    if high != 0:
        return np.uint64(clz_u32(high))
    return np.uint64(32 + clz_u32(np.uint32(a & _LOW)))


@njit(**_FAST)
def ctz_u64(a):
    low = np.uint32(a & _LOW)
    if low != 0:
        return np.uint64(ctz_u32(low))
    return np.uint64(32 + ctz_u32(np.uint32(a >> _HALF)))


@njit(**_FAST)
def bit_reverse_u64(a):
    return (np.uint64(bit_reverse_u32(np.uint32(a & _LOW))) << _HALF) | \
        np.uint64(bit_reverse_u32(np.uint32(a >> _HALF)))


@njit(**_FAST)
def rotl_u64(a, b):
    n = np.uint64(b & np.uint32(63))
    return (a << n) | (a >> ((np.uint64(64) - n) & np.uint64(63)))


@njit(**_FAST)
def rotr_u64(a, b):
    return rotl_u64(a, np.uint32((np.uint32(64) - (b & np.uint32(63))) & np.uint32(63)))


@njit(**_FAST)
def mulhi_u64(a, b):
    a0, a1, b0, b1 = a & _LOW, a >> _HALF, b & _LOW, b >> _HALF
    mid = ((a0 * b0) >> _HALF) + ((a1 * b0) & _LOW) + ((a0 * b1) & _LOW)
    return a1 * b1 + ((a1 * b0) >> _HALF) + ((a0 * b1) >> _HALF) + (mid >> _HALF)


@njit(**_FAST)
def mulhi_i64(a, b):
    """The unsigned high word less the other operand for each negative one (mod 2^64)."""
    ua, ub = np.uint64(a), np.uint64(b)
    high = mulhi_u64(ua, ub)
    if a < 0:
        high -= ub
    if b < 0:
        high -= ua
    return np.int64(high)


@njit(**_FAST)
def add_sat_u64(a, b):
    s = a + b
    return np.uint64(0xFFFFFFFFFFFFFFFF) if s < a else s


@njit(**_FAST)
def sub_sat_u64(a, b):
    return a - b if a > b else np.uint64(0)


@njit(**_FAST)
def add_sat_i64(a, b):
    s = np.int64(np.uint64(a) + np.uint64(b))
    if (a < 0) == (b < 0) and (s < 0) != (a < 0):
        return np.int64(-9223372036854775808) if a < 0 else np.int64(9223372036854775807)
    return s


@njit(**_FAST)
def sub_sat_i64(a, b):
    s = np.int64(np.uint64(a) - np.uint64(b))
    if (a < 0) != (b < 0) and (s < 0) != (a < 0):
        return np.int64(-9223372036854775808) if a < 0 else np.int64(9223372036854775807)
    return s


@njit(**_FAST)
def float_to_u64(x):
    if x != x:
        return np.uint64(0)
    t = np.trunc(np.float64(x))
    if t <= 0.0:
        return np.uint64(0)
    if t >= 18446744073709551616.0:
        return np.uint64(0xFFFFFFFFFFFFFFFF)
    if t >= 9223372036854775808.0:  # (past i64: through it, less 2^63)
        return np.uint64(np.int64(t - 9223372036854775808.0)) + np.uint64(1 << 63)
    return np.uint64(np.int64(t))


@njit(**_FAST)
def float_to_i64(x):
    if x != x:
        return np.int64(0)
    t = np.trunc(np.float64(x))
    if t <= -9223372036854775808.0:
        return np.int64(-9223372036854775808)
    if t >= 9223372036854775808.0:
        return np.int64(9223372036854775807)
    return np.int64(t)
