"""The transcendentals' throughput (issue 42): each IR function over 4 Mi f32 (64 Ki in
quick mode) through a Driver on cpu and wgpu (lavapipe here: a software Vulkan on the
same cores), next to numpy's f32 function on the same array timed in turns with it (one
call of each per round, medians), so a machine that slows down moves both alike. The
input is a ``Driver.asarray`` array (its descriptor crosses, no copy); the output comes
back as an ordinary array. Arguments lie where each function does its work: ``exp``'s
whole range, ``sin`` up to 50 (a reduction at every magnitude), ``pow``'s bases near 1
and exponents to +-40, ...

Before it is timed, each result is checked against the reference backend's, within the
op's budget in ``vyre conform --exhaustive`` (``sweep.OPS``): 0, identical bytes, for the
math library's correctly rounded functions; the ULP budget docs/semantics.md states for
the other transcendentals."""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable

import numpy as np

from vyre_benchmarks.harness import Result, reps
from vyre_core import Driver, ir
from vyre_core.compare import first_divergence
from vyre_core.conformance import sweep
from vyre_core.mathlib.library import functions

REQUIRES = ("reference", "cpu", "wgpu")


def _size() -> int:
    """4 Mi elements; quick mode 64 Ki (the reference checks every result first, and it
    interprets: 4 Mi of each function is minutes of it)."""
    return reps(1 << 22, 1 << 16)


def _uniform(low: float, high: float) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.uniform(low, high, _size()).astype(np.float32)


def _log_uniform(rng: np.random.Generator) -> np.ndarray:
    return np.exp2(rng.uniform(-120, 120, _size())).astype(np.float32)


#: op -> (IR builder, numpy's function, how each operand is drawn)
OPS: dict[str, tuple[Callable, Callable, tuple[Callable, ...]]] = {
    "exp": (ir.exp, np.exp, (_uniform(-87, 88),)),
    "exp2": (ir.exp2, np.exp2, (_uniform(-126, 127),)),
    "log": (ir.log, np.log, (_log_uniform,)),
    "log2": (ir.log2, np.log2, (_log_uniform,)),
    "sin": (ir.sin, np.sin, (_uniform(-50, 50),)),
    "cos": (ir.cos, np.cos, (_uniform(-50, 50),)),
    "tan": (ir.tan, np.tan, (_uniform(-50, 50),)),
    "tanh": (ir.tanh, np.tanh, (_uniform(-10, 10),)),
    "pow": (ir.pow, np.power, (_uniform(0.25, 4.0), _uniform(-40, 40))),
    "atan2": (ir.atan2, np.arctan2, (_uniform(-10, 10), _uniform(-10, 10))),
}


def _uniform64(low: float, high: float) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.uniform(low, high, _size())


def _log_uniform64(rng: np.random.Generator) -> np.ndarray:
    return np.exp2(rng.uniform(-1000, 1000, _size()))


#: The f64 functions (cpu only: wgpu has no f64 transcendentals), next to numpy's f64.
OPS_F64: dict[str, tuple[Callable, Callable, tuple[Callable, ...]]] = {
    "exp": (ir.exp, np.exp, (_uniform64(-708, 709),)),
    "exp2": (ir.exp2, np.exp2, (_uniform64(-1022, 1023),)),
    "log": (ir.log, np.log, (_log_uniform64,)),
    "log2": (ir.log2, np.log2, (_log_uniform64,)),
    "sin": (ir.sin, np.sin, (_uniform64(-50, 50),)),
    "cos": (ir.cos, np.cos, (_uniform64(-50, 50),)),
    "tan": (ir.tan, np.tan, (_uniform64(-50, 50),)),
    "tanh": (ir.tanh, np.tanh, (_uniform64(-10, 10),)),
    "atan2": (ir.atan2, np.arctan2, (_uniform64(-10, 10), _uniform64(-10, 10))),
    "pow": (ir.pow, np.power, (_uniform64(0.25, 4.0), _uniform64(-40, 40))),
}
_TABLES = {ir.f32: OPS, ir.f64: OPS_F64}


@functools.cache
def _driver() -> Driver:
    return Driver()  # (closed at exit by the driver's own atexit hook)


@functools.cache
def _program(op: str, dtype: ir.DType = ir.f32) -> ir.Program:
    fn, _, operands = _TABLES[dtype][op]
    k = ir.Kernel(workgroup=(256,))
    ins = [k.read(f"x{j}", dtype) for j in range(len(operands))]
    out = k.output("out", dtype, _size())
    i = k.let("i", ir.global_id())
    out[i] = fn(*(x[i] for x in ins))
    return k.build()


@functools.cache
def _inputs(op: str, dtype: ir.DType = ir.f32) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(42)
    arrays = [draw(rng) for draw in _TABLES[dtype][op][2]]
    return arrays, [_driver().asarray(a) for a in arrays]


def _budget(op: str, dtype: ir.DType) -> int:
    """f32: the sweep's budget; f64: 0 (identical bytes) where the library computes it,
    else the 4 ULP between numpy's and libm's that docs/semantics.md allows."""
    if dtype is ir.f32:
        return sweep.OPS[op][2]
    kind = "binop" if len(OPS_F64[op][2]) == 2 else "unop"
    return 0 if (f"{kind}.{op}", dtype) in functions() else 4


def _bench(op: str, backend: str, dtype: ir.DType = ir.f32) -> Callable[[], Result]:
    def bench() -> Result:
        drv, program, (arrays, shared) = _driver(), _program(op, dtype), _inputs(op, dtype)
        numpy_fn = _TABLES[dtype][op][1]
        want, = drv.dispatch(program, arrays, backend="reference")
        got, = drv.dispatch(program, shared, backend=backend)
        found = first_divergence(want, got, dtype, _budget(op, dtype))
        if found is not None:
            raise AssertionError(f"{op} on {backend} differs from the reference: {found}")
        mine: list[float] = []
        theirs: list[float] = []
        for _ in range(reps(7 if backend == "cpu" else 3, 1)):
            for call, into in ((lambda: drv.dispatch(program, shared, backend=backend), mine),
                               (lambda: numpy_fn(*arrays), theirs)):
                start = time.perf_counter()
                call()
                into.append(time.perf_counter() - start)
        return Result(f"{op} over {_size() >> 10:,} Ki {dtype.value}, {backend} backend",
                      statistics.median(mine) * 1e3, "ms",
                      f"numpy.{numpy_fn.__name__} {dtype.value}", statistics.median(theirs) * 1e3)

    bench.__name__ = f"{op}_4m_{dtype.value}_{backend}_vs_numpy"
    return bench


BENCHMARKS = [*(_bench(op, backend) for backend in ("cpu", "wgpu") for op in OPS),
              *(_bench(op, "cpu", ir.f64) for op in OPS_F64)]
