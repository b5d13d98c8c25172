"""The bundled examples keep their promise: each one's outputs equal the numpy oracle it
ships (exact bytes, floats within its ULP budget) on the reference backend, the wgpu
backend (lavapipe here) and the cpu backend (numba), so they are known to be portable;
and an example runs as a script exactly as its docstring says."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import vyre_cpu.backend
from fresh_env import fresh_env

import vyre_reference.backend
import vyre_wgpu.backend
from vyre_core import Example
from vyre_core.cli.targets import bundled_examples, load_target
from vyre_workers.backend_host import BackendHost

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"
EXAMPLES = bundled_examples()

def _example(name: str) -> Example:
    return load_target(name).example


BACKENDS = {"reference": vyre_reference.backend, "wgpu": vyre_wgpu.backend,
            "cpu": vyre_cpu.backend}


@pytest.fixture(scope="module", params=list(BACKENDS))
def host(request):
    with BackendHost(BACKENDS[request.param]) as host:
        yield host


def test_every_example_is_bundled():
    on_disk = {p.stem for p in EXAMPLES_DIR.glob("*.py") if not p.stem.startswith("_")}
    assert set(EXAMPLES) == on_disk
    assert {"saxpy", "xor", "histogram", "reduction", "matmul", "mandelbrot", "f64_kernel",
            "fault_tolerance", "reduce", "scan", "sort", "chain", "jacobi",
            "matmul_int8"} <= set(EXAMPLES)


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_module_says_what_it_shows_and_runs_as_a_script(name):
    source = (EXAMPLES_DIR / f"{name}.py").read_text()
    tree = ast.parse(source)
    doc = ast.get_docstring(tree)
    assert doc and "Run it:" in doc and f"examples/{name}.py" in doc
    last = tree.body[-1]
    assert isinstance(last, ast.If) and "__main__" in ast.unparse(last.test)
    if name != "fault_tolerance":  # prints its walk-through instead of the plain run
        assert "main(['run', __file__, *sys.argv[1:]])" in ast.unparse(last)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_backend_reproduces_expected(host, name):
    """Every example on every backend, mandelbrot's chaotic escape counts included (wgpu's
    lowering keeps the shader compiler from reassociating or folding float arithmetic:
    wgsl.OPAQUE_ZERO), chain's resident buffers included."""
    example = _example(name)
    assert example.expected is not None, "every bundled example ships a numpy oracle"
    assert example.mismatch(example.run_in(host)) is None


@pytest.mark.parametrize("script, expect", [
    ("xor.py", "expected outputs (numpy): match"),
    ("chain.py", "expected outputs (numpy): match"),
    ("fault_tolerance.py", "PipelineInvalidatedError [E1304]"),
])
def test_example_runs_as_a_script(script, expect):
    proc = subprocess.run([sys.executable, str(EXAMPLES_DIR / script)], capture_output=True,
                          text=True, timeout=120, env=_environment())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert expect in proc.stdout
    assert "FAIL" not in proc.stdout and "DIVERGES" not in proc.stdout


def _environment() -> dict[str, str]:
    """This environment without VYRE_* steering (no test inherits another's), and wide
    enough that rich does not wrap the lines the checks look for."""
    return {**fresh_env(),
            "COLUMNS": "200"}
