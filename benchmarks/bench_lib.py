"""vyre.lib figures: ``lib.sum``, ``lib.max`` and ``lib.cumsum`` of 16 Mi float32 through a
Driver, each next to numpy's function of the same name on the same array timed in turns
with it (one call of each per round, medians), so a machine that slows down during the
run moves both alike. Issue 40's targets on the cpu backend: within 1.5x of numpy for
sum and max, 2x for cumsum.

The input crosses two ways, each its own figure: an array of ``Driver.asarray`` (shared
memory: its descriptor crosses, no copy) and an ordinary numpy array (copied into shared
memory on every call). On wgpu (lavapipe here: a software Vulkan on the same cores) the
figures are recorded beside the cpu ones. Each result's bytes are checked against the
order's own bytes on the reference backend before it is timed (the order differs from
numpy's pairwise sum, so the time is compared, not the bits).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable

import numpy as np

from vyre_benchmarks.harness import Result, elements, reps, size
from vyre_core import Driver, lib

REQUIRES = ("reference", "cpu", "wgpu")
N = 1 << 24


@functools.cache
def _driver() -> Driver:
    return Driver()  # (closed at exit by the driver's own atexit hook)


@functools.cache
def _data() -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(0).standard_normal(size(N)).astype(np.float32)
    return x, _driver().asarray(x)


@functools.cache
def _reference(name: str) -> np.ndarray:
    """``lib.NAME`` of the data on the reference backend, once for all its rows (it
    interprets every element)."""
    return np.asarray(getattr(lib, name)(_driver(), _data()[0], backend="reference"))


def _in_turns(fn: Callable[[], object], baseline: Callable[[], object],
              rounds: int) -> tuple[float, float]:
    """Median ms of ``fn`` and of ``baseline``, one call of each per round, after a
    warm-up call of ``baseline`` (the caller's check was ``fn``'s)."""
    baseline()
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(rounds):
        for f, into in ((fn, mine), (baseline, theirs)):
            start = time.perf_counter()
            f()
            into.append(time.perf_counter() - start)
    return statistics.median(mine) * 1e3, statistics.median(theirs) * 1e3


def _bench(name: str, backend: str, shared: bool) -> Callable[[], Result]:
    def bench() -> Result:
        drv = _driver()
        x, in_shared_memory = _data()
        arg = in_shared_memory if shared else x
        fn = getattr(lib, name)
        want = _reference(name)
        got = fn(drv, arg, backend=backend)
        if np.asarray(got).tobytes() != want.tobytes():
            raise AssertionError(f"lib.{name} on {backend}: {got!r}, the reference {want!r}")
        numpy_fn = getattr(np, name)
        value, base = _in_turns(lambda: fn(drv, arg, backend=backend), lambda: numpy_fn(x),
                                reps(15 if backend == "cpu" else 5, 2))
        how = "a Driver.asarray array (no copy)" if shared else "a numpy array (copied)"
        return Result(f"lib.{name} {elements(x.size)} f32, {backend} backend, {how}", value, "ms",
                      f"numpy.{name}", base)

    bench.__name__ = f"{name}_16m_{backend}_{'shared' if shared else 'copied'}_vs_numpy"
    return bench


BENCHMARKS = [_bench(name, backend, shared) for backend in ("cpu", "wgpu")
              for name in ("sum", "max", "cumsum") for shared in (True, False)]
