"""``vyre_core.testing.dispatch_on``: a program or a sequence sent to one backend past
routing (how a kit sees a backend refuse what it did not claim), with real workers; the
Driver's old methods for it still work, and warn once, until vyre 1.0.0."""

from __future__ import annotations

import numpy as np
import pytest

import vyre_core
from vyre_core import DispatchConfig, deprecations, ir
from vyre_core.conformance import honesty
from vyre_core.errors import InvalidConfigError, LaunchLimitError, UnsupportedFeatureError
from vyre_core.registry import Registry
from vyre_core.sequence import SequenceBuilder
from vyre_core.testing import dispatch_on

pytestmark = pytest.mark.processes

X = np.arange(8, dtype=np.float32)


def doubled(dtype: ir.DType = ir.f32) -> ir.Program:
    k = ir.Kernel(workgroup=(8,))
    x = k.read("x", dtype, 8)
    out = k.output("out", dtype, 8)
    out[ir.global_id(0)] = x[ir.global_id(0)] * 2.0
    return k.build()


def two_steps() -> vyre_core.Sequence:
    s = SequenceBuilder()
    s.input("x", ir.f32, 8)
    s.transient("mid", ir.f32, 8)
    s.transient("out", ir.f32, 8)
    s.step(doubled(), {"x": "x", "out": "mid"})
    s.step(doubled(), {"x": "mid", "out": "out"})
    return s.build(returns=["out"])


@pytest.fixture(scope="module")
def drv():
    with vyre_core.Driver(Registry.discover("reference,cpu")) as d:
        yield d


def test_a_program_and_a_sequence_run_on_the_backend_named(drv):
    (once,) = dispatch_on(drv, "cpu", doubled(), [X])
    (twice,) = dispatch_on(drv, "reference", two_steps(), [X])
    assert once.tobytes() == (X * 2).tobytes() and twice.tobytes() == (X * 4).tobytes()
    (again,) = dispatch_on(drv, "cpu", two_steps(), [X], config=DispatchConfig(timeout=60))
    assert again.tobytes() == twice.tobytes()


def test_routing_is_skipped_so_the_backend_itself_refuses(drv):
    """A workgroup one invocation wider than the cpu backend reports: routing would never
    send it there; sent anyway, the worker refuses it with a Fix, and goes on serving."""
    over = honesty.oversized_workgroup(drv.probe("cpu"))
    with pytest.raises((UnsupportedFeatureError, LaunchLimitError)) as err:
        dispatch_on(drv, "cpu", over.program, over.inputs)
    assert err.value.fix
    (out,) = dispatch_on(drv, "cpu", doubled(), [X])
    assert out.tobytes() == (X * 2).tobytes()


def test_dim_is_for_a_program_not_a_sequence(drv):
    (out,) = dispatch_on(drv, "reference", doubled(), [X], dim=8)
    assert out.tobytes() == (X * 2).tobytes()
    with pytest.raises(InvalidConfigError, match="its steps say their own grids") as err:
        dispatch_on(drv, "reference", two_steps(), [X], dim=8)
    assert "Give dim= to each step (SequenceBuilder.step)" in err.value.fix


def test_the_drivers_old_methods_work_and_warn_once(drv, monkeypatch):
    monkeypatch.setattr(deprecations, "_warned", {})
    with pytest.warns(deprecations.VyreDeprecationWarning,
                      match=r"call 'Driver.dispatch_on'.*Fix: Call vyre_core.testing.dispatch_on"):
        (out,) = drv.dispatch_on("reference", doubled(), [X])
    assert out.tobytes() == (X * 2).tobytes()
    with pytest.warns(deprecations.VyreDeprecationWarning,
                      match=r"call 'Driver.dispatch_sequence_on'.*takes a sequence too"):
        (out,) = drv.dispatch_sequence_on("reference", two_steps(), [X])
    assert out.tobytes() == (X * 4).tobytes()
