"""A third-party backend, shipped in its own distribution ("vyre-thirdparty-demo") and
found through the ``vyre.backends`` entry point; tests/test_registry.py pip-installs it.

It implements only the required hooks plus its identity and honest limits, and runs a
dispatch with the reference interpreter (it has no device of its own).
"""

from __future__ import annotations

from vyre_core.contract import Capabilities, hookimpl

VYRE_CONTRACT = 1

CLAIMS = {
    "max_workgroup_size": (64, 1, 1),
    "max_workgroups_per_dimension": 1024,
}

dispatches = 0


@hookimpl
def vyre_backend_id() -> str:
    return "demo"


@hookimpl
def vyre_backend_version() -> str:
    return "0.3.0"


@hookimpl
def vyre_backend_precedence() -> int:
    return 50


@hookimpl
def vyre_backend_claims() -> dict:
    return dict(CLAIMS)


@hookimpl
def vyre_capabilities() -> Capabilities:
    return Capabilities.from_claims(CLAIMS)


@hookimpl
def vyre_dispatch(program, inputs, config):
    global dispatches
    from vyre_reference import run  # imported on first dispatch only, never at discovery

    dispatches += 1
    return run(program, inputs, grid=config.grid_override)
