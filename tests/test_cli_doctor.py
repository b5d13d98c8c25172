"""``vyre doctor`` run as a user runs it: a fresh interpreter of this venv, JSON on stdout.

Each run gets its own runtime dir, so run directories of other tests never show up; a
broken plugin is an installed distribution in a temp site folder on PYTHONPATH,
invisible to this process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from installed_dists import write_dist

from vyre_core import __version__
from vyre_core.driver import Driver
from vyre_core.registry import SELECT_ENV

TIMEOUT = 100
# Runs the command, then says on stderr whether this process ever imported wgpu.
SCRIPT = ("import sys; from vyre_core.cli import main; rc = main(); "
          "sys.stderr.write(f'\\nwgpu imported: {\"wgpu\" in sys.modules}\\n'); sys.exit(rc)")


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A short runtime dir of its own (unix socket paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="vdt-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def doctor(runtime: Path, *args: str, select: str | None = None,
           site: Path | None = None) -> tuple[int, dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in (SELECT_ENV, "PYTHONPATH")}
    env["VYRE_RUNTIME_DIR"] = str(runtime)
    if select is not None:
        env[SELECT_ENV] = select
    if site is not None:
        env["PYTHONPATH"] = str(site)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, "doctor", "--json", *args], env=env,
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=runtime)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_doctor_lists_the_bundled_backends_and_their_adapters(runtime_dir):
    rc, report, stderr = doctor(runtime_dir)
    assert report["problems"] == [] and report["ok"] is True and rc == 0
    assert report["python"]["executable"] == sys.executable
    assert report["vyre"] == __version__
    plugins = {p["id"]: p for p in report["plugins"]}
    for backend, dist in (("reference", "vyre-reference"), ("wgpu", "vyre-wgpu")):
        assert plugins[backend]["status"] == "loaded"
        assert plugins[backend]["distribution"] == dist
        assert plugins[backend]["distribution_version"] == metadata.version(dist)
    assert plugins["reference"]["reference"] is True
    adapters = {a["backend"]: a for a in report["adapters"]}
    assert adapters["reference"]["error"] is None
    assert adapters["wgpu"]["error"] is None and adapters["wgpu"]["device"]
    assert adapters["wgpu"]["backend_type"]
    if adapters["wgpu"]["software_adapter"]:  # lavapipe: a note, never a problem
        assert any("software adapter" in n["what"] for n in report["notes"])
    assert report["vulkan"]["loader"] and report["vulkan"]["icds"]
    assert report["run_dirs"]["stale"] == []
    assert "wgpu imported: False" in stderr  # the device was touched only in the worker


def test_a_broken_plugin_is_a_problem_with_its_error_and_fix(runtime_dir, tmp_path):
    site = write_dist(tmp_path / "site", "vyre-doctor-broken", {"broken": "vyre_broken_import"},
                      ("vyre_broken_import",))
    # wgpu left out (no device opened: faster), so it shows up as disabled, a note
    rc, report, _ = doctor(runtime_dir, select="reference,broken", site=site)
    assert rc == 1 and report["ok"] is False
    broken = {p["name"]: p for p in report["plugins"]}["broken"]
    assert broken["status"] == "broken"
    assert broken["distribution"] == "vyre-doctor-broken"
    assert broken["distribution_version"] == "0.0.1"
    assert broken["reason"] == ("ImportError: vyre_broken_import cannot find "
                               "libvyre_missing_device.so")
    assert "Traceback (most recent call last)" in broken["traceback"]
    problem, = (p for p in report["problems"] if "'broken'" in p["what"])
    assert problem["detail"] == broken["reason"]
    assert "pip install --force-reinstall vyre-doctor-broken" in problem["fix"]
    assert {p["name"]: p["status"] for p in report["plugins"]}["wgpu"] == "disabled"
    assert any(n["what"] == "plugin 'wgpu' is disabled" for n in report["notes"])
    assert [a["backend"] for a in report["adapters"]] == ["reference"]


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True, timeout=TIMEOUT)
    return int(proc.stdout)


def test_stale_run_dirs_are_reported_and_clean_removes_only_them(runtime_dir, monkeypatch):
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(runtime_dir))
    with Driver():  # a live driver's run dir: neither reported nor removed
        live_dir, = (runtime_dir / f"vyre-{os.getuid()}").iterdir()
        stale = live_dir.parent / f"{_dead_pid()}-zz-beef"
        stale.mkdir(mode=0o700)
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(stale / "p0.sock"))  # the socket file a killed driver leaves behind
        sock.close()

        rc, report, _ = doctor(runtime_dir, select="reference")
        assert rc == 1
        assert report["run_dirs"]["stale"] == [{"path": str(stale), "sockets": ["p0.sock"]}]
        problem, = report["problems"]
        assert "stale run directories" in problem["what"] and "--clean" in problem["fix"]
        assert stale.is_dir()  # reporting changes nothing

        rc, report, _ = doctor(runtime_dir, "--clean", select="reference")
        assert rc == 0 and report["problems"] == []
        assert report["run_dirs"]["removed"] == [{"path": str(stale), "sockets": ["p0.sock"]}]
        assert report["run_dirs"]["stale"] == []
        assert not stale.exists()
        assert live_dir.is_dir()


def test_text_from_a_plugin_is_printed_as_it_is_not_read_as_markup(runtime_dir, tmp_path):
    """An import error with square brackets (pip's extras, a closing ``[/]``) crashed
    ``vyre backends`` and ``vyre doctor``: rich took it for markup. Tables print what a
    plugin says verbatim."""
    site = write_dist(tmp_path / "site", "vyre-markup", {"markup": "vyre_markup_import"},
                      ("vyre_markup_import",))
    message = ("vyre_markup_import needs the [cuda] extra: pip install 'vyre-markup[cuda]' "
               "([/] [bold red]x[/bold red] [link=file://x])")
    env = {k: v for k, v in os.environ.items() if k not in (SELECT_ENV, "PYTHONPATH")}
    env.update(VYRE_RUNTIME_DIR=str(runtime_dir), PYTHONPATH=str(site), COLUMNS="2000",
               **{SELECT_ENV: "reference,markup"})
    for command in ("backends", "doctor"):
        proc = subprocess.run([sys.executable, "-m", "vyre_core.cli", command], env=env,
                              capture_output=True, text=True, timeout=TIMEOUT, cwd=runtime_dir)
        # (doctor prints the plugin's own traceback on stderr; nothing of rich's)
        assert proc.returncode in (0, 1) and "rich" not in proc.stderr, proc.stderr
        assert message in proc.stdout, proc.stdout
