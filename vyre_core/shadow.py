"""Shadow checking: run a compiled pipeline and the reference side by side over a set of
cases and report the first divergence, precisely enough to debug from the report alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre_core.compare import Divergence, first_divergence
from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidInputError
from vyre_core.pipeline import CompiledPipeline, CompiledSequence


@dataclass(frozen=True)
class ShadowCase:
    label: str
    inputs: Sequence[Any]
    config: DispatchConfig | None = None


@dataclass(frozen=True)
class ShadowDivergence:
    label: str            # the case
    fingerprint: str      # the program
    output: str           # the output buffer
    dtype: str
    ulp_budget: int
    at: Divergence        # element, first differing byte, both values
    expected: np.ndarray  # the reference's whole output
    actual: np.ndarray    # the candidate's whole output

    def __str__(self) -> str:
        return (f"case {self.label!r}, program {self.fingerprint[:16]}, output "
                f"{self.output!r} ({self.dtype}, ULP budget {self.ulp_budget}): {self.at}")


@dataclass(frozen=True)
class ShadowReport:
    backend: str
    reference: str
    cases_run: int
    divergence: ShadowDivergence | None

    @property
    def ok(self) -> bool:
        return self.divergence is None

    def __str__(self) -> str:
        if self.ok:
            return (f"{self.backend} matches {self.reference} on all {self.cases_run} "
                    f"case(s)")
        return f"{self.backend} diverges from {self.reference}: {self.divergence}"


Handle = CompiledPipeline | CompiledSequence


def _fused_from(candidate: Handle, reference: Handle) -> bool:
    return isinstance(candidate, CompiledSequence) and isinstance(reference, CompiledSequence) \
        and reference.sequence.fused().fingerprint() == candidate.fingerprint


def shadow(candidate: Handle, reference: Handle, cases: Iterable[ShadowCase],
           ulp_budget: int | None = None) -> ShadowReport:
    """Dispatch every case on both (compiled pipelines, or compiled sequences compared as
    a whole by what they return); stop at the first output that differs beyond the
    ULP budget (``ulp_budget``, else the case's config, else the candidate's config).
    A candidate sequence may be the reference's fused (``Sequence.fused``): how fusion
    is shown not to change a byte."""
    if candidate.fingerprint != reference.fingerprint and not _fused_from(candidate,
                                                                          reference):
        raise InvalidInputError(
            f"the candidate runs {candidate.fingerprint[:12]}, the reference "
            f"{reference.fingerprint[:12]}: they are not the same work",
            "Compile the same program (or sequence) on both backends.")
    cases = list(cases)
    if not cases:
        raise InvalidInputError(
            "shadow got no cases: a comparison over nothing proves nothing",
            "Pass at least one ShadowCase(label, inputs), e.g. the inputs of a real dispatch.")
    run = 0
    for case in cases:
        config = case.config or candidate.config
        budget = ulp_budget if ulp_budget is not None else config.ulp_budget
        expected = reference.dispatch(case.inputs, config)
        actual = candidate.dispatch(case.inputs, config)
        run += 1
        for (name, dtype), want, got in zip(candidate.output_buffers(), expected, actual,
                                            strict=True):
            at = first_divergence(want, got, dtype, budget)
            if at is not None:
                return ShadowReport(candidate.backend, reference.backend, run, ShadowDivergence(
                    case.label, candidate.fingerprint, name, dtype.value, budget, at, want,
                    got))
    return ShadowReport(candidate.backend, reference.backend, run, None)
