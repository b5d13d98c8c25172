"""The IR's operators on lane values (numpy scalars or one element per lane), with the
total rules of docs/semantics.md: literals, integer division and shifts, saturation,
float extremes, casts and bitcasts, tables, and the subgroup reductions' tables."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre_core.ir.dtypes import CANONICAL_NAN, DType
from vyre_core.ir.nodes import (
    BinOp,
    Lit,
    SubgroupOp,
    UnOp,
)

Value = Any  # np.generic (uniform) or np.ndarray of shape (lanes,)
Mask = np.ndarray | None

DTYPE_OF = {t.value_np: t for t in DType}
#: The unsigned numpy type of each width: a number's bit pattern
UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def mask_and(a: Mask, b: Mask) -> Mask:
    if a is None:
        return b
    return a if b is None else a & b


def is_uniform(v: Value) -> bool:
    return np.ndim(v) == 0


@functools.lru_cache(maxsize=4096)
def literal_value(node: Lit) -> Value:
    """A literal's value (a numpy scalar: immutable, so shared between dispatches)."""
    if node.dtype.is_numeric:  # (its bit pattern, in the unsigned type of its width)
        return np.array(node.bits, UNSIGNED[node.dtype.bits]).view(node.dtype.value_np)[()]
    return node.dtype.value_np.type(node.bits)


SCANS = (SubgroupOp.INCLUSIVE_ADD, SubgroupOp.EXCLUSIVE_ADD)


SUBGROUP_REDUCE = {SubgroupOp.MIN: np.minimum, SubgroupOp.MAX: np.maximum,
                    SubgroupOp.AND: np.bitwise_and, SubgroupOp.OR: np.bitwise_or,
                    SubgroupOp.XOR: np.bitwise_xor}


def unsort(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per-lane values back from subgroup order."""
    out = np.empty(len(order), dtype=values.dtype)
    out[order] = values.reshape(-1)
    return out


def as_scalar(v: Value) -> Value:
    return v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else v


def bits_of(a: Value, dtype: DType) -> np.ndarray:
    """An integer's bit pattern (the unsigned type of its width)."""
    return np.asarray(a).view(UNSIGNED[dtype.bits])


def from_bits(bits: np.ndarray, dtype: DType) -> Value:
    return as_scalar(np.asarray(bits, UNSIGNED[dtype.bits]).view(dtype.value_np))


def _int_div_rem(a: Value, b: Value, dtype: DType) -> tuple[Value, Value]:
    """Truncating quotient and remainder with vyre's total rules (x/0 all ones, x%0 0, MIN /
    -1 == MIN): unsigned as numpy divides (it truncates), signed up to 32 bits in i64, and
    i64 on the magnitudes as unsigned numbers (no wider type to hold them)."""
    if not dtype.is_signed:
        if np.ndim(b) == 0 and b:
            return a // b, a % b
        zero = b == 0
        safe = np.where(zero, a.dtype.type(1), b)
        return (as_scalar(np.where(zero, a.dtype.type(np.iinfo(a.dtype).max), a // safe)),
                as_scalar(np.where(zero, a.dtype.type(0), a % safe)))
    if dtype.bits <= 32:
        a64, b64 = np.asarray(a, np.int64), np.asarray(b, np.int64)
        zero = b64 == 0
        safe = np.where(zero, 1, b64)
        q = np.abs(a64) // np.abs(safe) * (np.sign(a64) * np.sign(safe))
        r = np.where(zero, 0, a64 - q * safe)
        return as_scalar(np.where(zero, -1, q).astype(a.dtype)), as_scalar(r.astype(a.dtype))
    u = np.uint64
    ua, ub = bits_of(a, dtype), bits_of(b, dtype)
    neg_a, neg_b = np.asarray(a) < 0, np.asarray(b) < 0
    mag_a = np.where(neg_a, u(0) - ua, ua).astype(u)
    mag_b = np.where(neg_b, u(0) - ub, ub).astype(u)
    zero = mag_b == 0
    safe = np.where(zero, u(1), mag_b).astype(u)
    q, r = mag_a // safe, mag_a % safe
    q = np.where(neg_a != neg_b, u(0) - q, q).astype(u)
    r = np.where(neg_a, u(0) - r, r).astype(u)
    return (from_bits(np.where(zero, u(2**64 - 1), q), dtype),
            from_bits(np.where(zero, u(0), r), dtype))


def _mulhi(a: Value, b: Value, dtype: DType) -> Value:
    """The high half of the exact double-width product."""
    if dtype.bits <= 32:
        wide = np.int64 if dtype.is_signed else np.uint64
        high = (np.asarray(a, wide) * np.asarray(b, wide)) >> wide(dtype.bits)
        return as_scalar(high.astype(a.dtype))
    u, half, mask = np.uint64, np.uint64(32), np.uint64(0xFFFFFFFF)
    ua, ub = bits_of(a, dtype), bits_of(b, dtype)
    a0, a1, b0, b1 = ua & mask, ua >> half, ub & mask, ub >> half
    mid = ((a0 * b0) >> half) + (a1 * b0 & mask) + (a0 * b1 & mask)
    high = a1 * b1 + ((a1 * b0) >> half) + ((a0 * b1) >> half) + (mid >> half)
    if dtype.is_signed:  # (a signed product's high word: the unsigned one less the
        # other operand for each negative one, mod 2^64)
        high = high - np.where(np.asarray(a) < 0, ub, u(0)) - np.where(np.asarray(b) < 0,
                                                                      ua, u(0))
    return from_bits(high, dtype)


def _saturating(op: BinOp, a: Value, b: Value, dtype: DType) -> Value:
    """add_sat/sub_sat: the wrapped result, or the bound it crossed."""
    lo, hi = (np.array(v, dtype.value_np) for v in dtype.int_range)
    out = a + b if op is BinOp.ADD_SAT else a - b
    a, b = np.asarray(a), np.asarray(b)
    if not dtype.is_signed:
        crossed = out < a if op is BinOp.ADD_SAT else b > a
        return as_scalar(np.where(crossed, hi if op is BinOp.ADD_SAT else lo, out))
    same_signs = (a < 0) == (b < 0)
    crossed = (same_signs if op is BinOp.ADD_SAT else ~same_signs) & ((out < 0) != (a < 0))
    return as_scalar(np.where(crossed, np.where(a < 0, lo, hi), out))


def _float_extreme(pick: np.ufunc, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE minimumNumber/maximumNumber: ``pick`` (fmin/fmax: a NaN loses to a number),
    with -0 below +0 where both are zeros (numpy leaves that to chance)."""
    out = pick(a, b)
    zeros = (a == 0) & (b == 0)
    if np.any(zeros):
        negative = np.signbit(a) | np.signbit(b) if pick is np.fmin else \
            np.signbit(a) & np.signbit(b)
        out = np.where(zeros, np.where(negative, -0.0, 0.0).astype(out.dtype), out)
    return out


def binary_op(op: BinOp, a: Value, b: Value) -> Value:
    dtype = DTYPE_OF[a.dtype]
    match op:
        case BinOp.ADD:
            return a + b
        case BinOp.SUB:
            return a - b
        case BinOp.MUL:
            return a * b
        case BinOp.DIV:
            return _int_div_rem(a, b, dtype)[0] if dtype.is_int else a / b
        case BinOp.REM:
            return _int_div_rem(a, b, dtype)[1] if dtype.is_int else np.fmod(a, b)
        case BinOp.MIN:
            return _float_extreme(np.fmin, a, b) if dtype.is_float else np.minimum(a, b)
        case BinOp.MAX:
            return _float_extreme(np.fmax, a, b) if dtype.is_float else np.maximum(a, b)
        case BinOp.AND | BinOp.LOGICAL_AND:
            return a & b
        case BinOp.OR | BinOp.LOGICAL_OR:
            return a | b
        case BinOp.XOR:
            return a ^ b
        case BinOp.SHL | BinOp.SHR | BinOp.ROTL | BinOp.ROTR:  # (amounts mod the width)
            w, u = dtype.bits, UNSIGNED[dtype.bits]
            if op is BinOp.SHR:  # (arithmetic on a signed type)
                return as_scalar(a >> (b & np.uint32(w - 1)).astype(a.dtype))
            n = (b & np.uint32(w - 1)).astype(u)
            if op is BinOp.SHL:
                return from_bits(bits_of(a, dtype) << n, dtype)
            left = n if op is BinOp.ROTL else (u(w) - n) & u(w - 1)
            bits = bits_of(a, dtype)
            return from_bits((bits << left) | (bits >> ((u(w) - left) & u(w - 1))), dtype)
        case BinOp.MULHI:
            return _mulhi(a, b, dtype)
        case BinOp.ADD_SAT | BinOp.SUB_SAT:
            return _saturating(op, a, b, dtype)
        case BinOp.EQ:
            return a == b
        case BinOp.NE:
            return a != b
        case BinOp.LT:
            return a < b
        case BinOp.LE:
            return a <= b
        case BinOp.GT:
            return a > b
        case BinOp.GE:
            return a >= b
    raise AssertionError(op)


#: The float unary ops numpy computes here; the math library's (``exp`` ..., every type)
#: never reach the interpreter: programs are run written out.
_FLOAT_FUNCS = {UnOp.SQRT: np.sqrt, UnOp.FLOOR: np.floor, UnOp.CEIL: np.ceil,
                UnOp.ROUND: np.rint, UnOp.TRUNC: np.trunc}  # (rint: ties to even)


#: Each byte with its bits in reverse order.
_REVERSED_BYTE = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint64)


def unary_op(op: UnOp, a: Value) -> Value:
    dtype = DTYPE_OF[a.dtype]
    match op:
        case UnOp.NEG:
            return -a
        case UnOp.BIT_NOT:
            return ~a
        case UnOp.NOT:
            return ~a
        case UnOp.ABS:
            return a if dtype.is_int and not dtype.is_signed else np.abs(a)
        case UnOp.POPCOUNT:
            return as_scalar(np.bitwise_count(bits_of(a, dtype)).astype(a.dtype))
        case UnOp.CLZ:  # the width minus the bits up to the highest set one (smeared down)
            bits = bits_of(a, dtype)
            shift = 1
            while shift < dtype.bits:
                bits = bits | (bits >> bits.dtype.type(shift))
                shift *= 2
            return as_scalar((dtype.bits - np.bitwise_count(bits)).astype(a.dtype))
        case UnOp.CTZ:  # the ones below the lowest set bit (the width for zero)
            bits = bits_of(a, dtype)
            below = (bits & (~bits + bits.dtype.type(1))) - bits.dtype.type(1)
            return as_scalar(np.bitwise_count(below).astype(a.dtype))
        case UnOp.BIT_REVERSE:
            bits = bits_of(a, dtype).astype(np.uint64)
            out = np.zeros_like(bits)
            for byte in range(dtype.bits // 8):
                out |= _REVERSED_BYTE[(bits >> np.uint64(8 * byte)) & np.uint64(255)] \
                    << np.uint64(dtype.bits - 8 - 8 * byte)
            return from_bits(out.astype(UNSIGNED[dtype.bits]), dtype)
        case UnOp.ISNAN:
            return np.isnan(a)
        case UnOp.ISINF:
            return np.isinf(a)
    return _FLOAT_FUNCS[op](a)


def table_lookup(values: np.ndarray, index: Value) -> Value:
    """Element ``index`` of a table's values, which end with the 0 an index past the end
    reads."""
    return as_scalar(values[np.minimum(index, np.uint32(len(values) - 1))])


def bitcast_to(v: Value, dst: DType) -> Value:
    """``v``'s bits as ``dst`` (numpy's view); a NaN's are the canonical NaN's."""
    src = DTYPE_OF[v.dtype]
    bits = bits_of(v, src)
    if src.is_float:
        nan = np.isnan(v)
        if np.any(nan):
            bits = np.where(nan, bits.dtype.type(CANONICAL_NAN[src]), bits)
    return from_bits(bits, dst)


def cast_to(v: Value, dst: DType) -> Value:
    src = DTYPE_OF[v.dtype]
    if dst is DType.BOOL:
        return v if src is DType.BOOL else v != 0
    if src.is_float and dst.is_int:  # (the bounds as floats: 2^63 and 2^64 are exact)
        lo, hi = dst.int_range
        x = np.trunc(np.nan_to_num(np.asarray(v, np.float64), nan=0.0))
        over, under = x >= float(hi), x <= float(lo)
        inside = np.where(over | under, 0.0, x).astype(dst.value_np)
        return as_scalar(np.where(over, np.array(hi, dst.value_np),
                                np.where(under, np.array(lo, dst.value_np), inside)))
    if src.is_int and dst.is_int:  # (modulo 2^width: numpy's integer casts wrap so)
        return as_scalar(np.asarray(v).astype(dst.value_np))
    return as_scalar(np.asarray(v).astype(dst.value_np))
