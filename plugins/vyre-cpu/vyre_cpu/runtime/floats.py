"""Floats: f32 computed in f64 and rounded once, f64, f16 stored as its 16 bits and
computed as exact f32 values rounded once to binary16; casts between the types, and
bitcasts (a value's bits read as another type of its width)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from vyre_cpu.runtime.base import _FAST, _NAN_F16, _NAN_F32, _NAN_F64

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
