"""``vyre bench`` run as a user runs it, in quick mode: every benchmark reports a figure and
its same-run baseline. Figures are never compared with anything: these machines are
shared and noisy, and a test must not depend on speed."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fresh_env import fresh_env

from vyre_benchmarks import SUITES
from vyre_core.registry import SELECT_ENV

# Alone, the quick suites take 1-56 s each (ray starts two local clusters, cpu compiles);
# beside another test worker (make test runs two) the slowest took twice that, and on a
# machine loaded by other work (load average 10-13) cpu's took over 170 s. A bound for a
# hang, not a speed: generous.
TIMEOUT = 300
#: The comparisons the benchmarks exist for: id -> words of its baseline's name.
REQUIRED = {
    "workers.empty_dispatch_p50": "raw zmq ipc echo",
    "workers.empty_dispatch_vs_executor_p50": "ProcessPoolExecutor",
    "workers.big_round_trip": "np.copyto 64 MiB",
    "workers.zero_copy_round_trip": "the copied path",
    "workers.recovery_after_kill": "cold start",
    "foundation.reference_saxpy": "numpy",
    "wgpu.small_dispatch_overhead": "reference",
    "wgpu.big_throughput": "reference",
    "contract.hook_call": "direct function call",
    "routing.warm_route": "dict lookup",
    "startup.first_routed_dispatch": "naming the backend routing chose",
    "sequences.chain_step_reference": "one more pass as its own dispatch",
    "sequences.example_reduce_reference": "numpy",
    "kernels.cached_launch": "dispatch of the same program",
    "cpu_launch.pipeline_launch_vs_lane": "raw lane round trip",
    "cpu_launch.tiny_dispatch_loaded_vs_reference": "reference backend's loaded / quiet",
}


def bench(*args: str, select: str | None = None, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != SELECT_ENV}
    if select is not None:
        env[SELECT_ENV] = select
    return subprocess.run([sys.executable, "-c", "from vyre_core.cli import main; "
                           "raise SystemExit(main())", "bench", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=TIMEOUT)


#: Every suite, the slowest (in quick mode, on 2 cores) first.
SLOWEST = ("ray", "sequences", "workers", "cpu", "wgpu")
SUITES_BY_COST = [*SLOWEST, *(name for name in SUITES if name not in SLOWEST)]


#: Suites that skip themselves here, saying why: the Warp and Taichi comparisons without
#: warp-lang or taichi (the `suite` extra).
OPTIONAL = {suite: f"{dist} is not installed" for suite, module, dist in (
    ("suite_warp", "warp", "warp-lang"), ("suite_taichi", "taichi", "taichi"))
    if importlib.util.find_spec(module) is None}


#: Suites with rows made by one factory over many cases: the run takes the rows these
#: select (each factory run once per backend and type, every other row), not all; each
#: case left out costs a compile or an interpreted run (seconds to tens) and checks only
#: what another test checks. bench_math: one function (30 rows differ only in it; each
#: function's bytes are the conformance and math library tests'); bench_cpu: two of the
#: twelve examples against the reference, one of the five compile kinds, one of the three
#: new-process kernels; bench_suite and bench_suite_numba: two of the ten ports (each is
#: tests/test_suite_ports.py's); bench_sequences: one of the five examples; bench_cpu's
#: matmuls: the kernel and int8, not the tuned one (the autotuner's search, 25 s here; the
#: tuner's choices are tests/test_lib_matmul.py's); bench_ray: the tiny and big calls, not
#: the three rates (one factory starting two more clusters and six pools, 21 s; a pool on
#: Ray is tests/faults/test_ray_cluster.py's).
SAMPLED = {
    "math": ("math.exp_4m",),
    "cpu": ("cpu.elementwise", "cpu.reduce_vs", "cpu.example_saxpy", "cpu.example_sort",
            "cpu.matmul_kernel", "cpu.matmul_int8", "cpu.compile_elementwise",
            "cpu.compile_stencil", "cpu.compile_large", "cpu.compile_sequence_side",
            "cpu.two_cores"),
    "suite": ("suite.jacobi_2d", "suite.gemm"),
    "suite_numba": ("suite_numba.jacobi_2d", "suite_numba.gemm"),
    "sequences": ("sequences.chain", "sequences.fused", "sequences.example_reduce"),
    "ray": ("ray.tiny", "ray.big"),
}


def every_benchmark_id() -> set[str]:
    return {f"{name}.{fn.__name__}" for name in SUITES if name not in OPTIONAL
            for fn in importlib.import_module(f"vyre_benchmarks.bench_{name}").BENCHMARKS}


@pytest.mark.timeout(2 * TIMEOUT + 30)  # (two suites at a time, each within TIMEOUT)
def test_quick_bench_reports_every_benchmark_with_its_baseline(tmp_path):
    """Each suite as ``vyre bench --quick --only SUITE.`` (a ``SAMPLED`` suite: the rows
    it names), two at a time (figures are not judged here, so running side by side costs
    nothing but time saved)."""
    def suite(name: str) -> dict | None:
        only = [arg for part in SAMPLED.get(name, (f"{name}.",)) for arg in ("--only", part)]
        proc = bench("--quick", *only, "--json", "-", cwd=tmp_path)
        if name in OPTIONAL:  # (asked for it alone, the run says why it has nothing to run)
            assert proc.returncode != 0 and OPTIONAL[name] in proc.stderr, proc.stderr
            return None
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    with ThreadPoolExecutor(2) as pool:  # (the slowest first: ray starts its clusters)
        docs = {name: doc for name, doc in zip(SUITES_BY_COST, pool.map(
            suite, SUITES_BY_COST), strict=True) if doc is not None}
    cannot_run = set()  # (a benchmark that cannot run here says why: a Ray cluster that
    for doc in docs.values():  # did not start on a loaded machine; the run still passes)
        assert doc["quick"] is True and "rough" in doc["note"]
        assert doc["failed"] == []
        for skip in doc["skipped"]:
            assert skip["reason"], skip
            if skip["suite"] in OPTIONAL:
                assert OPTIONAL[skip["suite"]] in skip["reason"], skip
            else:
                assert skip["suite"] == "ray", skip  # (only a local cluster may not start)
                cannot_run.update(skip["benchmarks"])
    results = {r["id"]: r for doc in docs.values() for r in doc["results"]}
    doc = docs["wgpu"]
    left = {i for i in every_benchmark_id() if i.partition(".")[0] in SAMPLED
            and not any(part in i for part in SAMPLED[i.partition(".")[0]])}
    assert {"math.exp_4m_f32_cpu_vs_numpy", "math.exp_4m_f32_wgpu_vs_numpy",
            "math.exp_4m_f64_cpu_vs_numpy", "cpu.example_sort_vs_reference",
            "suite.gemm_medium", "suite_numba.jacobi_2d"} <= set(results)
    assert len(left) < len(every_benchmark_id()) // 2, left  # (a sample, not most)
    assert set(results) | cannot_run | left == every_benchmark_id()
    assert not set(results) & cannot_run
    assert set(REQUIRED) <= set(results)
    for result in results.values():
        for key in ("name", "unit", "baseline"):
            assert isinstance(result[key], str) and result[key], (result, key)
        for key in ("value", "baseline_value", "ratio"):
            assert isinstance(result[key], float) and math.isfinite(result[key]), (result, key)
        assert result["ratio"] == result["value"] / result["baseline_value"]
        assert isinstance(result["seconds"], float) and result["seconds"] >= 0, result
    for bench_id, words in REQUIRED.items():
        assert words in results[bench_id]["baseline"], results[bench_id]
    machine = doc["machine"]
    assert machine["platform"] and machine["python"] and machine["cpu_count"] >= 1
    assert machine["wgpu_adapter"]["device"]  # the adapter the wgpu figures ran on


def test_the_wgpu_suite_is_skipped_with_a_reason_when_its_backend_is_missing(tmp_path):
    # "small_dispatch" selects contract.small_dispatch and wgpu.small_dispatch_overhead
    proc = bench("--quick", "--only", "small_dispatch", "--json", "-", select="reference",
                 cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["id"] for r in doc["results"]] == ["contract.small_dispatch"]
    assert doc["failed"] == []
    skipped, = doc["skipped"]
    assert skipped["suite"] == "wgpu"
    assert "'wgpu' backend is not registered (left out by VYRE_LOAD_PLUGINS)" in skipped["reason"]
    assert "skipped wgpu suite" in proc.stderr
    assert "wgpu_adapter" not in doc["machine"]


def test_only_that_matches_nothing_is_an_error_with_a_fix(tmp_path):
    proc = bench("--only", "no-such-benchmark", cwd=tmp_path)
    assert proc.returncode == 2
    assert "no benchmark id contains 'no-such-benchmark'" in proc.stderr
    assert "Fix:" in proc.stderr


def test_only_benchmarks_of_a_skipped_suite_is_an_error_not_an_empty_table():
    proc = subprocess.run([sys.executable, "-m", "vyre_core.cli", "bench", "--quick",
                           "--only", "wgpu."], env=fresh_env(VYRE_LOAD_PLUGINS="reference"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nothing to run: the wgpu suite is skipped" in proc.stderr
    assert "Fix: Install (or stop leaving out) the backend" in proc.stderr


def test_only_given_twice_runs_the_benchmarks_either_selects(tmp_path):
    proc = bench("--quick", "--only", "contract.small_dispatch", "--only", "ROUTING.warm_",
                 "--json", "-", select="reference", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["id"] for r in doc["results"]] == ["contract.small_dispatch",
                                                 "routing.warm_route"]
    assert doc["failed"] == []
