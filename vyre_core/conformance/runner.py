"""One conformance case on one backend, through its real worker process, with a verdict
``vyre conform`` and the pytest kit both report.

Verdicts:

* ``pass`` — claimed (routing accepts it on the backend's probed report) and every output
  matches the expected bytes (floats within the case's ULP budget);
* ``refused`` — claimed, but the backend declined it (at compile with
  ``UnsupportedFeatureError``, or at launch with ``LaunchLimitError``): allowed (the Driver
  routes compile refusals elsewhere), and listed so it is never silent;
* ``unclaimed`` — not claimed, and the backend refused it when handed it anyway: honest;
* ``fail`` — wrong outputs, or it ran a program it does not claim;
* ``error`` — any other error (a crash, a timeout, a lost device, a pool that failed).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from vyre_core.compare import outputs_divergence
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Capabilities
from vyre_core.driver import Driver
from vyre_core.errors import LaunchLimitError, UnsupportedFeatureError, VyreError
from vyre_core.launch import effective_program
from vyre_core.routing import rejection_reasons

from .base import Case, SequenceCase

PASSING = frozenset({"pass", "refused", "unclaimed"})
#: Per-case deadline: a hang is an error of that case, never of the session.
CASE_TIMEOUT = 60.0


@dataclass(frozen=True)
class CaseResult:
    case: str
    backend: str
    verdict: str          # pass | refused | unclaimed | fail | error
    detail: str | None    # why, for every verdict but pass
    seconds: float

    @property
    def ok(self) -> bool:
        return self.verdict in PASSING

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def run_case(driver: Driver, backend: str, caps: Capabilities, case: Case) -> CaseResult:
    """``case`` on ``backend`` (whose worker reported ``caps``), judged as above."""
    config = DispatchConfig(grid_override=case.grid, timeout=CASE_TIMEOUT,
                            constants=case.constants)
    reasons = rejection_reasons(effective_program(case.program, config).requirements(), caps)
    start = time.perf_counter()

    def verdict(name: str, detail: str | None = None) -> CaseResult:
        return CaseResult(case.name, backend, name, detail, time.perf_counter() - start)

    try:
        if reasons:  # not claimed: hand it over anyway, it must be refused
            outputs = driver.dispatch_on(backend, case.program, case.inputs, config)
        else:
            outputs = driver.dispatch(case.program, case.inputs, backend, config)
    except (UnsupportedFeatureError, LaunchLimitError) as exc:
        cause = exc.cause.splitlines()[0]
        if reasons:
            return verdict("unclaimed", f"not claimed ({'; '.join(reasons)}), refused: {cause}")
        stage = "at launch" if isinstance(exc, LaunchLimitError) else "at compile"
        return verdict("refused", f"declined {stage}: {cause}")
    except VyreError as exc:
        return verdict("error", f"{type(exc).__name__}: {exc.cause.splitlines()[0]}")
    if reasons:
        return verdict("fail", f"ran a program it does not claim ({'; '.join(reasons)}): "
                               "refuse it with UnsupportedFeatureError, or claim it")
    divergence = outputs_divergence(case.program, case.expected, outputs, case.ulp)
    return verdict("pass") if divergence is None else verdict("fail", divergence)


def run_sequence_case(driver: Driver, backend: str, case: SequenceCase) -> CaseResult:
    """``case`` on ``backend`` through its worker: ``pass`` when every return has the
    expected bytes, every loop ran as expected and the caller's inputs are unchanged;
    ``refused`` when routing or the backend declines it (with why); else ``fail`` or
    ``error``."""
    start = time.perf_counter()

    def verdict(name: str, detail: str | None = None) -> CaseResult:
        return CaseResult(case.name, backend, name, detail, time.perf_counter() - start)

    before = [bytes(a.tobytes()) for a in case.inputs]
    try:
        out = driver.dispatch_sequence(case.sequence, list(case.inputs), backend=backend,
                                       config=DispatchConfig(timeout=CASE_TIMEOUT))
    except (UnsupportedFeatureError, LaunchLimitError) as exc:
        return verdict("refused", exc.cause.splitlines()[0])
    except VyreError as exc:
        return verdict("error", f"{type(exc).__name__}: {exc.cause.splitlines()[0]}")
    for name, expected, got in zip(case.sequence.returns, case.expected, out, strict=True):
        if np.asarray(got).tobytes() != expected.tobytes():
            return verdict("fail", f"return {name!r}: {np.asarray(got)[:8]} ..., expected "
                                   f"{expected[:8]} ...")
    if tuple(out.loops) != case.loops:
        return verdict("fail", f"loops ran {out.loops}, expected {list(case.loops)}")
    if [a.tobytes() for a in case.inputs] != before:
        return verdict("fail", "the run wrote the caller's input array")
    return verdict("pass")
