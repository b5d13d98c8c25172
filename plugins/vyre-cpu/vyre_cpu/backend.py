"""The cpu backend behind the contract: programs compiled to native code with numba
(``compiler.py``), run in parallel over workgroups on every core of the worker's machine.
Registration imports numpy only; numba is imported in the worker, at the first compile."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from vyre_core.config import DispatchConfig
from vyre_core.contract import DeviceInfo, TimedDispatch, Timing, hookimpl
from vyre_core.contract.types import wall_clock_ns
from vyre_core.ir import Access, Program
from vyre_core.ir.requirements import ALL_OPS
from vyre_core.pipeline import pipeline_cache_key
from vyre_cpu import __version__

VYRE_CONTRACT = 1

#: What the compiled kernels honour: every operation (workgroup memory and barriers in
#: lockstep per workgroup), f16 (rounded to binary16 after every operation) and f64.
CLAIMS = {
    "supports_f16": True,
    "supports_f64": True,
    "max_workgroup_size": (1024, 1024, 64),
    "max_invocations_per_workgroup": 1024,
    "max_workgroups_per_dimension": 65535,
    "max_storage_buffer_bytes": 2**31,
    "max_workgroup_memory_bytes": 1 << 20,
    "supported_ops": ALL_OPS,
}


@hookimpl
def vyre_backend_id() -> str:
    return "cpu"


@hookimpl
def vyre_backend_version() -> str:
    return __version__


#: Where routing tries it. Its place is between the device backends (wgpu: 100) and the
#: reference interpreter (900), at 500. For now it ranks after the reference, so routing
#: picks it only when named (``backend="cpu"``): the suite's tests of default routing
#: assume the reference there, and its lockstep kernels (workgroup memory, barriers) are
#: not yet much faster than the interpreter.
PRECEDENCE = 950


@hookimpl
def vyre_backend_precedence() -> int:
    return PRECEDENCE


@hookimpl
def vyre_backend_claims() -> dict:
    return dict(CLAIMS)


@hookimpl
def vyre_supported_ops() -> frozenset[str]:
    return CLAIMS["supported_ops"]


@hookimpl
def vyre_devices() -> list[DeviceInfo]:
    """The host's CPU: every core runs the kernels, in host memory."""
    return [DeviceInfo.host_cpu("numba")]


@hookimpl
def vyre_compile(program: Program, config: Any) -> Pipeline:
    return Pipeline(program, config)


@hookimpl
def vyre_dispatch(program, inputs, config) -> list[np.ndarray]:
    return Pipeline(program, config).dispatch(inputs, config)


@hookimpl
def vyre_dispatch_borrowed(program, inputs, config) -> list[np.ndarray]:
    return Pipeline(program, config).dispatch(inputs, config)  # never writes its inputs


@hookimpl
def vyre_dispatch_into(program, inputs, config, outputs) -> None:
    Pipeline(program, config).dispatch(inputs, config, into=outputs)


@hookimpl
def vyre_dispatch_timed(program, inputs, config) -> TimedDispatch:
    start = wall_clock_ns()
    outputs = Pipeline(program, config).dispatch(inputs, config)
    return TimedDispatch(outputs, Timing(wall_clock_ns() - start, None, config.label))


@hookimpl
def vyre_supports_f16() -> bool:
    return CLAIMS["supports_f16"]


@hookimpl
def vyre_supports_f64() -> bool:
    return CLAIMS["supports_f64"]


@hookimpl
def vyre_max_workgroup_size() -> tuple[int, int, int]:
    return CLAIMS["max_workgroup_size"]


@hookimpl
def vyre_max_invocations_per_workgroup() -> int:
    return CLAIMS["max_invocations_per_workgroup"]


@hookimpl
def vyre_max_workgroups_per_dimension() -> int:
    return CLAIMS["max_workgroups_per_dimension"]


@hookimpl
def vyre_max_storage_buffer_bytes() -> int:
    return CLAIMS["max_storage_buffer_bytes"]


@hookimpl
def vyre_max_workgroup_memory_bytes() -> int:
    return CLAIMS["max_workgroup_memory_bytes"]


@hookimpl
def vyre_device_profile() -> dict[str, Any]:
    import numba

    return {"cores": os.cpu_count(), "threads": numba.get_num_threads(),
            "numba": numba.__version__, "threading_layer": _threading_layer()}


def _threading_layer() -> str:
    import numba

    try:
        return numba.threading_layer()
    except ValueError:  # (none chosen until the first parallel kernel runs)
        return "not started"


class Pipeline:
    """One program compiled (at construction, or loaded from the cache) for this
    backend: dispatches run its kernel over the bound inputs."""

    def __init__(self, program: Program, config: Any) -> None:
        from vyre_cpu.codegen import generate
        from vyre_cpu.compiler import compiled

        generate(program)  # (refused before anything else: f16, barriers, ...)
        self.program = program
        # (the program as it runs, workgroup override applied; nothing else of the config
        # changes its code)
        key = pipeline_cache_key(program, DispatchConfig(), "cpu", __version__)
        self.compiled = compiled(program, key, signature(program))
        self.compile_seconds = self.compiled.seconds

    def dispatch(self, inputs: list[np.ndarray], config: Any,
                 into: list[np.ndarray] | None = None) -> list[np.ndarray]:
        program = self.program
        inputs_by_name = dict(zip((b.name for b in program.inputs), inputs, strict=True))
        targets = {} if into is None else dict(zip((b.name for b in program.outputs), into,
                                                   strict=True))
        arrays = []
        storage = [b for b in program.buffers if b.access is not Access.WORKGROUP]
        for b in storage:
            target = targets.get(b.name)
            if b.access is Access.OUTPUT:
                if target is None:
                    target = np.zeros(b.count, dtype=b.dtype.storage_np)
                else:
                    target.fill(0)
                arrays.append(target)
            elif b.access is Access.READ_WRITE:
                if target is None:
                    target = np.array(inputs_by_name[b.name], dtype=b.dtype.storage_np)
                else:
                    np.copyto(target, inputs_by_name[b.name])
                arrays.append(target)
            else:
                view = np.asarray(inputs_by_name[b.name], dtype=b.dtype.storage_np).view()
                view.flags.writeable = False  # (the kernel's signature: read-only inputs)
                arrays.append(view)
        gx, gy, gz = config.grid_override
        self.compiled.kernel(gx, gy, gz, *(_words(a) for a in arrays))
        by_name = dict(zip((b.name for b in storage), arrays, strict=True))
        return [by_name[b.name] for b in program.outputs]


def _words(array: np.ndarray) -> np.ndarray:
    """What the kernel takes: the array itself, or an f16 array's 16-bit words."""
    return array.view(np.uint16) if array.dtype == np.float16 else array


def signature(program: Program) -> tuple[Any, ...]:
    """The numba signature of ``program``'s kernel: the grid, then one 1-D array per
    storage buffer (read-only for pure inputs; workgroup buffers are the kernel's own)."""
    from numba import types

    scalar = {np.dtype(np.uint32): types.uint32, np.dtype(np.int32): types.int32,
              np.dtype(np.float32): types.float32, np.dtype(np.float64): types.float64,
              np.dtype(np.float16): types.uint16}
    arrays = [types.Array(scalar[b.dtype.storage_np], 1, "C",
                          readonly=b.access in (Access.READ, Access.UNIFORM))
              for b in program.buffers if b.access is not Access.WORKGROUP]
    return (types.int64, types.int64, types.int64, *arrays)
