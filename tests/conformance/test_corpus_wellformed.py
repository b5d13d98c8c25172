"""The corpus is well-formed data, checked without running any backend."""

from __future__ import annotations

import re

import numpy as np
import pytest

from vyre_core.conformance.corpus import CASES, case
from vyre_core.ir import Program

IDS = [c.name for c in CASES]


def test_corpus_size_and_unique_names():
    assert len(CASES) >= 40
    assert len(set(IDS)) == len(IDS)
    assert all(re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", name) for name in IDS)
    assert case(IDS[0]) is CASES[0]


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_case_is_well_formed(c):
    program = c.program
    assert program.validate() == []
    assert len(c.inputs) == len(program.inputs)
    lengths = {}
    for buffer, data in zip(program.inputs, c.inputs, strict=True):
        storage = buffer.dtype.storage_np
        if isinstance(data, bytes):
            assert len(data) % storage.itemsize == 0, buffer.name
            n = len(data) // storage.itemsize
        else:
            assert isinstance(data, np.ndarray) and data.dtype == storage, buffer.name
            n = data.size
        assert buffer.count is None or n <= buffer.count, buffer.name
        lengths[buffer.name] = n if buffer.count is None else buffer.count
    assert len(c.expected) == len(program.outputs)
    for buffer, expected in zip(program.outputs, c.expected, strict=True):
        assert expected.dtype == buffer.dtype.storage_np, buffer.name
        assert expected.ndim == 1, buffer.name
        assert expected.size == lengths.get(buffer.name, buffer.count), buffer.name
    assert c.grid is None or (1 <= len(c.grid) <= 3 and all(a >= 1 for a in c.grid))
    assert c.ulp >= 0


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_case_round_trips_through_wire(c):
    decoded = Program.from_wire(c.program.to_wire())
    assert decoded == c.program
    assert decoded.fingerprint() == c.program.fingerprint()
