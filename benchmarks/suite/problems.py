"""The ten problems: PolyBench/C 4.2.1's inputs (its ``init_array``, in f32) and numpy
references, and one driver per problem that launches the kernels of any port.

A driver takes the kernel module (``vyre_kernels``, ``warp_kernels``, ``numba_kernels`` or
``taichi_kernels``), a ``launch(kernel, dim, *args)`` of that framework and the problem's
arrays in that framework's form, so every port runs the same launches, in the same order,
with the same ``dim``. Arrays are filled in place; the problem's ``outputs`` name those to
compare."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Launch = Callable[..., Any]
F32 = np.float32


@dataclass(frozen=True)
class Problem:
    name: str
    origin: str
    kind: str
    kernels: tuple[str, ...]                     # the functions it launches, in both ports
    make: Callable[[int], dict[str, Any]]        # size -> inputs (arrays and numbers)
    reference: Callable[[dict[str, Any]], dict[str, np.ndarray]]
    run: Callable[[Any, Launch, dict[str, Any]], None]
    outputs: tuple[str, ...]
    exact: bool                                  # numpy's order of operations exactly


def _grid(shape: tuple[int, ...], fn: Callable[..., np.ndarray]) -> np.ndarray:
    return np.asarray(fn(*np.indices(shape, dtype=np.float64)), dtype=F32)


# -- stencils: TSTEPS sweeps A -> B -> A, as PolyBench does ------------------------------
TSTEPS = 4


def _jacobi_make(n: int) -> dict[str, Any]:
    return {"a": _grid((n, n), lambda i, j: (i * (j + 2) + 2) / n),
            "b": _grid((n, n), lambda i, j: (i * (j + 3) + 3) / n)}


def _jacobi_ref(d: dict[str, Any]) -> dict[str, np.ndarray]:
    a, b = d["a"].copy(), d["b"].copy()
    for _ in range(TSTEPS):
        for src, dst in ((a, b), (b, a)):
            dst[1:-1, 1:-1] = F32(0.2) * (src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:]
                                          + src[2:, 1:-1] + src[:-2, 1:-1])
    return {"a": a, "b": b}


def _jacobi_run(k: Any, launch: Launch, d: dict[str, Any]) -> None:
    for _ in range(TSTEPS):
        launch(k.jacobi_2d, d["a"].shape, d["a"], d["b"])
        launch(k.jacobi_2d, d["a"].shape, d["b"], d["a"])


def _heat_make(n: int) -> dict[str, Any]:
    a = _grid((n, n, n), lambda i, j, k: (i + j + (n - k)) * 10 / n)
    return {"a": a, "b": a.copy()}


def _heat_ref(d: dict[str, Any]) -> dict[str, np.ndarray]:
    a, b = d["a"].copy(), d["b"].copy()
    c, eighth, two = (slice(1, -1),) * 3, F32(0.125), F32(2.0)
    lo, hi = slice(None, -2), slice(2, None)
    for _ in range(TSTEPS):
        for src, dst in ((a, b), (b, a)):
            mid = src[c]
            dst[c] = (eighth * (src[hi, c[1], c[2]] - two * mid + src[lo, c[1], c[2]])
                      + eighth * (src[c[0], hi, c[2]] - two * mid + src[c[0], lo, c[2]])
                      + eighth * (src[c[0], c[1], hi] - two * mid + src[c[0], c[1], lo])
                      + mid)
    return {"a": a, "b": b}


def _heat_run(k: Any, launch: Launch, d: dict[str, Any]) -> None:
    for _ in range(TSTEPS):
        launch(k.heat_3d, d["a"].shape, d["a"], d["b"])
        launch(k.heat_3d, d["a"].shape, d["b"], d["a"])


# -- linear algebra ------------------------------------------------------------------------
def _gemm_make(n: int) -> dict[str, Any]:
    ni, nj, nk = n, n + 2, n + 4
    return {"alpha": 1.5, "beta": 1.2,
            "c": _grid((ni, nj), lambda i, j: (i * j + 1) % ni / ni),
            "a": _grid((ni, nk), lambda i, k: i * (k + 1) % nk / nk),
            "b": _grid((nk, nj), lambda k, j: k * (j + 2) % nj / nj)}


def _gemm_ref(d: dict[str, Any]) -> dict[str, np.ndarray]:
    return {"c": F32(d["alpha"]) * (d["a"] @ d["b"]) + F32(d["beta"]) * d["c"]}


def _gemm_run(k: Any, launch: Launch, d: dict[str, Any]) -> None:
    launch(k.gemm, d["c"].shape, d["alpha"], d["beta"], d["a"], d["b"], d["c"])


def _atax_make(n: int) -> dict[str, Any]:
    m = n + 3
    return {"a": _grid((m, n), lambda i, j: (i + j) % n / (5 * m)),
            "x": _grid((n,), lambda i: 1 + i / n),
            "tmp": np.zeros(m, F32), "y": np.zeros(n, F32)}


def _atax_ref(d: dict[str, Any]) -> dict[str, np.ndarray]:
    tmp = d["a"] @ d["x"]
    return {"tmp": tmp, "y": d["a"].T @ tmp}


def _atax_run(k: Any, launch: Launch, d: dict[str, Any]) -> None:
    launch(k.atax_ax, d["tmp"].shape, d["a"], d["x"], d["tmp"])
    launch(k.atax_aty, d["y"].shape, d["a"], d["tmp"], d["y"])


def _bicg_make(n: int) -> dict[str, Any]:
    m = n + 5
    return {"a": _grid((n, m), lambda i, j: i * (j + 1) % n / n),
            "p": _grid((m,), lambda i: i % m / m), "r": _grid((n,), lambda i: i % n / n),
            "s": np.zeros(m, F32), "q": np.zeros(n, F32)}


def _bicg_ref(d: dict[str, Any]) -> dict[str, np.ndarray]:
    return {"s": d["r"] @ d["a"], "q": d["a"] @ d["p"]}


def _bicg_run(k: Any, launch: Launch, d: dict[str, Any]) -> None:
    launch(k.bicg_s, d["s"].shape, d["a"], d["r"], d["s"])
    launch(k.bicg_q, d["q"].shape, d["a"], d["p"], d["q"])


def _mvt_make(n: int) -> dict[str, Any]:
    vec = {name: _grid((n,), lambda i, o=o: (i + o) % n / n)
           for name, o in (("x1", 0), ("x2", 1), ("y1", 3), ("y2", 4))}
    return {"a": _grid((n, n), lambda i, j: i * j % n / n), **vec}


def _mvt_ref(d: dict[str, Any]) -> dict[str, np.ndarray]:
    return {"x1": d["x1"] + d["a"] @ d["y1"], "x2": d["x2"] + d["a"].T @ d["y2"]}


def _mvt_run(k: Any, launch: Launch, d: dict[str, Any]) -> None:
    launch(k.mvt, d["x1"].shape, d["a"], d["y1"], d["y2"], d["x1"], d["x2"])


# -- statistics ----------------------------------------------------------------------------
def _cov_make(n: int) -> dict[str, Any]:
    m = n - 2
    return {"data": _grid((n, m), lambda i, j: i * j / m),
            "mean": np.zeros(m, F32), "cov": np.zeros((m, m), F32)}


def _cov_ref(d: dict[str, Any]) -> dict[str, np.ndarray]:
    data = d["data"] - d["data"].mean(axis=0, dtype=F32)
    return {"cov": (data.T @ data) / F32(len(data) - 1)}


def _cov_run(k: Any, launch: Launch, d: dict[str, Any]) -> None:
    launch(k.column_mean, d["mean"].shape, d["data"], d["mean"])
    launch(k.center, d["data"].shape, d["data"], d["mean"])
    launch(k.covariance, d["cov"].shape, d["data"], d["cov"])


def _corr_make(n: int) -> dict[str, Any]:
    m = n - 2
    return {"data": _grid((n, m), lambda i, j: i * j / m + i),
            "mean": np.zeros(m, F32), "stddev": np.zeros(m, F32),
            "corr": np.zeros((m, m), F32)}


def _corr_ref(d: dict[str, Any]) -> dict[str, np.ndarray]:
    data = d["data"]
    mean = data.mean(axis=0, dtype=F32)
    std = np.sqrt(((data - mean) ** 2).mean(axis=0, dtype=F32))
    std = np.where(std <= F32(0.1), F32(1.0), std)
    data = (data - mean) / (np.sqrt(F32(len(data))) * std)
    corr = data.T @ data
    np.fill_diagonal(corr, 1.0)
    return {"corr": corr}


def _corr_run(k: Any, launch: Launch, d: dict[str, Any]) -> None:
    launch(k.column_mean, d["mean"].shape, d["data"], d["mean"])
    launch(k.column_stddev, d["stddev"].shape, d["data"], d["mean"], d["stddev"])
    launch(k.normalize, d["data"].shape, d["data"], d["mean"], d["stddev"])
    launch(k.correlation, d["corr"].shape, d["data"], d["corr"])


# -- a k-loop: one launch per k, the k passed as a scalar ----------------------------------
def _floyd_make(n: int) -> dict[str, Any]:
    i, j = np.indices((n, n))
    far = ((i + j) % 13 == 0) | ((i + j) % 7 == 0) | ((i + j) % 11 == 0)
    return {"path": np.where(far, 999, i * j % 7 + 1).astype(np.int32)}


def _floyd_ref(d: dict[str, Any]) -> dict[str, np.ndarray]:
    path = d["path"].copy()
    for k in range(len(path)):
        np.minimum(path, path[:, k:k + 1] + path[k:k + 1, :], out=path)
    return {"path": path}


def _floyd_run(k: Any, launch: Launch, d: dict[str, Any]) -> None:
    for step in range(d["path"].shape[0]):
        launch(k.floyd_warshall, d["path"].shape, step, d["path"])


# -- sparse: CSR SpMV, SHOC's scalar kernel (one thread per row) ---------------------------
def _spmv_make(n: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    dense = np.where(rng.random((n, n)) < 0.05, rng.random((n, n)), 0).astype(F32)
    rows, cols = np.nonzero(dense)
    return {"rows": np.searchsorted(rows, np.arange(n + 1)).astype(np.int32),
            "cols": cols.astype(np.int32), "vals": dense[rows, cols],
            "x": _grid((n,), lambda i: i / n), "y": np.zeros(n, F32), "dense": dense}


def _spmv_ref(d: dict[str, Any]) -> dict[str, np.ndarray]:
    return {"y": d["dense"] @ d["x"]}


def _spmv_run(k: Any, launch: Launch, d: dict[str, Any]) -> None:
    launch(k.spmv_csr, d["y"].shape, d["rows"], d["cols"], d["vals"], d["x"], d["y"])


POLYBENCH = "PolyBench/C 4.2.1"
PROBLEMS = {p.name: p for p in (
    Problem("jacobi_2d", f"{POLYBENCH} stencils/jacobi-2d", "stencil", ("jacobi_2d",),
            _jacobi_make, _jacobi_ref, _jacobi_run, ("a", "b"), True),
    Problem("heat_3d", f"{POLYBENCH} stencils/heat-3d", "stencil", ("heat_3d",),
            _heat_make, _heat_ref, _heat_run, ("a", "b"), True),
    Problem("gemm", f"{POLYBENCH} linear-algebra/blas/gemm", "linear algebra", ("gemm",),
            _gemm_make, _gemm_ref, _gemm_run, ("c",), False),
    Problem("atax", f"{POLYBENCH} linear-algebra/kernels/atax", "linear algebra",
            ("atax_ax", "atax_aty"), _atax_make, _atax_ref, _atax_run, ("tmp", "y"), False),
    Problem("bicg", f"{POLYBENCH} linear-algebra/kernels/bicg", "linear algebra",
            ("bicg_s", "bicg_q"), _bicg_make, _bicg_ref, _bicg_run, ("s", "q"), False),
    Problem("mvt", f"{POLYBENCH} linear-algebra/kernels/mvt", "linear algebra", ("mvt",),
            _mvt_make, _mvt_ref, _mvt_run, ("x1", "x2"), False),
    Problem("covariance", f"{POLYBENCH} datamining/covariance", "statistics",
            ("column_mean", "center", "covariance"), _cov_make, _cov_ref, _cov_run, ("cov",),
            False),
    Problem("correlation", f"{POLYBENCH} datamining/correlation", "statistics",
            ("column_mean", "column_stddev", "normalize", "correlation"), _corr_make,
            _corr_ref, _corr_run, ("corr",), False),
    Problem("floyd_warshall", f"{POLYBENCH} medley/floyd-warshall", "k-loop",
            ("floyd_warshall",), _floyd_make, _floyd_ref, _floyd_run, ("path",), True),
    Problem("spmv_csr", "SHOC 1.1.5 Spmv, spmv_csr_scalar_kernel", "sparse", ("spmv_csr",),
            _spmv_make, _spmv_ref, _spmv_run, ("y",), False),
)}


#: The argument of each problem's ``make`` that gives PolyBench's MEDIUM dataset (jacobi-2d
#: N=250, heat-3d N=40, gemm 200x220x240, atax and bicg 390x410 (here 400x403 and
#: 400x405), mvt N=400, covariance and correlation 260x240, floyd-warshall N=500; TSTEPS
#: stays 4) and, for SpMV, a 4096-row matrix (SHOC's smallest problem has 1024 rows).
MEDIUM = {"jacobi_2d": 250, "heat_3d": 40, "gemm": 200, "atax": 400, "bicg": 400, "mvt": 400,
          "covariance": 260, "correlation": 260, "floyd_warshall": 500, "spmv_csr": 4096}


def run_vyre(problem: Problem, data: dict[str, Any], drv: Any, backend: str) -> dict[str, Any]:
    """Run the vyre port on copies of ``data``; the arrays after the run, by name."""
    from vyre_benchmarks.suite import vyre_kernels
    arrays = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in data.items()}
    problem.run(vyre_kernels, lambda kern, dim, *args: drv.launch(
        kern, dim=dim, args=args, backend=backend), arrays)
    return arrays


def run_warp(problem: Problem, data: dict[str, Any]) -> dict[str, Any]:
    """Run the Warp port on Warp's CPU device on copies of ``data``; its arrays after the
    run, back in numpy."""
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING  # (its banner and module reports go to stdout)
    from vyre_benchmarks.suite import warp_kernels
    arrays = {k: wp.array(v, device="cpu") if isinstance(v, np.ndarray) else v
              for k, v in data.items()}
    problem.run(warp_kernels, lambda kern, dim, *args: wp.launch(
        kern, dim=dim, inputs=list(args), device="cpu"), arrays)
    return {k: v.numpy() if isinstance(v, wp.array) else v for k, v in arrays.items()}


def run_taichi(problem: Problem, data: dict[str, Any]) -> dict[str, Any]:
    """Run the Taichi port on Taichi's CPU backend on copies of ``data``: a launch is a
    call of the kernel, which loops over the output itself; numpy arrays are its
    ``ti.types.ndarray`` arguments (no copy)."""
    from vyre_benchmarks.suite import taichi_kernels
    arrays = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in data.items()}
    problem.run(taichi_kernels, lambda kern, dim, *args: kern(*args), arrays)
    return arrays


def run_numba(problem: Problem, data: dict[str, Any]) -> dict[str, Any]:
    """Run the numba port on copies of ``data``: a launch is a call of the kernel's
    function, which loops over the output itself."""
    from vyre_benchmarks.suite import numba_kernels
    arrays = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in data.items()}
    problem.run(numba_kernels, lambda kern, dim, *args: kern(*args), arrays)
    return arrays
