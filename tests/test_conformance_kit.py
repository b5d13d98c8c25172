"""The conformance kit (``pytest --vyre-backend=ID``) run as a backend author runs it: a
pytest subprocess in an empty folder, against installed backends — the bundled ones
pass; a backend whose capability report lies fails, naming the lie."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fresh_env import fresh_env
from installed_dists import write_dist

from vyre_core.conformance.corpus import CASES, SEQUENCE_CASES
from vyre_core.conformance.honesty import PROBES

#: The corpus's programs and sequences, the honesty probes, the contract checks.
KIT_TESTS = len(CASES) + len(SEQUENCE_CASES) + len(PROBES) + 5
#: Every case and probe the kit judges (one verdict each).
JUDGED = len(CASES) + len(SEQUENCE_CASES) + len(PROBES)


def run_kit(backend: str, cwd: Path, *sites: Path, args: tuple[str, ...] = (),
            **env: str) -> tuple[int, str, dict]:
    """Exit code, output, and the verdict counts of the kit's summary."""
    environ = fresh_env()
    environ.update(env, PYTHONPATH=os.pathsep.join(str(s) for s in sites))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--vyre-backend={backend}", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    summary = re.search(r"vyre conformance kit: backend .*\n(.*)\n", out)
    counts = {} if summary is None else {
        verdict: int(n) for n, verdict in re.findall(r"(\d+) (\w+)", summary.group(1))}
    return proc.returncode, out, counts


@pytest.fixture
def dishonest_site(tmp_path: Path) -> Path:
    return write_dist(tmp_path / "site", "vyre-dishonest",
                      {"dishonest": "vyre_dishonest_backend"}, ("vyre_dishonest_backend",))


def test_the_reference_backend_passes_the_kit(tmp_path):
    code, out, counts = run_kit("reference", tmp_path)
    assert code == 0, out
    assert f"{KIT_TESTS} passed" in out
    # the over-limit workgroup is the one probe nobody claims
    assert counts == {"pass": JUDGED - 1, "unclaimed": 1}, out


def test_the_wgpu_backend_passes_the_kit_listing_what_it_declines(tmp_path):
    code, out, counts = run_kit("wgpu", tmp_path)
    assert code == 0, out
    # (subgroups of 4 and 32: lavapipe forms subgroups of 8 only; WGSL has no u64/i64,
    # so no f64 bitcast either, and not the math library's f64 functions, which use them)
    assert counts == {"pass": JUDGED - 15, "refused": 5, "unclaimed": 10}, out
    assert "unclaimed u64_edges_0: not claimed (uses ops not supported: dtype.u64)" in out
    assert "unclaimed bitcast_f64_u64_i64: not claimed (uses ops not supported: " \
           "dtype.i64, dtype.u64" in out
    assert "unclaimed subgroups_of_32: not claimed (needs subgroups of 32 invocations " \
           "(this backend runs 8))" in out
    assert "unclaimed f64_transcendental: not claimed (uses ops not supported: " \
           "dtype.i64, dtype.u64" in out
    assert "refused   f64_special_rem: declined at compile" in out
    assert "refused   f64_rem: declined at compile" in out
    assert "refused   cast_f64_f16_rounding: declined at compile" in out


KIT_IMPORT = ('"""The kit, with node ids of this folder."""\n\n'
              "from vyre_core.conformance.kit import *  # noqa: F403\n")


def test_kit_cases_have_node_ids_that_select_them(tmp_path):
    """Before: the kit's cases had node ids with no path (``::test_corpus[u32_arith]``),
    which no command line can name. A module that imports the kit gives them its own,
    and the copy the option adds is dropped: each case runs once."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_conformance.py").write_text(KIT_IMPORT)
    case = f"tests/test_conformance.py::test_corpus[{CASES[3].name}]"
    sequence = f"tests/test_conformance.py::test_sequence_corpus[{SEQUENCE_CASES[1].name}]"
    code, out, counts = run_kit("reference", tmp_path, args=(case, sequence, "-rA"))
    assert code == 0, out
    assert f"PASSED {case}" in out and f"PASSED {sequence}" in out, out
    assert "2 passed" in out and counts == {"pass": 2}, out
    code, out, counts = run_kit("reference", tmp_path, args=("-k", "honesty and atomics"))
    assert code == 0 and "1 passed" in out and counts == {"pass": 1}, out
    code, out, _ = run_kit("reference", tmp_path, args=("--collect-only",))
    ids = [line for line in out.splitlines() if "::" in line]
    assert len(ids) == KIT_TESTS == len(set(ids)), out
    assert all(line.startswith("tests/test_conformance.py::") for line in ids), out
    # a module that imports part of the kit runs that part; the rest still runs
    (tmp_path / "tests" / "test_conformance.py").write_text(
        "from vyre_core.conformance.kit import backend_id, caps, kit_driver, registration, "
        "test_corpus  # noqa: F401\n")
    code, out, _ = run_kit("reference", tmp_path, args=("--collect-only",))
    ids = [line for line in out.splitlines() if "::" in line]
    assert len(ids) == KIT_TESTS, out
    assert sum(line.startswith("tests/test_conformance.py::test_corpus[") for line in ids) \
        == len(CASES), out


def test_a_folder_importing_the_kit_skips_it_without_the_option(tmp_path):
    """Found in review: the kit's driver read the registry the option leaves, so a plain
    ``pytest`` in a backend's folder gave an error per kit test instead of skips."""
    (tmp_path / "test_conformance.py").write_text(KIT_IMPORT)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=tmp_path, env=fresh_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and f"{KIT_TESTS} skipped" in proc.stdout, proc.stdout


def test_running_what_it_does_not_claim_fails_the_kit(tmp_path, dishonest_site):
    code, out, counts = run_kit("dishonest", tmp_path, dishonest_site,
                                VYRE_DISHONEST="f64_unclaimed")
    assert code == 1, out
    # every f64 case within the backend's one workgroup (64 lanes) runs though unclaimed;
    # a larger one is refused at launch (unclaimed, honestly)
    f64_cases = [c.name for c in CASES if "f64" in c.program.requirements().features
                 and len(c.expected[0]) <= 64]
    # a sequence with an f64 step is unclaimed whole, and runs all the same
    f64_sequences = [c.name for c in SEQUENCE_CASES if any(
        "f64" in p.requirements().features for p, _ in c.sequence.programs())]
    assert f64_cases and f64_sequences, (f64_cases, f64_sequences)
    assert counts["fail"] == len(f64_cases) + len(f64_sequences) + 1, out  # + the f64 probe
    assert re.search(r"FAILED .*test_capability_honesty\[f64_arithmetic\]", out), out
    assert ("honesty_f64_arithmetic on dishonest: fail: ran a program it does not claim "
            "(needs f64 (supports_f64 is false))") in out
    assert re.search(r"FAILED .*test_sequence_corpus\[seq_f64_step\]", out), out
    assert ("seq_f64_step on dishonest: fail: ran a program it does not claim (step 0: "
            "needs f64 (supports_f64 is false))") in out


def test_a_claimed_feature_that_computes_wrongly_fails_the_kit(tmp_path, dishonest_site):
    """(The kit's f16 cases only: every other case runs on the reference's code, and the
    kit runs whole on the reference above.)"""
    code, out, counts = run_kit("dishonest", tmp_path, dishonest_site,
                                VYRE_DISHONEST="f16_wrong", args=("-k", "f16"))
    assert code == 1, out
    assert re.search(r"honesty_f16_arithmetic on dishonest: fail: output 'sum' \(f16\): "
                     r"element 0 \(byte 0\): expected .*, got .*, 1 ULP apart", out), out
    assert counts["fail"] >= 2, out


def test_an_unknown_backend_is_one_usage_error_with_the_closest_name(tmp_path):
    """It was an error per kit test: 91 of them in 3,008 lines."""
    code, out, _ = run_kit("refrence", tmp_path)
    assert code == 4, out  # (pytest's usage error)
    assert "ERROR: --vyre-backend 'refrence': no such backend is installed (did you mean " \
        "'reference'?) (installed: wgpu, cpu, reference)" in out
    assert "Fix: pip install the backend's distribution" in out
    assert len(out.strip().splitlines()) <= 3, out


def test_a_backend_left_out_or_broken_is_one_usage_error_saying_so(tmp_path):
    code, out, _ = run_kit("cpu", tmp_path, VYRE_LOAD_PLUGINS="reference")
    assert code == 4 and "left out by VYRE_LOAD_PLUGINS" in out, out
    site = write_dist(tmp_path / "site", "vyre-broken", {"broken": "vyre_broken_import"},
                      ("vyre_broken_import",))
    code, out, _ = run_kit("broken", tmp_path, site)
    assert code == 4, out
    assert "the plugin is installed but failed to load: ImportError: vyre_broken_import " \
        "cannot find libvyre_missing_device.so" in out


def test_without_the_option_the_plugin_adds_nothing(tmp_path):
    (tmp_path / "test_own.py").write_text(
        "import sys\n\n"
        "def test_own():  # the plugin is loaded, but builds no corpus\n"
        "    assert 'vyre_core.conformance.pytest_plugin' in sys.modules\n"
        "    assert 'vyre_core.conformance.corpus' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr


def test_probes_fit_a_backend_that_reports_one_workgroup_per_axis():
    """Sized from the report: one workgroup per axis gives one-workgroup probes whose
    expected outputs the reference reproduces."""
    import dataclasses

    from vyre_core.compare import outputs_divergence
    from vyre_core.registry import Registry
    from vyre_reference import run

    caps = dataclasses.replace(Registry.discover("reference").get("reference").claims,
                               max_workgroups_per_dimension=1)
    for name, build in PROBES.items():
        case = build(caps)
        assert case.name == f"honesty_{name}" and case.grid in (None, (1,)), (name, case.grid)
        if name != "oversized_workgroup":
            got = run(case.program, case.inputs, grid=case.grid)
            assert outputs_divergence(case.program, case.expected, got) is None, name
