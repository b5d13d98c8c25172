"""The slow tier (``vyre conform --exhaustive``): every unary float op of f32 over at least
2^24 inputs spread evenly over all bit patterns, against the correctly rounded result
(computed in f64, rounded once), reporting the largest ULP distance per backend and op.

The default corpus tries a few dozen inputs per op; this is where an approximation that is
fine at 1.0 and hundreds of ULPs out at 80.0 (or wrong at 1e9) shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from vyre_core import ir
from vyre_core.compare import ulp_distance
from vyre_core.config import DispatchConfig

#: (IR function, the exact or correctly rounded numpy function in f64, allowed ULPs): the
#: budget is the one docs/semantics.md promises for the op
OPS: dict[str, tuple[Callable, Callable, int]] = {
    "neg": (lambda x: -x, np.negative, 0), "abs": (abs, np.abs, 0),
    "floor": (ir.floor, np.floor, 0), "ceil": (ir.ceil, np.ceil, 0),
    "sqrt": (ir.sqrt, np.sqrt, 0),
    "exp": (ir.exp, np.exp, 4), "log": (ir.log, np.log, 4),
    "sin": (ir.sin, np.sin, 4), "cos": (ir.cos, np.cos, 4),
}
DEFAULT_INPUTS = 1 << 24
CHUNK = 1 << 20


@dataclass(frozen=True)
class SweepResult:
    backend: str
    op: str
    inputs: int
    max_ulp: int          # NaN against a number counts as the largest distance
    worst_input: float
    expected: float
    actual: float
    budget: int

    @property
    def ok(self) -> bool:
        return self.max_ulp <= self.budget


def inputs(count: int) -> Iterator[np.ndarray]:
    """``count`` f32 values whose bit patterns step evenly through all 2^32 (both signs,
    subnormals, infinities and NaNs included), in chunks."""
    step = max(1, (1 << 32) // count)
    for start in range(0, count, CHUNK):
        n = min(CHUNK, count - start)
        bits = (np.arange(start, start + n, dtype=np.uint64) * step).astype(np.uint32)
        yield bits.view(np.float32)


def program(op: str, n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    x = k.read("x", ir.f32, n)
    out = k.output("out", ir.f32, n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < n):
        out[i] = OPS[op][0](x[i])
    return k.build()


def sweep(dispatch: Callable[[ir.Program, list[np.ndarray]], list[np.ndarray]],
          backend: str, op: str, count: int = DEFAULT_INPUTS) -> SweepResult:
    """``op`` over ``count`` inputs through ``dispatch(program, inputs) -> outputs``."""
    worst = (-1, 0.0, 0.0, 0.0)
    programs: dict[int, ir.Program] = {}
    for xs in inputs(count):
        prog = programs.setdefault(len(xs), program(op, len(xs)))
        got = np.asarray(dispatch(prog, [xs])[0])
        with np.errstate(all="ignore"):
            want = OPS[op][1](xs.astype(np.float64)).astype(np.float32)
        distance = ulp_distance(want, got)
        at = int(distance.argmax())
        if int(distance[at]) > worst[0]:
            worst = (int(distance[at]), float(xs[at]), float(want[at]), float(got[at]))
    return SweepResult(backend, op, count, worst[0], worst[1], worst[2], worst[3], OPS[op][2])


def run_on(driver, backend: str, count: int = DEFAULT_INPUTS,
           advance: Callable[[str], None] = lambda _label: None) -> list[SweepResult]:
    """Every op on ``backend`` through ``driver`` (its worker), one result per op."""
    config = DispatchConfig(timeout=120.0)

    def dispatch(prog: ir.Program, xs: list[np.ndarray]) -> list[np.ndarray]:
        return list(driver.dispatch(prog, xs, backend, config))

    results = []
    for op in OPS:
        results.append(sweep(dispatch, backend, op, count))
        advance(f"{backend} {op}")
    return results
