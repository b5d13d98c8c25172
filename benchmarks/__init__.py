"""vyre's benchmarks, run by ``vyre bench`` (``make bench``): every figure next to a
baseline measured in the same run.

Each suite module ``bench_<name>`` has ``BENCHMARKS`` (functions returning a
``harness.Result``), ``REQUIRES`` (backend ids it needs registered) and optionally
``facts()`` (machine facts it learned while running) and ``unavailable()`` (why it cannot
run here, say an optional dependency missing; None when it can)."""

#: Suite names in run order; the module of ``name`` is ``vyre_benchmarks.bench_<name>``.
SUITES = ("foundation", "contract", "routing", "startup", "workers", "wgpu", "sequences", "ray",
          "cpu", "cpu_launch", "kernels", "lib", "lib_histogram", "lib_matmul", "lib_sort",
          "math", "suite", "suite_numba", "suite_warp", "suite_taichi")
