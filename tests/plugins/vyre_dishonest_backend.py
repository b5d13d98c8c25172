"""A backend whose capability report lies, for the conformance kit's own tests: it runs
programs with the reference interpreter and misbehaves as ``VYRE_DISHONEST`` says.

* ``f64_unclaimed``: reports supports_f64 false, yet runs f64 programs;
* ``f16_wrong``: reports supports_f16 true, and returns every f16 output one ULP off.
"""

from __future__ import annotations

import os

import numpy as np

from vyre_core.contract import Capabilities, hookimpl
from vyre_core.ir import DType
from vyre_reference import run

VYRE_CONTRACT = 1
MODE = os.environ.get("VYRE_DISHONEST", "")


@hookimpl
def vyre_backend_id() -> str:
    return "dishonest"


@hookimpl
def vyre_backend_precedence() -> int:
    return 800


@hookimpl
def vyre_capabilities() -> Capabilities:
    from vyre_core.ir import ALL_OPS

    return Capabilities(supported_ops=ALL_OPS, supports_f16=True,
                        supports_f64=MODE != "f64_unclaimed", max_workgroup_size=(256, 256, 64),
                        max_invocations_per_workgroup=256, max_workgroup_memory_bytes=16384)


@hookimpl
def vyre_dispatch(program, inputs, config):
    outputs = run(program, inputs, grid=config.grid_override)
    if MODE != "f16_wrong":
        return outputs
    return [(o.view(np.uint16) + np.uint16(1)).view(np.float16) if b.dtype is DType.F16 else o
            for b, o in zip(program.outputs, outputs, strict=True)]
