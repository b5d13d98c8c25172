"""The slow tier's sweep (``vyre conform --exhaustive``): its inputs cover the bit patterns
evenly, and it finds the worst input of an op, here through the reference interpreter in
this process (the CLI test runs it through workers)."""

from __future__ import annotations

import numpy as np
import pytest

from vyre_core import ir
from vyre_core.conformance import sweep
from vyre_reference import run as reference_run

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)


def test_inputs_step_evenly_through_every_bit_pattern():
    chunks = list(sweep.inputs(1 << 21))
    assert [len(c) for c in chunks] == [sweep.CHUNK, sweep.CHUNK]
    bits = np.concatenate(chunks).view(np.uint32).astype(np.uint64)
    assert bits[0] == 0 and (np.diff(bits) == 1 << 11).all()
    assert bits[-1] == (1 << 32) - (1 << 11)          # negatives, infinities and NaNs too


def reference(program, inputs):
    return reference_run(program, inputs)


def test_the_reference_is_its_own_truth_and_a_wrong_result_is_found(monkeypatch):
    result = sweep.sweep(reference, "reference", "exp", 1 << 16)
    assert (result.max_ulp, result.ok, result.inputs) == (0, True, 1 << 16)

    def two_ulps_out_near_one(program, inputs):
        out = reference(program, inputs)[0].copy()
        near = (inputs[0] > 0.5) & (inputs[0] < 0.6)
        out[near] = (out[near].view(np.uint32) + 2).view(np.float32)
        return [out]

    result = sweep.sweep(two_ulps_out_near_one, "liar", "tan", 1 << 16)
    assert result.max_ulp == 2 and not result.ok                 # tan is correctly rounded
    assert 0.5 < result.worst_input[0] < 0.6
    assert np.float32(result.actual).view(np.uint32) - 2 == \
        np.float32(result.expected).view(np.uint32)
    monkeypatch.setitem(sweep.OPS, "tan", (ir.tan, np.tan, 4))   # a budget of 4 ULPs
    result = sweep.sweep(two_ulps_out_near_one, "liar", "tan", 1 << 16)
    assert (result.max_ulp, result.ok) == (2, True)
    floor = sweep.sweep(two_ulps_out_near_one, "liar", "floor", 1 << 16)
    assert floor.max_ulp == 2 and not floor.ok                   # floor must be exact
