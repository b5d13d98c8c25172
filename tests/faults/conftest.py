"""The fault-injection suite: real worker processes misbehaving on request.

The kit users get: the ``vyre-faults`` distribution (plugins/vyre-faults) pip-installed
(offline) into a temporary folder once per session and put on the path of this process
and of every worker it starts, and ``vyre_core.testing``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vyre_core.testing.faults import PRECEDENCE_ENV, STARTUP_ENV

DISTRIBUTION = Path(__file__).parents[2] / "plugins" / "vyre-faults"


@pytest.fixture(scope="package", autouse=True)
def faults_installed(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("faults-site")
    source = tmp_path_factory.mktemp("faults-source") / "vyre-faults"
    shutil.copytree(DISTRIBUTION, source, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__"))  # (pip builds in the tree it is given)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "--quiet", "--target", str(site),
         str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    old_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), old_path]))
    sys.path.insert(0, str(site))
    yield site
    sys.path.remove(str(site))
    if old_path is None:
        del os.environ["PYTHONPATH"]
    else:
        os.environ["PYTHONPATH"] = old_path


@pytest.fixture(autouse=True)
def _clean_fault_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start-up faults are steered by environment variables: no test inherits another's."""
    monkeypatch.delenv(STARTUP_ENV, raising=False)
    monkeypatch.delenv(PRECEDENCE_ENV, raising=False)
