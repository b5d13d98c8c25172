"""The Taichi comparison of the kernel suite (``benchmarks/bench_suite_taichi.py``): where
taichi is not installed, ``vyre bench`` skips the whole suite with its reason instead of
failing; its ports and figures cover exactly the suite's problems (read from the source
text, so this holds where taichi is not installed); and, where it is installed, each port
gives numpy's result as the vyre ports do (``test_suite_ports.py``'s rule and budget)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_suite_ports import SIZE, ULPS, ulps_off

from vyre_benchmarks import bench_suite, bench_suite_numba, bench_suite_taichi, bench_suite_warp
from vyre_benchmarks.suite.lines import kernel_lines
from vyre_benchmarks.suite.problems import PROBLEMS
from vyre_core.cli import bench
from vyre_core.registry import Registry

SUITE = Path(__file__).resolve().parent.parent / "benchmarks" / "suite"
REASON = "taichi is not installed (pip install 'vyre[suite]')"


@pytest.mark.fast
def test_without_taichi_the_suite_is_skipped_with_its_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "taichi", None)  # (import taichi now fails: not found)
    assert bench_suite_taichi.unavailable() == REASON
    chosen, skipped = bench.select(["suite_taichi."], Registry.discover("cpu"))
    assert chosen == []
    assert skipped == [{"suite": "suite_taichi", "reason": REASON, "benchmarks": [
        f"suite_taichi.{fn.__name__}" for fn in bench_suite_taichi.BENCHMARKS]}]


@pytest.mark.fast
def test_the_taichi_suite_times_every_problem_of_the_vyre_suite_and_one_launch():
    ids = [fn.__name__ for fn in bench_suite_taichi.BENCHMARKS]
    assert ids == [*PROBLEMS, "tiny_launch"]
    assert ids[:-1] == [fn.__name__ for fn in bench_suite_numba.BENCHMARKS] \
        == [fn.__name__ for fn in bench_suite_warp.BENCHMARKS]
    assert {f"{name}_medium" for name in ids[:-1]} <= {
        fn.__name__ for fn in bench_suite.BENCHMARKS}


@pytest.mark.fast
def test_the_taichi_port_has_the_vyre_ports_kernels_and_only_those():
    taichi = kernel_lines(SUITE / "taichi_kernels.py")
    assert list(taichi) == list(kernel_lines(SUITE / "vyre_kernels.py"))
    assert set(taichi) == {k for p in PROBLEMS.values() for k in p.kernels}


@pytest.mark.slow
@pytest.mark.parametrize("name", PROBLEMS)
def test_a_taichi_port_gives_numpys_result(name):
    pytest.importorskip("taichi", reason="taichi is not installed (the suite extra)")
    from vyre_benchmarks.suite.problems import run_taichi
    problem = PROBLEMS[name]
    data = problem.make(SIZE)
    want, got = problem.reference(data), run_taichi(problem, data)
    for out in problem.outputs:
        if problem.exact:
            assert got[out].tobytes() == want[out].tobytes(), out
        else:
            assert ulps_off(got[out], want[out]) <= ULPS, out
