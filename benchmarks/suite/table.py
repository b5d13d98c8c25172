"""The kernel suite beside the other kernel languages on this CPU, in one run, at
PolyBench's MEDIUM size (issue 39, item 2): ``python -m vyre_benchmarks.suite.table``
prints a markdown table of each problem's time in numpy, numba, Taichi, Warp (each
left out, saying so, where not installed) and vyre's cpu backend, the kernels alone (the
backend in this process, as ``bench_cpu`` runs it) and through a Driver (its worker, as a
user launches them and as ``bench_suite`` times them), each with its ratio to numpy and
the geometric mean of the ratios; then Taichi with ``fast_math=False`` (its default lets
LLVM reassociate, which vyre never does) beside numpy again; then a one-invocation
launch's p50 in each. ``--threads N`` runs every framework on N threads (numba's
``set_num_threads``, Taichi's ``cpu_max_num_threads``, ``VYRE_CPU_THREADS``; Warp runs a
CPU launch on one thread anyway; numpy's BLAS reads ``OPENBLAS_NUM_THREADS`` when it
loads, so set that too): on a loaded machine one thread measures the generated code
rather than the scheduler.

Every port is checked against numpy first (``bench_suite.check``). The columns of a
problem are timed in turns (``ROUNDS`` rounds, each column once a round), each figure the
median of its rounds, because the machine is shared and noisy (the geometric means are
also given over the best rounds)."""

import argparse
import importlib
import importlib.util
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from vyre_benchmarks.bench_suite import BACKEND, check
from vyre_benchmarks.harness import percentile, samples
from vyre_benchmarks.suite import vyre_kernels
from vyre_benchmarks.suite.problems import (
    MEDIUM,
    PROBLEMS,
    Problem,
    run_numba,
    run_taichi,
    run_vyre,
    run_warp,
)
from vyre_core.config import DispatchConfig
from vyre_core.driver import Driver
from vyre_workers.backend_host import BackendHost

ROUNDS = 7
ROUND_SECONDS = 0.02  # the least time of one turn: short calls are repeated to fill it
LAUNCHES = 400        # tiny launches per p50
Run = Callable[[Problem, dict[str, Any]], dict[str, Any]]


def run_vyre_alone(host: BackendHost) -> Run:
    """The vyre port on the cpu backend in this process: each launch planned as
    ``Driver.launch`` plans it and run by the backend into the caller's arrays."""
    def run(problem: Problem, data: dict[str, Any]) -> dict[str, Any]:
        arrays = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in data.items()}

        def launch(kern: Any, dim: Any, *args: Any) -> None:
            plan = kern.plan(dim, args)
            host.dispatch_into(plan.program, plan.inputs, plan.out, DispatchConfig(dim=dim))
            plan.fill()
        problem.run(vyre_kernels, launch, arrays)
        return arrays
    return run


def _turn(fn: Callable[[], object]) -> Callable[[], float]:
    """A timed turn of ``fn`` (seconds per call), repeated to last ``ROUND_SECONDS``."""
    start = time.perf_counter()
    fn()
    number = max(1, round(ROUND_SECONDS / max(time.perf_counter() - start, 1e-7)))

    def turn() -> float:
        begin = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - begin) / number
    return turn


Figures = dict[str, dict[str, list[float]]]  # problem -> column -> seconds of each round


def measure(columns: dict[str, Run]) -> Figures:
    """Each round's seconds of a run, per problem and column, numpy's reference as column
    'numpy'; each port checked against numpy before it is timed."""
    figures = {}
    for name, problem in PROBLEMS.items():
        data = problem.make(MEDIUM[name])
        want = problem.reference(data)
        turns = {"numpy": _turn(lambda p=problem, d=data: p.reference(d))}
        for column, run in columns.items():
            check(problem, run(problem, data), want, column)  # (compiles it, once)
            turns[column] = _turn(lambda r=run, p=problem, d=data: r(p, d))
        figures[name] = {c: [] for c in turns}
        for _ in range(ROUNDS):
            for column, turn in turns.items():
                figures[name][column].append(turn())
        print(f"  {name}: done", file=sys.stderr)
    return figures


def _geomean(figures: Figures, column: str, pick: Callable[[list[float]], float]) -> float:
    return math.exp(statistics.fmean(math.log(pick(f[column]) / pick(f["numpy"]))
                                     for f in figures.values()))


def table(figures: Figures) -> str:
    """Each problem's median (and its ratio to numpy's); the geometric mean of the ratios
    of the medians, and of the best rounds (on a loaded machine, the closer to the code's
    own speed: contention only adds)."""
    columns = list(next(iter(figures.values())))
    rows = ["| kernel (n) | " + " | ".join(columns) + " |",
            "| --- |" + " ---: |" * len(columns)]
    for name, figs in figures.items():
        med = {c: statistics.median(figs[c]) for c in columns}
        cells = [f"{med[c] * 1e3:.3g} ms ({med[c] / med['numpy']:.2f}x)" for c in columns[1:]]
        rows.append(f"| {name} ({MEDIUM[name]}) | {med['numpy'] * 1e3:.3g} ms | "
                    + " | ".join(cells) + " |")
    for label, pick in (("medians", statistics.median), ("best rounds", min)):
        rows.append(f"| **geometric mean of the ratios, {label}** | 1x | " + " | ".join(
            f"**{_geomean(figures, c, pick):.2f}x**" for c in columns[1:]) + " |")
    return "\n".join(rows)


def _have(module: str) -> bool:
    found = importlib.util.find_spec(module) is not None
    if not found:
        print(f"{module} is not installed: its column is left out", file=sys.stderr)
    return found


def _taichi_init(**options: Any) -> None:
    from vyre_benchmarks.suite.taichi_kernels import init
    init(**options)


def launches(drv: Driver, have: dict[str, bool]) -> dict[str, float]:
    """Seconds of a one-invocation launch (``out[0] = x[0] + 1``, u32), p50, in each."""
    import numba

    from vyre_benchmarks.bench_cpu_launch import tiny_program
    x, out = np.arange(4, dtype=np.uint32), np.zeros(1, np.uint32)

    @numba.njit
    def numba_tiny(x, out):  # (numba reads no annotations)
        out[0] = x[0] + 1

    calls: dict[str, Callable[[], object]] = {"numba (a call)": lambda: numba_tiny(x, out)}
    if have["taichi"]:
        from vyre_benchmarks.suite.taichi_kernels import ti

        @ti.kernel
        def taichi_tiny(x: ti.types.ndarray(dtype=ti.u32, ndim=1),
                        out: ti.types.ndarray(dtype=ti.u32, ndim=1)):
            out[0] = x[0] + ti.u32(1)

        tx, tout = ti.ndarray(ti.u32, 4), ti.ndarray(ti.u32, 1)
        tx.from_numpy(x)
        calls["Taichi (numpy arrays)"] = lambda: taichi_tiny(x, out)
        calls["Taichi (ti.ndarray)"] = lambda: taichi_tiny(tx, tout)
    if have["warp"]:
        import warp as wp

        @wp.kernel
        def warp_tiny(x: wp.array(dtype=wp.uint32), out: wp.array(dtype=wp.uint32)):
            out[0] = x[0] + wp.uint32(1)

        wx, wout = wp.array(x, device="cpu"), wp.zeros(1, dtype=wp.uint32, device="cpu")
        calls["Warp (wp.launch)"] = lambda: wp.launch(warp_tiny, dim=1, inputs=[wx, wout],
                                                      device="cpu")
    pipeline = drv.compile(tiny_program(), backend=BACKEND)
    calls["vyre cpu (compiled pipeline)"] = lambda: pipeline.dispatch([x])
    calls["vyre cpu (Driver.dispatch)"] = lambda: drv.dispatch(tiny_program(), [x], backend=BACKEND)
    found: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(3):
        for name, call in calls.items():
            found[name].append(percentile(samples(call, LAUNCHES, 40), 50))
    return {name: statistics.median(f) for name, f in found.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--threads", type=int, help="threads of every framework (default: "
                        "each framework's own, every core)")
    threads = parser.parse_args(argv).threads
    taichi = {} if threads is None else {"cpu_max_num_threads": threads}
    if threads is not None:
        import numba
        numba.set_num_threads(threads)
        os.environ["VYRE_CPU_THREADS"] = str(threads)  # (the host below, the Driver's worker)
    have = {module: _have(module) for module in ("taichi", "warp")}
    if have["taichi"]:
        _taichi_init(**taichi)
    host = BackendHost(importlib.import_module("vyre_cpu.backend"))
    host.prepare()
    with Driver() as drv:
        columns: dict[str, Run] = {"numba": run_numba}
        if have["taichi"]:
            columns["Taichi"] = run_taichi
        if have["warp"]:
            columns["Warp"] = run_warp
        columns["vyre cpu, kernels alone"] = run_vyre_alone(host)
        columns["vyre cpu, through a Driver"] = lambda p, d: run_vyre(p, d, drv, BACKEND)
        print(f"threads {threads or 'default'}, load average {os.getloadavg()}",
              file=sys.stderr)
        print(table(measure(columns)) + "\n")
        if "Taichi" in columns:
            _taichi_init(fast_math=False, **taichi)
            print(table(measure({"Taichi, fast_math=False": run_taichi})) + "\n")
            _taichi_init(**taichi)
        print("| one-invocation launch | p50 |\n| --- | ---: |")
        for name, seconds in launches(drv, have).items():
            print(f"| {name} | {seconds * 1e6:.3g} us |")
        print(f"\nload average {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
