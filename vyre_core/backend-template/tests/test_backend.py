"""This backend's own tests, run next to the conformance kit
(``pytest --vyre-backend=template``): what the kit cannot know about this backend. They
run against the installed distribution, through real worker processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from vyre_core import ir
from vyre_core.driver import Driver
from vyre_core.errors import UnsupportedFeatureError
from vyre_core.testing import dispatch_on

BACKEND = "template"  # the backend id


@pytest.fixture(scope="module")
def driver() -> Iterator[Driver]:
    with Driver() as drv:  # closing it stops every worker it started
        drv.registry.get(BACKEND)  # not installed: PluginLoadError, with the Fix
        yield drv


def test_discovery_opens_no_device() -> None:
    """Discovery imports the entry module in the user's process: it must not load the
    device (here the stand-in interpreter) nor open it."""
    probe = ("import sys, vyre_template.backend as b; "
             "print(b._caps is None, 'vyre_reference.interpreter' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.split() == ["True", "False"]


def test_a_kernel_of_ours_matches_numpy_byte_for_byte(driver: Driver) -> None:
    """The pattern for your own kernels: run on this backend by name, compare the bytes."""
    k = ir.Kernel(workgroup=(128,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, count=1000)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = (x[i] * 2654435761) >> 7
    xs = np.arange(1000, dtype=np.uint32)
    (got,) = driver.dispatch(k.build(), [xs], backend=BACKEND)
    assert got.tobytes() == ((xs * np.uint32(2654435761)) >> 7).tobytes()


def test_f64_is_routed_elsewhere_and_refused_here(driver: Driver) -> None:
    """Unclaimed f64: routing passes this backend over; handed to it anyway, it refuses
    with the reason and a Fix instead of running it."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f64)
    out = k.output("out", ir.f64, count=64)
    out[ir.global_id(0)] = x[ir.global_id(0)] * 3.0
    program, xs = k.build(), np.linspace(0.1, 6.4, 64)
    ours = next(e for e in driver.explain(program) if e.backend == BACKEND)
    assert not ours.accepted and "needs f64 (supports_f64 is false)" in ours.reasons
    assert driver.route(program).backend != BACKEND
    assert driver.dispatch(program, [xs])[0].tobytes() == (xs * 3.0).tobytes()
    with pytest.raises(UnsupportedFeatureError, match="needs f64") as refused:
        dispatch_on(driver, BACKEND, program, [xs])
    assert "Fix: Let routing choose a backend" in str(refused.value)
