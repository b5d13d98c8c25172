"""A vyre backend that does nothing, for the worker benchmarks: what a dispatch costs
with no backend work at all, only the host, the supervisor and the worker boundary.

Backend id ``null``. It never interprets the program: ``vyre_dispatch`` and
``vyre_dispatch_borrowed`` return zero-filled outputs of each output's storage dtype and
bound length, and ``vyre_dispatch_into`` only zeroes the caller's output arrays. Its
precedence is 1000000, after every real backend: routing never picks it unless it is
named. It claims what the reference claims (and answers ``vyre_capabilities`` the same
way), so it is handed every program the reference would be.

Installed by ``vyre_benchmarks.bench_workers`` into a temporary folder for one figure;
never part of vyre itself.
"""

from __future__ import annotations

import numpy as np

import vyre_reference.backend as _reference
from vyre_core import abi
from vyre_core.contract import hookimpl
from vyre_reference.backend import CLAIMS

VYRE_CONTRACT = 1
PRECEDENCE = 1_000_000

# The reference's honest record serves as this backend's own (as its claims do).
vyre_capabilities = _reference.vyre_capabilities


@hookimpl
def vyre_backend_id() -> str:
    return "null"


@hookimpl
def vyre_backend_version() -> str:
    return "0.1.0"


@hookimpl
def vyre_backend_precedence() -> int:
    return PRECEDENCE


@hookimpl
def vyre_backend_claims() -> dict:
    return dict(CLAIMS)


def _zeros(program, inputs) -> list[np.ndarray]:
    """Zero-filled outputs of the right dtype and length (the host bound ``inputs``)."""
    return [np.zeros(count, dtype=dtype) for dtype, count in abi.output_shapes(program, inputs)]


@hookimpl
def vyre_dispatch(program, inputs, config) -> list[np.ndarray]:
    return _zeros(program, inputs)


@hookimpl
def vyre_dispatch_borrowed(program, inputs, config) -> list[np.ndarray]:
    return _zeros(program, inputs)


@hookimpl
def vyre_dispatch_into(program, inputs, config, outputs) -> None:
    for out in outputs:
        out.fill(0)
