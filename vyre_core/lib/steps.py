"""vyre.lib's reductions as steps of the caller's own sequence.

``lib.steps.sum(b, "x")`` adds the passes of docs/lib.md to the SequenceBuilder ``b``
and returns the name of the buffer that will hold the result, so a reduction of a buffer
an earlier step computed, or of a resident buffer, runs in the same request as the rest
of the sequence: no round trip, no copy out. The order is the one ``lib.sum`` uses (the
functions of ``reduce`` are built on these), so the bytes are the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vyre_core.errors import InvalidInputError
from vyre_core.ir.dtypes import DType
from vyre_core.kernels import KernelFunction
from vyre_core.lib import histogram, passes, scan, sorts
from vyre_core.lib.args import buffer_split
from vyre_core.lib.matmul import add as _matmul
from vyre_core.lib.transpose import add as _transpose
from vyre_core.sequence import SequenceBuilder


@dataclass(frozen=True)
class _Reduction:
    """A reduction as its passes: ``first`` reads the source (two for dot), ``rest`` the
    partials; ``arg`` ones carry an index array beside the values."""

    first: KernelFunction
    rest: KernelFunction
    arg: bool = False
    greater: bool = True  # (arg ones: argmax's order, else argmin's)


REDUCTIONS = {
    "sum": _Reduction(passes.sum_pass, passes.sum_pass),
    "prod": _Reduction(passes.prod_pass, passes.prod_pass),
    "max": _Reduction(passes.max_pass, passes.max_pass),
    "min": _Reduction(passes.min_pass, passes.min_pass),
    "square_sum": _Reduction(passes.square_sum_pass, passes.sum_pass),
    "dot": _Reduction(passes.dot_pass, passes.sum_pass),
    "argmax": _Reduction(passes.arg_first, passes.arg_next, arg=True),
    "argmin": _Reduction(passes.arg_first, passes.arg_next, arg=True, greater=False),
}


def reduction(b: SequenceBuilder, op: str, source: str, *, shape: Any = None,
              axis: int | None = None, other: str | None = None,
              name: str | None = None) -> str:
    """Add reduction ``op``'s passes over the declared buffer ``source`` (seen as
    ``shape``, default flat; ``other`` is dot's second vector) to ``b``; the name of the
    transient that holds the result (flat: one element per element of numpy's result;
    for argmax/argmin the i32 indices). Its passes' transients are named after it."""
    red = REDUCTIONS[op]
    given, where = buffer_split(b, source, shape, axis)
    dtype = given.dtype
    if other is not None and (b.buffer(other).dtype, b.buffer(other).count) != \
            (dtype, given.count):
        raise InvalidInputError(
            f"dot of {source!r} and {other!r}: their dtypes or lengths differ",
            "Reduce two buffers of one dtype and length.")
    name = name or f"{source}_{op}"  # (never empty: a sequence buffer has an element)
    outer, inner = where.outer, where.inner
    at = None
    for level, (count, m) in enumerate(passes.levels(where.n)):
        last = m == 1
        out = b.transient(name if last and not red.arg else f"{name}_pass{level}",
                          dtype, outer * m * inner)
        bind: dict[str, Any] = {"x": source, "n": count, "m": m, "inner": inner}
        if other is not None and level == 0:
            bind["y"] = other
        if red.arg:  # (values as best, their indices as at; the first pass makes them)
            index = b.transient(name if last else f"{name}_index{level}", DType.I32,
                                outer * m * inner)
            bind.update({"best": out, "at": index})
            if at is not None:
                bind["xat"] = at
            at = index
        else:
            bind["out"] = out
        for blocks, params in passes.steps(count):  # (a step a kind of block: 1 or 2)
            b.step(red.first if level == 0 else red.rest, {**bind, **params},
                   dim=(params["parts"] * inner, blocks, outer),
                   constants={"GREATER": red.greater} if red.arg else None)
        source = out
    return name


def sum(b: SequenceBuilder, source: str, *, shape: Any = None, axis: int | None = None,
        name: str | None = None) -> str:
    """The sum of ``source``'s elements (along ``axis`` of ``shape``), as ``lib.sum``."""
    return reduction(b, "sum", source, shape=shape, axis=axis, name=name)


def prod(b: SequenceBuilder, source: str, *, shape: Any = None, axis: int | None = None,
         name: str | None = None) -> str:
    """The product, as ``lib.prod``."""
    return reduction(b, "prod", source, shape=shape, axis=axis, name=name)


def max(b: SequenceBuilder, source: str, *, shape: Any = None, axis: int | None = None,
        name: str | None = None) -> str:
    """The greatest element, as ``lib.max`` (NaN where any is)."""
    return reduction(b, "max", source, shape=shape, axis=axis, name=name)


def min(b: SequenceBuilder, source: str, *, shape: Any = None, axis: int | None = None,
        name: str | None = None) -> str:
    """The least element, as ``lib.min``."""
    return reduction(b, "min", source, shape=shape, axis=axis, name=name)


def argmax(b: SequenceBuilder, source: str, *, shape: Any = None, axis: int | None = None,
           name: str | None = None) -> str:
    """The i32 index of the first greatest element (or first NaN), as ``lib.argmax``."""
    return reduction(b, "argmax", source, shape=shape, axis=axis, name=name)


def argmin(b: SequenceBuilder, source: str, *, shape: Any = None, axis: int | None = None,
           name: str | None = None) -> str:
    """The i32 index of the first least element (or first NaN), as ``lib.argmin``."""
    return reduction(b, "argmin", source, shape=shape, axis=axis, name=name)


def dot(b: SequenceBuilder, x: str, y: str, *, name: str | None = None) -> str:
    """The inner product of two buffers of one dtype and length, as ``lib.dot``."""
    return reduction(b, "dot", x, other=y, name=name)


def cumsum(b: SequenceBuilder, source: str, *, shape: Any = None, axis: int | None = None,
           exclusive: bool = False, name: str | None = None) -> str:
    """The cumulative sum along ``axis`` of ``shape`` (None: the whole buffer), as
    ``lib.cumsum``: a transient of ``source``'s size."""
    return scan.add(b, source, shape=shape, axis=axis, exclusive=exclusive, name=name)


def sort(b: SequenceBuilder, source: str, *, shape: Any = None, axis: int | None = -1,
         name: str | None = None) -> str:
    """``source`` sorted along ``axis`` of ``shape`` (None: the whole buffer), as
    ``lib.sort``: a transient of the source's dtype and size."""
    return sorts.add(b, source, shape=shape, axis=axis, name=name)


def argsort(b: SequenceBuilder, source: str, *, shape: Any = None, axis: int | None = -1,
            name: str | None = None) -> str:
    """The indices that sort ``source`` along ``axis`` of ``shape``, as ``lib.argsort``:
    a transient of i32 (as ``argmax``'s), the source's size."""
    return sorts.add(b, source, shape=shape, axis=axis, arg=True, name=name)


def bincount(b: SequenceBuilder, source: str, bins: int, *, weights: str | None = None,
             name: str | None = None) -> str:
    """The counts of ``source``'s values ``0..bins-1`` (u32; others in no bin), or with
    ``weights`` their float64 sums, as ``lib.bincount``: a transient of ``bins``."""
    return histogram.add(b, source, bins, weights=weights, name=name)


def matmul(b: SequenceBuilder, x: str, y: str, *, m: int, k: int, n: int, batch: int = 1,
           name: str | None = None) -> str:
    """The product of ``x`` as ``(batch, m, k)`` and ``y`` as ``(batch, k, n)``, as
    ``lib.matmul``: a transient of ``batch * m * n``."""
    return _matmul(b, x, y, m=m, k=k, n=n, batch=batch, name=name)


def transpose(b: SequenceBuilder, source: str, *, shape: Any, axes: Any = None,
              name: str | None = None) -> str:
    """``source`` seen as ``shape``, transposed by ``axes``, as ``lib.transpose``: a
    transient of the source's size."""
    return _transpose(b, source, shape=shape, axes=axes, name=name)


__all__ = ["argmax", "argmin", "argsort", "bincount", "cumsum", "dot", "matmul", "max", "min",
           "prod", "reduction", "sort", "sum", "transpose"]
