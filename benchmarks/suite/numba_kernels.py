"""The suite's kernels as a numba user writes them: one ``@numba.njit(parallel=True)``
function per kernel, the outer loop a ``prange`` over the output, the loop body
PolyBench/C's. Same names and arguments as ``vyre_kernels.py``, so ``problems.py``'s
drivers launch them (``run_numba``: a launch is a call; ``dim`` is the loops' own
bounds). Constants are f32 where PolyBench's arrays are, so the stencils give numpy's
bytes."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

F32 = np.float32
_JIT = {"parallel": True, "cache": True}
FIFTH, EIGHTH, TWO, ONE, TENTH = F32(0.2), F32(0.125), F32(2.0), F32(1.0), F32(0.1)


@njit(**_JIT)
def jacobi_2d(a, b):
    n, m = a.shape
    for i in prange(1, n - 1):
        for j in range(1, m - 1):
            b[i, j] = FIFTH * (a[i, j] + a[i, j - 1] + a[i, j + 1] + a[i + 1, j] + a[i - 1, j])


@njit(**_JIT)
def heat_3d(a, b):
    n = a.shape[0] - 1
    for i in prange(1, n):
        for j in range(1, n):
            for k in range(1, n):
                b[i, j, k] = (EIGHTH * (a[i + 1, j, k] - TWO * a[i, j, k] + a[i - 1, j, k])
                              + EIGHTH * (a[i, j + 1, k] - TWO * a[i, j, k] + a[i, j - 1, k])
                              + EIGHTH * (a[i, j, k + 1] - TWO * a[i, j, k] + a[i, j, k - 1])
                              + a[i, j, k])


@njit(**_JIT)
def gemm(alpha, beta, a, b, c):
    alpha, beta = F32(alpha), F32(beta)
    for i in prange(c.shape[0]):
        for j in range(c.shape[1]):
            c[i, j] *= beta
        for k in range(a.shape[1]):
            for j in range(c.shape[1]):
                c[i, j] += alpha * a[i, k] * b[k, j]


@njit(**_JIT)
def atax_ax(a, x, tmp):
    for i in prange(a.shape[0]):
        acc = F32(0)
        for j in range(a.shape[1]):
            acc += a[i, j] * x[j]
        tmp[i] = acc


@njit(**_JIT)
def atax_aty(a, tmp, y):
    for j in prange(a.shape[1]):
        acc = F32(0)
        for i in range(a.shape[0]):
            acc += a[i, j] * tmp[i]
        y[j] = acc


@njit(**_JIT)
def bicg_s(a, r, s):
    for j in prange(a.shape[1]):
        acc = F32(0)
        for i in range(a.shape[0]):
            acc += r[i] * a[i, j]
        s[j] = acc


@njit(**_JIT)
def bicg_q(a, p, q):
    for i in prange(a.shape[0]):
        acc = F32(0)
        for j in range(a.shape[1]):
            acc += a[i, j] * p[j]
        q[i] = acc


@njit(**_JIT)
def mvt(a, y1, y2, x1, x2):
    for i in prange(a.shape[0]):
        acc1, acc2 = x1[i], x2[i]
        for j in range(a.shape[1]):
            acc1 += a[i, j] * y1[j]
            acc2 += a[j, i] * y2[j]
        x1[i], x2[i] = acc1, acc2


@njit(**_JIT)
def column_mean(data, mean):
    for j in prange(data.shape[1]):
        acc = F32(0)
        for i in range(data.shape[0]):
            acc += data[i, j]
        mean[j] = acc / F32(data.shape[0])


@njit(**_JIT)
def center(data, mean):
    for i in prange(data.shape[0]):
        for j in range(data.shape[1]):
            data[i, j] -= mean[j]


@njit(**_JIT)
def covariance(data, cov):
    m = data.shape[1]
    for i in prange(m):
        for j in range(m):
            acc = F32(0)
            for k in range(data.shape[0]):
                acc += data[k, i] * data[k, j]
            cov[i, j] = acc / (F32(data.shape[0]) - ONE)


@njit(**_JIT)
def column_stddev(data, mean, stddev):
    for j in prange(data.shape[1]):
        acc = F32(0)
        for i in range(data.shape[0]):
            acc += (data[i, j] - mean[j]) * (data[i, j] - mean[j])
        sd = F32(math.sqrt(acc / F32(data.shape[0])))
        stddev[j] = ONE if sd <= TENTH else sd


@njit(**_JIT)
def normalize(data, mean, stddev):
    root = F32(math.sqrt(F32(data.shape[0])))
    for i in prange(data.shape[0]):
        for j in range(data.shape[1]):
            data[i, j] = (data[i, j] - mean[j]) / (root * stddev[j])


@njit(**_JIT)
def correlation(data, corr):
    m = data.shape[1]
    for i in prange(m):
        for j in range(m):
            acc = F32(0)
            for k in range(data.shape[0]):
                acc += data[k, i] * data[k, j]
            corr[i, j] = ONE if i == j else acc


@njit(**_JIT)
def floyd_warshall(k, path):
    n = path.shape[0]
    for i in prange(n):
        for j in range(n):
            path[i, j] = min(path[i, j], path[i, k] + path[k, j])


@njit(**_JIT)
def spmv_csr(rows, cols, vals, x, y):
    for row in prange(y.shape[0]):
        acc = F32(0)
        for j in range(rows[row], rows[row + 1]):
            acc += vals[j] * x[cols[j]]
        y[row] = acc
