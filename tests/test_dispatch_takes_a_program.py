"""A program entry point given something that is not a Program (a name, a kernel not yet
built, the function that makes one) refuses it with InvalidInputError and a Fix, before
anything starts (issue 35; it was a bare AttributeError)."""

from __future__ import annotations

import numpy as np
import pytest

import vyre_core as vyre
from vyre_core import Driver, ir
from vyre_core.errors import InvalidInputError
from vyre_core.registry import Registry
from vyre_core.testing import dispatch_on

pytestmark = pytest.mark.fast  # the fast tier: no process is started here

DATA = [np.ones(4, np.float32)]


@pytest.fixture
def drv(monkeypatch, tmp_path):
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp_path))
    with Driver(Registry.discover()) as driver:  # lazy: nothing starts unless used
        yield driver
        assert all(p["state"] == "not started" for p in driver.status()["pools"].values())


def unbuilt() -> ir.Kernel:
    k = ir.Kernel(workgroup=(4,))
    x = k.read("x", ir.f32)
    out = k.output("out", ir.f32, count=4)
    out[ir.global_id(0)] = x[ir.global_id(0)]
    return k


@vyre.kernel(workgroup=(4,))
def copy(x: vyre.Array[vyre.f32], out: vyre.Array[vyre.f32]):
    out[vyre.global_id(0)] = x[vyre.global_id(0)]


NOT_PROGRAMS = {"name": ("saxpy", "not names"), "kernel": (unbuilt(), "kernel.build()"),
                "function": (unbuilt, "Call it"), "number": (3, r"ir\.Kernel"),
                # (calling a @vyre.kernel refuses, so "Call it" would send a user in a
                # circle: the Fix names launch and the kernel's program)
                "@vyre.kernel": (copy, r"drv\.launch\(copy, .*copy\.program\(dim=n")}
ENTRY_POINTS = {
    "dispatch": lambda d, p: d.dispatch(p, DATA),
    "dispatch_on": lambda d, p: dispatch_on(d, "reference", p, DATA),
    "dispatch_async": lambda d, p: d.dispatch_async(p, DATA),
    "compile": lambda d, p: d.compile(p),
    "route": lambda d, p: d.route(p),
    "explain": lambda d, p: d.explain(p),
    "tune": lambda d, p: d.tune(p, DATA, backend="reference"),
    "tuned_config": lambda d, p: d.tuned_config(p, DATA),
}


@pytest.mark.parametrize("given", NOT_PROGRAMS)
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_an_entry_point_refuses_what_is_not_a_program_with_a_fix(drv, entry, given):
    program, fix = NOT_PROGRAMS[given]
    with pytest.raises(InvalidInputError, match=f"Fix: .*{fix}") as info:
        ENTRY_POINTS[entry](drv, program)
    assert info.value.cause.startswith("expected a Program, got ")
