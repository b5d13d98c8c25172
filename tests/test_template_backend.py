"""A backend written by ``vyre new-backend`` as an author and a user meet it: the command
run for real, the package it wrote pip-installed (offline, into a temporary site), then,
in subprocesses with that site on the path, its own tests run with the conformance kit
and the ``vyre`` command run against it. The pure part of the command (names, the
rendering, all-or-nothing writing) is tested in-process at the end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fresh_env import fresh_env
from test_conformance_kit import KIT_TESTS, run_kit

from vyre_core.cli import new_backend
from vyre_core.conformance.corpus import CASES, SEQUENCE_CASES
from vyre_core.errors import InvalidConfigError
from vyre_core.ir import NEWER_OPS
from vyre_core.mathlib.inline import requirements

NAME = "my-gpu"
OWN_TESTS = 3  # vyre_core/backend-template/tests/test_backend.py

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


def vyre(site: Path | None, *args: str, cwd: Path,
         **settings: str) -> subprocess.CompletedProcess[str]:
    """``python -m vyre_core.cli ARGS`` with ``site`` on the path; no VYRE_* settings but
    ``settings``."""
    env = fresh_env(**settings)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "vyre_core.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package ``vyre new-backend my-gpu`` writes, as the command writes it."""
    root = tmp_path_factory.mktemp("new-backend")
    proc = vyre(None, "new-backend", NAME, "--json", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    written = json.loads(proc.stdout)
    assert written == {"backend": NAME, "path": str(root / "vyre-my-gpu"), "files": [
        "README.md", "pyproject.toml", "tests/test_backend.py", "tests/test_conformance.py",
        "vyre_my_gpu/__init__.py", "vyre_my_gpu/backend.py"]}
    return root / "vyre-my-gpu"


@pytest.fixture(scope="module")
def site(package: Path) -> Path:
    """The written package installed as a user installs it."""
    site = package.parent / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "--quiet", "--target", str(site),
         str(package)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return site


def test_the_written_backend_passes_the_kit_with_its_own_tests(package, site):
    code, out, counts = run_kit(NAME, package, site)
    assert code == 0, out
    assert f"{KIT_TESTS + OWN_TESTS} passed" in out, out
    # f16, f64, subgroups and the ops newer than the contract (it names no ops) are not
    # claimed: those cases, two probes and the over-limit workgroup must be refused;
    # everything else passes, nothing fails or errors
    # (a sequence: when any step is not)
    programs = [[c.program] for c in CASES] + [
        [p for p, _ in c.sequence.programs()] for c in SEQUENCE_CASES]
    # (a program's requirements as a backend is given it: a transcendental the math
    # library computes needs the newer ops its function is made of)
    unclaimed = sum(1 for case in programs if any(
        {"f16", "f64", "subgroups"} & requirements(p).features
        or NEWER_OPS & requirements(p).ops for p in case))
    assert counts == {"pass": len(programs) - unclaimed + 3, "unclaimed": unclaimed + 3}, out
    assert "unclaimed honesty_f64_arithmetic: not claimed (needs f64 (supports_f64 is " \
           "false)), refused: backend 'my-gpu' does not run program" in out, out
    assert "unclaimed seq_f64_step: not claimed (step 0: needs f64 (supports_f64 is " \
           "false)), refused: backend 'my-gpu' does not run program" in out, out


def test_one_kit_case_of_the_written_backend_runs_by_its_node_id(package, site):
    case = f"tests/test_conformance.py::test_corpus[{CASES[0].name}]"
    code, out, counts = run_kit(NAME, package, site, args=(case,))
    assert code == 0 and "1 passed" in out and counts == {"pass": 1}, out


def test_vyre_run_on_the_written_backend_matches_numpy_and_the_reference(site, tmp_path):
    proc = vyre(site, "run", "--backend", NAME, "--shadow", "--json", "saxpy",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(proc.stdout)
    assert (record["backend"], record["reason"]) == (NAME, "requested explicitly")
    assert record["oracle"] == {"ok": True, "mismatch": None}
    assert record["shadow"] == {"reference": "reference", "ok": True, "divergence": None}


def test_vyre_backends_lists_it_between_wgpu_and_cpu(site, tmp_path):
    proc = vyre(site, "backends", "--json", cwd=tmp_path, VYRE_PROBE_CACHE="off")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [(r["id"], r["precedence"], r["distribution"], r["status"])
            for r in json.loads(proc.stdout) if r["id"] in {"wgpu", NAME, "cpu"}]
    assert rows == [("wgpu", 100, "vyre-wgpu", "loaded"),  # (never probed: by precedence)
                    (NAME, 300, "vyre-my-gpu", "loaded"),
                    ("cpu", 500, "vyre-cpu", "loaded")]


def test_an_f64_program_named_onto_it_is_refused(site, tmp_path):
    example = tmp_path / "f64_half.py"
    example.write_text(F64_EXAMPLE)
    proc = vyre(site, "run", "--backend", NAME, "--json", str(example), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["type"] == "NoCapableBackendError"
    assert error["details"] == {"rejections": {NAME: ["needs f64 (supports_f64 is false)"]}}
    assert "backend 'my-gpu' was requested but cannot run program" in proc.stderr
    assert "Fix: cpu and reference can run all of it. Omit the backend to let routing pick " \
           "a capable one" in proc.stderr
    # left to routing, the same program runs elsewhere and matches
    routed = vyre(site, "run", "--json", str(example), cwd=tmp_path)
    assert routed.returncode == 0, routed.stdout + routed.stderr
    record = json.loads(routed.stdout)
    assert record["backend"] == "cpu" and record["oracle"]["ok"] is True


# -- the command's rules, in-process -----------------------------------------------------

def test_the_written_package_keeps_no_name_of_the_template():
    files = new_backend.rendered("my-gpu", new_backend.template_files())
    text = "\n".join(files.values())
    for left in ('"template"', "vyre_template", "vyre-template", "=template", "backend template",
                 "\ntemplate = "):
        assert left not in text and not any(left in path for path in files), left
    assert '\nmy-gpu = "vyre_my_gpu.backend"' in files["pyproject.toml"]
    assert 'BACKEND_ID = "my-gpu"' in files["vyre_my_gpu/backend.py"]


@pytest.mark.parametrize("name", ["", "MyGPU", "1gpu", "my--gpu", "gpu-", "my gpu", "a/b",
                                  "x" * 33, "ünï"])
def test_a_name_that_cannot_be_an_id_a_package_and_a_distribution_is_refused(name):
    with pytest.raises(InvalidConfigError) as caught:
        new_backend.check_name(name, [])
    assert "cannot name a backend" in caught.value.cause and "e.g. mygpu" in caught.value.fix


def test_an_installed_name_is_refused():
    with pytest.raises(InvalidConfigError, match="installed already"):
        new_backend.check_name("cpu", ["reference", "cpu"])
    new_backend.check_name("cpu2", ["reference", "cpu"])


def test_a_name_whose_package_exists_is_refused():
    """Found in review: ``core`` wrote a package vyre_core, which a non-editable install
    would have laid over vyre's own."""
    for name in ("core", "workers", "examples", "cpu"):
        assert new_backend.clash(name) == f"a package vyre_{name} is importable already"
    assert new_backend.clash("not-installed-anywhere") is None
    with pytest.raises(InvalidConfigError, match="starts with 'vyre'") as caught:
        new_backend.check_name("vyre_gpu", [])
    assert "vyre new-backend gpu" in caught.value.fix


def test_the_command_writes_into_an_empty_folder_the_shell_stands_in(tmp_path):
    """Found in review: the empty folder was removed and replaced, so a shell standing in
    it (``mkdir x && cd x && vyre new-backend x --dir .``) was left in a deleted folder."""
    here = tmp_path / "vyre-x"
    here.mkdir()
    inode = here.stat().st_ino
    proc = vyre(None, "new-backend", "x", "--dir", ".", cwd=here)
    assert proc.returncode == 0, proc.stderr
    assert here.stat().st_ino == inode and (here / "vyre_x" / "backend.py").is_file()
    assert sorted(p.name for p in here.iterdir()) == ["README.md", "pyproject.toml", "tests",
                                                      "vyre_x"]


def test_a_folder_in_the_way_is_left_as_it_is(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("keep")
    with pytest.raises(InvalidConfigError, match="not an empty folder") as caught:
        new_backend.write_package({"a.py": "x"}, tmp_path / "taken")
    assert "--dir" in caught.value.fix
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["mine.txt", "taken"]
    with pytest.raises(InvalidConfigError, match="is not a folder"):
        new_backend.write_package({"a.py": "x"}, tmp_path / "no" / "such")
    new_backend.write_package({"a.py": "x", "b/c.py": "y"}, tmp_path / "empty")
    assert (tmp_path / "empty" / "b" / "c.py").read_text() == "y"


FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from vyre_core.cli import new_backend
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
new_backend.write_package({"small.py": "x", "large.py": "y" * 5000}, Path(sys.argv[1]))
"""


def test_a_write_that_fails_leaves_nothing_behind(tmp_path):
    """A file the OS refuses (here: past the process's file size limit) leaves neither
    the package nor its staging folder."""
    for target in (tmp_path / "pkg", tmp_path / "empty"):
        if target.name == "empty":
            target.mkdir()
        proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(target)],
                              capture_output=True, text=True, timeout=60, env=fresh_env())
        assert proc.returncode == 1, proc.stderr
        assert "SystemResourceError: [E1306] writing the package into" in proc.stderr
        assert "EFBIG: File too large" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["empty"]
    assert list((tmp_path / "empty").iterdir()) == []


@pytest.mark.fast
def test_the_templates_precedence_ties_with_no_bundled_backend(monkeypatch):
    """A tie is broken by id: routing between the new backend and a bundled one would hang
    on their names. The template said 500, the cpu backend's rank."""
    import importlib
    import importlib.util
    from importlib import metadata

    root = Path(__file__).parents[1]
    monkeypatch.syspath_prepend(str(root / "plugins" / "vyre-faults"))  # (not installed)
    bundled = {ep.name: ep.load().vyre_backend_precedence()
               for ep in metadata.entry_points(group="vyre.backends")
               if ep.dist is not None and ep.dist.name in
               {"vyre-wgpu", "vyre-cpu", "vyre-reference"}}
    for name in ("backend", "wgpu"):
        monkeypatch.delenv(f"VYRE_FAULTS{'_WGPU' if name == 'wgpu' else ''}_PRECEDENCE",
                           raising=False)
        bundled[f"faults-{name}"] = importlib.import_module(
            f"vyre_faults.{name}").vyre_backend_precedence()
    template = (root / "vyre_core" / "backend-template" / "vyre_template" / "backend.py")
    spec = importlib.util.spec_from_file_location("template_backend", template)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert {"wgpu", "cpu", "reference"} <= set(bundled)
    assert module.vyre_backend_precedence() not in bundled.values(), bundled
