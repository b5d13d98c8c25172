"""The functions a builder's user calls on values (``ir.select``, ``ir.fma``, ``ir.table``,
``ir.global_id``, ``ir.min``, ``ir.sqrt``, ...), each one IR node over ``values.py``'s
operands: apart from the values because nothing there calls them, so the library grows
here without touching how a value behaves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre_core.ir import typerules
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    MAX_TABLE,
    BinOp,
    Fma,
    IdKind,
    InvocationId,
    Select,
    Table,
    UnOp,
)
from vyre_core.ir.values import (
    _NUMPY_DTYPES,
    Operand,
    Val,
    as_val,
    binary,
    unary,
)


def table(values: Any, index: Operand, dtype: DType | None = None) -> Val:
    """Element ``index`` (u32) of the constant array ``values``, 0 past its end (as a
    load): ``ir.table([1.0, 0.5, 0.25], i, ir.f32)``. A numpy array keeps its type;
    Python numbers take ``dtype``, floats rounded to it as literals are."""
    if dtype is None:
        dtype = _NUMPY_DTYPES.get(getattr(values, "dtype", None))
        if dtype is None:
            raise TypeError("ir.table(values, index) of Python numbers needs their type. "
                            "Fix: pass dtype, e.g. ir.table(values, i, ir.f32), or a numpy "
                            "array of a vyre type")
    if dtype is DType.BOOL:
        raise TypeError("a table of bool. Fix: a table of u32 0s and 1s, compared with != 0")
    elements = np.ravel(values).tolist() if isinstance(values, np.ndarray) else list(values)
    if not 1 <= len(elements) <= MAX_TABLE:
        raise ValueError(f"a table of {len(elements)} values. Fix: give it 1 to {MAX_TABLE} "
                         "values; a larger array belongs in a buffer")
    try:
        bits = tuple(dtype.to_bits(v) for v in elements)
    except TypeError as exc:
        raise TypeError(f"a table of {dtype.value}: {exc}. Fix: give it "
                        f"{'ints' if dtype.is_int else 'numbers'} only") from None
    i = as_val(index, DType.U32)
    return Val.of(Table(dtype, bits, i.node), dtype, i)


def select(cond: Operand, if_true: Operand, if_false: Operand) -> Val:
    """``if_true`` where ``cond`` holds, else ``if_false`` (both evaluated)."""
    c = as_val(cond, DType.BOOL)
    t = as_val(if_true, if_false.dtype if isinstance(if_false, Val) else None)
    f = as_val(if_false, t.dtype)
    return Val.of(Select(c.node, t.node, f.node), t.dtype if t.dtype is f.dtype else None,
                  c, t, f)


def fma(a: Operand, b: Operand, c: Operand) -> Val:
    """``a * b + c`` for floats, fused or not (see docs/semantics.md)."""
    like = next((v.dtype for v in (a, b, c) if isinstance(v, Val)), None)
    va, vb, vc = (as_val(v, like) for v in (a, b, c))
    return Val.of(Fma(va.node, vb.node, vc.node),
                  None if None in (va.dtype, vb.dtype, vc.dtype)
                  else typerules.fma_result(va.dtype, vb.dtype, vc.dtype), va, vb, vc)


def _id(kind: IdKind, axis: int) -> Val:
    return Val(InvocationId(kind, axis), DType.U32)


def global_id(axis: int = 0) -> Val:
    """Global invocation id along ``axis`` (u32)."""
    return _id(IdKind.GLOBAL, axis)


def local_id(axis: int = 0) -> Val:
    """Invocation id within the workgroup along ``axis`` (u32)."""
    return _id(IdKind.LOCAL, axis)


def workgroup_id(axis: int = 0) -> Val:
    """Workgroup id along ``axis`` (u32)."""
    return _id(IdKind.WORKGROUP, axis)


def min(a: Operand, b: Operand) -> Val:
    return binary(BinOp.MIN, a, b)


def max(a: Operand, b: Operand) -> Val:
    return binary(BinOp.MAX, a, b)


def logical_and(a: Operand, b: Operand) -> Val:
    return binary(BinOp.LOGICAL_AND, a, b)


def logical_or(a: Operand, b: Operand) -> Val:
    return binary(BinOp.LOGICAL_OR, a, b)


def logical_not(a: Operand) -> Val:
    return unary(UnOp.NOT, a)


def sqrt(x: Operand) -> Val: return unary(UnOp.SQRT, x)
def exp(x: Operand) -> Val: return unary(UnOp.EXP, x)
def log(x: Operand) -> Val: return unary(UnOp.LOG, x)
def sin(x: Operand) -> Val: return unary(UnOp.SIN, x)
def cos(x: Operand) -> Val: return unary(UnOp.COS, x)
def tan(x: Operand) -> Val: return unary(UnOp.TAN, x)
def tanh(x: Operand) -> Val: return unary(UnOp.TANH, x)
def exp2(x: Operand) -> Val: return unary(UnOp.EXP2, x)
def log2(x: Operand) -> Val: return unary(UnOp.LOG2, x)
def pow(x: Operand, y: Operand) -> Val: return binary(BinOp.POW, x, y)
def atan2(y: Operand, x: Operand) -> Val: return binary(BinOp.ATAN2, y, x)
def floor(x: Operand) -> Val: return unary(UnOp.FLOOR, x)
def ceil(x: Operand) -> Val: return unary(UnOp.CEIL, x)
def popcount(x: Operand) -> Val: return unary(UnOp.POPCOUNT, x)
def round(x: Operand) -> Val: return unary(UnOp.ROUND, x)
def trunc(x: Operand) -> Val: return unary(UnOp.TRUNC, x)
def isnan(x: Operand) -> Val: return unary(UnOp.ISNAN, x)
def isinf(x: Operand) -> Val: return unary(UnOp.ISINF, x)
def clz(x: Operand) -> Val: return unary(UnOp.CLZ, x)
def ctz(x: Operand) -> Val: return unary(UnOp.CTZ, x)
def bit_reverse(x: Operand) -> Val: return unary(UnOp.BIT_REVERSE, x)
def rotl(x: Operand, n: Operand) -> Val: return binary(BinOp.ROTL, x, n)
def rotr(x: Operand, n: Operand) -> Val: return binary(BinOp.ROTR, x, n)
def mulhi(a: Operand, b: Operand) -> Val: return binary(BinOp.MULHI, a, b)
def add_sat(a: Operand, b: Operand) -> Val: return binary(BinOp.ADD_SAT, a, b)
def sub_sat(a: Operand, b: Operand) -> Val: return binary(BinOp.SUB_SAT, a, b)
