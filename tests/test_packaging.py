"""What pip installs: a wheel built from a copy of the sources ships the typing marker
(``py.typed``) and the files the code reads at run time, and says vyre is for Linux;
imported elsewhere, vyre says so and stops (it needs pidfds, prctl and /proc)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from vyre_core.cli import new_backend

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.processes


def _wheel(sources: list[str], base: Path, tmp_path: Path) -> zipfile.ZipFile:
    """The wheel pip builds (offline, the venv's setuptools) from a copy of ``sources``
    under ``base``: the checkout itself gets no build folder."""
    copy = tmp_path / "src"
    for name in sources:
        source = base / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            copy.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, copy / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--no-index", "--disable-pip-version-check",
                           "--quiet", "--wheel-dir", str(tmp_path / "dist"), str(copy)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel, = (tmp_path / "dist").glob("*.whl")
    return zipfile.ZipFile(wheel)


def _metadata(wheel: zipfile.ZipFile) -> str:
    name, = (n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return wheel.read(name).decode()


def test_the_vyre_wheel_is_typed_linux_only_and_carries_its_data(tmp_path):
    wheel = _wheel(["pyproject.toml", "README.md", "vyre_core", "workers", "benchmarks",
                    "examples"], ROOT, tmp_path)
    names = set(wheel.namelist())
    assert {"vyre_core/py.typed", "vyre_core/contract/contract.json"} <= names
    template = {f"vyre_core/backend-template/{path}"
                for path in new_backend.template_files()}  # what `vyre new-backend` reads
    assert len(template) == 6 and template <= names
    installed = {"vyre_workers": "workers", "vyre_benchmarks": "benchmarks",
                 "vyre_examples": "examples", "vyre_core": "vyre_core"}
    packages = {f"{name}/{init.parent.relative_to(ROOT / folder).as_posix()}/__init__.py"
                .replace("/./", "/") for name, folder in installed.items()
                for init in (ROOT / folder).rglob("__init__.py")
                if "backend-template" not in init.parts}
    assert packages - names == set()  # (a package missing from pyproject's list)
    metadata = _metadata(wheel)
    assert "Classifier: Operating System :: POSIX :: Linux" in metadata
    assert "Requires-Python: >=3.11" in metadata


@pytest.mark.parametrize("backend", ["cpu", "reference", "wgpu", "faults"])
def test_each_backend_wheel_is_typed_and_has_every_module(backend, tmp_path):
    """Every module, subpackages' too (found missing: vyre_cpu.runtime, a package the
    explicit list in pyproject.toml left out, so an installed wheel failed at import)."""
    dist = ROOT / "plugins" / f"vyre-{backend}"
    wheel = _wheel(["pyproject.toml", f"vyre_{backend}"], dist, tmp_path)
    assert f"vyre_{backend}/py.typed" in wheel.namelist()
    modules = {path.relative_to(dist).as_posix() for path in
               (dist / f"vyre_{backend}").rglob("*.py") if "__pycache__" not in path.parts}
    assert modules - set(wheel.namelist()) == set()
    assert "Classifier: Operating System :: POSIX :: Linux" in _metadata(wheel)


def test_imported_on_another_system_vyre_says_it_needs_linux():
    proc = subprocess.run([sys.executable, "-c",
                           "import sys; sys.platform = 'darwin'; import vyre_core"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "ImportError: vyre runs on Linux only (this is darwin)" in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("Fix: run vyre on Linux")
