"""Buffers and the workgroup: loads and stores (out of bounds: 0 read, stores dropped;
NaNs stored canonical), the stop words a kernel looks at, the least and the most of two
numbers, a workgroup's arrays, atomics and subgroup operations."""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from vyre_cpu.runtime.base import _FAST, F32_NAN, F64_NAN
from vyre_cpu.runtime.ints import wrap_i32

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
