"""A figure measured in a process of its own whose BLAS threads sleep as soon as they are
idle, for benchmarks whose baseline is numpy's BLAS timed in turns with vyre.

OpenBLAS's threads spin for about 2**28 cycles (0.1 s) after each call before they sleep
(``OPENBLAS_THREAD_TIMEOUT``, read when numpy loads it: too late to set in ``vyre bench``'s
own process), on the cores the cpu worker's threads compute on next: timed in turns with
``numpy.matmul`` on two cores, ``lib.matmul`` of 512 x 512 took 6.3-6.8 ms, against
4.2-4.7 ms with those threads asleep and 4.1 ms timed apart from numpy (BENCHMARKS.md,
session 38). With ``OPENBLAS_THREAD_TIMEOUT=4`` (the least: 16 cycles) numpy's own calls
take about 5% longer, waking their threads; the figure's baseline is that time.

``python -m vyre_benchmarks.apart SUITE FUNCTION [--quick]`` runs the benchmark FUNCTION
of ``vyre_benchmarks.bench_SUITE`` (its ``APART`` functions) and prints its Result as
JSON (a benchmark that cannot run here says why, and comes back ``harness.Unavailable``);
``blas_idle`` is the benchmark that does so from ``vyre bench``."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable

from vyre_benchmarks import harness

#: OpenBLAS's spin before an idle thread sleeps: 2**4 cycles, the least it takes.
BLAS_IDLE_ENV = {"OPENBLAS_THREAD_TIMEOUT": "4"}
#: The most a figure measured apart may take (its own Driver, workers and compiles).
TIMEOUT = 600.0


def blas_idle(suite: str, function: Callable[[], harness.Result]
              ) -> Callable[[], harness.Result]:
    """``function`` (a benchmark of ``vyre_benchmarks.bench_<suite>``, listed in its
    ``APART``) run in a new process whose BLAS threads sleep when idle; its id is the
    same."""
    def bench() -> harness.Result:
        what = f"{suite}.{function.__name__}, measured apart,"
        argv = [sys.executable, "-m", "vyre_benchmarks.apart", suite, function.__name__,
                *(["--quick"] if harness.quick() else [])]
        try:
            proc = subprocess.run(argv, env={**os.environ, **BLAS_IDLE_ENV},
                                  capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired as exc:  # (killed: its workers die with it)
            raise RuntimeError(f"{what} did not finish within {TIMEOUT:g} s: "
                               f"{_text(exc.stderr)[-2000:]}") from None
        if proc.returncode != 0:
            raise RuntimeError(f"{what} failed (exit {proc.returncode}): "
                               f"{proc.stderr.strip()[-2000:]}")
        lines = proc.stdout.strip().splitlines()
        if not lines:
            raise RuntimeError(f"{what} printed no result: {proc.stderr.strip()[-2000:]}")
        said = json.loads(lines[-1])
        if "unavailable" in said:
            raise harness.Unavailable(said["unavailable"])
        return harness.Result(**said)

    bench.__name__ = function.__name__
    bench.__doc__ = function.__doc__
    return bench


def main(argv: list[str]) -> int:
    suite, name, *rest = argv
    harness.set_quick(rest == ["--quick"])
    module = importlib.import_module(f"vyre_benchmarks.bench_{suite}")
    found = {f.__name__: f for f in module.APART}
    try:
        result = found[name]()
    except harness.Unavailable as exc:
        print(json.dumps({"unavailable": str(exc)}))
        return 0
    print(json.dumps({k: v for k, v in result.to_dict().items() if k != "ratio"}))
    return 0


def _text(output: str | bytes | None) -> str:
    """What a killed child had written (``TimeoutExpired`` may hold bytes, or nothing)."""
    if isinstance(output, bytes):
        return output.decode(errors="replace").strip()
    return (output or "").strip()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
