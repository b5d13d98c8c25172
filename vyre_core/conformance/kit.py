"""The conformance kit's tests, added to the session by ``pytest --vyre-backend=ID``.

A backend's own test folder may hold them too, for node ids of its own
(``tests/test_conformance.py::test_corpus[u32_arith]``): a module there that does
``from vyre_core.conformance.kit import *`` is where they run then (each kit test it holds
is dropped from the copy the option adds); without the option they are skipped.

Everything runs against the installed backend ID as users run it: discovered through
its entry point, started in its own supervised worker process, driven by a ``Driver``.
Three groups: the contract (it loads under the frozen hookspec, its identity is stable,
its worker starts and reports sane capabilities, pipelines and async dispatch agree with
plain dispatch, it survives a refusal), capability honesty (``honesty.PROBES``: what it
claims works exactly, what it does not claim is refused), and the whole corpus: its
programs, and its sequences run whole (iteration numbers, nested loops, inputs updated in
place), each claimed only when the backend accepts every step.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from vyre_core import ir
from vyre_core.conformance import honesty, runner
from vyre_core.conformance.base import Case, SequenceCase, arr, case_of
from vyre_core.conformance.corpus import CASES, SEQUENCE_CASES
from vyre_core.conformance.pytest_plugin import REGISTRY, RESULTS
from vyre_core.contract.manager import LoadedBackend
from vyre_core.contract.types import Capabilities
from vyre_core.driver import Driver
from vyre_core.errors import LaunchLimitError, UnsupportedFeatureError
from vyre_core.ir import ALL_OPS
from vyre_core.registry import BackendRegistration, register_plugin
from vyre_core.routing import rejection_reasons
from vyre_core.testing.dispatch import dispatch_on

__all__ = [
    "backend_id",
    "caps",
    "kit_driver",
    "registration",
    "test_capability_honesty",
    "test_corpus",
    "test_identity_is_stable",
    "test_loads_under_the_frozen_contract",
    "test_pipeline_and_async_agree_with_dispatch",
    "test_sequence_corpus",
    "test_survives_a_refusal",
    "test_worker_reports_sane_capabilities",
]


@pytest.fixture(scope="module")
def backend_id(request: pytest.FixtureRequest) -> str:
    backend = request.config.getoption("vyre_backend", None)
    if not backend:
        pytest.skip("the vyre conformance kit runs with --vyre-backend=ID")
    return backend


@pytest.fixture(scope="module")
def kit_driver(request: pytest.FixtureRequest, backend_id: str) -> Iterator[Driver]:
    with Driver(request.config.stash[REGISTRY]) as driver:  # (discovered at configure)
        yield driver


@pytest.fixture(scope="module")
def registration(kit_driver: Driver, backend_id: str) -> BackendRegistration:
    return kit_driver.registry.get(backend_id)  # (pytest_configure refused the others)


@pytest.fixture(scope="module")
def caps(kit_driver: Driver, registration: BackendRegistration) -> Capabilities:
    return kit_driver.probe(registration.id)


def record(request: pytest.FixtureRequest, result: runner.CaseResult) -> None:
    request.config.stash.setdefault(RESULTS, []).append(result)
    if not result.ok:
        pytest.fail(f"{result.case} on {result.backend}: {result.verdict}: {result.detail}",
                    pytrace=False)


# -- the contract ---------------------------------------------------------------------------

def test_loads_under_the_frozen_contract(registration: BackendRegistration) -> None:
    loaded = LoadedBackend(registration.plugin, registration.id)  # PluginLoadError says why
    assert loaded.implements("vyre_backend_id") and loaded.implements("vyre_dispatch")


def test_identity_is_stable(registration: BackendRegistration, backend_id: str) -> None:
    again = register_plugin(registration.plugin, name=backend_id)
    assert registration.id == backend_id, "vyre_backend_id must equal the entry-point name"
    assert registration.version and isinstance(registration.version, str)
    assert (again.id, again.version, again.precedence, again.claims) == (
        registration.id, registration.version, registration.precedence, registration.claims)


def test_worker_reports_sane_capabilities(caps: Capabilities) -> None:
    assert caps.supported_ops, "a backend that supports no op can run no program"
    assert caps.supported_ops <= ALL_OPS, f"unknown ops: {sorted(caps.supported_ops - ALL_OPS)}"
    assert all(isinstance(a, int) and a >= 1 for a in caps.max_workgroup_size)
    assert 1 <= caps.max_invocations_per_workgroup <= math.prod(caps.max_workgroup_size)
    assert caps.max_workgroups_per_dimension >= 1
    assert caps.max_workgroup_memory_bytes >= 0 and caps.max_storage_buffer_bytes >= 0
    assert caps.subgroup_size is None or caps.subgroup_size >= 1
    assert caps.subgroup_size_range is None or 1 <= caps.subgroup_size_range[0] \
        <= caps.subgroup_size_range[1]


def _simple_case(caps: Capabilities) -> Case:
    """out = a ^ b over u32; skipped for a backend that does not claim it."""
    k = ir.Kernel(workgroup=(64,))
    a, b = k.read("a", ir.u32), k.read("b", ir.u32)
    out = k.output("out", ir.u32, count=1000)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < a.len):
        out[i] = a[i] ^ b[i]
    xs, ys = np.arange(1000, dtype=np.uint32) * 2654435761, np.arange(1000, dtype=np.uint32)
    c = case_of("kit_xor", k, [arr(ir.u32, xs), arr(ir.u32, ys)], [xs ^ ys])
    reasons = rejection_reasons(c.program.requirements(), caps)
    if reasons:
        pytest.skip(f"the backend does not claim a u32 xor kernel: {'; '.join(reasons)}")
    return c


def test_pipeline_and_async_agree_with_dispatch(kit_driver: Driver, caps: Capabilities,
                                                backend_id: str) -> None:
    c = _simple_case(caps)
    pipeline = kit_driver.compile(c.program, backend=backend_id)
    for outputs in (kit_driver.dispatch(c.program, c.inputs, backend=backend_id),
                    pipeline.dispatch(c.inputs), pipeline.dispatch(c.inputs),
                    kit_driver.dispatch_async(c.program, c.inputs, backend=backend_id).result(60)):
        assert outputs[0].tobytes() == c.expected[0].tobytes()


def test_survives_a_refusal(kit_driver: Driver, caps: Capabilities, backend_id: str) -> None:
    """A refused program leaves the same worker serving; the refusal carries a Fix."""
    c = _simple_case(caps)
    kit_driver.dispatch(c.program, c.inputs, backend=backend_id)
    before = kit_driver.status()["pools"][backend_id]["workers"]
    over = honesty.oversized_workgroup(caps)
    with pytest.raises((UnsupportedFeatureError, LaunchLimitError)) as info:
        dispatch_on(kit_driver, backend_id, over.program, over.inputs)
    assert info.value.fix and "Fix:" in str(info.value)
    assert kit_driver.dispatch(c.program, c.inputs, backend=backend_id)[0].tobytes() \
        == c.expected[0].tobytes()
    after = kit_driver.status()["pools"][backend_id]["workers"]
    assert [(w["pid"], w["generation"]) for w in after] \
        == [(w["pid"], w["generation"]) for w in before]


# -- capability honesty ---------------------------------------------------------------------

@pytest.mark.parametrize("probe", list(honesty.PROBES))
def test_capability_honesty(request: pytest.FixtureRequest, kit_driver: Driver,
                            caps: Capabilities, backend_id: str, probe: str) -> None:
    record(request, runner.run_case(kit_driver, backend_id, caps, honesty.PROBES[probe](caps)))


# -- the corpus -----------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus(request: pytest.FixtureRequest, kit_driver: Driver, caps: Capabilities,
                backend_id: str, case: Case) -> None:
    record(request, runner.run_case(kit_driver, backend_id, caps, case))


@pytest.mark.parametrize("case", SEQUENCE_CASES, ids=[c.name for c in SEQUENCE_CASES])
def test_sequence_corpus(request: pytest.FixtureRequest, kit_driver: Driver,
                         caps: Capabilities, backend_id: str, case: SequenceCase) -> None:
    record(request, runner.run_sequence_case(kit_driver, backend_id, caps, case))
