"""The template backend (examples/template-backend) as an author and a user meet it: the
distribution really pip-installed (offline, into a temporary site), then, in
subprocesses with that site on the path, its test folder run with the conformance kit and
the ``vyre`` command run against it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fresh_env import fresh_env
from test_conformance_kit import KIT_TESTS, run_kit

from vyre_core.conformance.corpus import CASES

TEMPLATE = Path(__file__).resolve().parent.parent / "examples" / "template-backend"
OWN_TESTS = 3  # examples/template-backend/tests/test_template.py

F64_EXAMPLE = '''
import numpy as np
from vyre_core import Example, ir

def build():
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f64)
    out = k.output("out", ir.f64, count=256)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] * 0.5
    xs = np.linspace(-1.0, 1.0, 256)
    return Example(k.build(), [xs], expected=[xs * 0.5])
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template installed as a user installs it, from a clean copy (pip builds in the
    source tree; the repository's copy stays free of build artefacts)."""
    root = tmp_path_factory.mktemp("template")
    source = root / "template-backend"
    shutil.copytree(TEMPLATE, source, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "--quiet", "--target",
         str(root / "site"), str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / "site"


def vyre(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m vyre_core.cli ARGS`` with the template installed; no VYRE_* settings."""
    env = fresh_env()
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "vyre_core.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_template_passes_the_kit_with_its_own_tests(site, tmp_path):
    shutil.copytree(TEMPLATE / "tests", tmp_path / "tests",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code, out, counts = run_kit("template", tmp_path, site)
    assert code == 0, out
    assert f"{KIT_TESTS + OWN_TESTS} passed" in out, out
    # f16 and f64 are not claimed: those cases, their two probes and the over-limit
    # workgroup must be refused; everything else passes, nothing fails or errors
    unclaimed = sum(1 for c in CASES if {"f16", "f64"} & c.program.requirements().features)
    assert counts == {"pass": len(CASES) - unclaimed + 3, "unclaimed": unclaimed + 3}, out
    assert "unclaimed honesty_f64_arithmetic: not claimed (needs f64 (supports_f64 is " \
           "false)), refused: backend 'template' does not run program" in out, out


def test_vyre_run_on_the_template_matches_numpy_and_the_reference(site, tmp_path):
    proc = vyre(site, "run", "--backend", "template", "--shadow", "--json", "saxpy",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(proc.stdout)
    assert (record["backend"], record["reason"]) == ("template", "requested explicitly")
    assert record["oracle"] == {"ok": True, "mismatch": None}
    assert record["shadow"] == {"reference": "reference", "ok": True, "divergence": None}


def test_vyre_backends_lists_the_template_between_wgpu_and_reference(site, tmp_path):
    proc = vyre(site, "backends", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [(r["id"], r["precedence"], r["distribution"], r["status"])
            for r in json.loads(proc.stdout) if r["id"] in {"wgpu", "template", "reference"}]
    assert rows == [("wgpu", 100, "vyre-wgpu", "loaded"),
                    ("template", 500, "vyre-template-backend", "loaded"),
                    ("reference", 900, "vyre-reference", "loaded")]


def test_an_f64_program_named_onto_the_template_is_refused(site, tmp_path):
    example = tmp_path / "f64_half.py"
    example.write_text(F64_EXAMPLE)
    proc = vyre(site, "run", "--backend", "template", "--json", str(example), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["type"] == "NoCapableBackendError"
    assert error["details"] == {"rejections": {"template": ["needs f64 (supports_f64 is false)"]}}
    assert "backend 'template' was requested but cannot run program" in proc.stderr
    assert "Fix: Omit the backend to let routing pick a capable one" in proc.stderr
    # left to routing, the same program runs elsewhere and matches
    routed = vyre(site, "run", "--json", str(example), cwd=tmp_path)
    assert routed.returncode == 0, routed.stdout + routed.stderr
    record = json.loads(routed.stdout)
    assert record["backend"] == "cpu" and record["oracle"]["ok"] is True
