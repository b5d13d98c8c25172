"""The conformance corpus: every case, from every topic module, in one list.

Each case is pure data (a program, inputs, independently worked-out expected outputs),
so the same corpus runs against every backend.
"""

from __future__ import annotations

from . import (
    cases_atomics,
    cases_bitcast,
    cases_bool,
    cases_builder,
    cases_cast,
    cases_constants,
    cases_control,
    cases_float,
    cases_grid,
    cases_integer,
    cases_loops,
    cases_memory,
    cases_sequences,
    cases_special,
    cases_subgroups,
    cases_table,
    cases_widths,
    cases_workgroup,
)
from .base import Case, SequenceCase

__all__ = ["CASES", "SEQUENCE_CASES", "Case", "SequenceCase", "case"]

CASES: list[Case] = [
    *cases_integer.CASES, *cases_widths.CASES, *cases_float.CASES, *cases_cast.CASES,
    *cases_bitcast.CASES, *cases_table.CASES,
    *cases_bool.CASES,
    *cases_memory.CASES, *cases_grid.CASES, *cases_control.CASES, *cases_loops.CASES,
    *cases_workgroup.CASES,
    *cases_atomics.CASES, *cases_special.CASES, *cases_constants.CASES,
    *cases_subgroups.CASES, *cases_builder.CASES,
]

#: Sequences (run whole, by ``runner.run_sequence_case``): iteration numbers, nested
#: loops, inputs updated in place.
SEQUENCE_CASES: list[SequenceCase] = [*cases_sequences.CASES]

_BY_NAME = {c.name: c for c in CASES}


def case(name: str) -> Case:
    """The case called ``name``; KeyError when there is none."""
    return _BY_NAME[name]
