"""A call in flight (``dispatch_async``, ``launch_async``): the handle a caller polls,
waits on, cancels or awaits. Apart from the Driver because a handle outlives the call
that made it and waits on the call's outcome alone, never on the driver's routing or
locks; a launch's handle also fills the caller's arrays, once, when the answer is read."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from vyre_core.contract.types import Outputs
from vyre_core.deadline import checked_seconds
from vyre_core.driver.calls import _outputs
from vyre_core.errors import DispatchTimeoutError
from vyre_core.kernels.kernel import Written
from vyre_core.supervisor.outcome import Outcome


class PendingResult:
    """A dispatch in flight: ``is_ready()``, ``result(timeout)`` and ``cancel()``."""

    def __init__(self, future: Outcome) -> None:
        self._future = future

    def is_ready(self) -> bool:
        return self._future.done()

    def cancel(self) -> bool:
        """Cancel the call: True if this cancelled it, False (a no-op) when it had already
        finished, failed or been cancelled. Safe from any thread. A waiting call is
        dropped; a running one is stopped at its worker's next safe point (or its worker
        is replaced, docs/operations.md "Cancelling a call"). Exactly one of a cancel and
        the call's answer wins: after a True, ``result()`` raises
        ``DispatchCancelledError``."""
        return self._future.cancel()

    def cancelled(self) -> bool:
        return self._future.cancelled()

    def result(self, timeout: float | None = None) -> Outputs:
        return _outputs(*self._future_result(timeout))

    def __await__(self) -> Generator[Any, None, Outputs]:
        """``await`` the call from a coroutine: its loop keeps running meanwhile, the
        answer is ``result()``'s, and cancelling the awaiting task cancels the call."""
        from vyre_core import awaiting  # (asyncio is imported only by those who await)

        return awaiting.answer(self._future, lambda: self.result(0),
                               lambda: self.cancel()).__await__()

    def _future_result(self, timeout: float | None) -> tuple[dict[str, Any], list[Any]]:
        timeout = checked_seconds(timeout, "timeout", zero=True)
        try:
            if not self._future.wait(timeout):
                raise DispatchTimeoutError(
                    f"the dispatch did not finish within result(timeout={timeout})",
                    "Wait longer; the dispatch keeps running (its own deadline is "
                    "DispatchConfig.timeout).")
        except DispatchTimeoutError:
            raise
        except BaseException:  # Ctrl-C (any exception) while waiting: the call is cancelled
            self._future.cancel()
            raise
        return self._future.result()


class _LaunchResult(PendingResult):
    """A launch in flight: ``result()`` fills the caller's arrays, once."""

    def __init__(self, future: Outcome, plan: Written) -> None:
        super().__init__(future)
        self._plan: Written | None = plan

    def result(self, timeout: float | None = None) -> Outputs:
        meta, arrays = self._future_result(timeout)
        plan, self._plan = self._plan, None
        if plan is not None:
            for target, array in zip(plan.out, arrays, strict=True):
                np.copyto(target.reshape(-1), array, casting="no")
            plan.fill()
            self._filled = plan.out
        return _outputs(meta, list(self._filled))
