"""lib.bincount's and lib.histogram's order of operations in numpy: the model the
backends' bytes are checked against.

Within a chunk the order is numpy.bincount's own (each bin from 0.0, the weights as
float64 added in element order), so the model calls it chunk by chunk; the chunks'
partials are then added left to right from 0 in the result's dtype. The bin of each value
is numpy.histogram's, found by numpy's own code (its ``_get_bin_edges`` and the lines of
its fast path), not by vyre_core.lib.binning: the model is a check of that module.
"""

from __future__ import annotations

import numpy as np
from numpy.lib import _histograms_impl as impl

from vyre_core.lib.histogram import CHUNK


def numpy_bins(x: np.ndarray, bins: int, range_=None) -> tuple[np.ndarray, np.ndarray]:
    """numpy.histogram's bin of each value of the flat ``x`` (-1: outside the range), by
    its own code for uniform bins, and its edges."""
    a = x.reshape(-1)
    edges, (first, last, n) = impl._get_bin_edges(a, bins, range_, None)
    keep = (a >= first) & (a <= last)
    tmp = a[keep].astype(edges.dtype, copy=False)
    with np.errstate(all="ignore"):
        f = (impl._unsigned_subtract(tmp, first) / impl._unsigned_subtract(last, first)) * n
    indices = f.astype(np.intp)
    indices[indices == n] -= 1
    indices[tmp < edges[indices]] -= 1
    indices[(tmp >= edges[indices + 1]) & (indices != n - 1)] += 1
    out = np.full(a.shape, -1, np.intp)
    out[keep] = indices
    return out, edges


def sums(indices: np.ndarray, weights: np.ndarray, bins: int, dtype) -> np.ndarray:
    """Each bin's sum of weights in lib's order: per chunk numpy.bincount (float64, from
    0.0, in element order), then the chunks' partials, each cast to ``dtype``, added
    left to right from 0 in ``dtype``."""
    total = np.zeros(bins, dtype)
    for start in range(0, indices.size, CHUNK):
        at = indices[start:start + CHUNK]
        w = weights.reshape(-1)[start:start + CHUNK].astype(np.float64)
        inside = (at >= 0) & (at < bins)
        part = np.bincount(at[inside], w[inside], minlength=bins)
        with np.errstate(all="ignore"):
            total = total + part.astype(dtype)
    return total


def bincount(x: np.ndarray, weights: np.ndarray | None = None,
             minlength: int = 0) -> np.ndarray:
    """lib.bincount in its order."""
    bins = max(int(x.max()) + 1 if x.size else 0, minlength)
    if weights is None:
        return np.bincount(x, minlength=minlength)
    return sums(x.astype(np.intp), weights, bins, np.float64)


def histogram(x: np.ndarray, bins: int, range_=None, weights=None) -> np.ndarray:
    """lib.histogram's hist in its order."""
    indices, _ = numpy_bins(x, bins, range_)
    if weights is None:
        return np.bincount(indices[indices >= 0], minlength=bins)
    return sums(indices, weights, bins, weights.dtype)


def edge_bins(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """numpy.histogram's bin of each value of the flat ``x`` among edges of the caller's
    (its sort and ``searchsorted`` path: ``edges[i] <= v < edges[i + 1]``, the last bin
    closed), -1 outside them; compared in the dtype searchsorted uses."""
    common = np.float64 if x.dtype.kind in "iu" else np.result_type(x.dtype, edges.dtype)
    v, e = x.reshape(-1).astype(common), np.asarray(edges).astype(common)
    at = np.searchsorted(e[:-1], v, side="right") - 1
    at[~((v >= e[0]) & (v <= e[-1]))] = -1
    return at
