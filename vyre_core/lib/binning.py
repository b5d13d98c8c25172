"""numpy.histogram's bins, worked out on the host before any work.

numpy (``numpy/lib/_histograms_impl.py``) finds a value's bin with a handful of scalar
operations whose dtypes follow from the types of ``range``'s edges and of the data
(NEP 50: a Python number adapts to the array, a numpy scalar does not): it keeps the
values ``first <= v <= last``, compared in ``result_type(x, edge)``; casts them to the
bin type (``result_type(first, last, x)``, float64 for integers); computes
``int((v - first) / (last - first) * bins)`` (the subtraction in one dtype, the division
and product in another); then moves the index down where ``v`` is below its bin's lower
edge and up where it reaches the next edge (the last bin closed). ``uniform`` returns
each scalar in the dtype numpy computes with, so a kernel doing the same operations in
those dtypes (``histogram.bin_index``) puts every value in numpy's bin.
``given_edges`` checks edges of the caller's and casts them to the dtype numpy's
``searchsorted`` compares values with them in.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre_core.errors import InvalidInputError
from vyre_core.lib.args import DTYPES, MAX_ELEMENTS


@dataclass(frozen=True)
class Uniform:
    """numpy's uniform bins for one call: ``edges`` (numpy's ``bin_edges``), and the
    one-element arrays the kernel reads: ``lo``, ``hi`` (the range's edges in the dtypes
    a value is compared with them in), ``first`` (the first edge in the subtraction's
    dtype) and ``scale`` (``last - first`` and the bin count, in the division's)."""

    edges: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    first: np.ndarray
    scale: np.ndarray

    @property
    def bins(self) -> int:
        return self.edges.size - 1


def count(bins: Any) -> int:
    """The number of bins an int ``bins`` asks for; anything else is refused."""
    if isinstance(bins, str) or np.ndim(bins) != 0:
        what = "an estimator name" if isinstance(bins, str) else \
            f"an array of {np.ndim(bins)} dimensions"
        raise InvalidInputError(
            f"bins={bins!r}: lib.histogram takes a number of uniform bins or a 1-D "
            f"sequence of edges, not {what}",
            "Pass an int bins (and range= for their span), or the edges as a 1-D "
            "array; for numpy's estimators, numpy.histogram_bin_edges(x, 'auto') gives "
            "edges to pass.")
    try:
        n = operator.index(bins)
    except TypeError:
        raise InvalidInputError(f"bins={bins!r} is not an int",
                                "Pass a whole number of bins, as bins=10.") from None
    if not 1 <= n <= MAX_ELEMENTS - 1:
        raise InvalidInputError(
            f"bins={n}: the number of bins must be from 1 to {MAX_ELEMENTS - 1} (numpy: "
            "'`bins` must be positive, when an integer')", "Pass bins >= 1.")
    return n


def outer_edges(a: np.ndarray, range: Any) -> tuple[Any, Any]:
    """numpy's ``_get_outer_edges``: ``range``, else the data's least and greatest
    values (0 and 1 when empty), widened by 0.5 each way when they are equal; its
    ValueErrors as InvalidInputErrors with a Fix."""
    if range is not None:
        try:
            first, last = range
        except (TypeError, ValueError):
            raise InvalidInputError(f"range={range!r} is not a pair",
                                    "Pass range=(low, high), or leave it out.") from None
        if first > last:
            raise InvalidInputError(
                f"range={range!r}: its low edge is above its high one (numpy: 'max must be "
                "larger than min in range parameter')", "Pass range=(low, high), low <= high.")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise InvalidInputError(
                f"supplied range of [{first}, {last}] is not finite",
                "Pass finite edges; values outside them (inf, NaN) are not counted.")
    elif a.size == 0:
        first, last = 0, 1
    else:
        first, last = a.min(), a.max()
        if not (np.isfinite(first) and np.isfinite(last)):
            raise InvalidInputError(
                f"autodetected range of [{first}, {last}] is not finite (x holds an "
                "infinity or NaN)", "Pass range=(low, high) with finite edges: values "
                "outside it, NaN included, are not counted; or drop them first, as "
                "x[np.isfinite(x)] does.")
    if first == last:
        first, last = first - 0.5, last + 0.5
    return first, last


def _unsigned_subtract(a: Any, b: Any) -> Any:
    """numpy's: ``a - b`` for ``a >= b``, a signed integer type's difference taken in its
    unsigned twin (so it cannot overflow)."""
    dt = np.result_type(a, b)
    unsigned = {np.dtype(np.int8): np.uint8, np.dtype(np.int16): np.uint16,
                np.dtype(np.int32): np.uint32, np.dtype(np.int64): np.uint64}.get(dt)
    if unsigned is None:
        return np.subtract(a, b, dtype=dt)
    return np.subtract(np.asarray(a, dtype=dt), np.asarray(b, dtype=dt), casting="unsafe",
                       dtype=unsigned)


def _compared(a: np.ndarray, edge: Any) -> np.ndarray:
    """``edge`` as the dtype ``a >= edge`` compares in. For integer data that is float64
    here (exact: an int32/uint32 value against a float64 edge decides as against the
    edge itself), so an integer edge of any size compares correctly."""
    dtype = np.float64 if a.dtype.kind in "iu" else np.result_type(a, edge)
    return np.array([edge], dtype=dtype)


def given_edges(a: np.ndarray, bins: Any) -> tuple[np.ndarray, np.ndarray]:
    """numpy.histogram's edges for a 1-D sequence ``bins`` (its own array, returned as
    numpy returns it), and the same edges in the dtype a value is compared with them in
    (numpy's ``searchsorted``: the two dtypes' common one; float64 for integer data,
    where that decides every comparison as the integers themselves would)."""
    edges = np.asarray(bins)
    if edges.dtype.kind not in "iuf":
        raise InvalidInputError(f"bins has dtype {edges.dtype}, not numbers",
                                "Pass the edges as an array of floats or ints.")
    if edges.size - 1 > MAX_ELEMENTS - 1:
        raise InvalidInputError(f"bins has {edges.size} edges; a vyre.lib call makes at "
                                f"most {MAX_ELEMENTS - 1} bins", "Pass fewer edges.")
    if edges.dtype.kind == "f" and np.isnan(edges).any():
        raise InvalidInputError("bins holds a NaN edge", "Pass edges that are numbers.")
    if np.any(edges[:-1] > edges[1:]):
        raise InvalidInputError(
            "bins must increase monotonically (numpy: '`bins` must increase monotonically, "
            "when an array')", "Sort the edges: np.sort(edges) (equal edges make empty "
            "bins).")
    compared = np.float64 if a.dtype.kind in "iu" else np.result_type(a.dtype, edges.dtype)
    found = edges.astype(compared)
    if found.dtype not in DTYPES:
        raise InvalidInputError(
            f"edges of dtype {edges.dtype} would be compared in {found.dtype}, which vyre.lib "
            "does not compute in", "Pass the edges as float64.")
    return edges, found


def uniform(a: np.ndarray, bins: Any, range: Any) -> Uniform:
    """numpy.histogram's bins for the flat array ``a``, ``bins`` an int (numpy's
    ``_get_bin_edges``), and the scalars of its fast path in the dtypes it uses."""
    n = count(bins)
    first, last = outer_edges(a, range)
    bin_type = np.result_type(first, last, a)
    if np.issubdtype(bin_type, np.integer):
        bin_type = np.result_type(bin_type, float)
    with np.errstate(over="ignore", invalid="ignore"):
        edges = np.linspace(first, last, n + 1, endpoint=True, dtype=bin_type)
    if np.any(edges[:-1] >= edges[1:]):
        raise InvalidInputError(
            f"Too many bins for data range. Cannot create {n} finite-sized bins (numpy's "
            f"words: {edges.dtype} has too few values between {first} and {last})",
            "Pass fewer bins, a wider range=, or the data as float64.")
    denom = _unsigned_subtract(last, first)
    sub_type = np.result_type(np.zeros(0, bin_type), first)
    div_type = np.result_type(np.zeros(0, sub_type), denom)
    found = Uniform(edges, _compared(a, first), _compared(a, last),
                    np.array([first], sub_type), np.array([denom, n], div_type))
    odd = [str(v.dtype) for v in (found.edges, found.lo, found.hi, found.first, found.scale)
           if v.dtype not in DTYPES]
    if odd:
        raise InvalidInputError(
            f"range={range!r}: numpy would compute these bins in {odd[0]}, which vyre.lib "
            "does not compute in", "Pass range's edges as Python floats (or float64).")
    return found


__all__ = ["Uniform", "count", "given_edges", "outer_edges", "uniform"]
