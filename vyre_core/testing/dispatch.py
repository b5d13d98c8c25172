"""Work sent to one backend past routing: how a conformance kit, or a backend's own
tests, see the backend itself refuse what it did not claim. A tool of tests, not of
applications (routing is what keeps a program off a backend that cannot run it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Outputs
from vyre_core.driver import Driver
from vyre_core.driver.calls import dispatched_on
from vyre_core.ir import Program
from vyre_core.sequence import Sequence as StepSequence


def dispatch_on(driver: Driver, backend: str, work: Program | StepSequence,
                inputs: Sequence[Any] = (), *, config: DispatchConfig | None = None,
                dim: int | Sequence[int] | None = None) -> Outputs:
    """Run ``work`` (a program, or a sequence) on ``backend``'s worker of ``driver``,
    skipping routing's capability check; everything else (the ABI, the launch planned,
    ``dim`` for a program, supervision, timeouts) is as ``Driver.dispatch``."""
    return dispatched_on(driver, backend, work, inputs, config, dim)
