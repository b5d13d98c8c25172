"""The slow tier (``vyre conform --exhaustive``): every unary float op of f32 over at least
2^24 inputs spread evenly over all bit patterns, and each binary one over as many pairs
(half with the first operand so spread and random bits for the second, half drawn where
the result is an ordinary number: ``operands``),
against the correctly rounded result (computed in f64, rounded once), reporting the
largest ULP distance per backend and op.

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
from vyre_core.conformance import oracle
from vyre_core.conformance.cases_special import correctly_rounded_pow

#: (IR function, the exact or correctly rounded numpy function in f64, allowed ULPs): the
#: budget is the one docs/semantics.md promises for the op; its arity is the function's.
#: A transcendental with budget 0 (the math library's: correctly rounded) is held to the
#: oracle instead (``conformance.oracle``: f64 rounded once misrounds a few inputs).
OPS: dict[str, tuple[Callable, Callable, int]] = {
    "neg": (lambda x: -x, np.negative, 0), "abs": (abs, np.abs, 0),
    "floor": (ir.floor, np.floor, 0), "ceil": (ir.ceil, np.ceil, 0),
    "sqrt": (ir.sqrt, np.sqrt, 0),
    "exp": (ir.exp, np.exp, 0), "log": (ir.log, np.log, 0),
    "sin": (ir.sin, np.sin, 0), "cos": (ir.cos, np.cos, 0),
    "tan": (ir.tan, np.tan, 0), "tanh": (ir.tanh, np.tanh, 0),
    "exp2": (ir.exp2, np.exp2, 0), "log2": (ir.log2, np.log2, 0),
    "pow": (ir.pow, correctly_rounded_pow, 0), "atan2": (ir.atan2, np.arctan2, 0),
}
BINARY = ("pow", "atan2")
DEFAULT_INPUTS = 1 << 24
CHUNK = 1 << 20


@dataclass(frozen=True)
class SweepResult:
    backend: str
    op: str
    inputs: int
    max_ulp: int          # NaN against a number counts as the largest distance
    worst_input: tuple[float, ...]  # (the operands)
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


def operands(op: str, count: int) -> Iterator[list[np.ndarray]]:
    """The inputs of ``op``: ``inputs(count)``, and for a binary op a second operand per
    value from a fixed seed: random bits for half; for the other half one that keeps the
    result finite and not trivial. pow: x from [1/4, 4) (where y is largest for a given
    result, so an error in log2 x counts most), either sign, and y with y log2|x| in
    [-155, 130], integers among them; atan2 (whose first operand is y): x = y times
    [-4, 4)."""
    rng = np.random.default_rng(0)
    for xs in inputs(count):
        if op not in BINARY:
            yield [xs]
            continue
        ys = rng.integers(0, 1 << 32, len(xs), dtype=np.uint64).astype(np.uint32).view(
            np.float32)
        half = len(xs) // 2
        with np.errstate(all="ignore"):
            if op == "pow":
                xs = xs.copy()
                xs[:half] = rng.uniform(0.25, 4.0, half) * rng.choice([-1.0, 1.0], half)
                t = rng.uniform(-155.0, 130.0, half) / np.log2(np.abs(xs[:half].astype(
                    np.float64)))
                t[half // 2:] = np.rint(t[half // 2:])
            else:
                t = xs[:half] * rng.uniform(-4.0, 4.0, half)
            ys[:half] = np.where(np.isfinite(t), t, ys[:half]).astype(np.float32)
        yield [xs, ys]


def program(op: str, n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    args = [k.read(name, ir.f32, n) for name in ("x", "y")[:1 + (op in BINARY)]]
    out = k.output("out", ir.f32, n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < n):
        out[i] = OPS[op][0](*(a[i] for a in args))
    return k.build()


def sweep(dispatch: Callable[[ir.Program, list[np.ndarray]], list[np.ndarray]],
          backend: str, op: str, count: int = DEFAULT_INPUTS) -> SweepResult:
    """``op`` over ``count`` inputs through ``dispatch(program, inputs) -> outputs``."""
    worst: tuple = (-1, (), 0.0, 0.0)
    programs: dict[int, ir.Program] = {}
    for args in operands(op, count):
        prog = programs.setdefault(len(args[0]), program(op, len(args[0])))
        got = np.asarray(dispatch(prog, args)[0])
        if OPS[op][2] == 0 and op in oracle.OPS:  # (correctly rounded: one answer)
            want = oracle.correctly_rounded(op, "f32", *args)
        else:
            with np.errstate(all="ignore"):
                want = OPS[op][1](*(a.astype(np.float64) for a in args)).astype(np.float32)
        distance = ulp_distance(want, got)
        at = int(distance.argmax())
        if int(distance[at]) > worst[0]:
            worst = (int(distance[at]), tuple(float(a[at]) for a in args), float(want[at]),
                     float(got[at]))
    return SweepResult(backend, op, count, worst[0], worst[1], worst[2], worst[3], OPS[op][2])


def run_on(driver, backend: str, count: int = DEFAULT_INPUTS,
           advance: Callable[[str], None] = lambda _label: None) -> list[SweepResult]:
    """Every op on ``backend`` through ``driver`` (its worker), one result per op."""
    config = DispatchConfig(timeout=120.0)

    def dispatch(prog: ir.Program, xs: list[np.ndarray]) -> list[np.ndarray]:
        return list(driver.dispatch(prog, xs, backend=backend, config=config))

    results = []
    for op in OPS:
        results.append(sweep(dispatch, backend, op, count))
        advance(f"{backend} {op}")
    return results
