"""The errors and descriptions the rules hand to callers and to the log. Apart from the
rules so that those read as decisions, and so that what a caller is told (each error with
its Fix) can be read in one place."""

from __future__ import annotations

import collections

from vyre_core.errors import DispatchTimeoutError, PipelineInvalidatedError, PoolFailedError
from vyre_core.supervisor.rules.constants import OUTPUT_IN_ERRORS
from vyre_core.supervisor.rules.requests import Request
from vyre_core.supervisor.rules.slots import Worker, _Rules


class Wording(_Rules):
    """The words of the rules' errors (see the module docstring)."""

    def _why_waiting(self, req: Request | None = None) -> str:
        workers = self.workers if req is None or req.call.devices is None else self._eligible(req)
        states = collections.Counter(w.state for w in workers)
        ahead = sum(not r.done for r in self.queue)
        parts = [f"{n} {state}" for state, n in sorted(states.items())]
        where = "" if req is None or req.call.devices is None else \
            f" on device(s) {sorted(req.call.devices)}"
        return f"workers{where}: {', '.join(parts)}; {ahead} request(s) queued"

    def _device_names(self) -> str:
        return "no device (unpinned)" if self.devices is None else \
            f"device(s) {sorted(self.devices)}"

    # -- errors ----------------------------------------------------------------------------

    def _timeout(self, req: Request, where: str) -> DispatchTimeoutError:
        seconds = req.call.deadline.seconds
        return DispatchTimeoutError(
            f"{req.label} on {self.backend!r} ran past its {seconds:g} s deadline "
            f"{where}" if seconds is not None else
            f"{req.label} on {self.backend!r} ran past its deadline {where}",
            timeout=seconds)

    def _failed_error(self, now: float) -> PoolFailedError:
        failure = self.failure
        retry_in = max(0.0, failure.retry_at - now)
        return PoolFailedError(
            f"{failure.cause}\nNext try in {retry_in:.0f} s (RestartPolicy.cooldown).",
            failure.fix, backend=self.backend, retry_in=round(retry_in, 3),
            stderr=failure.output[-OUTPUT_IN_ERRORS:])

    def _closed_error(self, req: Request) -> PoolFailedError:
        return PoolFailedError(f"the driver was closed while {req.label} to "
                               f"{self.backend!r} was pending",
                               "Keep the driver open until results are collected.",
                               backend=self.backend)

    def _invalidated(self, req: Request, w: Worker) -> PipelineInvalidatedError:
        if req.call.generation == w.generation:
            now_is = (f"that worker is being stopped ({w.retire_reason})" if w.retire_reason
                      else f"that worker is {w.state}")
        else:
            now_is = f"that worker is now generation {w.generation}"
        return PipelineInvalidatedError(
            f"{req.label} uses a handle from worker {w.index} generation {req.call.generation} "
            f"of {self.backend!r}; {now_is}", generation=req.call.generation,
            backend=self.backend)
