"""The production shadow (``Driver(shadow=ShadowOptions(every=N))``): 1 in N dispatches
another backend served run again on the reference in the background; a divergence is
logged, counted and saved as a replay bundle that ``vyre run`` replays. Through real
workers: a backend that gets f16 sums 1 ULP wrong, installed as a distribution in a child
process's path."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from installed_dists import write_dist

import vyre_core as vyre
from vyre_core.errors import InvalidConfigError
from vyre_core.shadow_sampler import Every

pytestmark = pytest.mark.processes

_SCRIPT = """
import json, logging, sys
import numpy as np
import vyre_core as vyre
from vyre_core import ir

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
k = ir.Kernel(workgroup=(8,))
a, b = k.read("a", ir.f16), k.read("b", ir.f16)
out = k.output("sum", ir.f16, count=8)
i = k.let("i", ir.global_id(0))
out[i] = a[i] + b[i]
program = k.build()
xs = np.arange(8, dtype=np.float16)
with vyre.Driver(shadow=vyre.ShadowOptions(every=2, dir=sys.argv[1])) as drv:
    backends = [drv.route(program).backend for _ in range(1)]
    exact = vyre.DispatchConfig(ulp_budget=0)  # (the backend is 1 ULP out)
    for n in range(5):
        drv.dispatch(program, [xs + n, xs], config=exact)
    drv.dispatch(program, [xs, xs], backend="reference")  # (never shadowed)
    drv.close()
    print(json.dumps({"backend": backends[0], "report": drv.shadow_report()}))
"""


def test_every_nth_dispatch_is_due_starting_with_the_first():
    rule = Every(3)
    assert [rule.due() for _ in range(7)] == [True, False, False, True, False, False, True]
    with pytest.raises(InvalidConfigError, match=r"ShadowOptions\(every=0\)"):
        Every(0)


@pytest.mark.timeout(240)
def test_a_divergence_is_counted_logged_and_replayable(tmp_path):
    site = write_dist(tmp_path / "site", "vyre-dishonest",
                      {"dishonest": "vyre_dishonest_backend"}, ("vyre_dishonest_backend",))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "VYRE_DISHONEST": "f16_wrong",
           "VYRE_LOAD_PLUGINS": "dishonest,reference", "HOME": str(tmp_path)}
    bundles = tmp_path / "bundles"
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_SCRIPT), str(bundles)],
                          capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["backend"] == "dishonest"                  # routed before the reference
    report = result["report"]
    assert {k: report[k] for k in ("sampled", "compared", "diverged", "dropped", "failed")} \
        == {"sampled": 3, "compared": 3, "diverged": 3, "dropped": 0, "failed": 0}
    assert len(report["bundles"]) == 3 and report["every"] == 2
    assert proc.stderr.count("diverges from the reference") == 3
    assert "replay it with `vyre run" in proc.stderr

    first = Path(report["bundles"][0])
    saved = json.loads(first.with_suffix(".json").read_text())
    assert saved["backend"] == "dishonest" and "output 'sum' (f16)" in saved["divergence"]
    with np.load(first.with_suffix(".npz")) as inputs:
        assert inputs["a"].tolist() == list(range(8)) and inputs["b"].tolist() == list(range(8))

    vyre = Path(sys.executable).with_name("vyre")
    replay = subprocess.run([str(vyre), "run", str(first), "--backend", "dishonest", "--shadow"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "DIVERGES" in replay.stdout
    honest = subprocess.run([str(vyre), "run", str(first), "--backend", "reference"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert honest.returncode == 0, honest.stdout + honest.stderr


@pytest.mark.timeout(240)
def test_an_in_place_launch_is_shadowed_with_the_inputs_it_was_given(tmp_path):
    """A kernel that doubles its array in place: the shadow replays it on the reference
    with the array as it was before the call (before: with the doubled one, a false
    divergence on every in-place call)."""
    @vyre.kernel
    def double(x: vyre.Array[vyre.f32]):
        i = vyre.global_id(0)
        if i < len(x):
            x[i] = x[i] * 2

    with vyre.Driver(shadow=vyre.ShadowOptions(every=1, dir=tmp_path)) as drv:
        x = np.arange(1, 65, dtype=np.float32)
        for _ in range(3):
            drv.launch(double, dim=len(x), args=(x,), backend="cpu")
        drv.close()
        report = drv.shadow_report()
    assert x.tobytes() == (np.arange(1, 65, dtype=np.float32) * 8).tobytes()
    assert report["compared"] == 3 and report["diverged"] == 0, report
