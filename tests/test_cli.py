"""The ``vyre`` command (backends, run, route, conform) run as a user runs it: the
console script in a subprocess, real workers behind it; and every bad input it can be
given answered with one line, its Fix, and exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fresh_env import fresh_env
from installed_dists import write_dist

from vyre_core.conformance import sweep
from vyre_core.conformance.corpus import CASES, SEQUENCE_CASES
from vyre_core.conformance.honesty import PROBES

VYRE = Path(sys.executable).with_name("vyre")
REPO = Path(__file__).resolve().parent.parent
SAXPY = REPO / "examples" / "saxpy.py"


def vyre(*args: str | Path, cwd: Path | None = None, sites: tuple[Path, ...] = (),
         **env: str) -> subprocess.CompletedProcess:
    environ = fresh_env(**env)
    if sites:
        environ["PYTHONPATH"] = os.pathsep.join(str(s) for s in sites)
    return subprocess.run([str(VYRE), *map(str, args)], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=300)


def json_of(proc: subprocess.CompletedProcess, code: int = 0):
    assert proc.returncode == code, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def refused(proc: subprocess.CompletedProcess, code: str, *phrases: str) -> None:
    """Exit 2, the error's cause on one line then its Fix, no traceback."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith(f"error [{code}] "), proc.stderr
    assert lines[-1].startswith("Fix: ") and "Traceback" not in proc.stderr, proc.stderr
    for phrase in phrases:
        assert phrase in proc.stderr, proc.stderr


# -- vyre backends ---------------------------------------------------------------------------

def test_backends_lists_in_precedence_order_with_broken_and_disabled(tmp_path):
    site = write_dist(tmp_path / "site", "vyre-broken", {"broken": "vyre_broken_import"},
                      ("vyre_broken_import",))
    rows = json_of(vyre("backends", "--json", sites=(site,), VYRE_PROBE_CACHE="off"))
    assert [(r["id"], r["status"], r["precedence"]) for r in rows] == [  # (never probed)
        ("wgpu", "loaded", 100), ("cpu", "loaded", 500), ("reference", "loaded", 900),
        ("broken", "broken", None)]
    assert rows[2]["reference"] and rows[2]["distribution"] == "vyre-reference"
    assert rows[3]["reason"] == ("ImportError: vyre_broken_import cannot find "
                                 "libvyre_missing_device.so")
    rows = json_of(vyre("backends", "--json", VYRE_LOAD_PLUGINS="reference"))
    assert [(r["id"], r["status"]) for r in rows] == [("reference", "loaded"),
                                                      ("cpu", "disabled"),
                                                      ("wgpu", "disabled")]
    table = vyre("backends", sites=(site,))
    assert table.returncode == 0 and "broken: ImportError" in table.stdout
    # a selection naming what is not installed: listed all the same, then refused
    for args in (("backends",), ("backends", "--json")):
        wrong = vyre(*args, VYRE_LOAD_PLUGINS="refrence")
        refused(wrong, "E1402", "'refrence' (did you mean 'reference'?)")
        assert "disabled" in wrong.stdout
    assert len(json.loads(vyre("backends", "--json", VYRE_LOAD_PLUGINS="nope").stdout)) == 3


def test_backends_probe_starts_each_worker_and_reports_its_adapter(tmp_path):
    cache = str(tmp_path / "probes")
    listed = json_of(vyre("backends", "--json", "--probe", VYRE_PROBE_CACHE=cache))
    rows = {r["id"]: r for r in listed}
    wgpu = rows["wgpu"]
    assert wgpu["software_adapter"] is True and "llvmpipe" in wgpu["adapter"]  # lavapipe
    assert wgpu["capabilities"]["max_invocations_per_workgroup"] >= 256
    assert rows["reference"]["capabilities"]["supports_f64"] is True
    assert rows["reference"]["software_adapter"] is False
    # in routing order: lavapipe demoted below the reference, and said so
    assert [(r["id"], r["demoted"], r["probed"]) for r in listed] == [
        ("cpu", False, "worker"), ("reference", False, "worker"), ("wgpu", True, "worker")]


def test_backends_shows_the_demotion_an_earlier_probe_found_and_what_was_never_probed(
        tmp_path):
    """It listed wgpu first under "routing order" though routing demotes it."""
    cache = str(tmp_path / "probes")
    never = vyre("backends", VYRE_PROBE_CACHE=cache)  # (nothing probed yet)
    assert never.returncode == 0
    text = " ".join(never.stdout.replace("│", " ").split())
    assert "demoted: software adapter" not in text and "never probed: wgpu, listed" in text
    json_of(vyre("run", "saxpy", "--json", VYRE_PROBE_CACHE=cache))  # (routing probes)
    rows = json_of(vyre("backends", "--json", VYRE_PROBE_CACHE=cache))
    assert [(r["id"], r["demoted"], r["probed"], r.get("software_adapter")) for r in rows] == [
        ("cpu", False, "cache", False), ("reference", False, None, None),
        ("wgpu", True, "cache", True)]
    table = " ".join(vyre("backends", VYRE_PROBE_CACHE=cache).stdout.replace("│", " ").split())
    assert "demoted: software adapter" in table and "never probed" not in table


# -- vyre run / route ------------------------------------------------------------------------

def test_run_routes_checks_and_shadows_an_example():
    record = json_of(vyre("run", "saxpy", "--shadow", "--json"))
    assert record["backend"] == "cpu"  # wgpu is on a software adapter here: demoted
    assert record["reason"] == ("first capable backend in routing order (rank 500; wgpu, "
                                "rank 100, demoted: software adapter)")
    assert record["oracle"] == {"ok": True, "mismatch": None}
    assert record["shadow"] == {"reference": "reference", "ok": True, "divergence": None}
    out, = record["outputs"]
    assert (out["name"], out["dtype"], out["count"]) == ("out", "f32", 1_000_000)


def test_run_shadow_without_the_reference_is_refused_with_how_to_get_it():
    refused(vyre("run", "saxpy", "--shadow", VYRE_LOAD_PLUGINS="cpu"), "E1402",
            "no reference backend is loaded", "pip install vyre-reference")


def test_run_on_a_named_backend_by_path_matches_the_example_oracle():
    record = json_of(vyre("run", SAXPY, "--backend", "wgpu", "--json"))
    assert (record["backend"], record["reason"]) == ("wgpu", "requested explicitly")
    assert record["oracle"]["ok"] is True


def test_a_saved_program_runs_with_its_inputs_and_gives_the_same_bytes(tmp_path):
    first = json_of(vyre("run", "saxpy", "--save", tmp_path / "saxpy.vyir", "--json"))
    # (saxpy's example has a config, its grid: it is saved too, and listed)
    assert first["saved"] == [str(tmp_path / f"saxpy.{suffix}") for suffix in
                              ("vyir", "npz", "json")]
    assert all(Path(path).is_file() for path in first["saved"])
    again = json_of(vyre("run", tmp_path / "saxpy.vyir", "--json"))
    assert again["outputs"] == first["outputs"] and again["oracle"] is None
    moved = tmp_path / "elsewhere.npz"
    (tmp_path / "saxpy.npz").rename(moved)
    assert json_of(vyre("run", tmp_path / "saxpy.vyir", "--inputs", moved, "--json")) \
        ["outputs"] == first["outputs"]


SPECIALIZED = """
import numpy as np
from vyre_core import DispatchConfig, ir
from vyre_core.example import Example

def build():
    k = ir.Kernel(workgroup=(4,))
    scale = k.constant("SCALE", ir.u32, 1)
    out = k.output("out", ir.u32, 8)
    out[ir.global_id()] = ir.global_id() * scale
    return Example(k.build(), [], expected=[np.arange(8, dtype=np.uint32) * 5],
                   config=DispatchConfig(constants={"SCALE": 5}))
"""


def test_a_saved_program_keeps_the_constants_it_ran_with(tmp_path):
    module = tmp_path / "scaled.py"
    module.write_text(SPECIALIZED)
    first = json_of(vyre("run", module, "--save", tmp_path / "scaled.vyir", "--json"))
    assert first["oracle"]["ok"] is True
    assert first["saved"] == [str(tmp_path / f"scaled.{suffix}")  # (the config: its .json)
                              for suffix in ("vyir", "npz", "json")]
    again = json_of(vyre("run", tmp_path / "scaled.vyir", "--json"))
    assert again["outputs"] == first["outputs"]


def test_run_exits_1_when_the_outputs_diverge_from_the_oracle(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text(SAXPY.read_text().replace("expected=[a[0] * x + y]",
                                               "expected=[a[0] * x + y + 1]"))
    record = json_of(vyre("run", wrong, "--json"), code=1)
    assert record["oracle"]["ok"] is False
    assert record["oracle"]["mismatch"].startswith(
        "output 'out' (f32): element 0 (byte 2): expected 3.99113988876342")


def test_route_explains_every_backend():
    report = json_of(vyre("route", "saxpy", "--json"))
    by_id = {b["backend"]: b for b in report["backends"]}
    assert by_id["cpu"]["chosen"] and by_id["wgpu"]["demoted"]
    assert by_id["reference"]["accepted"] and not by_id["reference"]["chosen"]
    assert by_id["wgpu"]["accepted"] and not by_id["wgpu"]["chosen"]
    assert "f32" in report["requirements"]["dtypes"]
    text = vyre("route", "saxpy")
    assert text.returncode == 0 and "chosen" in text.stdout and "demoted" in text.stdout


# -- vyre conform ----------------------------------------------------------------------------

def test_conform_reports_the_whole_corpus_on_a_backend_in_order():
    """The command's report: per backend its verdict counts, one result per case, the
    sequences after the programs and before the probes. On the reference only: the
    same runner's verdicts on wgpu and the reference are the kit's
    (test_conformance_kit, identical counts), the cpu's are its corpus test's
    (test_cpu_backend, the probes too) and its sequences' (test_sequence_conformance);
    every installed backend in one run: the exhaustive sweep below."""
    report = json_of(vyre("conform", "--backend", "reference", "--json"))
    assert set(report["backends"]) == {"reference"}
    assert report["backends"]["reference"]["ok"]
    judged = len(CASES) + len(SEQUENCE_CASES) + len(PROBES)
    # (the over-limit workgroup is the one probe nobody claims)
    assert report["backends"]["reference"]["counts"] == {"pass": judged - 1, "unclaimed": 1}
    assert len(report["results"]) == judged
    # the sequences, run whole, after the programs and before the probes
    names = [r["case"] for r in report["results"]]
    assert names[:len(CASES)] == [c.name for c in CASES]
    assert names[len(CASES):len(CASES) + len(SEQUENCE_CASES)] == [c.name for c in
                                                                   SEQUENCE_CASES]


#: What docs/semantics.md says wgpu's own f32 functions reach (ULPs from correctly rounded;
#: every transcendental is the math library's, the same on every backend).
WGPU_MEASURED = {"exp": 0, "log": 0, "sin": 0, "cos": 0, "tan": 0, "tanh": 0, "exp2": 0,
                 "log2": 0, "pow": 0, "atan2": 0}


def test_conform_exhaustive_sweeps_every_op_with_its_largest_ulp_distance():
    """The slow tier, small enough for the suite: every op on every backend within its
    budget; the wgpu lowering's own functions within what semantics.md says of each."""
    report = json_of(vyre("conform", "--exhaustive", "--inputs", "65536", "--json"))
    results = report["results"]
    assert {(r["backend"], r["op"]) for r in results} == {
        (b, op) for b in ("reference", "wgpu", "cpu") for op in sweep.OPS}
    assert all(r["ok"] and r["inputs"] == 65536 for r in results), results
    assert all(r["max_ulp"] == 0 for r in results if r["backend"] in ("reference", "cpu"))
    assert all(r["max_ulp"] <= WGPU_MEASURED.get(r["op"], 0)
               for r in results if r["backend"] == "wgpu"), results


def test_conform_fails_a_dishonest_backend_with_the_first_divergence(tmp_path):
    site = write_dist(tmp_path / "site", "vyre-dishonest",
                      {"dishonest": "vyre_dishonest_backend"}, ("vyre_dishonest_backend",))
    proc = vyre("conform", "--backend", "dishonest", sites=(site,), VYRE_DISHONEST="f16_wrong")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout
    assert "dishonest fail honesty_f16_arithmetic: output 'sum' (f16): element 0" in \
        " ".join(proc.stdout.split())


# -- bad input: one line, its Fix, exit 2 ----------------------------------------------------

@pytest.mark.parametrize("args", [("run", "saxpy"), ("conform",)], ids=["run", "conform"])
def test_an_unknown_backend(args):
    refused(vyre(*args, "--backend", "nosuch"), "E1402", "no backend 'nosuch' is registered")


@pytest.mark.parametrize("command", ["run", "route"])
def test_a_missing_file(command, tmp_path):
    refused(vyre(command, tmp_path / "nope.py"), "E1101", "nope.py': no such file")
    refused(vyre(command, tmp_path / "nope.vyir"), "E1101", "no such file")
    refused(vyre(command, "nosuchexample"), "E1101", "not a file or a bundled example",
            "saxpy")


@pytest.mark.parametrize("command", ["run", "route"])
def test_malformed_program_bytes(command, tmp_path):
    bad = tmp_path / "bad.vyir"
    bad.write_bytes(b"VYIR\x01" + b"\xc1" * 40)
    refused(vyre(command, bad), "E1001")
    bad.write_bytes(b"not a program at all")
    refused(vyre(command, bad), "E1001")


def test_a_module_that_is_not_an_example(tmp_path):
    module = tmp_path / "plain.py"
    module.write_text("x = 1\n")
    refused(vyre("run", module), "E1101", "has no build() function")


@pytest.mark.parametrize("problem", ["missing", "unknown", "dtype", "file"])
def test_inputs_that_do_not_match_the_buffers(problem, tmp_path):
    json_of(vyre("run", "saxpy", "--save", tmp_path / "p.vyir", "--json"))
    npz = tmp_path / "p.npz"
    data = dict(np.load(npz))
    if problem == "missing":
        del data["y"]
        np.savez(npz, **data)
        refused(vyre("run", tmp_path / "p.vyir"), "E1101", "missing y", "Fix: Save the inputs")
    elif problem == "unknown":
        np.savez(npz, **data, z=np.zeros(3))
        refused(vyre("run", tmp_path / "p.vyir"), "E1101", "unknown z")
    elif problem == "dtype":
        np.savez(npz, **{**data, "x": data["x"].astype(np.float64)})
        refused(vyre("run", tmp_path / "p.vyir"), "E1101", "input 'x' has dtype float64")
    else:
        npz.write_bytes(b"garbage")
        refused(vyre("run", tmp_path / "p.vyir"), "E1101", "is not a readable .npz")


def test_json_errors_are_json_and_debug_shows_the_traceback():
    proc = vyre("run", "saxpy", "--backend", "nosuch", "--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["code"] == 1402
    debug = vyre("--debug", "run", "saxpy", "--backend", "nosuch")
    assert debug.returncode == 2 and "Traceback" in debug.stderr


def test_usage_errors_exit_2():
    assert vyre("nosuchcommand").returncode == 2
    assert vyre("run").returncode == 2
    assert vyre("--version").stdout.startswith("vyre ")


def test_route_reads_a_saved_program_without_inputs_and_save_needs_a_real_folder(tmp_path):
    json_of(vyre("run", "saxpy", "--save", tmp_path / "p.vyir", "--json"))
    (tmp_path / "p.npz").unlink()
    report = json_of(vyre("route", tmp_path / "p.vyir", "--json"))
    assert any(b["chosen"] for b in report["backends"])
    refused(vyre("run", "saxpy", "--save", tmp_path / "no" / "p.vyir"), "E1101",
            "cannot save to", "Fix: Pass --save a path in an existing, writable folder.")
