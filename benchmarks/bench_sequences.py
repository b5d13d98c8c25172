"""Sequence figures: work that stays in the worker, each next to a baseline measured in
the same run, through a real Driver and its workers.

- a chain of ``STEPS`` small elementwise kernels (f32 x1024) as one sequence against the
  same chain as one dispatch per pass (each intermediate back to the caller and out
  again), on the reference and on wgpu: the whole chain, and the cost of one more step
  inside a sequence (``(t(STEPS) - t(1)) / (STEPS - 1)``, p50s, the three timed in turns)
  against one more pass as its own dispatch, and (on the reference) against an empty
  dispatch's round trip, timed in the same turns: the issue's target is a quarter of a
  round trip on the reference;
- the same chain with a buffer per step (every seam fusable), fused into one dispatch
  (``DispatchConfig(fuse=True)``) against the same sequence run step by step;
- every sequence example (reduce, scan, sort, chain, jacobi) run through the Driver on
  each backend (inputs sent, the sequence run, the returns received; chain's resident
  buffers uploaded once, before the timing) against its numpy counterpart on the same
  data (``numpy.sum``, ``numpy.cumsum``, ``numpy.sort``, the chain's three array
  expressions, jacobi's sweeps as array slices).

Every figure's bytes are checked against numpy before it is timed.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable

import numpy as np

from vyre_benchmarks.harness import Result, percentile, reps, seconds_per_call
from vyre_core import DispatchConfig, SequenceBuilder, ir
from vyre_core.cli.targets import BUNDLED, load_target
from vyre_core.driver import Driver

REQUIRES = ("reference", "wgpu")
BACKENDS = ("reference", "wgpu")
N = 1024
STEPS = 16
CALLS = 300
WARMUP = 30
EXAMPLE_REPEAT = {"reduce": 5, "scan": 5, "sort": 3, "chain": 5, "jacobi": 5}


def empty_program() -> ir.Program:
    """One invocation that writes one word: a round trip with (almost) no work."""
    k = ir.Kernel(workgroup=(1,))
    out = k.output("out", ir.u32, 1)
    out[0] = ir.u32(1)
    return k.build()


def step_program(n: int = N) -> ir.Program:
    """out[i] = x[i] * 0.5 + 1 over f32 (an exact chain: the same bits however it runs)."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f32)
    out = k.output("out", ir.f32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] * 0.5 + 1.0
    return k.build()


def chain(steps: int, n: int = N):
    """``steps`` passes of ``step_program`` as one sequence, ping-ponging two transients."""
    b = SequenceBuilder()
    b.input("x", ir.f32, n)
    b.transient("a", ir.f32, n)
    b.transient("b", ir.f32, n)
    program = step_program(n)
    b.step(program, {"out": "a"})
    for s in range(steps - 1):
        src, dst = ("a", "b") if s % 2 == 0 else ("b", "a")
        b.step(program, {"x": src, "out": dst})
    return b.build(returns=["a" if steps % 2 else "b"])


def chain_input(n: int = N) -> np.ndarray:
    return np.linspace(-4, 4, n, dtype=np.float32)


X = chain_input()


def chain_in_numpy(steps: int, x: np.ndarray = X) -> np.ndarray:
    for _ in range(steps):
        x = x * np.float32(0.5) + np.float32(1.0)
    return x


@functools.cache
def _driver() -> Driver:
    return Driver()  # (closed at exit by the driver's own atexit hook)


def _interleaved_p50s(fns: dict[str, Callable[[], object]]) -> dict[str, float]:
    """p50 seconds of each function, timed in turns (one call of each per round), so a
    machine that speeds up or slows down during the run moves every figure alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for round_ in range(reps(WARMUP, 5) + reps(CALLS, 20)):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            if round_ >= reps(WARMUP, 5):
                times[name].append(time.perf_counter() - start)
    return {name: percentile(found, 50) for name, found in times.items()}


@functools.cache
def _chain_figures(backend: str) -> dict[str, float]:
    """p50 seconds: the sequence of STEPS and of 1, and STEPS dispatches of one pass."""
    drv = _driver()
    program = step_program()
    long, short = chain(STEPS), chain(1)
    got = drv.dispatch(long, [X], backend=backend)[0]
    if got.tobytes() != chain_in_numpy(STEPS).tobytes():
        raise AssertionError(f"the chain on {backend} differs from numpy")

    def per_pass() -> np.ndarray:
        x = X
        for _ in range(STEPS):
            (x,) = drv.dispatch(program, [x], backend=backend)
        return x

    if per_pass().tobytes() != got.tobytes():
        raise AssertionError(f"the per-pass chain on {backend} differs from the sequence")
    empty = empty_program()
    return _interleaved_p50s({
        "long": lambda: drv.dispatch(long, [X], backend=backend),
        "short": lambda: drv.dispatch(short, [X], backend=backend),
        "per_pass": per_pass,
        "empty": lambda: drv.dispatch(empty, [], backend=backend)})


def _chain_whole(backend: str) -> Result:
    f = _chain_figures(backend)
    return Result(f"{backend}: a chain of {STEPS} steps (f32 x{N}) as one sequence, p50",
                  f["long"] * 1e3, "ms", f"the same chain as {STEPS} dispatches",
                  f["per_pass"] * 1e3)


def _chain_step(backend: str) -> Result:
    f = _chain_figures(backend)
    return Result(f"{backend}: one more step inside a sequence", (f["long"] - f["short"])
                  / (STEPS - 1) * 1e6, "us", "one more pass as its own dispatch",
                  f["per_pass"] / STEPS * 1e6)


def _chain_step_vs_empty(backend: str) -> Result:
    f = _chain_figures(backend)
    return Result(f"{backend}: one more step inside a sequence", (f["long"] - f["short"])
                  / (STEPS - 1) * 1e6, "us", "an empty dispatch's round trip",
                  f["empty"] * 1e6)


def chain_reference() -> Result:
    return _chain_whole("reference")


def chain_step_reference() -> Result:
    return _chain_step("reference")


def chain_step_reference_vs_empty() -> Result:
    return _chain_step_vs_empty("reference")


def chain_wgpu() -> Result:
    return _chain_whole("wgpu")


def chain_step_wgpu() -> Result:
    return _chain_step("wgpu")


# -- fusion -------------------------------------------------------------------------------------


def fusable_chain(steps: int):
    """The chain with a buffer of its own per step (t0 <- x, t1 <- t0, ...): every seam is
    fusable, so ``Sequence.fused`` makes it one dispatch."""
    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    for s in range(steps):
        b.transient(f"t{s}", ir.f32, N)
        b.step(step_program(), {"x": "x" if s == 0 else f"t{s - 1}", "out": f"t{s}"})
    return b.build(returns=[f"t{steps - 1}"])


@functools.cache
def _fusion_figures(backend: str) -> dict[str, float]:
    """p50 seconds of the fusable chain run as it is and fused, timed in turns."""
    drv = _driver()
    sequence = fusable_chain(STEPS)
    fused = DispatchConfig(fuse=True)
    if len(sequence.fused().items) != 1:
        raise AssertionError("the fusable chain did not fuse into one step")
    want = chain_in_numpy(STEPS).tobytes()
    for config in (None, fused):
        if drv.dispatch(sequence, [X], backend=backend, config=config)[0].tobytes() \
                != want:
            raise AssertionError(f"the chain on {backend} (fuse={config is fused}) differs "
                                 "from numpy")
    return _interleaved_p50s({
        "fused": lambda: drv.dispatch(sequence, [X], backend=backend, config=fused),
        "unfused": lambda: drv.dispatch(sequence, [X], backend=backend)})


def _fusion(backend: str) -> Result:
    f = _fusion_figures(backend)
    return Result(f"{backend}: {STEPS} fusable steps (f32 x{N}) fused into one dispatch, p50",
                  f["fused"] * 1e3, "ms", "the same sequence, step by step", f["unfused"] * 1e3)


def fused_chain_reference() -> Result:
    return _fusion("reference")


def fused_chain_wgpu() -> Result:
    return _fusion("wgpu")


# -- examples against numpy ---------------------------------------------------------------------


def _numpy_counterpart(name: str, example) -> Callable[[], object]:
    module = importlib.import_module(f"{BUNDLED}.{name}")
    if name == "reduce":
        return lambda: np.sum(example.inputs[0])
    if name == "scan":
        return lambda: np.cumsum(example.inputs[0], dtype=np.uint32)
    if name == "sort":
        return lambda: np.sort(example.inputs[0])
    if name == "chain":
        x, y = example.resident["x"], example.resident["y"]

        def chain_numpy() -> tuple[np.ndarray, np.ndarray]:
            t = x * np.float32(module.A) + y
            y2 = t * t
            return y2, y2 - x
        return chain_numpy
    if name == "jacobi":
        side = int(np.sqrt(example.inputs[0].size))
        return lambda: module.in_numpy(example.inputs[0], side)
    raise KeyError(name)


def _example(name: str, backend: str) -> Result:
    example = load_target(name).example
    drv = _driver()
    mismatch = example.mismatch(example.run(drv, backend))
    if mismatch:
        raise AssertionError(f"{name} on {backend}: {mismatch}")
    repeat = reps(EXAMPLE_REPEAT[name], 1)
    resident = example.upload_resident(drv, backend)  # once: the run is what is timed
    value = seconds_per_call(lambda: drv.dispatch(  # (the run above warmed it:
        example.program, example.inputs, resident=resident, backend=backend,
        config=example.config), repeat,
        warmup=False)  # the reference takes tens of seconds on the sort example)
    for buf in resident.values():
        buf.free()
    counterpart = _numpy_counterpart(name, example)
    base = seconds_per_call(counterpart, max(repeat, 5))
    return Result(f"{backend}: example {name} through the Driver", value * 1e3, "ms",
                  f"numpy ({name})", base * 1e3)


def _example_benchmarks() -> list[Callable[[], Result]]:
    found = []
    for name in EXAMPLE_REPEAT:
        for backend in BACKENDS:
            def bench(name: str = name, backend: str = backend) -> Result:
                return _example(name, backend)
            bench.__name__ = f"example_{name}_{backend}"
            found.append(bench)
    return found


BENCHMARKS = [chain_reference, chain_step_reference, chain_step_reference_vs_empty,
              chain_wgpu, chain_step_wgpu, fused_chain_reference, fused_chain_wgpu,
              *_example_benchmarks()]
