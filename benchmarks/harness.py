"""Timing and reporting shared by every benchmark: each figure is measured next to a
baseline in the same run, and reported as a ratio, because these machines are noisy."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Result:
    name: str
    value: float
    unit: str
    baseline: str
    baseline_value: float

    @property
    def ratio(self) -> float:
        return self.value / self.baseline_value if self.baseline_value else float("inf")

    def to_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}


def seconds_per_call(fn: Callable[[], object], repeat: int = 7, number: int = 1) -> float:
    """Median wall time of one call over ``repeat`` rounds of ``number`` calls, after a warm-up."""
    fn()
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - start) / number)
    return statistics.median(rounds)


def compare(name: str, fn: Callable[[], object], baseline: str,
            baseline_fn: Callable[[], object], repeat: int = 7, number: int = 1,
            unit: str = "ms") -> Result:
    """Time ``fn`` and ``baseline_fn`` alternately-in-one-run and report both."""
    scale = {"ms": 1e3, "us": 1e6, "s": 1.0}[unit]
    value = seconds_per_call(fn, repeat, number) * scale
    base = seconds_per_call(baseline_fn, repeat, number) * scale
    return Result(name, value, unit, baseline, base)
