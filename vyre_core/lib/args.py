"""Checks every vyre.lib function makes of its arguments, before any work.

One rule each: which dtypes a primitive takes, what an axis means, what a shape is
viewed as. Each refusal is an ``InvalidInputError`` with a Fix (docs/lib.md, "Refusals").
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre_core.errors import InvalidInputError
from vyre_core.ir.dtypes import DType
from vyre_core.sequence import SequenceBuffer, SequenceBuilder

#: The dtypes vyre.lib computes in, and their IR types.
DTYPES: dict[np.dtype, DType] = {np.dtype(t.value_np): t for t in (
    DType.F16, DType.F32, DType.F64, DType.I32, DType.U32)}

#: The most elements one call takes: every index in a pass is an i32.
MAX_ELEMENTS = 2**31 - 1


def as_input(x: Any, name: str, floats_only: bool = False) -> np.ndarray:
    """``x`` as a C-contiguous numpy array of a dtype vyre.lib computes in (an array of
    ``Driver.empty``/``asarray`` stays itself, so it crosses without a copy)."""
    array = np.asarray(x)
    kinds = "f" if floats_only else "fiu"
    if array.dtype not in DTYPES or array.dtype.kind not in kinds:
        allowed = ", ".join(str(d) for d in DTYPES if d.kind in kinds)
        raise InvalidInputError(
            f"{name} has dtype {array.dtype}, which this function does not compute in",
            f"Pass an array of {allowed}; convert it first, as x.astype(np.float32) does "
            "for an array x.")
    if array.size > MAX_ELEMENTS:
        raise InvalidInputError(
            f"{name} has {array.size} elements; a vyre.lib call takes at most {MAX_ELEMENTS}",
            "Reduce it in parts (slices of at most 2**31 - 1 elements) and combine those.")
    return np.ascontiguousarray(array)


@dataclass(frozen=True)
class Split:
    """An array seen as ``(outer, n, inner)`` around the axis reduced (``n`` its length),
    and the shape of the result."""

    outer: int
    n: int
    inner: int
    shape: tuple[int, ...]


def split(shape: tuple[int, ...], axis: Any) -> Split:
    """The view of ``shape`` reduced along ``axis`` (None: every element), numpy's rules
    for a negative axis."""
    if axis is None:
        return Split(1, math.prod(shape), 1, ())
    ndim = len(shape)
    try:
        k = operator.index(axis)
    except TypeError:
        raise InvalidInputError(
            f"axis={axis!r} is not one axis", "Pass one int axis, or axis=None for every "
            "element (to reduce several axes, reduce one after another, or reshape first)."
        ) from None
    if not -ndim <= k < ndim:
        raise InvalidInputError(
            f"axis {k} is out of range for an array of {ndim} dimensions",
            f"Pass an axis from {-ndim} to {ndim - 1}, or axis=None for every element."
            if ndim else "A 0-d array has no axis: pass axis=None.")
    k %= ndim
    return Split(math.prod(shape[:k]), shape[k], math.prod(shape[k + 1:]),
                 shape[:k] + shape[k + 1:])


def buffer_split(b: SequenceBuilder, source: str, shape: Any,
                 axis: Any) -> tuple[SequenceBuffer, Split]:
    """The declared buffer ``source`` of a ``lib.steps`` call, and its view seen as
    ``shape`` (None: flat) reduced or scanned along ``axis``: a buffer of a dtype vyre.lib
    does not compute in, or a shape that is not its count, is refused."""
    given = b.buffer(source)
    if given.dtype not in DTYPES.values():
        allowed = ", ".join(t.value for t in DTYPES.values())
        raise InvalidInputError(f"buffer {source!r} is {given.dtype.value}, which vyre.lib "
                                "does not compute in", f"Pass a buffer of {allowed}.")
    shape = (given.count,) if shape is None else tuple(shape)
    if math.prod(shape) != given.count:
        raise InvalidInputError(
            f"shape {shape} has {math.prod(shape)} elements; buffer {source!r} has "
            f"{given.count}", "Pass the shape the buffer's elements are laid out in "
            "(numpy's order), or leave shape out for a flat buffer.")
    return given, split(shape, axis)
