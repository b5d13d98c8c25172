"""Compiled kernels of one device generation: the bind group layout and compute pipeline
built from a lowering, and the least-recently-used cache of them by pipeline key."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vyre_core.contract.types import CacheSnapshot
from vyre_core.errors import KernelCompileError, PipelineInvalidatedError, UnsupportedFeatureError
from vyre_wgpu import BACKEND_ID
from vyre_wgpu.adapter import wgpu_module
from vyre_wgpu.loss import check_usable, fail
from vyre_wgpu.state import DeviceState
from vyre_wgpu.wgsl import Lowered


@dataclass(eq=False)
class Kernel:
    """A compiled compute pipeline of one device generation."""

    lowered: Lowered
    module: Any
    layout: Any          # the explicit bind group layout
    pipeline: Any
    generation: int
    tables: Any = None   # the read-only buffer of the kernel's tables, if it reads any
    key: str | None = None


class PipelineCache:
    """Kernels by pipeline cache key, the least recently used dropped past ``size``.
    (Used under the device lock; cleared when the device is opened again.)"""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kernels: OrderedDict[str, Kernel] = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key: str, build: Callable[[], Kernel]) -> Kernel:
        kernel = self._kernels.get(key)
        if kernel is not None:
            self.hits += 1
            self._kernels.move_to_end(key)
            return kernel
        self.misses += 1
        kernel = build()
        kernel.key = key
        self._kernels[key] = kernel
        while len(self._kernels) > self.size:
            self._kernels.popitem(last=False)
        return kernel

    def snapshot(self) -> CacheSnapshot:
        return CacheSnapshot(self.hits, self.misses, len(self._kernels))

    def clear(self) -> None:
        self._kernels.clear()


def build_kernel(dev: DeviceState, lowered: Lowered, label: str = "") -> Kernel:
    """(Under the device lock.) The pipeline of ``lowered`` with an explicit bind group
    layout: its buffers, the params uniform, vyre's status word and, when the kernel reads
    tables, the buffer holding them (made here, once: its contents never change)."""
    wgpu = wgpu_module()
    check_usable(dev)
    missing = sorted(lowered.features - dev.features)
    if missing:
        raise UnsupportedFeatureError(
            f"backend 'wgpu': the kernel needs {missing}, which the device on "
            f"{dev.name!r} lacks", "Route the program to a backend that reports the feature.")
    storage_max = dev.limit("max-storage-buffers-per-shader-stage")
    own = 2 if lowered.tables else 1  # the status word, and the tables
    if len(lowered.buffers) + own > storage_max:
        raise UnsupportedFeatureError(
            f"backend 'wgpu': the kernel binds {len(lowered.buffers) + own} storage "
            f"buffers ({own} of them vyre's own: its status word"
            f"{' and the tables its math reads' if own == 2 else ''}), the device allows "
            f"{storage_max}", f"Use at most {storage_max - own} buffers, or route to "
            "another backend.")
    entries = []
    for b in lowered.buffers:
        if b.access not in ("read", "read_write"):
            raise KernelCompileError(f"backend 'wgpu': lowering bound {b.name!r} "
                                     f"with access {b.access!r}")
        entries.append({"binding": b.binding, "visibility": wgpu.ShaderStage.COMPUTE,
                        "buffer": {"type": "read-only-storage" if b.access == "read"
                                   else "storage"}})
    entries.append({"binding": lowered.params_binding, "visibility": wgpu.ShaderStage.COMPUTE,
                    "buffer": {"type": "uniform"}})
    entries.append({"binding": lowered.status_binding, "visibility": wgpu.ShaderStage.COMPUTE,
                    "buffer": {"type": "storage"}})
    if lowered.tables:
        entries.append({"binding": lowered.tables_binding,
                        "visibility": wgpu.ShaderStage.COMPUTE,
                        "buffer": {"type": "read-only-storage"}})
    stage = "shader module creation"
    try:
        module = dev.device.create_shader_module(label=label, code=lowered.wgsl)
        stage = "bind group layout creation"
        layout = dev.device.create_bind_group_layout(label=label, entries=entries)
        stage = "pipeline creation"
        pipeline = dev.device.create_compute_pipeline(
            label=label,
            layout=dev.device.create_pipeline_layout(label=label, bind_group_layouts=[layout]),
            compute={"module": module, "entry_point": "main"})
        stage = "tables buffer creation"
        tables = dev.device.create_buffer_with_data(
            label=f"{label}-tables", data=lowered.tables,
            usage=wgpu.BufferUsage.STORAGE) if lowered.tables else None
    except Exception as exc:
        raise fail(dev, exc, stage, compiling=True, wgsl=lowered.wgsl) from exc
    return Kernel(lowered, module, layout, pipeline, dev.generation, tables)


def check_current(dev: DeviceState, kernel: Kernel) -> None:
    """(Under the device lock.) ``kernel`` is of the device's generation, and the device
    is usable."""
    if kernel.generation != dev.generation:
        raise PipelineInvalidatedError(
            f"backend 'wgpu': kernel {str(kernel.key)[:12]} was compiled for device "
            f"generation {kernel.generation}; the device was since recovered or reopened "
            f"(generation {dev.generation})",
            "Compile the program again (Driver.compile) and use the new handle.",
            generation=kernel.generation, backend=BACKEND_ID)
    check_usable(dev)
