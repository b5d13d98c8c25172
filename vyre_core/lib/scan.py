"""Scans: ``lib.cumsum`` (inclusive, or exclusive with ``exclusive=True``).

The order (docs/lib.md, "Scans"): a lane of ``n`` elements along the axis is cut into
chunks of ``CHUNK`` consecutive elements. Up to ``CHUNK`` elements, one chunk: each
result is the one before it plus the element, left to right from the first element,
which is numpy's own order, so the bytes are numpy's. Beyond, each chunk's total is
summed left to right, the totals are scanned by this same rule, and chunk ``c``'s
results are its elements added left to right onto the scan of the totals up to chunk
``c - 1`` (chunk 0 onto nothing). One invocation runs one chunk of one lane, so the
passes read the array twice and divide per chunk, never per element. An exclusive scan
is the inclusive one moved one place along the axis, 0 first.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

import vyre_core as vyre
from vyre_core import i32
from vyre_core.lib.args import DTYPES, as_input, buffer_split, split
from vyre_core.sequence import Sequence, SequenceBuilder

#: Invocations per workgroup.
WORKGROUP = 256
#: The elements one invocation scans one after another: up to this many along the axis,
#: the result is numpy's sequential cumsum, bit for bit.
CHUNK = 1024


@vyre.func
def first_of(g, n, inner, chunks):
    """Where invocation ``g``'s chunk starts: chunk ``(g // inner) % chunks`` of lane
    ``(g // inner // chunks, g % inner)`` of the array seen as ``(outer, n, inner)``."""
    rest = g // inner
    return ((rest // chunks) * n + (rest % chunks) * CHUNK) * inner + g % inner


@vyre.func
def length_of(g, n, inner, chunks):
    """How many elements invocation ``g``'s chunk has (the last may be short)."""
    return min(CHUNK, n - ((g // inner) % chunks) * CHUNK)


@vyre.kernel(workgroup=(WORKGROUP,))
def chunk_totals(x, totals, n: i32, inner: i32, chunks: i32):
    """The sum of each chunk, left to right from its first element."""
    g = vyre.global_id(0)
    base = first_of(g, n, inner, chunks)
    acc = x[base]
    for k in range(1, length_of(g, n, inner, chunks)):
        acc += x[base + k * inner]
    totals[g] = acc


@vyre.kernel(workgroup=(WORKGROUP,))
def chunk_scan(x, scanned, out, n: i32, inner: i32, chunks: i32):
    """Chunk ``c`` of a lane: its elements added left to right onto ``scanned``'s total
    of the chunks before it; chunk 0 from its first element (``scanned`` unread)."""
    g = vyre.global_id(0)
    base = first_of(g, n, inner, chunks)
    acc = x[base]
    if (g // inner) % chunks > 0:
        acc = scanned[g - inner] + acc
    out[base] = acc
    for k in range(1, length_of(g, n, inner, chunks)):
        acc += x[base + k * inner]
        out[base + k * inner] = acc


@vyre.kernel(workgroup=(WORKGROUP,))
def shift_along(x, out, n: i32, inner: i32):
    """The exclusive scan from the inclusive one: each element the one before it along
    the axis, 0 first."""
    g = vyre.global_id(0)
    i = (g // inner) % n
    if i > 0:
        out[g] = x[g - inner]


def add(b: SequenceBuilder, source: str, *, shape: Any = None, axis: int | None = None,
        exclusive: bool = False, name: str | None = None) -> str:
    """Add the cumulative sum of the declared buffer ``source`` (seen as ``shape``, default
    flat; along ``axis``, None: the whole buffer) to ``b``; the name of the transient
    that holds it (flat, ``source``'s size). Its passes' transients are named after it."""
    given, where = buffer_split(b, source, shape, axis)
    name = name or f"{source}_cumsum"
    out = _scan(b, source, given.dtype, where.outer, where.n, where.inner,
                f"{name}_inclusive" if exclusive else name)
    if exclusive:
        b.transient(name, given.dtype, given.count)
        b.step(shift_along, {"x": out, "out": name, "n": where.n, "inner": where.inner},
               dim=given.count)
    return name


def _scan(b: SequenceBuilder, source: str, dtype: Any, outer: int, n: int, inner: int,
          name: str) -> str:
    """The inclusive scan's passes over ``(outer, n, inner)``: the chunks' totals, their
    scan (the same rule, one level down), then the chunks onto it."""
    chunks = -(-n // CHUNK)
    b.transient(name, dtype, outer * n * inner)
    sizes = {"n": n, "inner": inner, "chunks": chunks}
    scanned = source  # (one chunk a lane: no chunk before any, nothing to read)
    if chunks > 1:
        totals = b.transient(f"{name}_totals", dtype, outer * chunks * inner)
        b.step(chunk_totals, {"x": source, "totals": totals, **sizes},
               dim=outer * chunks * inner)
        scanned = _scan(b, totals, dtype, outer, chunks, inner, f"{name}_up")
    b.step(chunk_scan, {"x": source, "scanned": scanned, "out": name, **sizes},
           dim=outer * chunks * inner)
    return name


@functools.lru_cache(maxsize=256)
def _sequence(dtype: np.dtype, shape: tuple[int, ...], axis: int | None,
              exclusive: bool) -> Sequence:
    b = SequenceBuilder()
    count = int(np.prod(shape))
    b.input("x", DTYPES[dtype], count)
    return b.build(returns=[add(b, "x", shape=shape, axis=axis, exclusive=exclusive,
                                name="result")])


def cumsum(drv: Any, x: Any, axis: int | None = None, *, exclusive: bool = False,
           backend: str | None = None) -> np.ndarray:
    """The cumulative sum of ``x`` along ``axis`` (None: of the flattened array, as
    numpy's), in ``x``'s dtype (integers wrap, as ``numpy.cumsum(x, dtype=x.dtype)``);
    ``exclusive=True``: the sum of the elements before each, 0 first."""
    array = as_input(x, "x")
    split(array.shape, axis)  # (a bad axis is refused before any work)
    shape = array.shape if axis is not None else (array.size,)
    if array.size == 0:
        return np.zeros(shape, array.dtype)
    seq = _sequence(array.dtype, shape, None if axis is None else axis % array.ndim,
                    bool(exclusive))
    got, = drv.dispatch(seq, [array.reshape(-1)], backend=backend)
    return np.array(got).reshape(shape)


__all__ = ["add", "cumsum"]
