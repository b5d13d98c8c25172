"""``vyre demo --json`` end to end, as a user runs it: a real console script, real worker
processes, a real SIGKILL in the fault-tolerance walk-through."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fresh_env import fresh_env

from vyre_core.cli.targets import bundled_examples

VYRE = Path(sys.executable).with_name("vyre")


@pytest.mark.timeout(180)
def test_demo_json_every_check_passes():
    proc = subprocess.run([str(VYRE), "demo", "--json"], capture_output=True, text=True,
                          timeout=170,
                          env=fresh_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True

    rows = report["examples"]
    assert [r["example"] for r in rows] == bundled_examples()
    for r in rows:
        assert r["ok"] and r["error"] is None, r
        assert r["backend"] and r["reason"], r
        assert r["reference"]["ok"] and r["reference"]["divergence"] is None, r
        assert r["numpy"]["ok"] and r["numpy"]["mismatch"] is None, r
        assert r["ms"] > 0

    steps = report["fault_tolerance"]
    assert len(steps) == 6 and all(s["ok"] for s in steps), steps
    text = " ".join(s["step"] for s in steps)
    assert "SIGKILL" in text and "PipelineInvalidatedError [E1304]" in text


@pytest.mark.timeout(180)
def test_demo_without_the_reference_checks_against_numpy_and_passes():
    """With the reference left out, the demo reported DIVERGES for every example, and its
    walk-through's kill landed after a compiled kernel had finished."""
    proc = subprocess.run([str(VYRE), "demo", "--json"], capture_output=True, text=True,
                          timeout=170, env=fresh_env(VYRE_LOAD_PLUGINS="cpu"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True
    for r in report["examples"]:
        assert r["backend"] == "cpu" and r["reference"] is None and r["numpy"]["ok"], r
    steps = report["fault_tolerance"]
    assert len(steps) == 6 and all(s["ok"] for s in steps), steps
    assert "'cpu'" in steps[0]["step"]
