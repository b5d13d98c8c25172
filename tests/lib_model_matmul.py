"""lib.matmul's order of operations in numpy, and the bound docs/lib.md states against
the exact product: the model the backends' bytes are checked against.

Each elementwise numpy operation on float16/32/64 is one IEEE operation, correctly
rounded (float16's through float32, which rounds twice harmlessly: 24 >= 2 * 11 + 2), and
integer arrays wrap, so a loop over k of rounded products and sums gives the bytes of
the kernel of vyre_core/lib/matmul.py.
"""

from __future__ import annotations

import numpy as np
from lib_model import canonical, gamma, unit_roundoff


def _promoted(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (a[None, :] if a.ndim == 1 else a), (b[:, None] if b.ndim == 1 else b)


def _dropped(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy.matmul's result shape: the axes a 1-D operand gained, dropped."""
    if b.ndim == 1:
        c = c[..., 0]
    if a.ndim == 1:
        c = c[..., 0, :] if b.ndim > 1 else c[..., 0]
    return c


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """lib.matmul in its order: out[i, j] = ((a[i,0]*b[0,j] + a[i,1]*b[1,j]) + ...), k
    ascending, every product and sum rounded to the dtype; zeros when k is 0; NaNs
    canonical."""
    a2, b2 = _promoted(a, b)
    k = a2.shape[-1]
    if k == 0:
        return np.zeros(np.matmul(a, b).shape, a.dtype)
    with np.errstate(all="ignore"):
        acc = a2[..., :, 0:1] * b2[..., 0:1, :]
        for j in range(1, k):
            acc = acc + a2[..., :, j:j + 1] * b2[..., j:j + 1, :]
    return canonical(_dropped(acc, a, b))


def magnitude(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a| @ |b| in float64: the scale of every bound."""
    return np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))


def bound_to_exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|lib.matmul - a @ b| elementwise: at most gamma(k) (|a| @ |b|) (Higham, 3.5), as
    long as nothing overflows (or underflows)."""
    k = _promoted(a, b)[0].shape[-1]
    return gamma(k, a.dtype) * magnitude(a, b)


def bound_to_numpy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|lib.matmul - numpy.matmul|: ours to the exact product plus numpy's. numpy's BLAS
    (any order, fused or not) is within gamma(k) (|a| @ |b|) in f32 and f64; in f16 numpy
    sums in float32 and rounds once, within gamma_f32(k) (1 + u) + u of it."""
    k = _promoted(a, b)[0].shape[-1]
    scale = magnitude(a, b)
    if a.dtype == np.float16:
        u = unit_roundoff(np.float16)
        theirs = (gamma(k, np.float32) * (1 + u) + u) * scale
    else:
        theirs = gamma(k, a.dtype) * scale
    return bound_to_exact(a, b) + theirs
