"""The kernels of ``vyre_kernels.py`` written in NVIDIA Warp, as a Warp user writes them:
``wp.tid()``, typed ``wp.array2d``/``wp.array3d`` parameters, and no bounds checks where
the launch's ``dim`` is the output's shape (Warp launches exactly ``dim`` threads).
Imported only where warp-lang is installed (``pip install 'vyre[suite]'``)."""

# ruff: noqa: UP018 (Warp needs float(0.0): a bare 0.0 is a constant it refuses to mutate in a loop)
from __future__ import annotations

import warp as wp


@wp.kernel
def jacobi_2d(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float)):
    i, j = wp.tid()
    if 0 < i < a.shape[0] - 1 and 0 < j < a.shape[1] - 1:
        b[i, j] = 0.2 * (a[i, j] + a[i, j - 1] + a[i, j + 1] + a[i + 1, j] + a[i - 1, j])


@wp.kernel
def heat_3d(a: wp.array3d(dtype=float), b: wp.array3d(dtype=float)):
    i, j, k = wp.tid()
    n = a.shape[0] - 1
    if 0 < i < n and 0 < j < n and 0 < k < n:
        b[i, j, k] = (0.125 * (a[i + 1, j, k] - 2.0 * a[i, j, k] + a[i - 1, j, k])
                      + 0.125 * (a[i, j + 1, k] - 2.0 * a[i, j, k] + a[i, j - 1, k])
                      + 0.125 * (a[i, j, k + 1] - 2.0 * a[i, j, k] + a[i, j, k - 1])
                      + a[i, j, k])


@wp.kernel
def gemm(alpha: float, beta: float, a: wp.array2d(dtype=float), b: wp.array2d(dtype=float),
         c: wp.array2d(dtype=float)):
    i, j = wp.tid()
    acc = c[i, j] * beta
    for k in range(a.shape[1]):
        acc += alpha * a[i, k] * b[k, j]
    c[i, j] = acc


@wp.kernel
def atax_ax(a: wp.array2d(dtype=float), x: wp.array(dtype=float), tmp: wp.array(dtype=float)):
    i = wp.tid()
    acc = float(0.0)
    for j in range(a.shape[1]):
        acc += a[i, j] * x[j]
    tmp[i] = acc


@wp.kernel
def atax_aty(a: wp.array2d(dtype=float), tmp: wp.array(dtype=float), y: wp.array(dtype=float)):
    j = wp.tid()
    acc = float(0.0)
    for i in range(a.shape[0]):
        acc += a[i, j] * tmp[i]
    y[j] = acc


@wp.kernel
def bicg_s(a: wp.array2d(dtype=float), r: wp.array(dtype=float), s: wp.array(dtype=float)):
    j = wp.tid()
    acc = float(0.0)
    for i in range(a.shape[0]):
        acc += r[i] * a[i, j]
    s[j] = acc


@wp.kernel
def bicg_q(a: wp.array2d(dtype=float), p: wp.array(dtype=float), q: wp.array(dtype=float)):
    i = wp.tid()
    acc = float(0.0)
    for j in range(a.shape[1]):
        acc += a[i, j] * p[j]
    q[i] = acc


@wp.kernel
def mvt(a: wp.array2d(dtype=float), y1: wp.array(dtype=float), y2: wp.array(dtype=float),
        x1: wp.array(dtype=float), x2: wp.array(dtype=float)):
    i = wp.tid()
    acc1, acc2 = float(x1[i]), float(x2[i])
    for j in range(a.shape[1]):
        acc1 += a[i, j] * y1[j]
        acc2 += a[j, i] * y2[j]
    x1[i] = acc1
    x2[i] = acc2


@wp.kernel
def column_mean(data: wp.array2d(dtype=float), mean: wp.array(dtype=float)):
    j = wp.tid()
    acc = float(0.0)
    for i in range(data.shape[0]):
        acc += data[i, j]
    mean[j] = acc / float(data.shape[0])


@wp.kernel
def center(data: wp.array2d(dtype=float), mean: wp.array(dtype=float)):
    i, j = wp.tid()
    data[i, j] -= mean[j]


@wp.kernel
def covariance(data: wp.array2d(dtype=float), cov: wp.array2d(dtype=float)):
    i, j = wp.tid()
    acc = float(0.0)
    for k in range(data.shape[0]):
        acc += data[k, i] * data[k, j]
    cov[i, j] = acc / (float(data.shape[0]) - 1.0)


@wp.kernel
def column_stddev(data: wp.array2d(dtype=float), mean: wp.array(dtype=float),
                  stddev: wp.array(dtype=float)):
    j = wp.tid()
    acc = float(0.0)
    for i in range(data.shape[0]):
        acc += (data[i, j] - mean[j]) * (data[i, j] - mean[j])
    sd = wp.sqrt(acc / float(data.shape[0]))
    stddev[j] = wp.where(sd <= 0.1, 1.0, sd)


@wp.kernel
def normalize(data: wp.array2d(dtype=float), mean: wp.array(dtype=float),
              stddev: wp.array(dtype=float)):
    i, j = wp.tid()
    data[i, j] = (data[i, j] - mean[j]) / (wp.sqrt(float(data.shape[0])) * stddev[j])


@wp.kernel
def correlation(data: wp.array2d(dtype=float), corr: wp.array2d(dtype=float)):
    i, j = wp.tid()
    acc = float(0.0)
    for k in range(data.shape[0]):
        acc += data[k, i] * data[k, j]
    corr[i, j] = wp.where(i == j, 1.0, acc)


@wp.kernel
def floyd_warshall(k: int, path: wp.array2d(dtype=int)):
    i, j = wp.tid()
    path[i, j] = wp.min(path[i, j], path[i, k] + path[k, j])


@wp.kernel
def spmv_csr(rows: wp.array(dtype=int), cols: wp.array(dtype=int), vals: wp.array(dtype=float),
             x: wp.array(dtype=float), y: wp.array(dtype=float)):
    row = wp.tid()
    acc = float(0.0)
    for j in range(rows[row], rows[row + 1]):
        acc += vals[j] * x[cols[j]]
    y[row] = acc
