"""Histograms: ``lib.bincount`` and ``lib.histogram`` (uniform bins), numpy's results.

The order (docs/lib.md, "Histograms"): the ``n`` values are cut into chunks of ``CHUNK``
consecutive values (numpy.histogram's own block of 65,536). One invocation takes one
chunk: it adds 1 (a count) or the value's weight as float64 (a weighted sum) to its own
row of partial bins, value after value, each bin starting at +0.0. That is
``numpy.bincount``'s own order within the chunk. Then each bin adds its chunks' partials
left to right to a running sum from 0, in the result's dtype (each float64 partial
rounded to it first): ``numpy.histogram``'s order for its blocks. The chunks run in
rounds of at most ``PARTIALS // bins`` (a sequence loop), which bounds the partials'
memory. Counts are exact in any order; a weighted sum is the same bytes on every
backend. ``lib.histogram`` first finds each value's bin, -1 outside the range: for
uniform bins with numpy's operations in numpy's dtypes (``binning.py``), for edges of the
caller's by bisection in the dtype numpy's ``searchsorted`` compares in.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

import vyre_core as vyre
from vyre_core import f64, i32, u32
from vyre_core.errors import InvalidInputError
from vyre_core.ir.dtypes import DType
from vyre_core.kernels import KernelFunction
from vyre_core.lib import binning
from vyre_core.lib.args import DTYPES, MAX_ELEMENTS, as_input
from vyre_core.sequence import Sequence, SequenceBuilder

#: Invocations per workgroup: a chunk pass has few (one per chunk), so small workgroups
#: let a device share them out.
WORKGROUP = 64
#: The values a chunk takes: numpy.histogram's block, so its weighted sums are lib's bytes.
CHUNK = 65536
#: The most partial bins one round of chunks holds (chunks x bins), unless one chunk's row
#: of bins is already more: 4 Mi (16 MiB of counts, 32 MiB of float64 sums).
PARTIALS = 1 << 22


def rounds(n: int, bins: int) -> tuple[int, int]:
    """``(chunks, per_round)``: the chunks of ``n`` values, and how many of them one round
    counts (as many as ``PARTIALS`` partial bins hold, at least one)."""
    chunks = -(-n // CHUNK)
    return chunks, max(1, min(chunks, PARTIALS // bins))


@vyre.func
def count_in(parts, row, b, bins):
    """One more in bin ``b`` of the row starting at ``row``; none outside the bins (so
    a value cannot reach another chunk's row)."""
    if 0 <= b < bins:
        parts[row + b] += u32(1)


@vyre.func
def add_in(parts, row, b, bins, weight):
    """``weight``, as float64, added to bin ``b`` of the row (none outside the bins)."""
    if 0 <= b < bins:
        parts[row + b] += f64(weight)


@vyre.kernel(workgroup=(WORKGROUP,))
def chunk_counts(x, parts: vyre.Array[u32], n: i32, chunks: i32, bins: i32, per: i32,
                 k: i32):
    """Chunk ``k * per + r``'s counts into row ``r`` of ``parts``, in its values' order,
    two a loop pass (wgpu stops an invocation after 65,535 passes); a bin outside
    ``[0, bins)`` (a histogram's -1 for a value outside its range) is skipped."""
    r = vyre.global_id(0)
    c = k * per + r
    if c < chunks:
        start = c * CHUNK
        count = min(CHUNK, n - start)
        for j in range(count // 2):
            count_in(parts, r * bins, i32(x[start + 2 * j]), bins)
            count_in(parts, r * bins, i32(x[start + 2 * j + 1]), bins)
        if count % 2 == 1:
            count_in(parts, r * bins, i32(x[start + count - 1]), bins)


@vyre.kernel(workgroup=(WORKGROUP,))
def chunk_sums(x, w, parts: vyre.Array[f64], n: i32, chunks: i32, bins: i32, per: i32,
               k: i32):
    """The same with each value's weight, as float64, added to its bin."""
    r = vyre.global_id(0)
    c = k * per + r
    if c < chunks:
        start = c * CHUNK
        count = min(CHUNK, n - start)
        for j in range(count // 2):
            at = start + 2 * j
            add_in(parts, r * bins, i32(x[at]), bins, w[at])
            add_in(parts, r * bins, i32(x[at + 1]), bins, w[at + 1])
        if count % 2 == 1:
            add_in(parts, r * bins, i32(x[start + count - 1]), bins, w[start + count - 1])


@functools.cache
def _combine(dtype: DType) -> KernelFunction:
    """The pass that adds a round's partials of bin ``g``, left to right, each cast to
    ``dtype`` (u32 counts; a weighted sum's dtype) first, to the bin's running sum (+0 at
    the start: a transient is zero-filled), and zeroes them for the next round."""
    W = dtype

    @vyre.kernel(workgroup=(256,))
    def combine(parts, out, per: i32, bins: i32):
        g = vyre.global_id(0)
        acc = out[g]
        for c in range(per):
            acc += W(parts[c * bins + g])
            parts[c * bins + g] = 0
        out[g] = acc

    return combine


@functools.cache
def _bin_index(lo_t: DType, hi_t: DType, bin_t: DType, sub_t: DType,
               div_t: DType) -> KernelFunction:
    """numpy.histogram's bin of each value (its fast path for uniform bins), -1 where the
    value is outside the range; each operation in the dtype numpy does it in."""
    LO, HI, B, S, Q = lo_t, hi_t, bin_t, sub_t, div_t

    @vyre.kernel(workgroup=(256,))
    def bin_index(x, lo, hi, edges, first, scale, out: vyre.Array[i32], bins: i32):
        g = vyre.global_id(0)
        v = x[g]
        at = -1
        if LO(v) >= lo[0] and HI(v) <= hi[0]:
            a = B(v)
            i = i32((Q(S(a) - first[0]) / scale[0]) * scale[1])
            if i == bins:
                i = bins - 1
            if a < edges[i]:
                i -= 1
            if a >= edges[i + 1] and i != bins - 1:
                i += 1
            at = i
        out[g] = at

    return bin_index


@functools.cache
def _edge_index(compared: DType) -> KernelFunction:
    """The bin of each value among edges of the caller's (sorted, ``bins + 1`` of them,
    in the dtype ``compared``): the ``i`` with ``edges[i] <= v < edges[i + 1]`` (the last
    bin closed: ``v <= edges[bins]``), found by bisection; -1 outside them (NaN too)."""
    C = compared

    @vyre.kernel(workgroup=(256,))
    def edge_index(x, edges, out: vyre.Array[i32], bins: i32):
        g = vyre.global_id(0)
        v = C(x[g])
        at = -1
        if edges[0] <= v and v <= edges[bins]:
            lo = 0
            hi = bins
            while lo < hi:  # (lo: how many of edges[0..bins-1] are <= v)
                mid = lo + (hi - lo) // 2  # (lo + hi could pass 2**31)
                if edges[mid] <= v:
                    lo = mid + 1
                else:
                    hi = mid
            at = lo - 1
        out[g] = at

    return edge_index


def _count_steps(b: SequenceBuilder, indices: str, n: int, bins: int, weights: str | None,
                 out: DType, name: str = "result") -> str:
    """The rounds of the chunk pass over the bins ``indices`` (with the buffer
    ``weights``, if any), each followed by the combining pass into the transient ``name``
    of ``out``s (its partials: ``<name>_parts``); returns ``name``."""
    chunks, per = rounds(n, bins)
    parts = b.transient(f"{name}_parts", DType.U32 if weights is None else DType.F64,
                        per * bins)
    result = b.transient(name, out, bins)
    sizes = {"n": n, "chunks": chunks, "bins": bins, "per": per}

    def one_round(k: Any) -> None:
        if weights is None:
            b.step(chunk_counts, {"x": indices, "parts": parts, "k": k, **sizes}, dim=per)
        else:
            b.step(chunk_sums, {"x": indices, "w": weights, "parts": parts, "k": k,
                                **sizes}, dim=per)
        b.step(_combine(out), {"parts": parts, "out": result, "per": per, "bins": bins},
               dim=bins)

    if per == chunks:
        one_round(0)
    else:
        with b.loop(times=-(-chunks // per)) as k:
            one_round(k)
    return result


def add(b: SequenceBuilder, source: str, bins: int, *, weights: str | None = None,
        name: str | None = None) -> str:
    """Add ``lib.bincount``'s passes over the declared int32/uint32 buffer ``source`` to
    ``b``, into ``bins`` bins (a value outside ``0..bins-1`` is in none: a sequence cannot
    look at its data before it runs); the name of the transient that holds the u32
    counts, or with ``weights`` (a float buffer of ``source``'s count) the float64 sums,
    in the order of ``lib.bincount``. Its passes' transients are named after it."""
    given = b.buffer(source)
    if given.dtype not in (DType.I32, DType.U32):
        raise InvalidInputError(f"buffer {source!r} is {given.dtype.value}; bincount counts "
                                "i32 or u32 values", "Count a buffer of i32 or u32 values.")
    if weights is not None and (not b.buffer(weights).dtype.is_float or
                                b.buffer(weights).count != given.count):
        raise InvalidInputError(
            f"weights {weights!r} is not a float buffer of {source!r}'s {given.count} "
            "elements", "Pass a buffer of f16, f32 or f64 weights, one per value.")
    try:
        count = operator.index(bins)
    except TypeError:
        raise InvalidInputError(f"bins={bins!r} is not an int",
                                "Pass the number of bins, as bins=256.") from None
    if not 1 <= count <= MAX_ELEMENTS:
        raise InvalidInputError(f"bins={count}: it must be from 1 to {MAX_ELEMENTS}",
                                "Pass at least one bin.")
    return _count_steps(b, source, given.count, count, weights,
                        DType.U32 if weights is None else DType.F64,
                        name or f"{source}_bincount")


@functools.lru_cache(maxsize=256)
def _bincount_sequence(dtype: np.dtype, n: int, bins: int, weights: np.dtype | None
                       ) -> Sequence:
    b = SequenceBuilder()
    b.input("x", DTYPES[dtype], n)
    if weights is not None:
        b.input("w", DTYPES[weights], n)
    out = DType.U32 if weights is None else DType.F64
    return b.build(returns=[_count_steps(b, "x", n, bins, None if weights is None else "w",
                                         out)])


@functools.lru_cache(maxsize=256)
def _histogram_sequence(dtype: np.dtype, n: int, bins: int, types: tuple[np.dtype, ...],
                        weights: np.dtype | None) -> Sequence:
    """``types``: the dtypes of ``binning.Uniform``'s lo, hi, edges, first and scale."""
    lo, hi, edges, first, scale = (DTYPES[t] for t in types)
    b = SequenceBuilder()
    b.input("x", DTYPES[dtype], n)
    if weights is not None:
        b.input("w", DTYPES[weights], n)
    for name, t, count in (("lo", lo, 1), ("hi", hi, 1), ("edges", edges, bins + 1),
                           ("first", first, 1), ("scale", scale, 2)):
        b.input(name, t, count)
    indices = b.transient("indices", DType.I32, n)
    b.step(_bin_index(lo, hi, edges, first, scale), {"out": indices, "bins": bins}, dim=n)
    out = DType.U32 if weights is None else DTYPES[weights]
    return b.build(returns=[_count_steps(b, indices, n, bins,
                                         None if weights is None else "w", out)])


@functools.lru_cache(maxsize=256)
def _edges_sequence(dtype: np.dtype, n: int, bins: int, compared: np.dtype,
                    weights: np.dtype | None) -> Sequence:
    b = SequenceBuilder()
    b.input("x", DTYPES[dtype], n)
    if weights is not None:
        b.input("w", DTYPES[weights], n)
    b.input("edges", DTYPES[compared], bins + 1)
    indices = b.transient("indices", DType.I32, n)
    b.step(_edge_index(DTYPES[compared]), {"out": indices, "bins": bins}, dim=n)
    out = DType.U32 if weights is None else DTYPES[weights]
    return b.build(returns=[_count_steps(b, indices, n, bins,
                                         None if weights is None else "w", out)])


def _as_weights(weights: Any, like: np.ndarray) -> np.ndarray:
    """``weights`` checked against the values: floats, one per value."""
    w = as_input(weights, "weights", floats_only=True)
    if w.shape != like.shape:
        raise InvalidInputError(
            f"weights has shape {w.shape}; x has shape {like.shape}",
            "Pass one weight per value, an array of x's shape.")
    return w


def bincount(drv: Any, x: Any, weights: Any = None, minlength: int = 0, *,
             backend: str | None = None) -> np.ndarray:
    """The number of occurrences of each value ``0..max(x)`` of a 1-D array of
    non-negative int32/uint32 (at least ``minlength`` bins), as ``numpy.intp``; with
    ``weights`` (f16/f32/f64, one per value) each bin's sum of weights, in float64:
    ``numpy.bincount``'s results."""
    array = np.asarray(x)
    if array.dtype not in (np.dtype(np.int32), np.dtype(np.uint32)):
        raise InvalidInputError(
            f"x has dtype {array.dtype}; bincount counts int32 or uint32 values",
            "Pass non-negative integers as int32 or uint32: x.astype(np.int32).")
    array = as_input(array, "x")
    if array.ndim != 1:
        raise InvalidInputError(
            f"x has {array.ndim} dimensions; bincount counts a 1-D array (numpy: 'object "
            "too deep for desired array')", "Pass x.ravel() to count every value.")
    w = None if weights is None else _as_weights(weights, array)
    try:
        least = operator.index(minlength)
    except TypeError:
        raise InvalidInputError(f"minlength={minlength!r} is not an int",
                                "Pass a whole number of bins, as minlength=10.") from None
    if not 0 <= least <= MAX_ELEMENTS:
        raise InvalidInputError(
            f"minlength={least}: it must be from 0 to {MAX_ELEMENTS} (numpy: "
            "''minlength' must not be negative')", "Pass minlength >= 0, or leave it out.")
    if array.size and array.dtype.kind == "i" and array.min() < 0:
        raise InvalidInputError(
            f"x holds a negative value ({array.min()}); bincount counts 0, 1, 2, ... "
            "(numpy: ''list' argument must have no negative elements')",
            "Shift the values first (x - x.min()), or count with lib.histogram and a "
            "range.")
    top = int(array.max()) + 1 if array.size else 0
    if top > MAX_ELEMENTS:
        raise InvalidInputError(
            f"x holds {top - 1}: bincount would make {top} bins; a vyre.lib call makes at "
            f"most {MAX_ELEMENTS}", "Shift or bin the values first (lib.histogram).")
    bins = max(top, least)
    dtype = np.intp if w is None else np.float64
    if array.size == 0:
        return np.zeros(bins, dtype)
    seq = _bincount_sequence(array.dtype, array.size, bins, None if w is None else w.dtype)
    got, = drv.dispatch(seq, [array] + ([] if w is None else [w]), backend=backend)
    return np.array(got, dtype)


def histogram(drv: Any, x: Any, bins: int = 10, range: Any = None, weights: Any = None,
              *, backend: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(hist, bin_edges)`` as ``numpy.histogram`` gives them: for an int ``bins``,
    ``bins`` uniform bins over ``range`` (default: the data's least to greatest value);
    for a 1-D sequence, those edges (``range`` unused, as numpy's); the last bin closed.
    Each value (of any shape of f16/f32/f64/int32/uint32, flattened) lands in numpy's
    bin; counts as ``numpy.intp``, or with ``weights`` (floats, x's shape) each bin's sum
    of weights in their dtype. Values outside the edges (NaN, inf) count nowhere."""
    array = as_input(x, "x")
    w = None if weights is None else _as_weights(weights, array).reshape(-1)
    array = array.reshape(-1)
    dtype = np.dtype(np.intp) if w is None else w.dtype
    if not isinstance(bins, str) and np.ndim(bins) == 1:
        edges, compared = binning.given_edges(array, bins)
        if array.size == 0 or edges.size < 2:
            return np.zeros(max(edges.size - 1, 0), dtype), edges
        seq = _edges_sequence(array.dtype, array.size, edges.size - 1, compared.dtype,
                              None if w is None else w.dtype)
        got, = drv.dispatch(seq, [array, *([] if w is None else [w]), compared],
                            backend=backend)
        return np.array(got, dtype), edges
    uniform = binning.uniform(array, bins, range)
    if array.size == 0:
        return np.zeros(uniform.bins, dtype), uniform.edges
    given = [uniform.lo, uniform.hi, uniform.edges, uniform.first, uniform.scale]
    seq = _histogram_sequence(array.dtype, array.size, uniform.bins,
                              tuple(a.dtype for a in given), None if w is None else w.dtype)
    got, = drv.dispatch(seq, [array, *([] if w is None else [w]), *given],
                        backend=backend)
    return np.array(got, dtype), uniform.edges


__all__ = ["add", "bincount", "histogram", "rounds"]
