"""The wgpu backend behind the contract. Registration imports neither wgpu nor
``vyre_wgpu.device``: the identity hooks below are pure, and the device is opened in the
worker by ``vyre_prepare`` (or the first hook that needs it). Every capability is
answered from the probed device, never from the static claims."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre_core.config import DispatchConfig
from vyre_core.contract import (
    CacheSnapshot,
    Capabilities,
    SequenceRun,
    TimedDispatch,
    Timing,
    hookimpl,
)
from vyre_core.contract.types import wall_clock_ns
from vyre_core.ir import Program
from vyre_core.ir.requirements import ALL_OPS
from vyre_wgpu import BACKEND_ID, __version__

if TYPE_CHECKING:
    from vyre_wgpu.device import Device
    from vyre_wgpu.pipelines import Kernel
    from vyre_wgpu.resident import Resident
    from vyre_wgpu.sequence import SequenceRunner

VYRE_CONTRACT = 1

#: Every op but 64-bit integers (WGSL has none). What one device cannot run besides, it
#: refuses at compile (capabilities.py).
OPS = ALL_OPS - {"dtype.u64", "dtype.i64"}

#: Claims before any device is seen: the WebGPU default limits, which every conformant
#: adapter meets; f16/f64 are claimed only after a probe passes on the real device.
CLAIMS = {
    "supports_f16": False,
    "supports_f64": False,
    "max_workgroup_size": (256, 256, 64),
    "max_invocations_per_workgroup": 256,
    "max_workgroups_per_dimension": 65535,
    "max_storage_buffer_bytes": 134217728,
    "max_workgroup_memory_bytes": 16384,
    "supported_ops": OPS,
}

_lock = threading.Lock()
_selected: int | None = None  # the device this worker is pinned to (None: the preferred)
_device: Device | None = None
_resident: Resident | None = None
_sequences: SequenceRunner | None = None


def device() -> Device:
    """The worker's device, opened (and probed) on first use."""
    global _device
    with _lock:
        if _device is None:
            from vyre_wgpu.device import Device

            _device = Device(device_id=_selected)
        return _device


def resident() -> Resident:
    """The resident buffers of the worker's device."""
    global _resident
    dev = device()
    with _lock:
        if _resident is None or _resident.device is not dev:
            from vyre_wgpu.resident import Resident

            _resident = Resident(dev)
        return _resident


def sequences() -> SequenceRunner:
    """The sequence runner of the worker's device."""
    global _sequences
    res = resident()
    with _lock:
        if _sequences is None or _sequences.resident is not res:
            from vyre_wgpu.sequence import SequenceRunner

            _sequences = SequenceRunner(res.device, res)
        return _sequences


# -- identity (pure) ---------------------------------------------------------------------

@hookimpl
def vyre_backend_id() -> str:
    return BACKEND_ID


@hookimpl
def vyre_backend_version() -> str:
    return __version__


@hookimpl
def vyre_backend_precedence() -> int:
    return 100  # a device backend: tried before the reference interpreter (900)


@hookimpl
def vyre_backend_claims() -> dict:
    return dict(CLAIMS)


# -- devices (listed without opening; one selected before prepare) -----------------------

@hookimpl
def vyre_devices() -> list:
    from vyre_wgpu.adapter import devices

    return devices()


@hookimpl
def vyre_select_device(device_id: int) -> None:
    global _selected
    with _lock:
        _selected = device_id


# -- dispatch ----------------------------------------------------------------------------

def _run(program: Program, inputs: list[np.ndarray], config: DispatchConfig,
         timed: bool = False) -> tuple[list[np.ndarray], int | None]:
    dev = device()
    kernel = dev.compile_program(program, config, __version__)
    return dev.run_program(kernel, program, inputs, config.grid_override, timed=timed)


@hookimpl
def vyre_dispatch(program, inputs, config) -> list[np.ndarray]:
    return _run(program, inputs, config)[0]


@hookimpl
def vyre_dispatch_borrowed(program, inputs, config) -> list[np.ndarray]:
    return _run(program, inputs, config)[0]  # inputs are only copied to the device


@hookimpl
def vyre_dispatch_timed(program, inputs, config) -> TimedDispatch:
    start = wall_clock_ns()
    outputs, device_ns = _run(program, inputs, config, timed=True)
    return TimedDispatch(outputs, Timing(wall_clock_ns() - start, device_ns, config.label))


class WgpuPipeline:
    """What ``vyre_compile`` returns: a compiled kernel of one device generation."""

    def __init__(self, program: Program, kernel: Kernel) -> None:
        self.program = program
        self.kernel = kernel

    def dispatch(self, inputs: list[np.ndarray], config: Any) -> list[np.ndarray]:
        """(A kernel of a device generation since recovered is refused by the device.)"""
        return device().run_program(self.kernel, self.program, inputs, config.grid_override)[0]


@hookimpl
def vyre_compile(program, config) -> WgpuPipeline:
    return WgpuPipeline(program, device().compile_program(program, config, __version__))


# -- resident buffers --------------------------------------------------------------------

@hookimpl
def vyre_allocate_resident(byte_len: int) -> int:
    return resident().allocate(byte_len)


@hookimpl
def vyre_upload_resident(handle: int, data: bytes) -> None:
    resident().upload(handle, data)


@hookimpl
def vyre_download_resident(handle: int) -> bytes:
    return resident().download(handle)


@hookimpl
def vyre_free_resident(handle: int) -> None:
    resident().free(handle)


@hookimpl
def vyre_dispatch_resident(program, handles, config) -> TimedDispatch:
    start = wall_clock_ns()
    kernel = device().compile_program(program, config, __version__)
    device_ns = resident().dispatch(kernel, program, handles, config.grid_override,
                                    timed=config.profile)
    return TimedDispatch([], Timing(wall_clock_ns() - start, device_ns, config.label))


@hookimpl
def vyre_dispatch_sequence(sequence, inputs, resident, config) -> SequenceRun:
    dev = device()
    kernels = {program.fingerprint(): dev.compile_program(program, config, __version__)
               for program, _ in sequence.programs()}
    return sequences().run(sequence, kernels, inputs, resident, config.label)


@hookimpl
def vyre_pipeline_cache_snapshot() -> CacheSnapshot:
    return device().cache_snapshot()


# -- capabilities (probed) -----------------------------------------------------------------

@hookimpl
def vyre_capabilities() -> Capabilities:
    """The device's record, as its probes found it (``vyre_wgpu.capabilities``)."""
    from vyre_wgpu import capabilities

    dev = device()
    return Capabilities(supported_ops=OPS, **capabilities.fields(dev),
                        extra=capabilities.profile(dev))


# -- lifecycle -----------------------------------------------------------------------------

@hookimpl
def vyre_prepare() -> None:
    device()


@hookimpl
def vyre_flush() -> None:
    if _device is not None:
        _device.flush()


@hookimpl
def vyre_shutdown() -> None:
    global _device, _resident, _sequences
    with _lock:
        dev, _device, _resident, _sequences = _device, None, None, None
    if dev is not None:
        dev.close()


@hookimpl
def vyre_device_lost() -> bool:
    return _device is not None and _device.is_lost()


@hookimpl
def vyre_try_recover() -> None:
    device().recover()
