"""The production shadow's sampler on its own (a thread, no process): what it counts,
what it saves, and that nothing a sample does ends its thread."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vyre_core import ir, saved
from vyre_core.config import DispatchConfig
from vyre_core.shadow_sampler import Every, Sample, ShadowOptions, ShadowSampler

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)


def oddly_named() -> ir.Program:
    """Input buffers named like numpy.savez's own arguments."""
    k = ir.Kernel(workgroup=(4,))
    a, b = k.read("file", ir.u32, 4), k.read("allow_pickle", ir.u32, 4)
    out = k.output("out", ir.u32, 4)
    i = k.let("i", ir.global_id(0))
    out[i] = a[i] + b[i]
    return k.build()


def test_inputs_are_saved_under_any_buffer_name(tmp_path):
    program = oddly_named()
    arrays = [np.arange(4, dtype=np.uint32), np.full(4, 7, np.uint32)]
    saved.save_inputs(tmp_path / "in.npz", program, arrays)
    loaded = saved.load_inputs(program, tmp_path / "in.npz")
    assert [a.tolist() for a in loaded] == [[0, 1, 2, 3], [7, 7, 7, 7]]


def test_a_divergence_is_saved_and_a_failing_reference_does_not_end_the_thread(tmp_path):
    program = oddly_named()
    inputs = [np.arange(4, dtype=np.uint32), np.ones(4, np.uint32)]
    calls = []

    def reference(prog, xs, config):
        calls.append(len(calls))
        if len(calls) == 1:
            raise TypeError("a reference that breaks once")
        return [xs[0] + xs[1]]

    sampler = ShadowSampler(Every(1), tmp_path / "bundles", reference)
    wrong = [np.array([1, 2, 3, 5], np.uint32)]
    for backend in ("odd.v2/x", "odd.v2/x", "fine"):
        outputs = wrong if backend != "fine" else [inputs[0] + inputs[1]]
        sampler.offer(Sample(program, inputs, DispatchConfig(), outputs, backend))
    sampler.close(30.0)
    report = sampler.report()
    assert {k: report[k] for k in ("sampled", "compared", "diverged", "failed", "dropped")} \
        == {"sampled": 3, "compared": 2, "diverged": 1, "failed": 1, "dropped": 0}
    bundle, = (tmp_path / "bundles").glob("*.vyir")
    assert bundle.name.split("-")[1] == "odd_v2_x" and str(bundle) == report["bundles"][0]
    assert saved.load_config(bundle.with_suffix(".json")) == DispatchConfig()
    assert json.loads(bundle.with_suffix(".json").read_text())["backend"] == "odd.v2/x"
    assert [a.tolist() for a in saved.load_inputs(program, bundle.with_suffix(".npz"))] == \
        [a.tolist() for a in inputs]


@pytest.mark.parametrize("every", [0, -1, 1.5, True])
def test_bad_shadow_options_are_refused_before_the_driver_makes_a_run_directory(monkeypatch,
                                                                               every):
    import vyre_core.driver.driver as driver  # (where Driver.__init__ reads RunDir)
    from vyre_core.errors import InvalidConfigError

    def no_run_dir():
        raise AssertionError("a run directory was made for a Driver that is refused")

    monkeypatch.setattr(driver, "RunDir", no_run_dir)
    with pytest.raises(InvalidConfigError, match=r"ShadowOptions\(every="):
        driver.Driver(shadow=ShadowOptions(every=every))
    with pytest.raises(InvalidConfigError, match="not a ShadowOptions"):
        driver.Driver(shadow={"every": 2})
