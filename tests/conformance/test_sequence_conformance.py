"""Every sequence case of the corpus (iteration numbers, nested loops, an input updated
in place) on every bundled backend, through its real worker: the same bytes as numpy,
the loops counted as expected, the caller's arrays untouched."""

from __future__ import annotations

import pytest

from vyre_core import Driver
from vyre_core.conformance.corpus import SEQUENCE_CASES
from vyre_core.conformance.runner import run_sequence_case

pytestmark = pytest.mark.processes


@pytest.fixture(scope="module")
def drv():
    with Driver() as driver:
        yield driver


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
@pytest.mark.parametrize("case", SEQUENCE_CASES, ids=[c.name for c in SEQUENCE_CASES])
def test_every_backend_runs_the_sequence_cases_byte_for_byte(drv, backend, case):
    result = run_sequence_case(drv, backend, drv.probe(backend), case)
    assert result.verdict == "pass", result.detail


def test_the_sequence_cases_have_unique_names_and_round_trip():
    from vyre_core.sequence import Sequence

    names = [c.name for c in SEQUENCE_CASES]
    assert len(set(names)) == len(names) >= 5
    for c in SEQUENCE_CASES:
        assert Sequence.from_wire(c.sequence.to_wire()) == c.sequence
