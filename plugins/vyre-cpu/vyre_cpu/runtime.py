"""The IR's operations as small numba functions, each with the exact total semantics of
docs/semantics.md (the reference interpreter is the oracle): integer arithmetic wraps,
division by zero and shifts are defined, float results are rounded once in their own
type, float-to-int casts saturate, NaN stores are canonical, out-of-bounds loads read 0
and stores are dropped. Generated kernels (``codegen.py``) call them by name; LLVM
inlines them.

f32 arithmetic is computed in f64 and rounded once to f32: for + - * / and sqrt that is
the correctly rounded f32 result (f64 carries more than twice f32's precision), and it
keeps numba's own typing out of the question."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from vyre_core.ir.dtypes import CANONICAL_NAN, DType

_FAST = {"cache": True, "nogil": True}
#: The canonical quiet NaNs' bits (numba reads module globals as constants)
_NAN_F16 = CANONICAL_NAN[DType.F16]
_NAN_F32 = CANONICAL_NAN[DType.F32]
_NAN_F64 = CANONICAL_NAN[DType.F64]


# -- cancellation ---------------------------------------------------------------------------

@intrinsic
def _load_relaxed(typingctx, array, index):
    """``array[index]`` (u64) as an atomic load of monotonic order: a plain load on x86 and
    arm, which LLVM may not hoist out of a loop. A plain load of memory the loop never
    stores is loop-invariant to LLVM, which then checks the stop word once, before the loop."""
    def codegen(context, builder, sig, args):
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
        return builder.load_atomic(ptr, "monotonic", 8)
    return types.uint64(array, index), codegen


@njit(**_FAST)
def stopped(stop):
    """Whether the call being run was cancelled (``vyre_core.cancel.words``): read at the
    generated code's safe points."""
    return _load_relaxed(stop, 0) == _load_relaxed(stop, 3)

F32_NAN = np.float32(np.nan)
F64_NAN = np.float64(np.nan)

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


# -- bitcasts: a value's bits read as another type of its width ----------------------------

@intrinsic
def _reinterpret(typingctx, value, to):
    """``value``'s bits as the number type ``to`` of its width: LLVM's bitcast, no
    instruction at all (numba compiles no ``.view`` of a scalar)."""
    target = to.instance_type if isinstance(to, types.NumberClass) else None
    if target is None or not isinstance(value, types.Number) or \
            target.bitwidth != value.bitwidth:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(sig.return_type))
    return target(value, to), codegen


@njit(**_FAST)
def reinterpret(x, to):
    """An integer's bits as ``to`` (np.float32 or np.float64; a NaN keeps its payload
    until a store or bitcast makes it canonical)."""
    return _reinterpret(x, to)


@njit(**_FAST)
def bits_f32(x, to):
    """An f32's bits as ``to`` (np.uint32 or np.int32); a NaN's are the canonical NaN's."""
    return to(_NAN_F32) if x != x else _reinterpret(x, to)


@njit(**_FAST)
def bits_f64(x, to):
    """An f64's bits as ``to`` (np.uint64 or np.int64); a NaN's are the canonical NaN's."""
    return to(_NAN_F64) if x != x else _reinterpret(x, to)


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


# -- floats --------------------------------------------------------------------------------


def _float_operation(instruction: str, of: types.Float) -> Any:
    """``a + b`` (``instruction``: fadd, fsub or fmul) of two values of ``of``: for f32
    computed in f64 and rounded once, for f64 in f64; IEEE, no fast-math flag. Written as
    LLVM's instruction at the call (an intrinsic): the math library's helpers make
    thousands of these calls, and numba lowered each as a call to a function of its own
    that LLVM then inlined, a third of the helpers' compile time (f32 ``pow``: 11.7 s ->
    7.6 s). Any other operand type is a typing error, never a silent conversion."""
    double = ir.DoubleType()

    @intrinsic
    def operation(typingctx, a, b):
        if a != of or b != of:
            return None

        def codegen(context, builder, sig, args):
            x, y = args
            if of == types.float64:
                return getattr(builder, instruction)(x, y)
            exact = getattr(builder, instruction)(builder.fpext(x, double),
                                                  builder.fpext(y, double))
            return builder.fptrunc(exact, ir.FloatType())
        return of(of, of), codegen
    return operation


add_f32 = _float_operation("fadd", types.float32)
sub_f32 = _float_operation("fsub", types.float32)
mul_f32 = _float_operation("fmul", types.float32)
add_f64 = _float_operation("fadd", types.float64)
sub_f64 = _float_operation("fsub", types.float64)
mul_f64 = _float_operation("fmul", types.float64)


@njit(**_FAST)
def div_f32(a, b):
    return np.float32(div_f64(np.float64(a), np.float64(b)))


@njit(**_FAST)
def div_f64(a, b):
    if b == 0.0:  # (IEEE: ±inf, or NaN for 0/0 and NaN/0; numba would raise)
        if a != a or a == 0.0:
            return np.float64(np.nan)
        negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
        return np.float64(-np.inf) if negative else np.float64(np.inf)
    return a / b


@njit(**_FAST)
def rem_f64(a, b):
    """fmod, computed exactly (sign of the dividend)."""
    if a != a or b != b or b == 0.0 or math.isinf(a):
        return np.float64(np.nan)
    if math.isinf(b):
        return a
    return np.fmod(a, b)


@njit(**_FAST)
def rem_f32(a, b):
    return np.float32(rem_f64(np.float64(a), np.float64(b)))


@njit(**_FAST)
def min_f64(a, b):
    """IEEE minimumNumber: a NaN loses to a number; -0 is below +0."""
    if a != a:
        return b
    if b != b:
        return a
    if a < b:
        return a
    if b < a:
        return b
    return a if math.copysign(1.0, a) < 0 else b


@njit(**_FAST)
def max_f64(a, b):
    """IEEE maximumNumber: a NaN loses to a number; +0 is above -0."""
    if a != a:
        return b
    if b != b:
        return a
    if a > b:
        return a
    if b > a:
        return b
    return b if math.copysign(1.0, a) < 0 else a


@njit(**_FAST)
def min_f32(a, b):
    return np.float32(min_f64(np.float64(a), np.float64(b)))


@njit(**_FAST)
def max_f32(a, b):
    return np.float32(max_f64(np.float64(a), np.float64(b)))


@njit(**_FAST)
def sqrt_f64(a):
    if a < 0.0:
        return np.float64(np.nan)
    return math.sqrt(a)


@njit(**_FAST)
def floor_f64(a):
    return np.floor(a)


@njit(**_FAST)
def ceil_f64(a):
    return np.ceil(a)


@njit(**_FAST)
def round_f64(a):
    return np.rint(a)  # ties to even


@njit(**_FAST)
def trunc_f64(a):
    return np.trunc(a)


@njit(**_FAST)
def isnan_f64(a):
    return math.isnan(a)


@njit(**_FAST)
def isinf_f64(a):
    return math.isinf(a)


# -- casts ---------------------------------------------------------------------------------


@njit(**_FAST)
def float_to_u32(x):
    """Truncate toward zero, then saturate; NaN gives 0."""
    if x != x:
        return np.uint32(0)
    t = np.trunc(np.float64(x))
    if t <= 0.0:
        return np.uint32(0)
    if t >= 4294967295.0:
        return np.uint32(0xFFFFFFFF)
    return np.uint32(np.int64(t))


@njit(**_FAST)
def float_to_i32(x):
    if x != x:
        return np.int32(0)
    t = np.trunc(np.float64(x))
    if t <= -2147483648.0:
        return np.int32(-2147483648)
    if t >= 2147483647.0:
        return np.int32(2147483647)
    return np.int32(np.int64(t))


@njit(**_FAST)
def u32_to_i32(a):
    return np.int32(np.int64(a) - np.int64(4294967296)) if a >= np.uint32(2147483648) \
        else np.int32(a)


@njit(**_FAST)
def i32_to_u32(a):
    return np.uint32(np.int64(a) & np.int64(0xFFFFFFFF))


# -- memory --------------------------------------------------------------------------------


@njit(**_FAST)
def load(arr, i, zero):
    """``arr[i]``, or ``zero`` (0 of its type) past the end."""
    if np.int64(i) < arr.shape[0]:
        return arr[np.int64(i)]
    return zero


@njit(**_FAST)
def load_bool(arr, i):
    return np.int64(i) < arr.shape[0] and arr[np.int64(i)] != 0


@njit(**_FAST)
def store(arr, i, value):
    """``arr[i] = value``; dropped past the end."""
    if np.int64(i) < arr.shape[0]:
        arr[np.int64(i)] = value


@njit(**_FAST)
def store_f32(arr, i, value):
    """A float store: every NaN becomes the canonical quiet NaN."""
    if np.int64(i) < arr.shape[0]:
        arr[np.int64(i)] = value if value == value else F32_NAN


@njit(**_FAST)
def store_f64(arr, i, value):
    if np.int64(i) < arr.shape[0]:
        arr[np.int64(i)] = value if value == value else F64_NAN


@njit(**_FAST)
def load_in(arr, i):
    """``arr[i]`` where the kernel knows ``i`` is inside ``arr`` (no check: a loop of
    them vectorises without masks, twice as fast). Indexed unsigned: numba wraps a
    signed index below 0 around, a select that hides consecutive indices from LLVM
    (a gather for every load at ``j - 1``)."""
    return arr[np.uint64(i)]


@njit(**_FAST)
def store_in(arr, i, value):
    arr[np.uint64(i)] = value


@njit(**_FAST)
def store_f32_in(arr, i, value):
    arr[np.uint64(i)] = value if value == value else F32_NAN


@njit(**_FAST)
def store_f64_in(arr, i, value):
    arr[np.uint64(i)] = value if value == value else F64_NAN


@njit(**_FAST)
def store_bool(arr, i, value):
    if np.int64(i) < arr.shape[0]:
        arr[np.int64(i)] = np.uint32(1) if value else np.uint32(0)


# -- the least and the most of two numbers, as Python's ``min``/``max`` (the first unless the
# -- second is beyond it): numba compiles its own for each type again in every process
# -- (0.03 s each), these are loaded from the disk cache ----------------------------------

@njit(**_FAST)
def min2(a, b):
    return b if b < a else a


@njit(**_FAST)
def max2(a, b):
    return b if b > a else a


# -- a workgroup's arrays (its workgroup buffers, its variables' lane arrays): numba's own
# -- np.zeros is compiled again in every process (0.2-0.5 s on a new worker's first kernel
# -- with lane arrays), these are loaded from the disk cache ---------------------------------

@njit(**_FAST)
def zeros_bool_(n):
    return np.zeros(n, np.bool_)


@njit(**_FAST)
def zeros_uint8(n):
    return np.zeros(n, np.uint8)


@njit(**_FAST)
def zeros_int8(n):
    return np.zeros(n, np.int8)


@njit(**_FAST)
def zeros_uint16(n):
    return np.zeros(n, np.uint16)


@njit(**_FAST)
def zeros_int16(n):
    return np.zeros(n, np.int16)


@njit(**_FAST)
def zeros_uint32(n):
    return np.zeros(n, np.uint32)


@njit(**_FAST)
def zeros_int32(n):
    return np.zeros(n, np.int32)


@njit(**_FAST)
def zeros_uint64(n):
    return np.zeros(n, np.uint64)


@njit(**_FAST)
def zeros_int64(n):
    return np.zeros(n, np.int64)


@njit(**_FAST)
def zeros_float32(n):
    return np.zeros(n, np.float32)


@njit(**_FAST)
def zeros_float64(n):
    return np.zeros(n, np.float64)


@njit(**_FAST)
def ones_bool_(n):
    return np.ones(n, np.bool_)


# -- atomics (kernels with atomics on storage buffers run their workgroups in turn) --------


@njit(**_FAST)
def _updated(op, old, value, comparand):
    """What an atomic writes (op: 0 add, 1 sub, 2 min, 3 max, 4 and, 5 or, 6 xor,
    7 exchange, 8 compare-exchange), as a 64-bit integer to wrap."""
    if op == 0:
        return np.int64(old) + np.int64(value)
    if op == 1:
        return np.int64(old) - np.int64(value)
    if op == 2:
        return np.int64(min(old, value))
    if op == 3:
        return np.int64(max(old, value))
    if op == 4:
        return np.int64(old) & np.int64(value)
    if op == 5:
        return np.int64(old) | np.int64(value)
    if op == 6:
        return np.int64(old) ^ np.int64(value)
    if op == 7 or old == comparand:
        return np.int64(value)
    return np.int64(old)


@njit(**_FAST)
def atomic_u32(arr, i, op, value, comparand):
    """Read-modify-write of ``arr[i]``: the value before, or 0 (and nothing) past the end."""
    if np.int64(i) >= arr.shape[0]:
        return np.uint32(0)
    j = np.int64(i)
    old = arr[j]
    arr[j] = np.uint32(_updated(op, old, value, comparand) & np.int64(0xFFFFFFFF))
    return old


@njit(**_FAST)
def atomic_i32(arr, i, op, value, comparand):
    if np.int64(i) >= arr.shape[0]:
        return np.int32(0)
    j = np.int64(i)
    old = arr[j]
    arr[j] = wrap_i32(_updated(op, old, value, comparand))
    return old


# -- f16: stored as its 16 bits (numba has no binary16), computed as f32 values that are
# -- always exactly binary16 ones: every result is computed in f64 (exact for + - *, one
# -- rounding for / and sqrt, which then round to binary16 without double-rounding error)
# -- and rounded once to binary16 here.

_F16_MIN_NORMAL = 2.0 ** -14
_F16_QUANTUM = 2.0 ** -24  # the spacing of subnormals


@njit(**_FAST)
def to_f16(x):
    """``x`` (f64) rounded to the nearest binary16 value, ties to even; overflow gives
    ±inf, NaN stays NaN, -0 stays -0. Returned as the f32 that holds it exactly."""
    if x != x:
        return np.float32(np.nan)
    ax = abs(x)
    if ax >= 65520.0:  # (65504 + half its spacing: the tie rounds to even, past the max)
        r = np.inf
    elif ax < _F16_MIN_NORMAL:
        r = np.rint(ax / _F16_QUANTUM) * _F16_QUANTUM
    else:
        _, e = math.frexp(ax)  # ax = m * 2**e, 0.5 <= m < 1
        quantum = 2.0 ** (e - 11)
        r = np.rint(ax / quantum) * quantum
    return np.float32(math.copysign(r, x))


@njit(**_FAST)
def add_f16(a, b):
    return to_f16(np.float64(a) + np.float64(b))


@njit(**_FAST)
def sub_f16(a, b):
    return to_f16(np.float64(a) - np.float64(b))


@njit(**_FAST)
def mul_f16(a, b):
    return to_f16(np.float64(a) * np.float64(b))


@njit(**_FAST)
def div_f16(a, b):
    return to_f16(div_f64(np.float64(a), np.float64(b)))


@njit(**_FAST)
def rem_f16(a, b):
    return to_f16(rem_f64(np.float64(a), np.float64(b)))


@njit(**_FAST)
def min_f16(a, b):
    return np.float32(min_f64(np.float64(a), np.float64(b)))


@njit(**_FAST)
def max_f16(a, b):
    return np.float32(max_f64(np.float64(a), np.float64(b)))


@njit(**_FAST)
def f16_value(bits):
    """The binary16 value of 16 ``bits``, as an f32 (exact)."""
    b = np.int64(bits)
    sign = -1.0 if b & 0x8000 else 1.0
    exponent = (b >> 10) & 0x1F
    mantissa = b & 0x3FF
    if exponent == 0:
        value = mantissa * _F16_QUANTUM
    elif exponent == 31:
        value = np.inf if mantissa == 0 else np.nan
    else:
        value = (1024 + mantissa) * 2.0 ** (exponent - 25)
    return np.float32(math.copysign(value, sign))


@njit(**_FAST)
def f16_bits(value):
    """The 16 bits of ``value``, a binary16 value held in an f32; every NaN gives the
    canonical quiet NaN (0x7e00)."""
    if value != value:
        return np.uint16(_NAN_F16)
    x = np.float64(value)
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    ax = abs(x)
    if ax == np.inf:
        return np.uint16(sign | 0x7C00)
    if ax < _F16_MIN_NORMAL:
        return np.uint16(sign | np.int64(ax / _F16_QUANTUM))
    _, e = math.frexp(ax)
    exponent = e + 14  # (biased: ax in [2**(e-1), 2**e), bias 15)
    mantissa = np.int64(ax / 2.0 ** (e - 11)) - 1024
    return np.uint16(sign | (exponent << 10) | mantissa)


@njit(**_FAST)
def load_f16(arr, i):
    if np.int64(i) < arr.shape[0]:
        return f16_value(arr[np.int64(i)])
    return np.float32(0.0)


@njit(**_FAST)
def store_f16(arr, i, value):
    if np.int64(i) < arr.shape[0]:
        arr[np.int64(i)] = f16_bits(value)


# -- subgroups: a workgroup's lane arrays, lanes size by size (the kernel writes the
# operands of every lane first: each subgroup operation runs between two stretches) ------

@njit(**_FAST)
def subgroup_reduce(src, dst, size, op):
    """op 0-5: add (wrapping: stored back into the 32-bit array), min, max, and, or,
    xor of each subgroup, in every lane of it."""
    for first in range(0, src.shape[0], size):
        acc = np.int64(src[first])
        for j in range(first + 1, first + size):
            v = np.int64(src[j])
            if op == 0:
                acc += v
            elif op == 1:
                acc = min(acc, v)
            elif op == 2:
                acc = max(acc, v)
            elif op == 3:
                acc &= v
            elif op == 4:
                acc |= v
            else:
                acc ^= v
        for j in range(first, first + size):
            dst[j] = acc & 0xFFFFFFFF if op == 0 else acc


@njit(**_FAST)
def subgroup_scan(src, dst, size, inclusive):
    for first in range(0, src.shape[0], size):
        acc = np.int64(0)
        for j in range(first, first + size):
            v = np.int64(src[j])
            if inclusive:
                acc += v
                dst[j] = acc & 0xFFFFFFFF
            else:
                dst[j] = acc & 0xFFFFFFFF
                acc += v


@njit(**_FAST)
def subgroup_shuffle(src, lanes, dst, size):
    for j in range(src.shape[0]):
        dst[j] = src[j - j % size + np.int64(lanes[j]) % size]


@njit(**_FAST)
def subgroup_ballot(src, dst, size):
    for first in range(0, src.shape[0], size):
        bits = np.uint32(0)
        for j in range(size):
            if src[first + j]:
                bits |= np.uint32(1) << np.uint32(j)
        for j in range(first, first + size):
            dst[j] = bits
