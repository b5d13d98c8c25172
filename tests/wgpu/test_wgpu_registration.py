"""Registering the wgpu backend is side-effect free: discovering it imports neither wgpu
nor any module of the device layer, opens no device and starts no process."""

from __future__ import annotations

import subprocess
import sys

import pytest

_CHECK = """
import sys
{body}
pure = ("vyre_wgpu", "vyre_wgpu.backend", "vyre_wgpu.lowering", "vyre_wgpu.wgsl",
        "vyre_wgpu.expressions", "vyre_wgpu.statements", "vyre_wgpu.bindings",
        "vyre_wgpu.narrow_ints", "vyre_wgpu.bitcasts", "vyre_wgpu.tables")
leaked = sorted(m for m in sys.modules if m.split(".")[0] == "wgpu"
                or (m.split(".")[0] == "vyre_wgpu" and m not in pure))
assert not leaked, f"registration imported {{leaked}}"
print("ok")
"""


def _run(body: str) -> str:
    proc = subprocess.run([sys.executable, "-c", _CHECK.format(body=body)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.parametrize("body", [
    "import vyre_wgpu.backend",
    "import vyre_wgpu, vyre_wgpu.lowering",
    "from vyre_core.registry import Registry\n"
    "reg = Registry.discover('wgpu').get('wgpu')\n"
    "assert (reg.precedence, reg.version, reg.distribution) == (100, '0.1.0', 'vyre-wgpu')\n"
    "assert reg.entry_point == 'wgpu = vyre_wgpu.backend', reg.entry_point\n"
    "assert reg.claims.max_workgroup_size == (256, 256, 64)",
], ids=["backend-module", "package", "entry-point-discovery"])
def test_registration_imports_no_wgpu(body):
    assert _run(body).strip() == "ok"


def test_the_registry_loads_the_plugin_without_errors():
    out = _run("from vyre_core.registry import Registry\n"
               "r = Registry.discover()\n"
               "assert not r.broken, r.broken\n"
               "print(r.ids())")
    assert "wgpu" in out and "reference" in out
