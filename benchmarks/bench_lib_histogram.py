"""vyre.lib histogram figures: ``lib.bincount`` of 16 Mi int32 values into 256 bins (counts,
and float32 weights summed) and ``lib.histogram`` of 16 Mi float32 into 256 uniform bins,
through a Driver, each next to numpy's function of the same name on the same arrays,
timed in turns with it (``bench_lib._in_turns``: one call of each per round, medians).
Issue 40's target on the cpu backend: counts within 2x of ``numpy.bincount``; the rest,
and wgpu (lavapipe here), recorded beside it.

The values cross as an array of ``Driver.asarray`` (shared memory: no copy) and, for the
counts, also as a plain numpy array (copied into shared memory on each call). Each
result is checked before it is timed: counts and histograms against numpy's exactly, the
weighted sums against the reference backend's bytes (the order differs from
numpy.bincount's beyond one chunk).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from vyre_benchmarks.bench_lib import _driver, _in_turns
from vyre_benchmarks.harness import Result, elements, reps, size
from vyre_core import lib

REQUIRES = ("reference", "cpu", "wgpu")
N = 1 << 24
BINS = 256


@functools.cache
def _data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    drv = _driver()
    n = size(N)
    values = rng.integers(0, BINS, n).astype(np.int32)
    points = rng.standard_normal(n).astype(np.float32)
    weights = rng.standard_normal(n).astype(np.float32)
    return {"values": values, "shared_values": drv.asarray(values), "points": points,
            "shared_points": drv.asarray(points), "weights": weights,
            "shared_weights": drv.asarray(weights)}


def _check(got: object, want: object, what: str) -> None:
    if np.asarray(got).tobytes() != np.asarray(want).tobytes():
        raise AssertionError(f"{what}: {got!r}, expected {want!r}")


def _counts(backend: str, shared: bool) -> Callable[[], Result]:
    def bench() -> Result:
        drv, d = _driver(), _data()
        x = d["shared_values"] if shared else d["values"]
        _check(lib.bincount(drv, x, backend=backend), np.bincount(d["values"]),
               f"lib.bincount on {backend}")
        value, base = _in_turns(lambda: lib.bincount(drv, x, backend=backend),
                                lambda: np.bincount(d["values"]),
                                reps(15 if backend == "cpu" else 5, 2))
        how = "a Driver.asarray array (no copy)" if shared else "a numpy array (copied)"
        return Result(f"lib.bincount {elements(d['values'].size)} int32 into {BINS} bins, "
                      f"{backend} backend, {how}",
                      value, "ms", "numpy.bincount", base)

    bench.__name__ = f"bincount_16m_{backend}_{'shared' if shared else 'copied'}_vs_numpy"
    return bench


@functools.cache
def _weighted_on_the_reference() -> np.ndarray:
    """The weighted counts on the reference backend, once for both rows (it interprets
    every element)."""
    d = _data()
    return lib.bincount(_driver(), d["shared_values"], d["shared_weights"],
                        backend="reference")


def _weighted(backend: str) -> Callable[[], Result]:
    def bench() -> Result:
        drv, d = _driver(), _data()
        x, w = d["shared_values"], d["shared_weights"]
        _check(lib.bincount(drv, x, w, backend=backend), _weighted_on_the_reference(),
               f"weighted on {backend}")
        value, base = _in_turns(lambda: lib.bincount(drv, x, w, backend=backend),
                                lambda: np.bincount(d["values"], d["weights"]),
                                reps(15 if backend == "cpu" else 5, 2))
        return Result(f"lib.bincount {elements(d['values'].size)} int32 into {BINS} bins, "
                      "float32 weights, "
                      f"{backend} backend, Driver.asarray arrays", value, "ms",
                      "numpy.bincount (weights)", base)

    bench.__name__ = f"bincount_weighted_16m_{backend}_vs_numpy"
    return bench


def _histogram(backend: str) -> Callable[[], Result]:
    def bench() -> Result:
        drv, d = _driver(), _data()
        x = d["shared_points"]
        _check(lib.histogram(drv, x, BINS, backend=backend)[0],
               np.histogram(d["points"], BINS)[0], f"lib.histogram on {backend}")
        value, base = _in_turns(lambda: lib.histogram(drv, x, BINS, backend=backend),
                                lambda: np.histogram(d["points"], BINS),
                                reps(15 if backend == "cpu" else 5, 2))
        return Result(f"lib.histogram {elements(d['points'].size)} float32 into {BINS} bins, "
                      f"{backend} backend, "
                      "a Driver.asarray array", value, "ms", "numpy.histogram", base)

    bench.__name__ = f"histogram_16m_{backend}_vs_numpy"
    return bench


BENCHMARKS = [f(backend) for backend in ("cpu", "wgpu") for f in (
    functools.partial(_counts, shared=True), functools.partial(_counts, shared=False),
    _weighted, _histogram)]
