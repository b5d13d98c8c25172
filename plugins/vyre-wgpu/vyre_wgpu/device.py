"""One wgpu device of the backend's worker: opened on the adapter with the features and
limits vyre uses, compiling and running kernels under one lock, lost and recovered.

The jobs around it each have a module: ``adapter`` (which adapter, what it is),
``capabilities`` (probes and what they decide), ``pipelines`` (kernels and their cache),
``buffers`` (launch buffers, params, bind groups), ``submission`` (recording, submitting,
reading back, timing) and ``loss`` (errors and device loss). A device is opened again
after a loss as a new generation: every kernel and buffer of the old one is refused.
Worker-only: wgpu is imported on first use, never when this module is imported.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vyre_core import abi
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import CacheSnapshot
from vyre_core.errors import DispatchError, UnsupportedFeatureError
from vyre_core.ir import Program
from vyre_core.pipeline import pipeline_cache_key
from vyre_wgpu import BACKEND_ID, __version__, capabilities
from vyre_wgpu.adapter import (
    OPTIONAL_FEATURES,
    USED_LIMITS,
    adapter_facts,
    adapter_for,
    same_adapter,
)
from vyre_wgpu.buffers import KeptLaunches, Launch, LaunchBuffers, as_words, launch_buffers
from vyre_wgpu.loss import check_usable, fail, summary, touch
from vyre_wgpu.lowering import lower
from vyre_wgpu.pipelines import Kernel, PipelineCache, build_kernel, check_current
from vyre_wgpu.state import DeviceState
from vyre_wgpu.submission import Pass, Readback, Recorder, launch_grid, submitting
from vyre_wgpu.wgsl import Lowered

_generations = itertools.count(1)  # process-wide: a kernel never matches another device


class Device(DeviceState):
    """One wgpu device with its probed capabilities and pipeline cache. Thread-safe."""

    def __init__(self, adapter: Any = None, *, device_id: int | None = None,
                 cache_size: int = 256, probe: bool = True) -> None:
        self._lock = threading.RLock()
        self.device_id = device_id  # the adapter's position in the device list (None: the
        self.adapter = adapter if adapter is not None else adapter_for(device_id)  # preferred)
        self.facts = adapter_facts(self.adapter)
        self.software = bool(self.facts["software_adapter"])
        self.requested_features = tuple(f for f in OPTIONAL_FEATURES
                                        if f in self.adapter.features)
        adapter_limits = self.adapter.limits
        self.requested_limits = {k: int(adapter_limits[k]) for k in USED_LIMITS
                                 if k in adapter_limits}
        self.pipelines = PipelineCache(cache_size)
        self.probes: dict[str, str] = {}
        self.max_loop_trip = capabilities.assumed_loop_trip(self.software)
        self.subgroup_size: int | None = None  # (until the probe shows one)
        self.closed = False
        self._open()
        if probe:
            self.probe()

    def _open(self) -> None:
        """A device of a new generation on ``self.adapter``: nothing of an older one
        (kernels, kept launches, the readback buffer) carries over."""
        try:
            device = self.adapter.request_device_sync(
                label="vyre", required_features=list(self.requested_features),
                required_limits=dict(self.requested_limits))
        except Exception as exc:
            raise UnsupportedFeatureError(
                f"adapter {self.name!r} refused a device with features "
                f"{list(self.requested_features)}: {summary(exc)}",
                "Check `vyre doctor`; update the GPU driver, or route to another "
                "backend.") from exc
        self.device = device
        self.queue = device.queue
        self.features = frozenset(str(f) for f in device.features)
        self.limits = {str(k): v for k, v in dict(device.limits).items()}
        self.generation = next(_generations)
        self.lost_reason = None
        self.pipelines.clear()
        self.launches = KeptLaunches()
        self.readback = Readback(self)

    def probe(self) -> None:
        """Measure what the device really does; the results decide the capabilities."""
        self.probes, self.max_loop_trip, self.subgroup_size = capabilities.probe(self)

    # -- compile --------------------------------------------------------------------------

    def compile_program(self, program: Program, config: DispatchConfig | None = None,
                        version: str = __version__) -> Kernel:
        """The cached kernel of ``program`` (lowered, checked and built on a miss)."""
        key = pipeline_cache_key(program, config or DispatchConfig(), BACKEND_ID, version)

        def make() -> Lowered:
            capabilities.refuse_unsupported(self, program)
            try:
                return lower(program)
            except NotImplementedError as exc:
                raise UnsupportedFeatureError(
                    "backend 'wgpu': the WGSL lowering is not available in this build",
                    "Route the program to another backend (backend='reference').") from exc

        return self._cached(key, make, f"program {program.fingerprint()[:12]}")

    def compile_wgsl(self, lowered: Lowered, key: str | None = None, label: str = "") -> Kernel:
        """A kernel for a hand-built ``Lowered``; cached when ``key`` is given."""
        if key is None:
            with self._lock:
                return build_kernel(self, lowered, label)
        return self._cached(key, lambda: lowered, label)

    def _cached(self, key: str, make: Callable[[], Lowered], label: str) -> Kernel:
        with self._lock:
            check_usable(self)
            return self.pipelines.get(key, lambda: build_kernel(self, make(), label))

    def cache_snapshot(self) -> CacheSnapshot:
        with self._lock:
            return self.pipelines.snapshot()

    # -- dispatch -------------------------------------------------------------------------

    def run_program(self, kernel: Kernel, program: Program, inputs: Sequence[np.ndarray],
                    grid: Sequence[int] | None, *, timed: bool = False,
                    ) -> tuple[list[np.ndarray], int | None]:
        """Outputs of ``program`` (ABI order, storage dtype) and device nanoseconds when
        ``timed`` and measurable. ``inputs`` are bound per the input ABI."""
        by_name = dict(zip((b.name for b in program.inputs), inputs, strict=True))
        declared = {b.name: b for b in program.buffers}
        data: list[np.ndarray | None] = []
        lengths: list[int] = []
        for bb in kernel.lowered.buffers:
            buf = declared[bb.name]
            if bb.element_bytes != buf.dtype.storage_bytes:
                raise DispatchError(
                    f"backend 'wgpu': lowering binds {bb.name!r} with {bb.element_bytes}-byte "
                    f"elements, its {buf.dtype.value} storage has {buf.dtype.storage_bytes}",
                    "This is a bug in the vyre-wgpu lowering; report it.")
            array = by_name.get(bb.name)
            if array is not None:
                array = np.ascontiguousarray(array).reshape(-1)
                lengths.append(len(array))
            else:
                lengths.append(int(buf.count or 0))
            data.append(array)
        if grid is None:
            grid = abi.infer_grid(program, dict(zip((b.name for b in kernel.lowered.buffers),
                                                    lengths, strict=True)))
        read = tuple(declared[bb.name].is_output for bb in kernel.lowered.buffers)
        raw, device_ns = self.run(Launch(kernel, data, lengths, grid, read), timed=timed)
        read_names = [bb.name for bb, rd in zip(kernel.lowered.buffers, read, strict=True)
                      if rd]
        results = {name: np.frombuffer(r, dtype=declared[name].dtype.storage_np)
                   for name, r in zip(read_names, raw, strict=True)}
        return [results[b.name] for b in program.outputs], device_ns

    def run(self, launch: Launch, *, timed: bool = False,
            ) -> tuple[list[bytearray], int | None]:
        """One dispatch: the bytes of ``launch``'s read buffers and device nanoseconds
        (``timed``). When the kernel's status word says the adapter cut a loop short, the
        outputs are discarded and UnsupportedFeatureError is raised."""
        with self._lock:
            check_current(self, launch.kernel)
            dispatch, folded = launch_grid(launch.grid,
                                           self.limit("max-compute-workgroups-per-dimension"))
            with submitting(self, "dispatch") as created:
                buffers, fresh = self._launch_buffers(launch, folded, created)
                zeroed = [] if fresh else [buffers.status]  # (new buffers are zeros already)
                reads = []
                for b, buf, array, n, rd in zip(launch.kernel.lowered.buffers, buffers.storage,
                                                launch.data, launch.lengths, launch.read,
                                                strict=True):
                    if array is not None and array.nbytes > 0:
                        self.queue.write_buffer(buf, 0, as_words(array))
                    elif not fresh:
                        zeroed.append(buf)
                    if rd:
                        reads.append((buf, n * b.element_bytes))
                recorder = Recorder(self, buffers.status, created,
                                    cut_short="the outputs were discarded", timed=timed)
                recorder.step(Pass(launch.kernel, buffers.bind_group, dispatch, zeroed))
                return recorder.read(reads), recorder.device_ns

    def _launch_buffers(self, launch: Launch, folded: int,
                        created: list[Any]) -> tuple[LaunchBuffers, bool]:
        """The buffers of a launch like ``launch`` kept from before, or new ones (True)
        kept while small; ``created`` takes those not kept, for the caller to destroy."""
        key = launch.key()
        kept = None if key is None else self.launches.get(key)
        if kept is not None:
            return kept, False
        made = launch_buffers(self, launch, folded)
        if key is None or not self.launches.keep(key, made):
            created.extend(made.buffers())
        return made, True

    # -- lifecycle ------------------------------------------------------------------------

    def flush(self) -> None:
        """Wait until the queue is idle (every dispatch already waits for its results)."""
        with self._lock:
            if self.closed or self.lost_reason is not None:
                return
            wait = getattr(self.device, "_poll_wait", None)  # wgpu-native: block until idle
            if wait is None:
                return
            try:
                wait()
            except Exception as exc:
                raise fail(self, exc, "flush") from exc

    def is_lost(self) -> bool:
        """Whether the device is lost: known from a failed call, or found by touching it."""
        with self._lock:
            touch(self)
            return not self.closed and self.lost_reason is not None

    def lose(self) -> None:
        """Destroy the wgpu device under the backend (fault injection for tests): the next
        call finds it lost, as after a driver reset."""
        with self._lock:
            self.device.destroy()

    def recover(self) -> None:
        """A new device on the same adapter with the same features and limits; every
        kernel compiled before is invalid (its generation is gone). Raises when the
        adapter cannot give one back."""
        with self._lock:
            if self.closed:
                raise UnsupportedFeatureError("backend 'wgpu': the device was shut down",
                                              "Prepare the backend again instead.")
            before = self.features
            try:
                self._open()
            except UnsupportedFeatureError:
                adapter = adapter_for(self.device_id)  # the old one may be gone with the device
                facts = adapter_facts(adapter)
                if not same_adapter(facts, self.facts):
                    raise UnsupportedFeatureError(
                        f"backend 'wgpu': the adapter {self.name!r} is gone and the one now "
                        f"offered is {facts['device']!r}",
                        "Restart the worker (the pool does this) to start on the new "
                        "adapter.") from None
                self.adapter = adapter
                self._open()
            missing = sorted(before - self.features)
            if missing:
                self.lost_reason = "recovered without " + ", ".join(missing)
                raise UnsupportedFeatureError(
                    f"backend 'wgpu': the recovered device lacks {missing}",
                    "Restart the worker (the pool does this).")
            self.probe()  # the old device is released by wgpu once unreferenced

    def close(self) -> None:
        """Release the device; kernels and this object are unusable afterwards."""
        with self._lock:
            self.closed = True
            self.pipelines.clear()
            self.launches.clear()
            self.device = self.queue = self.readback = None
