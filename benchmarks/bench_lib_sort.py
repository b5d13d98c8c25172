"""vyre.lib sort figures: ``lib.sort`` of 16 Mi and 1 Mi float32 through a Driver, each
next to ``numpy.sort`` of the same array timed in turns with it (bench_lib's
``_in_turns``: one call of each per round, medians). Issue 40's target on the cpu backend:
16 Mi within 3x of numpy.sort. On wgpu (lavapipe here: a software Vulkan on the same
cores) the figures are recorded beside the cpu ones.

The input is an array of ``Driver.asarray`` (shared memory: no copy in), and for 16 Mi on
the cpu backend also an ordinary numpy array (copied in on every call). numpy.sort is its
default (an AVX-512 quicksort where the CPU has it); lib.sort is stable, so each result is
checked against ``numpy.sort(x, kind="stable")``'s bytes before it is timed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from vyre_benchmarks.bench_lib import _driver, _in_turns
from vyre_benchmarks.harness import Result, elements, reps, size
from vyre_core import lib

REQUIRES = ("cpu", "wgpu")


@functools.cache
def _data(n: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(0).standard_normal(size(n)).astype(np.float32)
    return x, _driver().asarray(x)


def _bench(n: int, backend: str, shared: bool) -> Callable[[], Result]:
    def bench() -> Result:
        drv = _driver()
        x, in_shared_memory = _data(n)
        arg = in_shared_memory if shared else x
        got = lib.sort(drv, arg, backend=backend)
        if got.tobytes() != np.sort(x, kind="stable").tobytes():
            raise AssertionError(f"lib.sort on {backend} is not numpy's stable sort")
        rounds = reps(7 if backend == "cpu" else 3, 1) * (4 if n < 1 << 24 else 1)
        value, base = _in_turns(lambda: lib.sort(drv, arg, backend=backend),
                                lambda: np.sort(x), rounds)
        how = "a Driver.asarray array (no copy)" if shared else "a numpy array (copied)"
        return Result(f"lib.sort {elements(x.size)} f32, {backend} backend, {how}", value, "ms",
                      "numpy.sort", base)

    bench.__name__ = f"sort_{n >> 20}m_{backend}_{'shared' if shared else 'copied'}_vs_numpy"
    return bench


BENCHMARKS = [_bench(1 << 24, "cpu", True), _bench(1 << 24, "cpu", False),
              _bench(1 << 20, "cpu", True), _bench(1 << 24, "wgpu", True),
              _bench(1 << 20, "wgpu", True)]
