"""Every corpus program on the wgpu backend (lavapipe in CI) against its expected outputs.

Nothing is skipped: a program the backend cannot express must be refused at compile with
UnsupportedFeatureError, and only the programs listed in REFUSED may be, and subgroup programs
the device does not form the subgroups of."""

from __future__ import annotations

import pytest

import vyre_wgpu.backend
from vyre_core.compare import first_divergence
from vyre_core.config import DispatchConfig
from vyre_core.conformance.corpus import CASES
from vyre_core.errors import UnsupportedFeatureError
from vyre_workers.backend_host import BackendHost

#: Programs WGSL/SPIR-V cannot express faithfully, with the refusal they must get.
REFUSED = {
    # (the math library's f64 functions, written out: 64-bit integers)
    "f64_transcendental": "WGSL has no 64-bit integers",
    "f64_transcendental_more": "WGSL has no 64-bit integers",
    "cast_f64_f16_rounding": "f64 -> f16",
    "f64_special_rem": "rem on f64",
    "f64_rem": "rem on f64",
    "cast_f64_f16_special": "f64 -> f16",
    "f64_isinf": "isinf on f64",
    **{f"{t}_edges_{i}": "WGSL has no 64-bit integers" for t in ("u64", "i64") for i in (0, 1)},
    "bitcast_f64_u64_i64": "WGSL has no 64-bit integers",
}


@pytest.fixture(scope="module")
def host():
    host = BackendHost(vyre_wgpu.backend)
    host.prepare()
    yield host
    host.shutdown()


def _refusal(host, c) -> str | None:
    """What the backend must refuse ``c`` with: its REFUSED entry, or subgroups it does
    not form (a size other than the device's, or a 2-D or 3-D workgroup)."""
    req = c.program.requirements()
    if "subgroups" in req.features:
        if c.program.workgroup[1:] != (1, 1):
            return "1-D workgroups only"
        if host.capabilities().subgroup_size_range != (req.subgroup_size,) * 2:
            return f"needs {req.subgroup_size}"
    return REFUSED.get(c.name)


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_wgpu_matches_corpus(host, c):
    refusal = _refusal(host, c)
    if refusal is not None:
        with pytest.raises(UnsupportedFeatureError, match=refusal):
            host.dispatch(c.program, c.inputs, _config(c))
        return
    actual = host.dispatch(c.program, c.inputs, _config(c))
    for buffer, expected, got in zip(c.program.outputs, c.expected, actual, strict=True):
        divergence = first_divergence(expected, got, buffer.dtype, c.ulp)
        assert divergence is None, (
            f"case {c.name}, output {buffer.name!r} ({buffer.dtype.value}), program "
            f"{c.program.fingerprint()[:16]}: {divergence}")


def test_the_refusal_list_names_real_cases():
    assert set(REFUSED) <= {c.name for c in CASES}


def _config(c) -> DispatchConfig:
    return DispatchConfig(grid_override=c.grid, constants=c.constants)
