"""The reference backend behind the contract. Registration imports only numpy: there is
no device, so every capability below is exactly what the interpreter honours."""

from __future__ import annotations

import numpy as np

from vyre_core import abi
from vyre_core.contract import (
    Capabilities,
    DeviceInfo,
    SequenceRun,
    TimedDispatch,
    Timing,
    hookimpl,
)
from vyre_core.contract.types import wall_clock_ns
from vyre_core.host_memory import HostMemory
from vyre_core.ir.requirements import ALL_OPS
from vyre_core.limits import NO_GRID_LIMIT
from vyre_reference import __version__
from vyre_reference.interpreter import execute, run

VYRE_CONTRACT = 1

#: What the interpreter honours: any workgroup a GPU would accept, f16 computed in half
#: precision by numpy (float16 arithmetic rounds every result to binary16), f64 natively.
CLAIMS = {
    "supports_f16": True,
    "supports_f64": True,
    "max_workgroup_size": (1024, 1024, 64),
    "max_invocations_per_workgroup": 1024,
    "max_workgroups_per_dimension": NO_GRID_LIMIT,  # no per-axis limit (docs/semantics.md)
    "max_storage_buffer_bytes": 2**31,
    "max_workgroup_memory_bytes": 1 << 20,
    # subgroups of any size a program may declare (V034), formed as the program says
    "supports_subgroup_ops": True,
    "subgroup_size_range": (1, 128),
    "supported_ops": ALL_OPS,  # (the ops newer than the contract too: it defines them)
}


@hookimpl
def vyre_backend_id() -> str:
    return "reference"


@hookimpl
def vyre_backend_version() -> str:
    return __version__


@hookimpl
def vyre_backend_precedence() -> int:
    return 900  # the fallback: device backends rank before it


@hookimpl
def vyre_backend_claims() -> dict:
    return dict(CLAIMS)


@hookimpl
def vyre_is_reference_oracle() -> bool:
    return True


@hookimpl
def vyre_devices() -> list[DeviceInfo]:
    """The host's CPU: the interpreter runs on it (one core) in host memory."""
    return [DeviceInfo.host_cpu("interpreted")]


@hookimpl
def vyre_dispatch(program, inputs, config) -> list[np.ndarray]:
    return execute(program, inputs, config.grid_override)  # the host bound and sized it


@hookimpl
def vyre_dispatch_borrowed(program, inputs, config) -> list[np.ndarray]:
    return execute(program, inputs, config.grid_override)  # never writes its inputs


@hookimpl
def vyre_dispatch_into(program, inputs, config, outputs) -> None:
    execute(program, inputs, config.grid_override, into=outputs)  # in place, no copy


@hookimpl
def vyre_capabilities() -> Capabilities:
    return Capabilities.from_claims(CLAIMS)


# -- Resident buffers: host memory standing in for device memory ---------------------------

_memory = HostMemory(CLAIMS["max_storage_buffer_bytes"])


@hookimpl
def vyre_allocate_resident(byte_len: int) -> int:
    return _memory.allocate(byte_len)


@hookimpl
def vyre_upload_resident(handle: int, data: bytes) -> None:
    _memory.upload(handle, data)


@hookimpl
def vyre_download_resident(handle: int) -> bytes:
    return _memory.download(handle)


@hookimpl
def vyre_free_resident(handle: int) -> None:
    _memory.free(handle)


@hookimpl
def vyre_dispatch_resident(program, handles, config) -> TimedDispatch:
    """Inputs are read as they were before the dispatch (a handle bound twice reads its old
    content), then each output is written into its buffer."""
    bound = _memory.bind(program, handles)
    start = wall_clock_ns()
    inputs = [bound[b.name].copy() for b in program.inputs]
    outputs = run(program, inputs, grid=config.grid_override)
    for b, out in zip(program.outputs, outputs, strict=True):
        bound[b.name][:] = abi.coerce_input(b, out)
    return TimedDispatch([], Timing(wall_clock_ns() - start, None, config.label))


@hookimpl
def vyre_dispatch_sequence(sequence, inputs, resident, config) -> SequenceRun:
    """Every step straight through the interpreter over arrays in this process."""
    return _memory.run_sequence(
        sequence, inputs, resident, config,
        lambda step, step_inputs, _into: execute(step.program, step_inputs, step.grid))
