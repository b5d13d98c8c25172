"""vyre.lib's order of operations in numpy: the model the backends' bytes are checked
against, and the error bounds docs/lib.md states.

Each elementwise numpy operation on float16/32/64 is one IEEE operation, correctly
rounded, so doing the same operations in the same order gives the same bytes as the
kernels of vyre_core/lib/passes.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from vyre_core.lib.passes import BLOCK, FAN_IN, levels

CANONICAL_NAN = {np.dtype(np.float16): np.uint16(0x7E00),
                 np.dtype(np.float32): np.uint32(0x7FC00000),
                 np.dtype(np.float64): np.uint64(0x7FF8000000000000)}


def canonical(a: np.ndarray) -> np.ndarray:
    """``a`` with every NaN the canonical quiet NaN, as a backend stores it."""
    a = np.array(a, copy=True)
    if a.dtype.kind == "f":
        a.view(CANONICAL_NAN[a.dtype].dtype)[np.isnan(a)] = CANONICAL_NAN[a.dtype]
    return a


def _max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NaN if either is; else IEEE maximumNumber, -0 below +0."""
    if a.dtype.kind != "f":
        return np.maximum(a, b)
    zeros = (a == b) & np.signbit(a)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, np.where(
        zeros, b, np.where(b > a, b, a))))


def _min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind != "f":
        return np.minimum(a, b)
    zeros = (a == b) & np.signbit(b)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, np.where(
        zeros, b, np.where(b < a, b, a))))


def _wrapping(op: Callable) -> Callable:
    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return op(a, b)
    return run


COMBINE = {"sum": _wrapping(np.add), "prod": _wrapping(np.multiply), "max": _max,
           "min": _min}


def _beats(a, ia, b, ib, greater: bool) -> np.ndarray:
    """Whether (b, ib) comes before (a, ia) in argmax's (argmin's) order."""
    better = b > a if greater else b < a
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    return better | (b_nan & ~a_nan) | (((b == a) | (b_nan & a_nan)) & (ib < ia))


def _view(x: np.ndarray, axis: int | None) -> tuple[np.ndarray, tuple[int, ...]]:
    if axis is None:
        return x.reshape(1, -1, 1), ()
    axis %= x.ndim
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return x.reshape(math.prod(x.shape[:axis]), x.shape[axis], -1), shape


def _blocks(n: int) -> list[tuple[int, int, int]]:
    """A lane of ``n`` places cut into blocks: (first place, places, partials) of each."""
    return [(start, min(BLOCK, n - start), -(-min(BLOCK, n - start) // FAN_IN))
            for start in range(0, n, BLOCK)]


def _chunks(r: int, p: int) -> list[tuple[int, int]]:
    """The (start, width) of each run of a block of ``r`` places with ``p`` partials the
    partials combine in turn after their first elements: the first ``width`` partials
    take the next ``width`` places."""
    full = r // p
    return [(j * p, p) for j in range(1, full)] + [(full * p, r - full * p)]


def reduce(name: str, x: np.ndarray, axis: int | None = None) -> np.ndarray:
    """sum/prod/max/min of ``x`` over ``axis`` in vyre.lib's order."""
    v, shape = _view(x, axis)
    combine = COMBINE[name]
    for _ in levels(v.shape[1]):
        partials = []
        for start, r, p in _blocks(v.shape[1]):
            block = v[:, start:start + r]
            acc = block[:, :p].copy()
            for first, width in _chunks(r, p):
                acc[:, :width] = combine(acc[:, :width], block[:, first:first + width])
            partials.append(acc)
        v = np.concatenate(partials, axis=1)
    return canonical(v.reshape(shape))


def arg(name: str, x: np.ndarray, axis: int | None = None) -> np.ndarray:
    """argmax/argmin in vyre.lib's order (the index only)."""
    v, shape = _view(x, axis)
    greater = name == "argmax"
    index = np.broadcast_to(np.arange(v.shape[1]).reshape(1, -1, 1), v.shape)
    for _ in levels(v.shape[1]):
        values, places = [], []
        for start, r, p in _blocks(v.shape[1]):
            block, at_block = v[:, start:start + r], index[:, start:start + r]
            acc, at = block[:, :p].copy(), at_block[:, :p].copy()
            for first, width in _chunks(r, p):
                b, ib = block[:, first:first + width], at_block[:, first:first + width]
                take = _beats(acc[:, :width], at[:, :width], b, ib, greater)
                acc[:, :width] = np.where(take, b, acc[:, :width])
                at[:, :width] = np.where(take, ib, at[:, :width])
            values.append(acc)
            places.append(at)
        v, index = np.concatenate(values, axis=1), np.concatenate(places, axis=1)
    return index.reshape(shape)


def unit_roundoff(dtype: np.dtype) -> float:
    """u: half the gap between 1 and the next float (2**-24 for float32)."""
    return float(np.finfo(dtype).eps) / 2


def gamma(k: int, dtype: np.dtype) -> float:
    """gamma_k = k u / (1 - k u): the bound of k roundings (Higham, 2.4)."""
    ku = k * unit_roundoff(dtype)
    return math.inf if ku >= 1 else ku / (1 - ku)


def chain(n: int) -> int:
    """K: the most additions on the path from any element to lib.sum's result (the sum of
    (elements an invocation combines - 1) over the passes)."""
    return sum(max(-(-r // p) for _, r, p in _blocks(count)) - 1 for count, _ in levels(n))


def numpy_chain(n: int, contiguous: bool) -> int:
    """The same for numpy.sum: pairwise along a contiguous axis (numpy's pairwise_sum,
    blocks of 128 over 8 accumulators), one after another along any other."""
    if not contiguous or n < 8:
        return max(n - 1, 0)
    if n > 8192:  # (in case numpy buffers: blocks of 8192 added one after another)
        return -(-n // 8192) - 1 + numpy_chain(8192, True)
    if n <= 128:
        return (n // 8 - 1) + 3 + n % 8
    half = n // 2
    half -= half % 8
    return 1 + max(numpy_chain(half, True), numpy_chain(n - half, True))


def _inclusive(v: np.ndarray) -> np.ndarray:
    """The inclusive scan of each lane of ``v`` (outer, n, inner) in lib.cumsum's order."""
    from vyre_core.lib.scan import CHUNK

    n = v.shape[1]
    with np.errstate(all="ignore"):
        if n <= CHUNK:
            return np.add.accumulate(v, axis=1, dtype=v.dtype)
        starts = range(0, n, CHUNK)
        totals = np.stack([np.add.accumulate(v[:, s:s + CHUNK], axis=1,
                                             dtype=v.dtype)[:, -1] for s in starts], axis=1)
        scanned = _inclusive(totals)
        out = np.empty_like(v)
        for c, s in enumerate(starts):
            chunk = v[:, s:s + CHUNK].copy()
            if c:
                chunk[:, 0] = scanned[:, c - 1] + chunk[:, 0]
            out[:, s:s + CHUNK] = np.add.accumulate(chunk, axis=1, dtype=v.dtype)
        return out


def cumsum(x: np.ndarray, axis: int | None = None, exclusive: bool = False) -> np.ndarray:
    """lib.cumsum in its order (docs/lib.md, "Scans"), NaNs canonical."""
    shape = x.shape if axis is not None else (x.size,)
    v = x.reshape(1, -1, 1) if axis is None else \
        x.reshape(math.prod(x.shape[:axis % x.ndim]), x.shape[axis], -1)
    out = _inclusive(v)
    if exclusive:
        out = np.concatenate([np.zeros_like(out[:, :1]), out[:, :-1]], axis=1)
    return canonical(out.reshape(shape))


def _transcendental(fn: Callable, a: np.ndarray) -> np.ndarray:
    """``fn`` as every backend computes it: f16/f32 correctly rounded (the oracle: MPFR
    where numpy's f64 is too near a rounding boundary), as the math library is over every
    input; f64 by the math library's function (vyre_core/mathlib: ``np.exp`` is
    ``ir.exp``'s), run on the in-process reference."""
    if a.dtype == np.float64:
        return _library_f64(fn, a)
    from vyre_core.conformance.oracle import correctly_rounded

    dtype = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}[a.dtype]
    a = np.asarray(a)
    return correctly_rounded(fn.__name__, dtype, a.reshape(-1)).reshape(a.shape)


def _library_f64(fn: Callable, a: np.ndarray) -> np.ndarray:
    from vyre_core import ir
    from vyre_reference import run

    op = {np.exp: ir.exp, np.log: ir.log}[fn]
    flat = np.ascontiguousarray(a, np.float64).reshape(-1)
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", ir.f64), k.output("out", ir.f64, max(flat.size, 1))
    i = k.let("i", ir.global_id())
    with k.if_(i < x.len):
        out[i] = op(x[i])
    return run(k.build(), [flat])[0][:flat.size].reshape(a.shape)


def softmax(x: np.ndarray, axis: int | None, name: str = "softmax") -> np.ndarray:
    """lib.softmax (or lib.logsumexp, ``name``) in its order: lib.max's shift (0 where
    not finite), exp of each difference, lib.sum's order, one division (or shift + log)."""
    greatest = reduce("max", x, axis)
    shift = np.where(np.isfinite(greatest), greatest, 0).astype(x.dtype)
    along = shift if axis is None else np.expand_dims(shift, axis)
    with np.errstate(all="ignore"):
        e = _transcendental(np.exp, (x - along).astype(x.dtype))
        total = reduce("sum", e, axis)
        if name == "softmax":
            return canonical(e / (total if axis is None else np.expand_dims(total, axis)))
        return canonical(np.asarray(shift + _transcendental(np.log, total)))


# -- sorts ------------------------------------------------------------------------------------

def adversarial(dtype, shape, seed: int = 0, ties: bool = False) -> np.ndarray:
    """Random bit patterns (every NaN payload, both signs of NaN, subnormals) with the
    special values scattered in; ``ties``: drawn from a few values, so most are equal."""
    rng = np.random.default_rng(seed)
    size = math.prod(shape)
    bits = np.dtype(dtype).itemsize * 8
    words = rng.integers(0, 2**bits, size, dtype=np.uint64).astype(f"u{bits // 8}")
    x = words.view(dtype)
    if np.dtype(dtype).kind == "f":
        info = np.finfo(dtype)
        specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0,
                             info.max, -info.max, info.tiny, info.smallest_subnormal,
                             -info.smallest_subnormal], dtype)
    else:
        info = np.iinfo(dtype)
        specials = np.array([info.min, info.max, 0, 1, info.min + 1], dtype)
    spots = rng.random(size) < (0.9 if ties else 0.1)
    x[spots] = rng.choice(specials[:5] if ties else specials, int(spots.sum()))
    return x.reshape(shape)


def numpys(x: np.ndarray, axis) -> tuple[bytes, bytes]:
    """numpy's stable sort (NaNs canonical) and argsort, as bytes."""
    return (canonical(np.sort(x, axis, kind="stable")).tobytes(),
            np.argsort(x, axis, kind="stable").tobytes())
