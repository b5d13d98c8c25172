"""One kernel's first compile in this (new) process, for ``bench_cpu``'s compile figures:
``python -m vyre_benchmarks.compile_once KERNEL WHO`` prints the seconds it took (CPU
seconds of this process, then wall seconds: on a busy machine the first is what it
costs, the second what it took). KERNEL is a kernel of the suite (``jacobi_2d``,
``gemm``, ``atax_ax``, ``mvt``, ``covariance``: its first MEDIUM launch) or ``matmul``
(the tiled matmul example at 512, KTILE 16); WHO is ``vyre`` (the cpu backend's
``compiler.compiled`` for the launch's grid on one thread, with the kernel cache
``VYRE_CPU_CACHE_DIR`` the caller names: empty for a cold compile, filled for a cached
one) or ``numba`` (numba compiling the suite's port of it, ``gemm``'s for the matmul,
with no cache: what a numba user's first call pays). Nothing is compiled before the
timed one, so each pays numba's own start (its first compile in a process)."""

from __future__ import annotations

import contextlib
import resource
import sys
import time
from typing import Any

import numpy as np

from vyre_core.abi import grid_for_dim

#: The kernel of each of ``bench_cpu``'s compile figures, by kind.
KINDS = {"stencil": "jacobi_2d", "proven loop": "gemm", "tiled matmul": "matmul"}
#: The suite's problem that launches each suite kernel.
_PROBLEM = {"jacobi_2d": "jacobi_2d", "gemm": "gemm", "atax_ax": "atax", "mvt": "mvt",
            "covariance": "covariance"}


def _launch(kernel: str, module: Any) -> tuple[Any, tuple[Any, ...], Any]:
    """The first launch of ``kernel`` at the MEDIUM size: (its function in ``module``,
    its arguments, its dim)."""
    from vyre_benchmarks.suite import problems

    problem = problems.PROBLEMS[_PROBLEM[kernel]]
    data = problem.make(problems.MEDIUM[problem.name])
    found: list[tuple[Any, tuple[Any, ...], Any]] = []

    class Found(Exception):
        pass

    def launch(kern: Any, dim: Any, *args: Any) -> None:
        if kern is getattr(module, kernel):
            found.append((kern, args, dim))
            raise Found

    with contextlib.suppress(Found):  # (the launches after it: not needed)
        problem.run(module, launch, data)
    return found[0]


def vyre_seconds(kernel: str) -> tuple[float, float]:
    from vyre_cpu import compiler

    if kernel == "matmul":
        from vyre_examples.matmul import build

        example = build(512, 512, 512)
        program = example.program.specialize()
        grid = grid_for_dim((512, 512), program.workgroup)
    else:
        from vyre_benchmarks.suite import vyre_kernels

        kern, args, dim = _launch(kernel, vyre_kernels)
        program = kern.plan(dim, args).program
        grid = grid_for_dim(dim, program.workgroup)
    return _timed(lambda: compiler.compiled(program, grid, 1))


def numba_seconds(kernel: str) -> tuple[float, float]:
    import numba

    from vyre_benchmarks.suite import numba_kernels

    _, args, _ = _launch("gemm" if kernel == "matmul" else kernel, numba_kernels)
    port = getattr(numba_kernels, "gemm" if kernel == "matmul" else kernel).py_func
    signature = tuple(numba.typeof(a) for a in args)
    return _timed(lambda: numba.njit(parallel=True)(port).compile(signature))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(fn: Any) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``fn()``."""
    cpu, wall = _cpu(), time.perf_counter()
    fn()
    return _cpu() - cpu, time.perf_counter() - wall


def main(argv: list[str]) -> None:
    kernel, who = argv
    cpu, wall = vyre_seconds(kernel) if who == "vyre" else numba_seconds(kernel)
    print(f"{cpu:.6f} {wall:.6f}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main(sys.argv[1:])
