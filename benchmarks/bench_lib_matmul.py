"""vyre.lib matmul and transpose figures: ``lib.matmul`` of two 512 x 512 float32 matrices
and ``lib.transpose`` of a 4096 x 4096 float32 matrix through a Driver, each next to
numpy's (``numpy.matmul``, ``numpy.ascontiguousarray(x.T)``) on the same arrays timed in
turns with it (``bench_lib._in_turns``: one call of each per round, medians). Issue 40's
target on the cpu backend: matmul within 5x of numpy.matmul. numpy's BLAS uses as many
threads as it is given (``OPENBLAS_NUM_THREADS``, else every core); the cpu worker uses
the cores it may run on: the figure's name says both counts, so a run compares like with
like when they are equal. On wgpu (lavapipe here: a software Vulkan on the same cores)
the figures are recorded beside the cpu ones.

A product's figure is measured in a process of its own whose BLAS threads sleep as soon
as they are idle (``apart.blas_idle``: in turns, OpenBLAS's threads spin for 0.1 s after
each of numpy's calls, on the cores the cpu worker computes on next).

The inputs are ``Driver.asarray`` arrays (their descriptors cross, no copy). Each result
is checked before it is timed: a transpose against numpy's bytes, a product's first 16
rows against the reference backend's bytes (the order differs from numpy's BLAS, so the
time is compared, not the bits).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import numpy as np

from vyre_benchmarks import apart
from vyre_benchmarks.bench_lib import _driver, _in_turns
from vyre_benchmarks.harness import Result, reps
from vyre_core import lib

REQUIRES = ("reference", "cpu", "wgpu")
SIZE = 512
SIDE = 4096


@functools.cache
def _matrices() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    side = reps(SIZE, SIZE // 4)  # (quick: a 64th of the work)
    return tuple(_driver().asarray(rng.standard_normal((side, side)).astype(np.float32))
                 for _ in range(2))


def _threads() -> str:
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "every core's")
    return f"numpy's BLAS: {blas} threads, asleep when idle, the cpu worker: " \
           f"{_driver().probe('cpu').extra.get('threads')}"


def _matmul(backend: str) -> Callable[[], Result]:
    def bench() -> Result:
        drv = _driver()
        a, b = _matrices()
        got = lib.matmul(drv, a, b, backend=backend)
        want = lib.matmul(drv, a[:16], b, backend="reference")
        if got[:16].tobytes() != want.tobytes():
            raise AssertionError(f"lib.matmul on {backend}: rows 0-15 are not the "
                                 "reference's bytes")
        value, base = _in_turns(lambda: lib.matmul(drv, a, b, backend=backend),
                                lambda: np.matmul(a, b), reps(15 if backend == "cpu" else 5, 2))
        return Result(f"lib.matmul {len(a)}^3 f32, {backend} backend ({_threads()})", value,
                      "ms", "numpy.matmul", base)

    bench.__name__ = f"matmul_512_{backend}_vs_numpy"
    return bench


def _transpose(backend: str) -> Callable[[], Result]:
    def bench() -> Result:
        drv = _driver()
        side = reps(SIDE, SIDE // 4)
        x = drv.asarray(np.random.default_rng(1).standard_normal((side, side))
                        .astype(np.float32))
        if lib.transpose(drv, x, backend=backend).tobytes() != \
                np.ascontiguousarray(x.T).tobytes():
            raise AssertionError(f"lib.transpose on {backend}: not numpy's bytes")
        value, base = _in_turns(lambda: lib.transpose(drv, x, backend=backend),
                                lambda: np.ascontiguousarray(x.T),
                                reps(15 if backend == "cpu" else 5, 2))
        return Result(f"lib.transpose {side}x{side} f32, {backend} backend", value, "ms",
                      "numpy.ascontiguousarray(x.T)", base)

    bench.__name__ = f"transpose_4096_{backend}_vs_numpy"
    return bench


#: Measured apart (``apart.blas_idle``): in turns with numpy's BLAS, whose idle threads
#: spin on the cores the product runs on next.
APART = [_matmul(backend) for backend in ("cpu", "wgpu")]
BENCHMARKS = [*(apart.blas_idle("lib_matmul", bench) for bench in APART),
              *(_transpose(backend) for backend in ("cpu", "wgpu"))]
