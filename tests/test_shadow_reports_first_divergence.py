"""Shadow: a candidate pipeline run beside the reference, the first divergence reported
with the case label, fingerprint, both outputs and the first differing byte."""

from __future__ import annotations

import types

import numpy as np
import pytest

import vyre_reference.backend as reference_plugin
from vyre_core import ir
from vyre_core.config import DispatchConfig
from vyre_core.contract import Capabilities, hookimpl
from vyre_core.errors import InvalidInputError
from vyre_core.shadow import ShadowCase, shadow
from vyre_reference import run as reference_run
from vyre_workers.backend_host import BackendHost

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)


def skewed_backend(skew) -> types.ModuleType:
    """A backend that runs the reference and then applies ``skew`` to its outputs."""

    @hookimpl
    def vyre_backend_id():
        return "skewed"

    @hookimpl
    def vyre_dispatch(program, inputs, config):
        return [skew(out.copy()) for out in reference_run(program, inputs, config.grid_override)]

    @hookimpl
    def vyre_capabilities():
        return Capabilities.from_claims({"max_workgroup_size": (64, 1, 1),
                                         "max_workgroups_per_dimension": 1024})

    plugin = types.ModuleType("skewed_backend")
    plugin.VYRE_CONTRACT = 1
    plugin.vyre_backend_id = vyre_backend_id
    plugin.vyre_dispatch = vyre_dispatch
    plugin.vyre_capabilities = vyre_capabilities
    return plugin


def scale_program(dtype) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", dtype)
    out = k.output("out", dtype, count=8)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i] * 3
    return k.build()


def pipelines(program, skew):
    return (BackendHost(skewed_backend(skew)).compile(program),
            BackendHost(reference_plugin).compile(program))


def cases(dtype):
    return [ShadowCase(f"ramp{n}", [np.arange(n, n + 8, dtype=dtype)]) for n in range(3)]


def test_matching_backend_reports_ok_over_every_case():
    candidate, reference = pipelines(scale_program(ir.u32), lambda out: out)
    report = shadow(candidate, reference, cases(np.uint32))
    assert report.ok and report.cases_run == 3
    assert str(report) == "skewed matches reference on all 3 case(s)"


def test_first_divergence_names_case_program_output_and_byte():
    def flip_high_byte_of_element_5(out):
        if out[0] == 3:  # only in the second case, whose first input is 1
            out[5] ^= np.uint32(0x0100)
        return out

    program = scale_program(ir.u32)
    candidate, reference = pipelines(program, flip_high_byte_of_element_5)
    report = shadow(candidate, reference, cases(np.uint32))
    d = report.divergence
    assert not report.ok and report.cases_run == 2
    assert (d.label, d.fingerprint, d.output, d.dtype) == ("ramp1", program.fingerprint(),
                                                           "out", "u32")
    assert (d.at.index, d.at.byte_offset, d.at.expected, d.at.actual) == (5, 21, 18, 18 ^ 0x100)
    assert d.expected.tolist() == [3 * v for v in range(1, 9)]
    assert d.actual.tolist() == [3, 6, 9, 12, 15, 18 ^ 0x100, 21, 24]
    assert str(report) == (f"skewed diverges from reference: case 'ramp1', program "
                           f"{program.fingerprint()[:16]}, output 'out' (u32, ULP budget 0): "
                           f"element 5 (byte 21): expected 18, got 274")


@pytest.mark.parametrize(("budget", "ok"), [(0, False), (1, True)])
def test_float_outputs_are_compared_within_the_ulp_budget(budget, ok):
    def one_ulp_up(out):
        return np.nextafter(out, np.float32(np.inf)).astype(np.float32)

    candidate, reference = pipelines(scale_program(ir.f32), one_ulp_up)
    report = shadow(candidate, reference, cases(np.float32), ulp_budget=budget)
    assert report.ok is ok
    if not ok:
        assert report.divergence.at.ulp == 1 and report.divergence.ulp_budget == 0


def test_the_budget_comes_from_the_case_config_when_not_given():
    def one_ulp_up(out):
        return np.nextafter(out, np.float32(np.inf)).astype(np.float32)

    candidate, reference = pipelines(scale_program(ir.f32), one_ulp_up)
    strict = [ShadowCase("strict", [np.ones(8, np.float32)], DispatchConfig(ulp_budget=0))]
    assert not shadow(candidate, reference, strict).ok


def test_a_zero_of_the_wrong_sign_is_a_divergence_whatever_the_budget():
    """+0 and -0 are different bytes: 1 ULP apart, and named as the sign of zero, even
    where a budget would forgive 1 ULP (no op vyre defines turns one into the other)."""
    def flip_zeros(out):
        return np.where(out == 0, -out, out).astype(out.dtype)

    candidate, reference = pipelines(scale_program(ir.f32), flip_zeros)
    report = shadow(candidate, reference, [ShadowCase("zeros", [np.zeros(8, np.float32)])],
                    ulp_budget=1_000)
    assert not report.ok
    at = report.divergence.at
    assert (at.index, at.expected, at.actual, at.ulp, at.sign_of_zero) == (0, 0.0, -0.0, 1, True)
    assert str(at) == "element 0 (byte 3): expected 0.0, got -0.0, 1 ULP apart " \
                      "(the sign of zero differs)"


def test_shadow_over_no_cases_is_refused():
    candidate, reference = pipelines(scale_program(ir.u32), lambda out: out)
    with pytest.raises(InvalidInputError, match="no cases") as info:
        shadow(candidate, reference, [])
    assert "ShadowCase" in info.value.fix
    with pytest.raises(InvalidInputError, match="no cases"):
        shadow(candidate, reference, iter(()))
