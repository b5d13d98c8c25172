"""Ten kernels of PolyBench/C 4.2.1 (and CSR SpMV, the scalar kernel of the SHOC suite) as
``@vyre.kernel`` functions, one thread per output element as in PolyBench/GPU. Their
twins in Warp are in ``warp_kernels.py`` (same names, same algorithm, same launches:
``problems.py`` launches both); tests/test_suite_lines.py counts the lines of both."""

from __future__ import annotations

import math

import vyre_core as vyre
from vyre_core import f32, i32


@vyre.kernel
def jacobi_2d(a: vyre.Array[f32, 2], b: vyre.Array[f32, 2]):
    i, j = vyre.global_id(0), vyre.global_id(1)
    if 0 < i < a.shape[0] - 1 and 0 < j < a.shape[1] - 1:
        b[i, j] = 0.2 * (a[i, j] + a[i, j - 1] + a[i, j + 1] + a[i + 1, j] + a[i - 1, j])


@vyre.kernel
def heat_3d(a: vyre.Array[f32, 3], b: vyre.Array[f32, 3]):
    i, j, k = vyre.global_id(0), vyre.global_id(1), vyre.global_id(2)
    n = a.shape[0] - 1
    if 0 < i < n and 0 < j < n and 0 < k < n:
        b[i, j, k] = (0.125 * (a[i + 1, j, k] - 2.0 * a[i, j, k] + a[i - 1, j, k])
                      + 0.125 * (a[i, j + 1, k] - 2.0 * a[i, j, k] + a[i, j - 1, k])
                      + 0.125 * (a[i, j, k + 1] - 2.0 * a[i, j, k] + a[i, j, k - 1])
                      + a[i, j, k])


@vyre.kernel
def gemm(alpha: f32, beta: f32, a: vyre.Array[f32, 2], b: vyre.Array[f32, 2],
         c: vyre.Array[f32, 2]):
    i, j = vyre.global_id(0), vyre.global_id(1)
    acc = c[i, j] * beta
    for k in range(a.shape[1]):
        acc += alpha * a[i, k] * b[k, j]
    c[i, j] = acc


@vyre.kernel
def atax_ax(a: vyre.Array[f32, 2], x: vyre.Array[f32], tmp: vyre.Array[f32]):
    i = vyre.global_id(0)
    acc = f32(0)
    for j in range(a.shape[1]):
        acc += a[i, j] * x[j]
    tmp[i] = acc


@vyre.kernel
def atax_aty(a: vyre.Array[f32, 2], tmp: vyre.Array[f32], y: vyre.Array[f32]):
    j = vyre.global_id(0)
    acc = f32(0)
    for i in range(a.shape[0]):
        acc += a[i, j] * tmp[i]
    y[j] = acc


@vyre.kernel
def bicg_s(a: vyre.Array[f32, 2], r: vyre.Array[f32], s: vyre.Array[f32]):
    j = vyre.global_id(0)
    acc = f32(0)
    for i in range(a.shape[0]):
        acc += r[i] * a[i, j]
    s[j] = acc


@vyre.kernel
def bicg_q(a: vyre.Array[f32, 2], p: vyre.Array[f32], q: vyre.Array[f32]):
    i = vyre.global_id(0)
    acc = f32(0)
    for j in range(a.shape[1]):
        acc += a[i, j] * p[j]
    q[i] = acc


@vyre.kernel
def mvt(a: vyre.Array[f32, 2], y1: vyre.Array[f32], y2: vyre.Array[f32], x1: vyre.Array[f32],
        x2: vyre.Array[f32]):
    i = vyre.global_id(0)
    acc1, acc2 = x1[i], x2[i]
    for j in range(a.shape[1]):
        acc1 += a[i, j] * y1[j]
        acc2 += a[j, i] * y2[j]
    x1[i], x2[i] = acc1, acc2


@vyre.kernel
def column_mean(data: vyre.Array[f32, 2], mean: vyre.Array[f32]):
    j = vyre.global_id(0)
    acc = f32(0)
    for i in range(data.shape[0]):
        acc += data[i, j]
    mean[j] = acc / f32(data.shape[0])


@vyre.kernel
def center(data: vyre.Array[f32, 2], mean: vyre.Array[f32]):
    i, j = vyre.global_id(0), vyre.global_id(1)
    data[i, j] -= mean[j]


@vyre.kernel
def covariance(data: vyre.Array[f32, 2], cov: vyre.Array[f32, 2]):
    i, j = vyre.global_id(0), vyre.global_id(1)
    acc = f32(0)
    for k in range(data.shape[0]):
        acc += data[k, i] * data[k, j]
    cov[i, j] = acc / (f32(data.shape[0]) - 1.0)


@vyre.kernel
def column_stddev(data: vyre.Array[f32, 2], mean: vyre.Array[f32], stddev: vyre.Array[f32]):
    j = vyre.global_id(0)
    acc = f32(0)
    for i in range(data.shape[0]):
        acc += (data[i, j] - mean[j]) * (data[i, j] - mean[j])
    sd = math.sqrt(acc / f32(data.shape[0]))
    stddev[j] = 1.0 if sd <= 0.1 else sd


@vyre.kernel
def normalize(data: vyre.Array[f32, 2], mean: vyre.Array[f32], stddev: vyre.Array[f32]):
    i, j = vyre.global_id(0), vyre.global_id(1)
    data[i, j] = (data[i, j] - mean[j]) / (math.sqrt(f32(data.shape[0])) * stddev[j])


@vyre.kernel
def correlation(data: vyre.Array[f32, 2], corr: vyre.Array[f32, 2]):
    i, j = vyre.global_id(0), vyre.global_id(1)
    acc = f32(0)
    for k in range(data.shape[0]):
        acc += data[k, i] * data[k, j]
    corr[i, j] = 1.0 if i == j else acc


@vyre.kernel
def floyd_warshall(k: i32, path: vyre.Array[i32, 2]):
    i, j = vyre.global_id(0), vyre.global_id(1)
    path[i, j] = min(path[i, j], path[i, k] + path[k, j])


@vyre.kernel
def spmv_csr(rows: vyre.Array[i32], cols: vyre.Array[i32], vals: vyre.Array[f32],
             x: vyre.Array[f32], y: vyre.Array[f32]):
    row = vyre.global_id(0)
    acc = f32(0)
    for j in range(rows[row], rows[row + 1]):
        acc += vals[j] * x[cols[j]]
    y[row] = acc
