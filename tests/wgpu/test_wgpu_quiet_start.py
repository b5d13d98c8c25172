"""Opening wgpu writes nothing on stderr where no Wayland session can be reached (issue 37:
two "error: XDG_RUNTIME_DIR is invalid or not set in the environment." lines in every
``vyre bench``, from libwayland, asked for a display by wgpu's OpenGL backend)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fresh_env import fresh_env

SCRIPT = """
from vyre_wgpu.adapter import enumerate_adapters, request_adapter
request_adapter()
print(len(enumerate_adapters()))
"""


@pytest.mark.processes
def test_requesting_adapters_without_a_wayland_session_says_nothing_on_stderr(tmp_path) -> None:
    env = fresh_env()
    for name in ("XDG_RUNTIME_DIR", "WAYLAND_DISPLAY", "WAYLAND_SOCKET"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) >= 1
    assert "XDG_RUNTIME_DIR" not in proc.stderr, proc.stderr
