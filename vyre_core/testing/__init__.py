"""Tools for testing code that runs on vyre under worker faults: the fault vocabulary a
fault-injection backend (the ``vyre-faults`` distribution) obeys, a driver's workers as a
test handles them, a small disk to fill, waiting with deadlines, and work sent to one
backend past routing (``dispatch_on``). The pytest fixtures over them are in
``vyre_core.testing.pytest_plugin`` (loaded by pytest on its own);
docs/fault-injection.md walks through an example.

Names load on first use: the fault backend imports the vocabulary in every worker, and
pays for nothing else."""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "DISPATCH_FAULTS": "faults", "STARTUP_FAULTS": "faults", "fault": "faults",
    "startup_faults": "faults", "PATIENCE": "waiting", "stays_true": "waiting",
    "wait_for": "waiting", "Stalls": "waiting", "Workers": "workers", "one_word_program": "workers",
    "DiskUnavailable": "disk", "SmallDisk": "disk", "dispatch_on": "dispatch",
    "TIGHT": "tight", "options_over": "tight",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'vyre_core.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"vyre_core.testing.{home}"), name)
