"""The reference interpreter reproduces every corpus case."""

from __future__ import annotations

import pytest

from vyre_core.compare import first_divergence
from vyre_core.conformance.corpus import CASES

reference = pytest.importorskip("vyre_reference")


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_reference_matches_corpus(c):
    actual = reference.run(c.program, c.inputs, grid=c.grid, constants=dict(c.constants))
    assert len(actual) == len(c.expected), f"{c.name}: wrong number of outputs"
    for buffer, expected, got in zip(c.program.outputs, c.expected, actual, strict=True):
        divergence = first_divergence(expected, got, buffer.dtype, c.ulp)
        assert divergence is None, (
            f"case {c.name}, output {buffer.name!r} ({buffer.dtype.value}), program "
            f"{c.program.fingerprint()[:16]}: {divergence}")
