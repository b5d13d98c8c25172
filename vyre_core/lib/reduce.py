"""Reductions: sum, prod, min, max, mean, argmin, argmax, dot, norm.

Each runs the passes of ``passes.py`` as one sequence (one request; the partial results
stay in the worker) on the routed or named backend, and returns what numpy's function of
the same name returns: a numpy scalar over every element, an array over one axis. The
order of every operation is the tree of docs/lib.md, the same on every backend, so the
result is the same bytes on each.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre_core.errors import InvalidInputError
from vyre_core.lib import steps
from vyre_core.lib.args import DTYPES, Split, as_input, split
from vyre_core.sequence import Sequence, SequenceBuilder

#: What each reduction of an empty axis gives, where it is defined (numpy's identity).
_EMPTY = {"sum": 0, "prod": 1, "square_sum": 0}


@functools.lru_cache(maxsize=512)
def _sequence(name: str, dtype: np.dtype, outer: int, n: int, inner: int) -> Sequence:
    """The passes of reduction ``name`` over ``(outer, n, inner)`` as one sequence,
    built once per shape (the kernels compile once per dtype)."""
    b = SequenceBuilder()
    b.input("x", DTYPES[dtype], outer * n * inner)
    if name == "dot":
        b.input("y", DTYPES[dtype], outer * n * inner)
    result = steps.reduction(b, name, "x", shape=(outer, n, inner), axis=1,
                             other="y" if name == "dot" else None, name="result")
    return b.build(returns=[result])


def _run(drv: Any, name: str, arrays: list[np.ndarray], where: Split,
         backend: str | None) -> list[np.ndarray]:
    seq = _sequence(name, arrays[0].dtype, where.outer, where.n, where.inner)
    got = drv.dispatch(seq, [a.reshape(-1) for a in arrays], backend=backend)
    return [np.array(a).reshape(where.shape) for a in got]


def _result(values: np.ndarray) -> Any:
    """numpy's form: a scalar for a reduction of every element, else the array."""
    return values[()] if values.ndim == 0 else values


def _reduce(drv: Any, name: str, x: Any, axis: Any, backend: str | None,
            floats_only: bool = False) -> Any:
    array = as_input(x, "x", floats_only)
    where = split(array.shape, axis)
    if where.n == 0:
        if name not in _EMPTY:
            raise InvalidInputError(
                f"{name} of an empty {'array' if axis is None else 'axis'} (shape "
                f"{array.shape}) has no value", "Check x.size (or x.shape[axis]) before "
                "calling, or use lib.sum / lib.prod, which give 0 and 1 there.")
        return _result(np.full(where.shape, _EMPTY[name], array.dtype))
    arg = steps.REDUCTIONS[name].arg
    if where.outer * where.inner == 0:
        return np.empty(where.shape, np.intp if arg else array.dtype)
    got, = _run(drv, name, [array], where, backend)
    return _result(got.astype(np.intp) if arg else got)


def sum(drv: Any, x: Any, axis: int | None = None, *, backend: str | None = None) -> Any:
    """The sum of ``x``'s elements (along ``axis``), in its dtype: integers wrap, as
    ``numpy.sum(x, dtype=x.dtype)``; an empty sum is 0."""
    return _reduce(drv, "sum", x, axis, backend)


def prod(drv: Any, x: Any, axis: int | None = None, *, backend: str | None = None) -> Any:
    """The product, in ``x``'s dtype (integers wrap); an empty product is 1."""
    return _reduce(drv, "prod", x, axis, backend)


def max(drv: Any, x: Any, axis: int | None = None, *, backend: str | None = None) -> Any:
    """The greatest element; NaN where any element is NaN (numpy's rule)."""
    return _reduce(drv, "max", x, axis, backend)


def min(drv: Any, x: Any, axis: int | None = None, *, backend: str | None = None) -> Any:
    """The least element; NaN where any element is NaN."""
    return _reduce(drv, "min", x, axis, backend)


def argmax(drv: Any, x: Any, axis: int | None = None, *, backend: str | None = None) -> Any:
    """The index (along ``axis``, or into the flattened array) of the first greatest
    element, or of the first NaN (numpy's), as ``numpy.intp``."""
    return _reduce(drv, "argmax", x, axis, backend)


def argmin(drv: Any, x: Any, axis: int | None = None, *, backend: str | None = None) -> Any:
    """The index of the first least element, or of the first NaN."""
    return _reduce(drv, "argmin", x, axis, backend)


def mean(drv: Any, x: Any, axis: int | None = None, *, backend: str | None = None) -> Any:
    """``sum`` divided by the count, in float64 then rounded to ``x``'s dtype (numpy's
    division for float32 and float64). Floats only."""
    array = as_input(x, "x", floats_only=True)
    count = split(array.shape, axis).n
    if count == 0:
        raise InvalidInputError(
            f"mean of an empty {'array' if axis is None else 'axis'} (shape {array.shape}) "
            "has no value (numpy warns and gives NaN)",
            "Check x.size (or x.shape[axis]) before calling.")
    total = _reduce(drv, "sum", array, axis, backend)
    return _result((np.asarray(total, np.float64) / count).astype(array.dtype))


def dot(drv: Any, x: Any, y: Any, *, backend: str | None = None) -> Any:
    """The inner product of two 1-D arrays of one length and dtype: the sum (in the
    order of ``sum``) of the rounded products ``x[k] * y[k]``; 0 when empty."""
    a, b = as_input(x, "x"), as_input(y, "y")
    if a.ndim != 1 or b.ndim != 1 or a.shape != b.shape or a.dtype != b.dtype:
        raise InvalidInputError(
            f"dot takes two 1-D arrays of one length and dtype; got shapes {a.shape} and "
            f"{b.shape}, dtypes {a.dtype} and {b.dtype}",
            "Pass two vectors of equal length and dtype (x.ravel(), y.astype(x.dtype)); "
            "for a product of matrices use lib.matmul.")
    where = split(a.shape, None)
    if where.n == 0:
        return a.dtype.type(0)
    return _result(_run(drv, "dot", [a, b], where, backend)[0])


def norm(drv: Any, x: Any, axis: int | None = None, *, backend: str | None = None) -> Any:
    """The Euclidean norm: the square root (numpy's, correctly rounded) of the sum of the
    rounded squares, in ``x``'s dtype. Floats only; 0 when empty."""
    squares = _reduce(drv, "square_sum", x, axis, backend, floats_only=True)
    return np.sqrt(squares)


__all__ = ["argmax", "argmin", "dot", "max", "mean", "min", "norm", "prod", "sum"]
