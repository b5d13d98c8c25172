"""The kernels of ``vyre_kernels.py`` written in Taichi, as a Taichi user writes them: a
``@ti.kernel`` whose outermost loop, a ``ti.ndrange`` over the output (PolyBench's own
bounds for the stencils), is the one Taichi runs in parallel, one iteration per output
element as in the vyre and Warp ports; arrays are ``ti.types.ndarray`` parameters, so numpy
arrays are passed straight in (no copy on the CPU). Same names and arguments as
``vyre_kernels.py``, so ``problems.py``'s drivers launch them (``run_taichi``: a launch is
a call). Taichi's default float is f32, so literals are f32 as PolyBench's arrays are.
Imported only where taichi is installed (``pip install 'vyre[suite]'``). No ``from
__future__ import annotations`` here: Taichi reads a kernel's annotations as objects."""

import contextlib
import ctypes
import ctypes.util
import os
import sys
from typing import Any

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")  # (else ti.init asks Taichi's server)
with contextlib.redirect_stdout(sys.stderr):  # (its banner, then "Starting on arch=x64")
    import taichi as ti


def init(**options: Any) -> None:
    """``ti.init`` on the CPU sets the calling thread's FPU to flush subnormals to zero,
    and every thread started after it inherits that. vyre keeps subnormals
    (docs/semantics.md), and numpy's reference results and vyre's in-process reference
    backend are computed in this process: the FPU is set back as it was (Taichi's own
    threads keep Taichi's setting)."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    fenv = ctypes.create_string_buffer(64)  # (a fenv_t: 32 bytes on x86-64 glibc)
    libm.fegetenv(fenv)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # ("Starting on arch=x64")
            ti.init(arch=ti.cpu, log_level=ti.WARN, **options)
    finally:
        libm.fesetenv(fenv)


init()

F2 = ti.types.ndarray(dtype=ti.f32, ndim=2)
F1 = ti.types.ndarray(dtype=ti.f32, ndim=1)
F3 = ti.types.ndarray(dtype=ti.f32, ndim=3)
I1 = ti.types.ndarray(dtype=ti.i32, ndim=1)
I2 = ti.types.ndarray(dtype=ti.i32, ndim=2)


@ti.kernel
def jacobi_2d(a: F2, b: F2):
    for i, j in ti.ndrange((1, a.shape[0] - 1), (1, a.shape[1] - 1)):
        b[i, j] = 0.2 * (a[i, j] + a[i, j - 1] + a[i, j + 1] + a[i + 1, j] + a[i - 1, j])


@ti.kernel
def heat_3d(a: F3, b: F3):
    n = a.shape[0] - 1
    for i, j, k in ti.ndrange((1, n), (1, n), (1, n)):
        b[i, j, k] = (0.125 * (a[i + 1, j, k] - 2.0 * a[i, j, k] + a[i - 1, j, k])
                      + 0.125 * (a[i, j + 1, k] - 2.0 * a[i, j, k] + a[i, j - 1, k])
                      + 0.125 * (a[i, j, k + 1] - 2.0 * a[i, j, k] + a[i, j, k - 1])
                      + a[i, j, k])


@ti.kernel
def gemm(alpha: ti.f32, beta: ti.f32, a: F2, b: F2, c: F2):
    for i, j in ti.ndrange(c.shape[0], c.shape[1]):
        acc = c[i, j] * beta
        for k in range(a.shape[1]):
            acc += alpha * a[i, k] * b[k, j]
        c[i, j] = acc


@ti.kernel
def atax_ax(a: F2, x: F1, tmp: F1):
    for i in range(a.shape[0]):
        acc = 0.0
        for j in range(a.shape[1]):
            acc += a[i, j] * x[j]
        tmp[i] = acc


@ti.kernel
def atax_aty(a: F2, tmp: F1, y: F1):
    for j in range(a.shape[1]):
        acc = 0.0
        for i in range(a.shape[0]):
            acc += a[i, j] * tmp[i]
        y[j] = acc


@ti.kernel
def bicg_s(a: F2, r: F1, s: F1):
    for j in range(a.shape[1]):
        acc = 0.0
        for i in range(a.shape[0]):
            acc += r[i] * a[i, j]
        s[j] = acc


@ti.kernel
def bicg_q(a: F2, p: F1, q: F1):
    for i in range(a.shape[0]):
        acc = 0.0
        for j in range(a.shape[1]):
            acc += a[i, j] * p[j]
        q[i] = acc


@ti.kernel
def mvt(a: F2, y1: F1, y2: F1, x1: F1, x2: F1):
    for i in range(a.shape[0]):
        acc1 = x1[i]
        acc2 = x2[i]
        for j in range(a.shape[1]):
            acc1 += a[i, j] * y1[j]
            acc2 += a[j, i] * y2[j]
        x1[i] = acc1
        x2[i] = acc2


@ti.kernel
def column_mean(data: F2, mean: F1):
    for j in range(data.shape[1]):
        acc = 0.0
        for i in range(data.shape[0]):
            acc += data[i, j]
        mean[j] = acc / data.shape[0]


@ti.kernel
def center(data: F2, mean: F1):
    for i, j in ti.ndrange(data.shape[0], data.shape[1]):
        data[i, j] -= mean[j]


@ti.kernel
def covariance(data: F2, cov: F2):
    for i, j in ti.ndrange(cov.shape[0], cov.shape[1]):
        acc = 0.0
        for k in range(data.shape[0]):
            acc += data[k, i] * data[k, j]
        cov[i, j] = acc / (data.shape[0] - 1.0)


@ti.kernel
def column_stddev(data: F2, mean: F1, stddev: F1):
    for j in range(data.shape[1]):
        acc = 0.0
        for i in range(data.shape[0]):
            acc += (data[i, j] - mean[j]) * (data[i, j] - mean[j])
        sd = ti.sqrt(acc / data.shape[0])
        stddev[j] = 1.0 if sd <= 0.1 else sd


@ti.kernel
def normalize(data: F2, mean: F1, stddev: F1):
    for i, j in ti.ndrange(data.shape[0], data.shape[1]):
        data[i, j] = (data[i, j] - mean[j]) / (ti.sqrt(ti.f32(data.shape[0])) * stddev[j])


@ti.kernel
def correlation(data: F2, corr: F2):
    for i, j in ti.ndrange(corr.shape[0], corr.shape[1]):
        acc = 0.0
        for k in range(data.shape[0]):
            acc += data[k, i] * data[k, j]
        corr[i, j] = 1.0 if i == j else acc


@ti.kernel
def floyd_warshall(k: ti.i32, path: I2):
    for i, j in ti.ndrange(path.shape[0], path.shape[1]):
        path[i, j] = ti.min(path[i, j], path[i, k] + path[k, j])


@ti.kernel
def spmv_csr(rows: I1, cols: I1, vals: F1, x: F1, y: F1):
    for row in range(y.shape[0]):
        acc = 0.0
        for j in range(rows[row], rows[row + 1]):
            acc += vals[j] * x[cols[j]]
        y[row] = acc
