"""One conformance case (a program, or a sequence run whole) on one backend, through its
real worker process, with a verdict ``vyre conform`` and the pytest kit both report.

Verdicts:

* ``pass`` — claimed (routing accepts it on the backend's probed report: a sequence, every
  step of it) and every output matches the expected bytes (floats within the case's ULP
  budget; a sequence's loops also ran as expected and the caller's inputs are unchanged);
* ``refused`` — claimed, but the backend declined it (at compile with
  ``UnsupportedFeatureError``, or at launch with ``LaunchLimitError``): allowed (the Driver
  routes compile refusals elsewhere), and listed so it is never silent;
* ``unclaimed`` — not claimed, and the backend refused it when handed it anyway: honest;
* ``fail`` — wrong outputs, or it ran a program it does not claim;
* ``error`` — any other error (a crash, a timeout, a lost device, a pool that failed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from vyre_core.compare import outputs_divergence
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Capabilities, Outputs
from vyre_core.driver import Driver
from vyre_core.errors import LaunchLimitError, UnsupportedFeatureError, VyreError
from vyre_core.launch import effective_program
from vyre_core.routing import claim_reasons
from vyre_core.testing.dispatch import dispatch_on

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
    reasons = claim_reasons(effective_program(case.program, config), caps)

    def run() -> Outputs:
        if reasons:  # not claimed: hand it over anyway, it must be refused
            return dispatch_on(driver, backend, case.program, case.inputs, config=config)
        return driver.dispatch(case.program, case.inputs, backend=backend, config=config)

    return _judged(case.name, backend, reasons, run, lambda outputs: outputs_divergence(
        case.program, case.expected, outputs, case.ulp))


def run_sequence_case(driver: Driver, backend: str, caps: Capabilities,
                      case: SequenceCase) -> CaseResult:
    """``case`` on ``backend``, judged as above: claimed when ``caps`` accept every step.
    ``pass`` also needs every loop to run as expected and the caller's inputs unchanged."""
    config = DispatchConfig(timeout=CASE_TIMEOUT)
    reasons = claim_reasons(case.sequence, caps)
    before = [a.tobytes() for a in case.inputs]

    def run() -> Outputs:
        if reasons:  # not claimed: hand it over anyway, it must be refused
            return dispatch_on(driver, backend, case.sequence, case.inputs, config=config)
        return driver.dispatch(case.sequence, case.inputs, backend=backend,
                               config=config)

    def divergence(out: Outputs) -> str | None:
        for name, expected, got in zip(case.sequence.returns, case.expected, out, strict=True):
            if np.asarray(got).tobytes() != expected.tobytes():
                return (f"return {name!r}: {np.asarray(got)[:8]} ..., expected "
                        f"{expected[:8]} ...")
        if tuple(out.loops) != case.loops:
            return f"loops ran {out.loops}, expected {list(case.loops)}"
        if [a.tobytes() for a in case.inputs] != before:
            return "the run wrote the caller's input array"
        return None

    return _judged(case.name, backend, reasons, run, divergence)


def run_any(driver: Driver, backend: str, caps: Capabilities,
            case: Case | SequenceCase) -> CaseResult:
    """A program case by ``run_case``, a sequence case by ``run_sequence_case``."""
    judge = run_sequence_case if isinstance(case, SequenceCase) else run_case
    return judge(driver, backend, caps, case)


def _judged(name: str, backend: str, reasons: list[str], run: Callable[[], Outputs],
            divergence: Callable[[Outputs], str | None]) -> CaseResult:
    """The verdict of one case: ``run`` it (claimed when ``reasons`` is empty), then
    ``divergence`` of what it returned from what was expected (None: none)."""
    start = time.perf_counter()

    def verdict(name_: str, detail: str | None = None) -> CaseResult:
        return CaseResult(name, backend, name_, detail, time.perf_counter() - start)

    try:
        outputs = run()
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
    found = divergence(outputs)
    return verdict("pass") if found is None else verdict("fail", found)
