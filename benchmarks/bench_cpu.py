"""The cpu backend (numba) against numpy and the reference interpreter in one run: a 64 MiB
elementwise kernel against the same numpy expression; the reduce example against
``numpy.sum``; the tiled matmul example at 512 (with the KTILE the tuner chose, through a
Driver, and its kernel alone) against ``numpy.matmul``; every example (sequences
included) against the reference; compiling a kernel of each kind (elementwise, loop,
barrier, atomics, a sequence's steps) cold against loading it from the disk cache, a
kernel for a large first launch (its parallel version alone against both), a sequence's
programs side by side in forked children against in turn; and the same kernel on two
cores against one. Kernels run in this process (``BackendHost``), as in a worker, so the
figures are the backend's own, without the process boundary (but the tuned matmul, which
a Driver tunes and runs in its worker)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from vyre_benchmarks import compile_once
from vyre_benchmarks.harness import Result, compare, elements, reps, size
from vyre_core.example import Example
from vyre_core.sequence import Sequence
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy
from vyre_workers.backend_host import BackendHost

REQUIRES = ("cpu", "reference")
BIG = 16 << 20  # elements: 64 MiB per f32 array
#: Every bundled example with a numpy oracle (the sequences chain, jacobi, reduce, scan and
#: sort run as one request each).
EXAMPLES = ("chain", "f64_kernel", "histogram", "jacobi", "mandelbrot", "matmul", "reduce",
            "reduction", "saxpy", "scan", "sort", "xor")


@functools.cache
def _host(backend: str) -> BackendHost:
    module = importlib.import_module(f"vyre_{backend}.backend")
    host = BackendHost(module)
    host.prepare()
    return host


def elementwise_64mib_vs_numpy() -> Result:
    """saxpy over 16 Mi f32 (64 MiB per array) against ``a * x + y`` in numpy."""
    cpu = _host("cpu")
    # (workgroups of 1024: 65536 groups of 256 are over the limit)
    program, data = saxpy(size(BIG), 1024), saxpy_inputs(size(BIG), 5)
    x, y, a = data
    out, = cpu.dispatch(program, data)
    if out.tobytes() != (a[0] * x + y).tobytes():
        raise AssertionError("the cpu backend's saxpy differs from numpy's")
    return compare(f"saxpy, {elements(x.size)} f32 ({x.nbytes >> 20} MiB per array), cpu backend",
                   lambda: cpu.dispatch(program, data), "numpy a * x + y",
                   lambda: a[0] * x + y, repeat=reps(7, 2))


#: The examples built smaller in quick mode (the reference interprets each: the sort
#: example's million keys took it tens of seconds a run)
QUICK_N = {"sort": 1 << 16, "scan": 1 << 18, "reduce": 1 << 20}


def _example(name: str) -> Example:
    build = importlib.import_module(f"vyre_examples.{name}").build
    return build(n=QUICK_N[name]) if name in QUICK_N and reps(False, True) else build()


def _vs_reference(name: str) -> Callable[[], Result]:
    def bench() -> Result:
        example = _example(name)
        cpu, ref = _host("cpu"), _host("reference")
        wrong = example.mismatch(example.run_in(cpu))
        if wrong:
            raise AssertionError(f"example {name} on the cpu backend: {wrong}")
        start = time.perf_counter()
        example.run_in(ref)
        once = time.perf_counter() - start
        # (rounds of at least 50 ms: a single call of a fraction of a millisecond moves
        # with whatever else the machine did at that moment; the run above is the
        # interpreter's warm-up: the sort example takes it tens of seconds)
        return compare(f"example {name}, cpu backend", lambda: example.run_in(cpu),
                       "the reference interpreter on it", lambda: example.run_in(ref),
                       repeat=reps(5, 1), number=max(1, round(0.05 / once)),
                       baseline_warm=True)
    bench.__name__ = f"example_{name}_vs_reference"
    return bench


def reduce_vs_numpy_sum() -> Result:
    """The reduce example (16 Mi f32, three passes as one sequence) against ``numpy.sum``
    of the same array (pairwise, another order: the time is compared, not the bits)."""
    example = _example("reduce")
    cpu = _host("cpu")
    wrong = example.mismatch(example.run_in(cpu))
    if wrong:
        raise AssertionError(f"the reduce example on the cpu backend: {wrong}")
    x = example.inputs[0]
    return compare(f"reduce {elements(x.size)} f32, cpu backend", lambda: example.run_in(cpu),
                   "numpy.sum", lambda: x.sum(), repeat=reps(7, 2))


#: The tiled matmul's size: issue 39's target (within 5x of ``numpy.matmul``) is at 512.
MATMUL = 512


def matmul_tuned_vs_numpy() -> Result:
    """The matmul example at 512x512x512 on the cpu backend through a Driver (its worker),
    with the KTILE the tuner chose for it on this machine (``tuned=True``; tuned afresh,
    in a temporary cache), against ``numpy.matmul`` (BLAS) on the same arrays. The
    inputs are small integers: the product is exact, checked bit for bit first."""
    from vyre_core.driver import Driver
    from vyre_core.tuning.cache import CACHE_ENV

    example = importlib.import_module("vyre_examples.matmul").build(MATMUL, MATMUL, MATMUL)
    a, b = (x.reshape(MATMUL, MATMUL) for x in example.inputs[:2])  # (then C, the shapes)
    saved = os.environ.get(CACHE_ENV)
    where = tempfile.mkdtemp(prefix="vyre-bench-tuning-")
    os.environ[CACHE_ENV] = where
    try:
        with Driver() as drv:
            tuned = drv.tune(example.program, example.inputs, backend="cpu", config=example.config,
                             constants={"KTILE": reps([16, 1, 2, 4, 8], [16, 8])},
                             repeats=reps(3, 1))  # (quick: two kernels to compile, not five)
            config = example.config.replace(tuned=True)  # (its dim, and the tuned KTILE)
            out = drv.dispatch(example.program, example.inputs, backend="cpu", config=config)[0]
            if out.tobytes() != example.expected[0].tobytes():
                raise AssertionError("the tuned matmul on the cpu backend differs from numpy")
            chosen = dict(tuned.best.constants)["KTILE"]
            return compare(f"matmul {MATMUL}x{MATMUL}x{MATMUL} f32, cpu backend, tuned "
                           f"KTILE={chosen}",
                           lambda: drv.dispatch(example.program, example.inputs, backend="cpu",
                                                config=config),
                           "numpy.matmul", lambda: a @ b, repeat=reps(5, 1))
    finally:
        shutil.rmtree(where, ignore_errors=True)
        if saved is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = saved


def matmul_kernel_vs_numpy() -> Result:
    """The same matmul (KTILE 16, the tuner's choice on a CPU) run in this process, as in
    a worker (no process boundary: the kernel's own speed), against ``numpy.matmul``;
    checked bit for bit first."""
    example = importlib.import_module("vyre_examples.matmul").build(MATMUL, MATMUL, MATMUL)
    a, b = (x.reshape(MATMUL, MATMUL) for x in example.inputs[:2])
    cpu = _host("cpu")
    wrong = example.mismatch(example.run_in(cpu))
    if wrong:
        raise AssertionError(f"the matmul example on the cpu backend: {wrong}")
    return compare(f"matmul {MATMUL}x{MATMUL}x{MATMUL} f32, cpu backend kernel, KTILE=16",
                   lambda: example.run_in(cpu), "numpy.matmul", lambda: a @ b,
                   repeat=reps(5, 1))


def matmul_int8_vs_numpy() -> Result:
    """The int8 matmul example at 128x256x128 (i8 operands, i32 sums, each dot product a
    subgroup reduction) on the cpu backend through a Driver, against ``numpy.matmul`` on
    the same matrices widened to i32; bytes checked first."""
    from vyre_core.driver import Driver

    example = importlib.import_module("vyre_examples.matmul_int8").build(128, 256, 128)
    a, b = (x.reshape(shape).astype(np.int32) for x, shape in
            zip(example.inputs[:2], ((128, 256), (256, 128)), strict=True))
    with Driver() as drv:
        wrong = example.mismatch(example.run(drv, "cpu"))
        if wrong:
            raise AssertionError(f"the int8 matmul on the cpu backend: {wrong}")
        return compare("matmul 128x256x128 i8 -> i32 (subgroup sums), cpu backend",
                       lambda: example.run(drv, "cpu"), "numpy.matmul (i32)", lambda: a @ b,
                       repeat=reps(5, 1))


#: A kernel of each kind, for the compile figures: the example whose programs are compiled.
COMPILE_KINDS = {"elementwise": "saxpy", "loop": "mandelbrot", "barrier": "reduction",
                 "atomics": "histogram", "sequence": "jacobi"}


@contextlib.contextmanager
def _kernel_cache() -> Iterator[Callable[[bool], None]]:
    """A kernel cache of its own for the compile figures, and ``forget(disk)``: nothing
    in memory (a new process), nor on disk with ``disk``. numba itself and the
    runtime's helpers are loaded first."""
    from vyre_cpu import compiler

    saved = os.environ.get(compiler.ENV)
    where = tempfile.mkdtemp(prefix="vyre-bench-kernels-")
    os.environ[compiler.ENV] = where

    def forget(disk: bool) -> None:
        compiler._loaded.clear()  # (a new process: nothing in memory)
        for name in [m for m in sys.modules if m.startswith("vyre_cpu_kernel_")]:
            del sys.modules[name]
        if disk:
            shutil.rmtree(where, ignore_errors=True)

    try:
        compiler.compiled(saxpy(64, bias=0.5))  # (numba and the helpers, once)
        yield forget
    finally:
        shutil.rmtree(where, ignore_errors=True)
        if saved is None:
            os.environ.pop(compiler.ENV, None)
        else:
            os.environ[compiler.ENV] = saved


def _compile(kind: str) -> Callable[[], Result]:
    def bench() -> Result:
        """Every program of the example compiled with an empty disk cache and nothing in
        memory, against the same loaded from the disk cache (what a restarted worker, or
        the next run, pays)."""
        from vyre_cpu import compiler

        example = _example(COMPILE_KINDS[kind])
        programs = [p for p, _ in example.program.programs()] \
            if isinstance(example.program, Sequence) else [example.program]
        with _kernel_cache() as forget:
            def compile_all(disk: bool) -> Callable[[], None]:
                def run() -> None:
                    forget(disk)
                    for program in programs:
                        compiler.compiled(program)
                return run

            return compare(f"compile {kind} kernel ({COMPILE_KINDS[kind]}: "
                           f"{len(programs)} program(s)), empty disk cache",
                           compile_all(True), "the same loaded from the disk cache",
                           compile_all(False), repeat=reps(3, 1), unit="s")
    bench.__name__ = f"compile_{kind}_cold_vs_cached"
    return bench


def _first_compile(kernel: str, who: str, cache: str = "") -> float:
    """CPU seconds of ``kernel``'s first compile in a new process (``compile_once``: on
    this shared machine its wall time is that, stretched by the load), median of the
    runs: ``who`` is ``numba``, or ``vyre`` with the kernel cache ``cache`` (emptied
    before each run where ``cold``)."""
    runs = []
    for _ in range(reps(3, 1)):
        if who == "vyre cold":
            shutil.rmtree(cache, ignore_errors=True)
        out = subprocess.run(
            [sys.executable, "-m", "vyre_benchmarks.compile_once", kernel, who.split()[0]],
            env={**os.environ, "VYRE_CPU_CACHE_DIR": cache}, capture_output=True,
            text=True, check=True, timeout=600).stdout
        runs.append(float(out.split()[0]))
    return statistics.median(runs)


@functools.cache
def _cold(kernel: str) -> tuple[float, str]:
    """``kernel``'s first compile in a new process from an empty kernel cache (CPU
    seconds), and that cache, left filled (for its load from the disk cache; removed when
    this process exits): measured once a run, for both of its figures."""
    cache = tempfile.mkdtemp(prefix="vyre-bench-kernels-")
    atexit.register(shutil.rmtree, cache, True)
    return _first_compile(kernel, "vyre cold", cache), cache


def _compile_new_process(kind: str, against: str) -> Callable[[], Result]:
    kernel = compile_once.KINDS[kind]

    def bench() -> Result:
        """A kernel's first compile in a new worker (a new process, numba's own start
        included), from an empty kernel cache, against numba compiling the suite's port
        of it in a new process (``compile_once``; ``gemm``'s for the tiled matmul); or
        the same kernel loaded from the disk cache in a new process, against that cold
        compile. CPU seconds of the compiling process."""
        cold, cache = _cold(kernel)
        if against == "numba":
            port = "gemm" if kernel == "matmul" else kernel
            return Result(f"first compile of a {kind} kernel ({kernel}) in a new process, "
                          "empty kernel cache (CPU s)", cold, "s",
                          f"numba's first compile of its port ({port})",
                          _first_compile(kernel, "numba"))
        return Result(f"the {kind} kernel ({kernel}) loaded from the disk cache in a new "
                      "process (CPU s)", _first_compile(kernel, "vyre cached", cache), "s",
                      "its first compile, empty kernel cache", cold)
    bench.__name__ = (f"compile_{kind.replace(' ', '_')}_new_process_" +
                      ("cold_vs_numba" if against == "numba" else "cached_vs_cold"))
    return bench


def compile_large_first_launch_vs_both_versions() -> Result:
    """A kernel whose first launch is large (the 64 MiB saxpy's grid, on every core),
    cold: its parallel version alone, as compiled now, against the serial one then the
    parallel one (what that first launch compiled before issue 39 item 4)."""
    from vyre_cpu import compiler, threads

    program, grid = saxpy(BIG, 1024), (BIG // 1024, 1, 1)
    cores = max(2, threads.available_cores())
    with _kernel_cache() as forget:
        def parallel_only() -> None:
            forget(True)
            compiler.compiled(program, grid, cores).parallel()

        def both() -> None:
            forget(True)
            compiler.compiled(program).parallel()

        return compare("compile a kernel for a large first launch (saxpy, 64 MiB): "
                       "the parallel version alone", parallel_only,
                       "the serial version, then the parallel one", both,
                       repeat=reps(3, 1), unit="s")


def compile_sequence_side_by_side_vs_in_turn() -> Result:
    """The jacobi example's programs compiled cold in forked children side by side, one
    per core (``vyre_cpu.ahead``, with the load average taken as idle: a worker forks
    only onto idle cores), against in turn in this process."""
    from vyre_cpu import ahead, compiler, threads

    launches = [(p, (1, 1, 1)) for p, _ in _example("jacobi").program.programs()]
    cores = max(2, threads.available_cores())
    with _kernel_cache() as forget:
        def side_by_side() -> None:
            forget(True)
            ahead.compile_ahead(launches, cores, load=0.0)
            for program, grid in launches:
                compiler.compiled(program, grid)

        def in_turn() -> None:
            forget(True)
            for program, grid in launches:
                compiler.compiled(program, grid)

        return compare(f"compile a sequence's {len(launches)} programs (jacobi) cold, "
                       "side by side in forked children", side_by_side,
                       "in turn in this process", in_turn, repeat=reps(3, 1), unit="s")


def two_cores_vs_one() -> Result:
    """The 64 MiB saxpy with every core against one (``VYRE_CPU_THREADS``)."""
    from vyre_cpu import backend, threads

    cpu = _host("cpu")
    # (workgroups of 1024: 65536 groups of 256 are over the limit)
    program, data = saxpy(size(BIG), 1024), saxpy_inputs(size(BIG), 5)
    everyone = threads.available_cores()

    def on(count: int) -> Callable[[], Any]:
        def run() -> Any:
            saved = os.environ.get(threads.ENV)
            os.environ[threads.ENV] = str(count)
            backend._threads.cache_clear()  # (a worker reads it once; this host, per run)
            try:
                return cpu.dispatch(program, data)
            finally:
                if saved is None:
                    os.environ.pop(threads.ENV, None)
                else:
                    os.environ[threads.ENV] = saved
                backend._threads.cache_clear()
        return run

    return compare(f"saxpy {data[0].nbytes >> 20} MiB on {everyone} cores", on(everyone),
                   "the same on 1 core", on(1), repeat=reps(7, 2))


BENCHMARKS = [elementwise_64mib_vs_numpy, reduce_vs_numpy_sum,
              *(_vs_reference(n) for n in EXAMPLES),
              matmul_tuned_vs_numpy, matmul_kernel_vs_numpy, matmul_int8_vs_numpy,
              *map(_compile, COMPILE_KINDS),
              *(_compile_new_process(kind, against) for kind in compile_once.KINDS
                for against in ("numba", "cold")),
              compile_large_first_launch_vs_both_versions,
              compile_sequence_side_by_side_vs_in_turn, two_cores_vs_one]


def facts() -> dict[str, Any]:
    if not _host.cache_info().currsize:
        return {}
    return {"cpu_backend": _host("cpu").device_profile()}
