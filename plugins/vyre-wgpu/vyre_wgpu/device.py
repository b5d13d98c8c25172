"""Everything of the wgpu backend that touches wgpu: the adapter and device, capabilities
probed from them, the pipeline cache, buffers and dispatch, device loss and recovery.

It runs only inside the backend's worker process; wgpu is imported on first use, never
when this module is imported. One :class:`Device` owns one wgpu device:

- ``Device()`` opens the high-performance adapter, requests the optional features it has
  (``shader-f16``, ``shader-f64``, ``timestamp-query``) and its own compute/storage limits,
  then probes what the device really does (f16/f64 smoke kernels through ``lower()``, and
  the per-invocation loop budget of the driver).
- ``compile_program`` lowers a program to WGSL and builds a compute pipeline with an
  explicit bind group layout, cached by ``vyre_core.pipeline.pipeline_cache_key``.
  ``compile_wgsl`` does the same for a hand-built ``Lowered`` (tests, probes).
- ``run_program`` / ``run`` upload inputs, dispatch (splitting an x grid that exceeds the
  per-dimension limit) and read back outputs; ``timed=True`` measures device time with
  timestamp queries where the device has them.
- ``is_lost`` / ``recover``: loss is detected from wgpu's errors (wgpu-py has no lost
  promise); recovery opens a new device on the same adapter, with the same features and
  limits, and invalidates every kernel compiled before.

Every failure leaves as a ``vyre_core.errors.VyreError`` with a ``Fix:``.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre_core import abi
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import CacheSnapshot
from vyre_core.errors import (
    DeviceLostError,
    DeviceOutOfMemoryError,
    DispatchError,
    KernelCompileError,
    LaunchLimitError,
    PipelineInvalidatedError,
    UnsupportedFeatureError,
    VyreError,
)
from vyre_core.ir import Program
from vyre_core.ir.dtypes import DType
from vyre_core.pipeline import pipeline_cache_key
from vyre_wgpu import __version__
from vyre_wgpu.lowering import BufferBinding, Lowered, lower, params_data

BACKEND_ID = "wgpu"

#: Features requested whenever the adapter has them; the lowering emits f16/f64 only for
#: programs that use them, and the probes decide whether they are reported.
OPTIONAL_FEATURES = ("shader-f16", "shader-f64", "timestamp-query")

#: Limits requested at the adapter's own values (the WebGPU defaults are far lower).
USED_LIMITS = (
    "max-compute-workgroup-size-x", "max-compute-workgroup-size-y",
    "max-compute-workgroup-size-z", "max-compute-invocations-per-workgroup",
    "max-compute-workgroups-per-dimension", "max-compute-workgroup-storage-size",
    "max-storage-buffer-binding-size", "max-buffer-size",
    "max-storage-buffers-per-shader-stage", "max-uniform-buffer-binding-size",
    "max-bindings-per-bind-group",
)

#: Loop budget assumed for a software adapter whose loop probe could not run: Mesa's
#: llvmpipe (lavapipe) ends every loop of an invocation after 65,535 iterations in total,
#: silently.
SOFTWARE_LOOP_TRIP = 65535
LOOP_PROBE_TRIPS = 1 << 20

#: f16/f64 smoke cases: (a, b), checked against a + b computed in the type itself; the
#: f64 cases come out wrong in f32.
_FLOAT_CASES = {
    DType.F16: ([1.0, 60000.0, -0.5], [2.0 ** -10, 10000.0, 0.25]),
    DType.F64: ([1.0, 1e300, 0.1], [2.0 ** -40, 1e300, 0.2]),
}

#: One loop of trips[0] iterations counted; params[0].x (the split stride, 0) keeps the
#: bound opaque to the compiler.
_LOOP_PROBE = """
@group(0) @binding(0) var<storage, read> trips: array<u32>;
@group(0) @binding(1) var<storage, read_write> counted: array<u32>;
@group(0) @binding(2) var<uniform> params: array<vec4<u32>, 1>;

@compute @workgroup_size(1)
fn main() {
    var count = 0u;
    let end = trips[0] + params[0].x;
    for (var i = 0u; i < end; i = i + 1u) {
        count = count + 1u;
    }
    counted[0] = count;
}
"""

_SOFTWARE_NAMES = ("llvmpipe", "lavapipe", "swiftshader", "softpipe")
_LOST = re.compile(r"device (?:is |was |has been )?(?:lost|destroyed)|lost device", re.I)
_READBACK_KEEP = 64 << 20   # readback buffers larger than this are not kept between calls
#: The buffers and bind group of a launch are kept for the next launch of the same kernel
#: with the same sizes and grid when they take at most KEEP_BYTES; at most KEEP_LAUNCHES
#: launches and KEEP_TOTAL_BYTES of them are kept (the least recently used go first).
KEEP_BYTES = 16 << 20
KEEP_TOTAL_BYTES = 64 << 20
KEEP_LAUNCHES = 64
_generations = itertools.count(1)  # process-wide: a kernel never matches another device


def wgpu_module():
    import wgpu  # only here: registration never imports wgpu

    return wgpu


def shader_cache_dir() -> str | None:
    """Point Mesa's on-disk shader cache at a directory vyre owns, unless the user set
    ``MESA_SHADER_CACHE_DIR``; must run before the first adapter is requested."""
    current = os.environ.get("MESA_SHADER_CACHE_DIR")
    if current:
        return current
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "vyre", "mesa-shader-cache")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return None  # Mesa falls back to its own default; nothing breaks
    os.environ["MESA_SHADER_CACHE_DIR"] = path
    return path


_NO_ADAPTER_FIX = ("Install a Vulkan driver: on Debian `apt-get install mesa-vulkan-drivers "
                   "libvulkan1` (lavapipe runs on the CPU), or route to another backend "
                   "(backend='reference').")


def request_adapter(power_preference: str = "high-performance") -> Any:
    """The wgpu adapter vyre uses; UnsupportedFeatureError when there is none."""
    shader_cache_dir()
    wgpu = wgpu_module()
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
    except Exception as exc:  # wgpu raises RuntimeError when no backend has an adapter
        raise UnsupportedFeatureError(f"no WebGPU adapter: {type(exc).__name__}: {exc}",
                                      _NO_ADAPTER_FIX) from exc
    if adapter is None:
        raise UnsupportedFeatureError("no WebGPU adapter was found", _NO_ADAPTER_FIX)
    return adapter


def adapter_facts(adapter: Any) -> dict[str, Any]:
    """The adapter's identity as plain data (crosses the process boundary)."""
    info = dict(adapter.info)
    facts: dict[str, Any] = {k: str(info.get(k, "") or "") for k in (
        "vendor", "architecture", "device", "description", "backend_type", "adapter_type")}
    for k in ("vendor_id", "device_id"):
        try:
            facts[k] = int(info.get(k, 0) or 0)
        except (TypeError, ValueError):
            facts[k] = 0
    facts["software_adapter"] = is_software(facts)
    return facts


def is_software(facts: dict[str, Any]) -> bool:
    """A CPU implementation of the GPU API (lavapipe, SwiftShader)."""
    if str(facts.get("adapter_type", "")).lower() == "cpu":
        return True
    names = " ".join(str(facts.get(k, "")) for k in ("vendor", "device", "description"))
    return any(n in names.lower() for n in _SOFTWARE_NAMES)


def padded_size(nbytes: int) -> int:
    """Buffer size for ``nbytes`` of data: a multiple of 4, at least 4."""
    return max(4, (int(nbytes) + 3) & ~3)


def launch_grid(grid: Sequence[int], limit: int) -> tuple[tuple[int, int, int], int]:
    """The workgroup counts to dispatch for a logical ``grid``, and the split stride.

    A grid within ``limit`` on every axis runs as is (stride 0). A 1-D grid whose x count
    exceeds it is folded into (S, rows, 1) with rows = ceil(gx / limit) and
    S = ceil(gx / rows) <= limit (fewer than ``rows`` padding workgroups); the shader maps
    workgroup (x, y) back to y * S + x and drops the padding ones. Anything else over the
    limit is refused."""
    gx, gy, gz = (int(a) for a in grid)
    if max(gx, gy, gz) <= limit:
        return (gx, gy, gz), 0
    rows = math.ceil(gx / limit)
    if gy == gz == 1 and rows <= limit:
        stride = math.ceil(gx / rows)
        return (stride, rows, 1), stride
    raise LaunchLimitError(
        f"backend 'wgpu': grid {(gx, gy, gz)} exceeds {limit} workgroups per dimension",
        f"Keep y and z at most {limit} (an x count above it is split only when y == z == "
        f"1, up to {limit * limit}), or use larger workgroups.")


@dataclass(eq=False)
class Kernel:
    """A compiled compute pipeline of one device generation."""

    lowered: Lowered
    module: Any
    layout: Any          # the explicit bind group layout
    pipeline: Any
    generation: int
    key: str | None = None


@dataclass
class _Transient:
    """The buffers and bind group of one launch shape, kept for the next one like it."""

    storage: list[Any]  # one per lowered buffer
    params: Any
    status: Any
    bind_group: Any

    @property
    def nbytes(self) -> int:
        return sum(buf.size for buf in self.buffers())

    def buffers(self) -> list[Any]:
        return [*self.storage, self.params, self.status]


def _destroy(buffers: Sequence[Any]) -> None:
    for buf in buffers:
        with contextlib.suppress(Exception):  # best effort: the device may be gone
            buf.destroy()


def _summary(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


class Device:
    """One wgpu device with its probed capabilities and pipeline cache. Thread-safe."""

    def __init__(self, adapter: Any = None, *, cache_size: int = 256, probe: bool = True) -> None:
        self._lock = threading.RLock()
        self.adapter = adapter if adapter is not None else request_adapter()
        self.facts = adapter_facts(self.adapter)
        self.software = bool(self.facts["software_adapter"])
        self.requested_features = tuple(f for f in OPTIONAL_FEATURES
                                        if f in self.adapter.features)
        adapter_limits = self.adapter.limits
        self.requested_limits = {k: int(adapter_limits[k]) for k in USED_LIMITS
                                 if k in adapter_limits}
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Kernel] = OrderedDict()
        self.hits = self.misses = 0
        self.probes: dict[str, str] = {}
        self.max_loop_trip: int | None = SOFTWARE_LOOP_TRIP if self.software else None
        self.closed = False
        self._open()
        if probe:
            self.probe()

    # -- device ---------------------------------------------------------------------------

    def _open(self) -> None:
        try:
            device = self.adapter.request_device_sync(
                label="vyre", required_features=list(self.requested_features),
                required_limits=dict(self.requested_limits))
        except Exception as exc:
            raise UnsupportedFeatureError(
                f"adapter {self.name!r} refused a device with features "
                f"{list(self.requested_features)}: {_summary(exc)}",
                "Check `vyre doctor`; update the GPU driver, or route to another "
                "backend.") from exc
        self.device = device
        self.queue = device.queue
        self.features = frozenset(str(f) for f in device.features)
        self.limits = {str(k): v for k, v in dict(device.limits).items()}
        self.generation = next(_generations)
        self.lost_reason: str | None = None
        self._cache.clear()
        self._readback: Any = None
        self._query: tuple[Any, Any] | None = None
        self._kept: OrderedDict[tuple, _Transient] = OrderedDict()  # (of this device)
        self._kept_bytes = 0
        self._timestamp_period = self._read_timestamp_period()

    def _read_timestamp_period(self) -> float:
        """Nanoseconds per timestamp tick (wgpu-native resolves raw ticks)."""
        try:
            from wgpu.backends.wgpu_native._api import libf
            period = float(libf.wgpuQueueGetTimestampPeriod(self.queue._internal))
            return period if period > 0 else 1.0
        except Exception:
            return 1.0

    @property
    def name(self) -> str:
        return self.facts.get("device") or self.facts.get("description") or "unknown"

    @property
    def timestamps(self) -> bool:
        return "timestamp-query" in self.features

    def limit(self, name: str) -> int:
        return int(self.limits[name])

    def capabilities(self) -> dict[str, Any]:
        """Capabilities fields as probed on this device (see ``probe``)."""
        return {
            "supports_subgroup_ops": False,  # the lowering emits no subgroup operations
            "supports_f16": self.probes.get("f16") == "passed",
            "supports_f64": self.probes.get("f64") == "passed",
            "max_workgroup_size": (self.limit("max-compute-workgroup-size-x"),
                                   self.limit("max-compute-workgroup-size-y"),
                                   self.limit("max-compute-workgroup-size-z")),
            "max_invocations_per_workgroup": self.limit("max-compute-invocations-per-workgroup"),
            "max_workgroups_per_dimension": self.limit("max-compute-workgroups-per-dimension"),
            "subgroup_size": None,
            "max_storage_buffer_bytes": min(self.limit("max-storage-buffer-binding-size"),
                                            self.limit("max-buffer-size")),
            "max_workgroup_memory_bytes": self.limit("max-compute-workgroup-storage-size"),
        }

    def profile(self) -> dict[str, Any]:
        """Adapter identity, limits, features and probe results (plain data)."""
        facts: dict[str, Any] = dict(self.facts)
        facts.update({
            "limits": {k: int(self.limits[k]) for k in USED_LIMITS if k in self.limits},
            "features": sorted(self.features),
            "probes": dict(self.probes),
            "timestamp_query": self.timestamps,
            "wgpu_version": str(getattr(wgpu_module(), "__version__", "unknown")),
            "mesa_shader_cache_dir": os.environ.get("MESA_SHADER_CACHE_DIR", ""),
            "device_generation": self.generation,
            # 1-D grids past the per-dimension limit are split (see launch_grid)
            "max_grid_x": self.limit("max-compute-workgroups-per-dimension") ** 2,
        })
        if self.max_loop_trip is not None:
            facts["max_loop_trip"] = int(self.max_loop_trip)
        return facts

    # -- probes ---------------------------------------------------------------------------

    def probe(self) -> None:
        """Measure what the device really does; the results decide the capabilities."""
        self.probes = {"f16": self._probe_float(DType.F16, "shader-f16"),
                       "f64": self._probe_float(DType.F64, "shader-f64")}
        limit, outcome = self._probe_loop()
        self.probes["loop_trip"] = outcome
        if limit is not None:
            self.max_loop_trip = limit
        elif outcome.startswith("no limit"):
            self.max_loop_trip = None
        else:  # the probe could not run: assume the known driver limit
            self.max_loop_trip = SOFTWARE_LOOP_TRIP if self.software else None

    def _probe_float(self, dtype: DType, feature: str) -> str:
        if feature not in self.features:
            return f"absent: the adapter has no {feature} feature"
        from vyre_core import ir

        k = ir.Kernel(workgroup=(1,))
        a = k.read("a", dtype, count=3)
        b = k.read("b", dtype, count=3)
        out = k.output("out", dtype, count=3)
        with k.loop("i", 0, 3) as i:
            out[i] = a[i] + b[i]
        program = k.build()
        xs, ys = (np.array(v, dtype=dtype.storage_np) for v in _FLOAT_CASES[dtype])
        with np.errstate(over="ignore"):  # 60000 + 10000 overflows f16 to inf, as it must
            expected = (xs + ys).astype(dtype.storage_np)  # numpy adds in the type itself
        try:
            lowered = lower(program)
        except NotImplementedError:
            return "not run: the WGSL lowering is not available"
        except VyreError as exc:
            return f"failed: lowering refused it: {exc.cause}"
        try:
            kernel = self._build(lowered, f"probe-{dtype.value}")
            (got,), _ = self.run_program(kernel, program, [xs, ys], (1, 1, 1))
        except VyreError as exc:
            return f"failed: {exc.cause}"
        if got.tobytes() != expected.tobytes():
            return f"failed: {xs} + {ys} gave {got}, expected {expected}"
        return "passed"

    def _probe_loop(self) -> tuple[int | None, str]:
        """Run one loop of LOOP_PROBE_TRIPS iterations: a driver that stops loops early
        (lavapipe does, silently) shows its budget in the count."""
        lowered = Lowered(_LOOP_PROBE, (BufferBinding("trips", 0, "read", 4),
                                             BufferBinding("counted", 1, "read_write", 4)),
                          params_binding=2, params_words=8, status_binding=3,
                          features=frozenset())
        try:
            kernel = self._build(lowered, "probe-loop")
            (counted,), _ = self.run(kernel, [np.array([LOOP_PROBE_TRIPS], np.uint32), None],
                                     [1, 1], (1, 1, 1), read=[False, True])
        except VyreError as exc:
            return None, f"failed: {exc.cause}"
        count = int(np.frombuffer(counted, np.uint32)[0])
        if count >= LOOP_PROBE_TRIPS:
            return None, f"no limit observed up to {LOOP_PROBE_TRIPS} iterations"
        return count, f"a loop of {LOOP_PROBE_TRIPS} iterations stopped after {count}"

    # -- errors ---------------------------------------------------------------------------

    def fail(self, exc: BaseException, during: str, *, compiling: bool = False,
              wgsl: str | None = None) -> VyreError:
        """``exc`` from wgpu as a VyreError; marks the device lost when it says so."""
        if isinstance(exc, VyreError):
            return exc
        text = str(exc).strip()
        if self.lost_reason is None and _LOST.search(text):
            self.lost_reason = _summary(exc)
        if self.lost_reason is not None:
            return DeviceLostError(
                f"backend 'wgpu': the device on {self.name!r} was lost during {during} "
                f"({self.lost_reason})",
                "Dispatch again: the worker recovers the device (try_recover) or restarts.",
                generation=self.generation)
        if type(exc).__name__ == "GPUOutOfMemoryError" or isinstance(exc, MemoryError):
            return DeviceOutOfMemoryError(f"backend 'wgpu': out of device memory during "
                                          f"{during}: {_summary(exc)}")
        if compiling:
            details = {"wgsl": wgsl} if wgsl is not None else {}
            return KernelCompileError(
                f"backend 'wgpu': {during} failed: {type(exc).__name__}: {text}",
                "This is a bug in the vyre-wgpu lowering: report the program's wire bytes "
                "with this message. Meanwhile run the program on another backend "
                "(backend='reference').", **details)
        return DispatchError(f"backend 'wgpu': {during} failed: {type(exc).__name__}: {text}",
                             "Check it against the reference (`vyre run TARGET --backend wgpu "
                             "--shadow`) and report the program's wire bytes with this "
                             "message.")

    def _check_usable(self) -> None:
        if self.closed:
            raise DispatchError("backend 'wgpu': the device was shut down",
                                "Prepare the backend again (vyre_prepare) before using it.")
        if self.lost_reason is not None:
            raise DeviceLostError(
                f"backend 'wgpu': the device on {self.name!r} is lost ({self.lost_reason})",
                "Dispatch again: the worker recovers the device (try_recover) or restarts.",
                generation=self.generation)

    # -- compile --------------------------------------------------------------------------

    def check_program(self, program: Program) -> None:
        """Refuse what this device would run wrongly: f16/f64 that failed the probe, and
        a loop whose static trip count exceeds the driver's silent loop budget (as
        routing does). Loops nested or in sequence share that budget, but how much of it
        they use depends on the driver's unrolling, so those are caught at run time: the
        kernel's status word flags a loop cut short (see ``run``)."""
        req = program.requirements()
        for dtype in ("f16", "f64"):
            if dtype in req.features and self.probes.get(dtype) != "passed":
                raise UnsupportedFeatureError(
                    f"backend 'wgpu' on {self.name!r} does not run {dtype} "
                    f"({self.probes.get(dtype, 'not probed')})",
                    f"Route the program to a backend with supports_{dtype}, e.g. "
                    "backend='reference'.")
        limit, bound = self.max_loop_trip, req.loop_trip_bound
        if limit is None or bound is None or bound <= limit:
            return  # run-time bounds and shared budgets: guarded by the status word (run)
        raise UnsupportedFeatureError(
            f"backend 'wgpu' on {self.name!r} (a software adapter) silently stops every "
            f"invocation after {limit} loop iterations; this program has a loop of {bound}",
            "Route it to another backend (omit backend='wgpu' and routing does), or keep "
            f"the loops of one invocation under {limit} iterations in total.")

    def compile_program(self, program: Program, config: DispatchConfig | None = None,
                        version: str = __version__) -> Kernel:
        """The cached kernel of ``program`` (lowered, checked and built on a miss)."""
        config = config or DispatchConfig()
        key = pipeline_cache_key(program, config, BACKEND_ID, version)

        def make() -> Lowered:
            self.check_program(program)
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
            return self._build(lowered, label)
        return self._cached(key, lambda: lowered, label)

    def _cached(self, key: str, make: Callable[[], Lowered], label: str) -> Kernel:
        with self._lock:
            self._check_usable()
            kernel = self._cache.get(key)
            if kernel is not None:
                self.hits += 1
                self._cache.move_to_end(key)
                return kernel
            self.misses += 1
            kernel = self._build(make(), label)
            kernel.key = key
            self._cache[key] = kernel
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
            return kernel

    def _build(self, lowered: Lowered, label: str = "") -> Kernel:
        wgpu = wgpu_module()
        with self._lock:
            self._check_usable()
            missing = sorted(lowered.features - self.features)
            if missing:
                raise UnsupportedFeatureError(
                    f"backend 'wgpu': the kernel needs {missing}, which the device on "
                    f"{self.name!r} lacks",
                    "Route the program to a backend that reports the feature.")
            storage_max = self.limit("max-storage-buffers-per-shader-stage")
            if len(lowered.buffers) + 1 > storage_max:  # + the status word
                raise UnsupportedFeatureError(
                    f"backend 'wgpu': the kernel binds {len(lowered.buffers) + 1} storage "
                    f"buffers (one is vyre's status word), the device allows {storage_max}",
                    f"Use at most {storage_max - 1} buffers, or route to another backend.")
            entries = []
            for b in lowered.buffers:
                if b.access not in ("read", "read_write"):
                    raise KernelCompileError(f"backend 'wgpu': lowering bound {b.name!r} "
                                             f"with access {b.access!r}")
                entries.append({"binding": b.binding, "visibility": wgpu.ShaderStage.COMPUTE,
                                "buffer": {"type": "read-only-storage" if b.access == "read"
                                           else "storage"}})
            entries.append({"binding": lowered.params_binding,
                            "visibility": wgpu.ShaderStage.COMPUTE,
                            "buffer": {"type": "uniform"}})
            entries.append({"binding": lowered.status_binding,
                            "visibility": wgpu.ShaderStage.COMPUTE,
                            "buffer": {"type": "storage"}})
            stage = "shader module creation"
            try:
                module = self.device.create_shader_module(label=label, code=lowered.wgsl)
                stage = "bind group layout creation"
                layout = self.device.create_bind_group_layout(label=label, entries=entries)
                stage = "pipeline creation"
                pipeline = self.device.create_compute_pipeline(
                    label=label,
                    layout=self.device.create_pipeline_layout(label=label,
                                                              bind_group_layouts=[layout]),
                    compute={"module": module, "entry_point": "main"})
            except Exception as exc:
                raise self.fail(exc, stage, compiling=True, wgsl=lowered.wgsl) from exc
            return Kernel(lowered, module, layout, pipeline, self.generation)

    def cache_snapshot(self) -> CacheSnapshot:
        with self._lock:
            return CacheSnapshot(self.hits, self.misses, len(self._cache))

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
        read: list[bool] = []
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
            read.append(buf.is_output)
        if grid is None:
            grid = abi.infer_grid(program, dict(zip((b.name for b in kernel.lowered.buffers),
                                                    lengths, strict=True)))
        raw, device_ns = self.run(kernel, data, lengths, grid, read=read, timed=timed)
        results = {bb.name: np.frombuffer(r, dtype=declared[bb.name].dtype.storage_np)
                   for bb, r in zip((b for b, rd in zip(kernel.lowered.buffers, read,
                                                        strict=True) if rd), raw, strict=True)}
        return [results[b.name] for b in program.outputs], device_ns

    def run(self, kernel: Kernel, data: Sequence[np.ndarray | None], lengths: Sequence[int],
            grid: Sequence[int], *, read: Sequence[bool], timed: bool = False,
            ) -> tuple[list[bytearray], int | None]:
        """One dispatch of ``kernel``, one entry of ``data``/``lengths``/``read`` per
        ``kernel.lowered.buffers``: ``data`` is uploaded (None: zero-filled), ``lengths``
        are element counts (into the params), ``read`` buffers are read back, trimmed to
        their length. Returns their bytes and device nanoseconds (``timed``).

        When the kernel's status word says the adapter cut a loop short, the outputs are
        discarded and UnsupportedFeatureError is raised."""
        with self._lock:
            self.check_kernel(kernel)
            logical = tuple(int(a) for a in grid)
            dispatch, stride = launch_grid(logical,
                                           self.limit("max-compute-workgroups-per-dimension"))
            created: list[Any] = []
            try:
                results, status, device_ns = self._submit(kernel, data, lengths, read, logical,
                                                          dispatch, stride, timed, created)
            except VyreError:
                self.forget_readback()
                raise
            except Exception as exc:
                self.forget_readback()
                raise self.fail(exc, "dispatch") from exc
            finally:
                for buf in created:
                    with contextlib.suppress(Exception):  # best effort: the device may be gone
                        buf.destroy()
        if status:
            raise self.loop_cut_short("the outputs were discarded")
        return results, device_ns

    def check_kernel(self, kernel: Kernel) -> None:
        """(Under the lock.) The device is usable and ``kernel`` is of its generation."""
        self._check_usable()
        if kernel.generation != self.generation:
            raise PipelineInvalidatedError(
                f"backend 'wgpu': kernel {str(kernel.key)[:12]} was compiled for device "
                f"generation {kernel.generation}, the device is now generation "
                f"{self.generation} (it was lost and recovered)",
                "Compile the program again (Driver.compile) and use the new handle.",
                generation=kernel.generation, backend=BACKEND_ID)

    def loop_cut_short(self, outcome: str) -> UnsupportedFeatureError:
        """The error for a dispatch whose status word says the adapter cut a loop short."""
        trips = self.max_loop_trip
        return UnsupportedFeatureError(
            f"backend 'wgpu' on {self.name!r} cut a loop short"
            + (f" (it stops an invocation after {trips} loop iterations in total)"
               if trips else "") + f"; {outcome}",
            "Run the program on another backend (backend='reference'), or bound its "
            "loops to fewer iterations per invocation.",
            loop_cut_short=True, max_loop_trip=trips)

    def _submit(self, kernel: Kernel, data: Sequence[np.ndarray | None],
                lengths: Sequence[int], read: Sequence[bool], logical: tuple[int, ...],
                dispatch: tuple[int, int, int], stride: int, timed: bool,
                created: list[Any]) -> tuple[list[bytearray], int, int | None]:
        """The buffers and bind group of this (kernel, sizes, grid), made on first use and
        kept while small (``_kept``), then ``submit_pass``: uploads overwrite their
        buffers, every other buffer and the status word are zeroed first, as fresh ones
        would be. ``created`` collects what is not kept, for the caller to destroy."""
        key = None if kernel.key is None else (
            kernel.key, kernel.generation, tuple(lengths), tuple(read), logical)
        kept = None if key is None else self._kept.get(key)
        fresh = kept is None  # (new buffers are zeros already)
        if fresh:
            kept = self._transient(kernel, lengths, read, logical, stride)
            if key is not None and kept.nbytes <= KEEP_BYTES:
                self._keep(key, kept)
            else:
                created.extend(kept.buffers())
        else:
            self._kept.move_to_end(key)
        zeroed = [] if fresh else [kept.status]
        reads = []
        for b, buf, array, n, rd in zip(kernel.lowered.buffers, kept.storage, data, lengths,
                                        read, strict=True):
            if array is not None and array.nbytes > 0:
                self.queue.write_buffer(buf, 0, as_words(array))
            elif not fresh:
                zeroed.append(buf)
            if rd:
                reads.append((buf, n * b.element_bytes))
        return self.submit_pass(kernel, kept.bind_group, dispatch, kept.status, reads, timed,
                                created, zeroed)

    def _transient(self, kernel: Kernel, lengths: Sequence[int], read: Sequence[bool],
                   logical: tuple[int, ...], stride: int) -> _Transient:
        """New buffers (storage, params, status) and their bind group for one launch."""
        usage = wgpu_module().BufferUsage
        lowered = kernel.lowered
        storage, entries = [], []
        try:
            for b, n, rd in zip(lowered.buffers, lengths, read, strict=True):
                size = self.binding_size(b, n)
                buf = self.device.create_buffer(
                    label=b.name, size=size,
                    usage=usage.STORAGE | usage.COPY_DST | (usage.COPY_SRC if rd else 0))
                storage.append(buf)
                entries.append({"binding": b.binding,
                                "resource": {"buffer": buf, "offset": 0, "size": size}})
            params = as_words(params_data(lowered, list(lengths), logical, stride))
            pbuf = self.device.create_buffer(label="vyre-params", size=params.nbytes,
                                             usage=usage.UNIFORM | usage.COPY_DST)
            storage.append(pbuf)
            self.queue.write_buffer(pbuf, 0, params)
            status = self.device.create_buffer(
                label="vyre-status", size=4,
                usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
            storage.append(status)
            bind_group = self.device.create_bind_group(
                layout=kernel.layout, entries=entries + self.own_entries(lowered, pbuf, status))
        except BaseException:
            _destroy(storage)
            raise
        storage = storage[:-2]
        return _Transient(storage, pbuf, status, bind_group)

    def _keep(self, key: tuple, kept: _Transient) -> None:
        self._kept[key] = kept
        self._kept_bytes += kept.nbytes
        while self._kept_bytes > KEEP_TOTAL_BYTES or len(self._kept) > KEEP_LAUNCHES:
            _, old = self._kept.popitem(last=False)
            self._kept_bytes -= old.nbytes
            _destroy(old.buffers())

    def binding_size(self, binding: BufferBinding, count: int) -> int:
        """Bytes bound for ``count`` elements of ``binding``, within the device's limit."""
        size = padded_size(count * binding.element_bytes)
        binding_max = self.limit("max-storage-buffer-binding-size")
        if size > binding_max:
            raise LaunchLimitError(
                f"backend 'wgpu': buffer {binding.name!r} is {size} bytes, the device binds at "
                f"most {binding_max}", "Split the data across several dispatches.")
        return size

    @staticmethod
    def own_entries(lowered: Lowered, params: Any, status: Any) -> list[dict[str, Any]]:
        """The bind group entries of the params uniform and the status word."""
        return [{"binding": lowered.params_binding,
                 "resource": {"buffer": params, "offset": 0, "size": params.size}},
                {"binding": lowered.status_binding,
                 "resource": {"buffer": status, "offset": 0, "size": 4}}]

    def submit_pass(self, kernel: Kernel, bind_group: Any, dispatch: tuple[int, int, int],
                    status: Any, reads: Sequence[tuple[Any, int]], timed: bool,
                    created: list[Any], zeroed: Sequence[Any] = (),
                    ) -> tuple[list[bytearray], int, int | None]:
        """One command buffer (zeroing ``zeroed`` buffers, the compute pass, timestamps,
        copies into the readback buffer), submitted; then map and copy out: the bytes of
        ``reads`` (buffer, bytes to keep), the status word and device nanoseconds."""
        timed = timed and self.timestamps
        encoder = self.device.create_command_encoder()
        for buf in zeroed:
            encoder.clear_buffer(buf, 0, buf.size)
        if timed:
            query_set = self._queries()[0]
            compute = encoder.begin_compute_pass(timestamp_writes={
                "query_set": query_set, "beginning_of_pass_write_index": 0,
                "end_of_pass_write_index": 1})
        else:
            compute = encoder.begin_compute_pass()
        compute.set_pipeline(kernel.pipeline)
        compute.set_bind_group(0, bind_group)
        compute.dispatch_workgroups(*dispatch)
        compute.end()

        return self.submit_and_read(encoder, status, reads, created,
                                    query_set if timed else None)

    def submit_and_read(self, encoder: Any, status: Any, reads: Sequence[tuple[Any, int]],
                        created: list[Any], query_set: Any = None,
                        ) -> tuple[list[bytearray], int, int | None]:
        """(Under the lock.) Finish ``encoder`` with copies of the status word, the pass
        timestamps (when ``query_set``) and ``reads`` (buffer, bytes to keep) into the
        readback buffer, submit it, map once and copy out: their bytes, the status word
        and device nanoseconds. ``created`` takes a readback buffer too large to keep."""
        wgpu = wgpu_module()
        timed = query_set is not None
        # readback layout: [status word, pad][timestamps: 2 x u64][outputs, 8-aligned]
        cursor = 8 + (16 if timed else 0)
        offsets = []
        for buf, _ in reads:
            offsets.append(cursor)
            cursor += (buf.size + 7) & ~7
        readback = self._readback_buffer(cursor)
        encoder.copy_buffer_to_buffer(status, 0, readback, 0, 4)
        if timed:
            resolve = self._queries()[1]
            encoder.resolve_query_set(query_set, 0, 2, resolve, 0)
            encoder.copy_buffer_to_buffer(resolve, 0, readback, 8, 16)
        for (buf, _), offset in zip(reads, offsets, strict=True):
            encoder.copy_buffer_to_buffer(buf, 0, readback, offset, buf.size)
        self.queue.submit([encoder.finish()])

        readback.map_sync(wgpu.MapMode.READ, 0, cursor)
        try:
            mapped = readback.read_mapped(0, cursor, copy=False)
            flag = int(np.frombuffer(bytes(mapped[:4]), np.uint32)[0])
            results = [bytearray(mapped[o:o + nbytes])
                       for (_, nbytes), o in zip(reads, offsets, strict=True)]
            device_ns = None
            if timed:
                begin, end = (int(t) for t in np.frombuffer(bytes(mapped[8:24]), np.uint64))
                if end > begin:
                    device_ns = round((end - begin) * self._timestamp_period)
        finally:
            readback.unmap()
        if readback.size > _READBACK_KEEP:
            self._readback = None
            created.append(readback)
        return results, flag, device_ns

    def read_buffer(self, buf: Any, nbytes: int) -> bytes:
        """(Under the lock.) The first ``nbytes`` of ``buf`` (a COPY_SRC buffer)."""
        size = padded_size(nbytes)
        readback = self._readback_buffer(size)
        encoder = self.device.create_command_encoder()
        encoder.copy_buffer_to_buffer(buf, 0, readback, 0, size)
        self.queue.submit([encoder.finish()])
        readback.map_sync(wgpu_module().MapMode.READ, 0, size)
        try:
            data = bytes(readback.read_mapped(0, size, copy=False)[:nbytes])
        finally:
            readback.unmap()
        if readback.size > _READBACK_KEEP:
            self._readback = None
            readback.destroy()
        return data

    def forget_readback(self) -> None:
        """(Under the lock.) After a failed submission the readback buffer may be left
        mapped: the next one is made fresh."""
        self._readback = None

    def _readback_buffer(self, nbytes: int) -> Any:
        usage = wgpu_module().BufferUsage
        if self._readback is None or self._readback.size < nbytes:
            size = max(4096, 1 << (int(nbytes) - 1).bit_length())
            self._readback = self.device.create_buffer(
                label="readback", size=size, usage=usage.MAP_READ | usage.COPY_DST)
        return self._readback

    def _queries(self) -> tuple[Any, Any]:
        if self._query is None:
            usage = wgpu_module().BufferUsage
            self._query = (self.device.create_query_set(type="timestamp", count=2),
                           self.device.create_buffer(label="timestamps", size=16,
                                                     usage=usage.QUERY_RESOLVE | usage.COPY_SRC))
        return self._query

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
                raise self.fail(exc, "flush") from exc

    def is_lost(self) -> bool:
        """Whether the device is lost: known from a failed call, or found by touching it."""
        with self._lock:
            if self.closed:
                return False
            if self.lost_reason is None:
                try:
                    buf = self.device.create_buffer(label="alive", size=4,
                                                    usage=wgpu_module().BufferUsage.COPY_DST)
                    buf.destroy()
                except Exception as exc:
                    self.fail(exc, "a liveness check")
                    if self.lost_reason is None:  # failed, but not for loss: say so
                        self.lost_reason = _summary(exc)
            return self.lost_reason is not None

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
                adapter = request_adapter()  # the old adapter may be gone with the device
                facts = adapter_facts(adapter)
                same = ("vendor", "device", "backend_type", "adapter_type")
                if any(facts[k] != self.facts[k] for k in same):
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
            self._cache.clear()
            _destroy([buf for kept in self._kept.values() for buf in kept.buffers()])
            self._kept.clear()
            self._readback = self._query = None
            self.device = self.queue = None


def as_words(array: np.ndarray) -> memoryview | np.ndarray:
    """``array``'s bytes padded to whole 4-byte words (write_buffer copies multiples of 4)."""
    array = np.ascontiguousarray(array)
    if array.nbytes % 4 == 0:
        return array
    padded = np.zeros(padded_size(array.nbytes), np.uint8)
    padded[:array.nbytes] = array.reshape(-1).view(np.uint8)
    return padded
