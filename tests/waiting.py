"""The suite's waiting helpers: ``wait_for``, ``stays_true`` and ``Stalls`` are vyre's
own (``vyre_core.testing``, what users get); the two below are for tests that watch a
pool's workers rows without the fault kit's ``Workers``."""

from __future__ import annotations

from typing import Any

import vyre_core
from vyre_core.testing.waiting import PATIENCE, Stalls, stays_true, wait_for

__all__ = ["PATIENCE", "Stalls", "stays_true", "wait_for", "wait_running", "workers"]


def workers(drv: vyre_core.Driver, backend: str) -> list[dict[str, Any]]:
    return drv.status()["pools"][backend]["workers"]


def wait_running(drv: vyre_core.Driver, backend: str = "reference", count: int = 1,
                 timeout: float = PATIENCE) -> list[dict[str, Any]]:
    """Workers of ``backend`` whose main thread holds a request (their progress page says
    so): the request really runs there, it is not merely on its way."""
    return wait_for(lambda: (found := [w for w in workers(drv, backend) if w["running"]])
                    and len(found) >= count and found, timeout,
                    f"{count} worker(s) of {backend!r} running a request")
