"""A function's exception list: the few inputs its fast path rounds the wrong way (found by
running every input against the oracle: tools/math_exceptions.py), each with its correctly
rounded result, looked up without a branch.

The inputs' bits are a sorted ``table`` padded to a power of two with 0xFFFFFFFF, which no
bitcast of an f32 gives (a NaN reads as the canonical NaN's bits); a bisection of
``log2(size)`` steps finds the last key not above the input, and the result is the listed
one where that key is the input itself.
"""

from __future__ import annotations

import numpy as np

from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.expressions import select, table
from vyre_core.ir.values import Val, bitcast, lit


def corrected(k: Kernel, x: Val, rounded: Val, inputs: list[int], results: list[int]) -> Val:
    """``rounded``, or the listed result where the f32 ``x`` is a listed input (``inputs``
    the sorted bits, ``results`` the bits of their correctly rounded results); an empty
    list is no lookup (how tools/math_exceptions.py makes a list: with it emptied)."""
    if not inputs and not results:
        return rounded
    if list(inputs) != sorted(set(inputs)) or len(inputs) != len(results):
        raise ValueError("an exception list is its inputs' bits, sorted and distinct, and one "
                         "result per input. Fix: make it with tools/math_exceptions.py")
    size = 1 << (len(inputs) - 1).bit_length()
    keys = np.full(size, 0xFFFFFFFF, np.uint32)
    keys[: len(inputs)] = inputs
    bits = k.let(k.fresh_name("exc"), bitcast(x, DType.U32))
    at = lit(0, DType.U32)
    step = size // 2
    while step:
        at = k.let(k.fresh_name("exc"), select(table(keys, at + step) <= bits, at + step, at))
        step //= 2
    listed = np.array(results, np.uint32).view(np.float32)
    return select(table(keys, at) == bits, table(listed, at), rounded)
