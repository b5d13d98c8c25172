"""The pure parts of ``vyre bench`` (issue 37: ``vyre bench --quick`` failed the run when a
Ray node did not start on a loaded machine, then two more figures with ``KeyError: 'one'``;
an empty-dispatch rate from 4 threads read 0; ids were cut at 80 columns): a benchmark
that cannot run is a skipped row with its reason, a failed measurement is remembered, a
threaded rate counts every thread's calls, and an id is printed whole."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import threading
import time

import pytest
from rich.console import Console

from vyre_benchmarks import apart, bench_ray, harness
from vyre_core.cli import bench, output

pytestmark = pytest.mark.fast


def test_a_threaded_rate_counts_a_call_from_every_thread_however_late_it_starts() -> None:
    calls = []

    def call() -> None:  # (each call outlasts the whole measurement)
        calls.append(threading.get_ident())
        time.sleep(0.02)

    rate = harness.threaded_rate(call, 4, 0.001)
    assert len(calls) == 4 and len(set(calls)) == 4
    assert rate > 0


def test_a_threaded_rate_raises_what_a_thread_raised() -> None:
    def call() -> None:
        raise RuntimeError("the dispatch failed")

    with pytest.raises(RuntimeError, match="the dispatch failed"):
        harness.threaded_rate(call, 4, 0.01)


def test_a_cluster_that_did_not_start_makes_every_ray_figure_unavailable_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    starts = []

    @contextlib.contextmanager
    def start(nodes: int, cpus: int):
        starts.append((nodes, cpus))
        raise TimeoutError("Timed out while waiting for node to start\nmore")
        yield

    monkeypatch.setattr(bench_ray, "_start_cluster", start)
    monkeypatch.setattr(bench_ray, "_clusters", {})
    monkeypatch.setattr(bench_ray, "_measured", None)
    for rate in (bench_ray.rate_1_worker, bench_ray.rate_2_workers, bench_ray.rate_4_workers):
        with pytest.raises(harness.Unavailable) as info:  # (never a KeyError)
            rate()
        assert str(info.value) == ("a local Ray cluster of 2 node(s) of 2 CPUs did not start "
                                   "(TimeoutError: Timed out while waiting for node to start)")
    assert starts == [(2, 2)]  # (tried once: a later figure does not wait for it again)


def test_rates_half_measured_are_not_half_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def rates(nodes: int, cpus: int) -> dict[int, float]:
        if nodes == 1:
            raise harness.Unavailable("the one-node cluster did not start")
        return {1: 1.0, 2: 2.0, 4: 4.0}

    monkeypatch.setattr(bench_ray, "_rates", rates)
    monkeypatch.setattr(bench_ray, "_measured", None)
    for rate in (bench_ray.rate_1_worker, bench_ray.rate_2_workers):
        with pytest.raises(harness.Unavailable, match="one-node cluster"):
            rate()


def _ok() -> harness.Result:
    return harness.Result("a figure", 2.0, "ms", "its baseline", 1.0)


def _cannot() -> harness.Result:
    raise harness.Unavailable("a local Ray cluster did not start")


def test_a_benchmark_that_cannot_run_is_a_skipped_row_not_a_failed_run(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(bench, "select", lambda only, registry: (
        [("ray.rate_2_workers", _cannot), ("workers.empty_dispatch_vs_executor_p50", _ok)], []))
    monkeypatch.setattr(bench.Registry, "discover", staticmethod(lambda: None))
    monkeypatch.setattr(bench, "machine_facts", dict)  # (platform.platform() runs uname)
    args = argparse.Namespace(json_file="-", quick=True, only=None)
    assert bench.run(args) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["failed"] == []
    assert [r["id"] for r in doc["results"]] == ["workers.empty_dispatch_vs_executor_p50"]
    assert doc["skipped"] == [{"suite": "ray", "benchmarks": ["ray.rate_2_workers"],
                               "reason": "a local Ray cluster did not start"}]


def test_every_id_is_printed_whole_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folded onto the next line where the column is narrower, never cut with an ellipsis."""
    screen = Console(file=io.StringIO(), width=80, highlight=False, markup=False)
    monkeypatch.setattr(output, "console", screen)
    monkeypatch.setattr(bench, "console", screen)
    long_id = "workers.empty_dispatch_vs_executor_p50"
    result = {"id": long_id, **_ok().to_dict(),
              "name": "empty dispatch round trip p50 against an executor",
              "baseline": "ProcessPoolExecutor(max_workers=1).submit(noop).result() p50"}
    doc = {"machine": {"cpu": "a CPU", "cpus_usable": 2, "python": "CPython"},
           "results": [result], "seconds": 1.0, "quick": False,
           "skipped": [{"suite": "ray", "benchmarks": ["ray.big_through_ray_vs_raw_actor"],
                        "reason": "a local Ray cluster did not start"},
                       {"suite": "warp", "benchmarks": ["warp.a", "warp.b"],
                        "reason": "warp is not installed"}]}
    bench._print(doc)
    text = screen.file.getvalue()
    assert "\u2026" not in text, text  # (no ellipsis anywhere)
    assert max(map(len, text.splitlines())) <= 80
    cells = [[cell.strip() for cell in line.split("\u2502")[1:-1]]
             for line in text.splitlines() if line.startswith("\u2502")]
    first = "".join(row[0] for row in cells)
    baseline = "".join(row[2] for row in cells)
    assert long_id in first and "ray.big_through_ray_vs_raw_actor" in first, text
    assert "ProcessPoolExecutor(max_workers=1).submit(noop).result()" in baseline, text
    assert "warp.*(2benchmarks)" in first.replace(" ", "")  # (a whole suite: one row)
    assert [row[1] for row in cells if row[1] == "skipped"] == ["skipped"] * 2
    assert "1 figures in 1 s" in text and "3 skipped" in text


@pytest.mark.processes
def test_a_figure_measured_apart_that_fails_says_why_with_the_childs_error() -> None:
    """``apart.blas_idle``: the child's exit and the end of its stderr, not a JSON error."""
    def matmul_512_cpu_vs_numpy() -> harness.Result:
        raise AssertionError("never run here")

    bench_fn = apart.blas_idle("no_such_suite", matmul_512_cpu_vs_numpy)
    assert bench_fn.__name__ == "matmul_512_cpu_vs_numpy"
    with pytest.raises(RuntimeError, match=r"(?s)no_such_suite\.matmul_512_cpu_vs_numpy, measured "
                       r"apart, failed \(exit 1\): .*No module named "
                       r"'vyre_benchmarks.bench_no_such_suite'"):
        bench_fn()


def test_a_figure_measured_apart_that_cannot_run_here_is_skipped_with_its_reason(
        monkeypatch, capsys) -> None:
    """The child says why (``{"unavailable": ...}``, exit 0) and ``vyre bench`` gets
    ``harness.Unavailable``: a skipped row, not a failure."""
    def matmul_512_cpu_vs_numpy() -> harness.Result:
        raise harness.Unavailable("no BLAS here")

    module = type("Suite", (), {"APART": [matmul_512_cpu_vs_numpy]})
    monkeypatch.setattr(apart.importlib, "import_module", lambda name: module)
    assert apart.main(["lib_matmul", "matmul_512_cpu_vs_numpy"]) == 0
    said = capsys.readouterr().out
    assert json.loads(said) == {"unavailable": "no BLAS here"}

    def answered(out: str, code: int = 0):
        return lambda *a, **k: subprocess.CompletedProcess(a, code, out, "the child's log")

    bench_fn = apart.blas_idle("lib_matmul", matmul_512_cpu_vs_numpy)
    monkeypatch.setattr(apart.subprocess, "run", answered(said))
    with pytest.raises(harness.Unavailable, match="no BLAS here"):
        bench_fn()
    monkeypatch.setattr(apart.subprocess, "run", answered(""))
    with pytest.raises(RuntimeError, match="printed no result: the child's log"):
        bench_fn()

    def too_slow(*a, **k):
        raise subprocess.TimeoutExpired(a, apart.TIMEOUT, stderr=b"still compiling")

    monkeypatch.setattr(apart.subprocess, "run", too_slow)
    with pytest.raises(RuntimeError, match=r"did not finish within 600 s: still compiling"):
        bench_fn()
