"""The wgpu tests run for real: on CI (``CI`` set) and under ``make test`` they demand Mesa's
lavapipe over Vulkan, and anywhere they demand some WebGPU adapter. No adapter is a
failure of every test here, never a skip.

No ``__init__.py`` here on purpose: ``tests/`` is on ``sys.path`` during the run, and a
package ``tests/wgpu`` would shadow the real ``wgpu``."""

from __future__ import annotations

import os

import pytest


def strict_adapter_required() -> bool:
    """CI and ``make test`` promise lavapipe (.ci/system-deps installs it)."""
    return bool(os.environ.get("CI")) or "MAKELEVEL" in os.environ


def adapter_problem(facts: dict | None) -> str | None:
    """Why the adapter in ``facts`` is not the one this run needs; None when it is."""
    if facts is None:
        return ("no WebGPU adapter was found. Fix: install the Debian packages "
                "mesa-vulkan-drivers and libvulkan1 (`bash .ci/system-deps`).")
    if strict_adapter_required():
        name = f"{facts['vendor']} {facts['device']}".lower()
        if facts["backend_type"] != "Vulkan" or not ("llvmpipe" in name or "lavapipe" in name):
            return (f"CI runs the wgpu tests on Mesa lavapipe over Vulkan, but wgpu chose "
                    f"{facts['device']!r} over {facts['backend_type']}. Fix: install "
                    "mesa-vulkan-drivers and libvulkan1, or unset CI to run on this adapter.")
    return None


@pytest.fixture(scope="session")
def adapter_facts() -> dict | None:
    from vyre_core.errors import UnsupportedFeatureError
    from vyre_wgpu.adapter import adapter_facts, request_adapter

    try:
        return adapter_facts(request_adapter())
    except UnsupportedFeatureError:
        return None


@pytest.fixture(scope="session")
def strict() -> bool:
    """Whether this run must be on lavapipe (CI, make test)."""
    return strict_adapter_required()


@pytest.fixture(autouse=True)
def _require_adapter(adapter_facts) -> None:
    problem = adapter_problem(adapter_facts)
    if problem is not None:
        pytest.fail(problem, pytrace=False)


@pytest.fixture(scope="module")
def host():
    """The wgpu backend behind BackendHost in this process, prepared once per module."""
    import vyre_wgpu.backend as backend
    from vyre_workers.backend_host import BackendHost

    host = BackendHost(backend)
    host.prepare()
    yield host
    host.shutdown()
