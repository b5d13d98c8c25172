"""What the device really does: f16, f64 and loop-budget probes run on it, the capability
fields and profile they decide, and the programs it refuses because it would run them wrongly."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from vyre_core.errors import UnsupportedFeatureError, VyreError
from vyre_core.ir import Access, Program
from vyre_core.ir.dtypes import DType
from vyre_wgpu import narrow_ints
from vyre_wgpu.adapter import USED_LIMITS, wgpu_module
from vyre_wgpu.buffers import Launch
from vyre_wgpu.lowering import lower
from vyre_wgpu.pipelines import Kernel
from vyre_wgpu.state import DeviceState
from vyre_wgpu.submission import max_grid_workgroups
from vyre_wgpu.wgsl import BufferBinding, Lowered

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

#: One loop of trips[0] iterations counted; params[0].x (0) keeps the
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


#: Every invocation of two 64-wide workgroups writes the subgroup size it sees, its lane,
#: and the sum of 1 over its subgroup (params[0].x, 0, keeps it opaque): vyre forms
#: subgroups of consecutive local indices, so the probe checks the device does the same.
#: (naga has no subgroup lane in a 2-D or 3-D workgroup: vyre's wgpu backend runs
#: subgroup programs in 1-D workgroups only.)
_SUBGROUP_PROBE = """
@group(0) @binding(0) var<storage, read_write> seen: array<u32>;
@group(0) @binding(1) var<uniform> params: array<vec4<u32>, 1>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) index: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_size) size: u32, @builtin(subgroup_invocation_id) lane: u32) {
    let at = (wid.x * 64u + index) * 3u;
    seen[at] = size;
    seen[at + 1u] = lane;
    seen[at + 2u] = subgroupAdd(1u + params[0].x);
}
"""
SUBGROUP_PROBE_WORKGROUPS = 2


class Probed(DeviceState, Protocol):
    """What the probes use of a device (``vyre_wgpu.device.Device`` is one): its state and
    its way of compiling and running kernels."""

    def compile_wgsl(self, lowered: Lowered, key: str | None = None,
                     label: str = "") -> Kernel: ...

    def run_program(self, kernel: Kernel, program: Program, inputs: Sequence[np.ndarray],
                    grid: Sequence[int] | None, *, timed: bool = False,
                    ) -> tuple[list[np.ndarray], int | None]: ...

    def run(self, launch: Launch, *, timed: bool = False,
            ) -> tuple[list[bytearray], int | None]: ...


def assumed_loop_trip(software: bool) -> int | None:
    """The loop budget before (or without) a probe: the known driver limit on software."""
    return SOFTWARE_LOOP_TRIP if software else None


def probe(dev: Probed) -> tuple[dict[str, str], int | None, int | None]:
    """Measure what ``dev`` really does: each probe's outcome, the loop budget, and the
    subgroup size every pipeline runs with (None: no subgroups vyre can use)."""
    probes = {"f16": _probe_float(dev, DType.F16, "shader-f16"),
              "f64": _probe_float(dev, DType.F64, "shader-f64")}
    limit, outcome = _probe_loop(dev)
    probes["loop_trip"] = outcome
    if limit is None and not outcome.startswith("no limit"):
        limit = assumed_loop_trip(dev.software)  # the probe could not run
    subgroup_size, probes["subgroups"] = _probe_subgroups(dev)
    return probes, limit, subgroup_size


def fields(dev: DeviceState) -> dict[str, Any]:
    """Capabilities fields as probed on ``dev``."""
    return {
        "supports_subgroup_ops": dev.subgroup_size is not None,
        "supports_f16": dev.probes.get("f16") == "passed",
        "supports_f64": dev.probes.get("f64") == "passed",
        "max_workgroup_size": (dev.limit("max-compute-workgroup-size-x"),
                               dev.limit("max-compute-workgroup-size-y"),
                               dev.limit("max-compute-workgroup-size-z")),
        "max_invocations_per_workgroup": dev.limit("max-compute-invocations-per-workgroup"),
        "max_workgroups_per_dimension": dev.limit("max-compute-workgroups-per-dimension"),
        # (WGSL cannot choose a size: a device runs only the size it always forms)
        "subgroup_size_range": None if dev.subgroup_size is None else
        (dev.subgroup_size, dev.subgroup_size),
        "max_storage_buffer_bytes": min(dev.limit("max-storage-buffer-binding-size"),
                                        dev.limit("max-buffer-size")),
        "max_workgroup_memory_bytes": dev.limit("max-compute-workgroup-storage-size"),
        "max_loop_trip": dev.max_loop_trip,
    }


def profile(dev: DeviceState) -> dict[str, Any]:
    """Adapter identity, limits, features and probe results (plain data)."""
    facts: dict[str, Any] = dict(dev.facts)
    facts.update({
        "limits": {k: int(dev.limits[k]) for k in USED_LIMITS if k in dev.limits},
        "features": sorted(dev.features),
        "probes": dict(dev.probes),
        "timestamp_query": dev.timestamps,
        "wgpu_version": str(getattr(wgpu_module(), "__version__", "unknown")),
        "mesa_shader_cache_dir": os.environ.get("MESA_SHADER_CACHE_DIR", ""),
        "device_generation": dev.generation,
        # grids past the per-dimension limit are folded (see submission.launch_grid)
        "max_grid_workgroups": max_grid_workgroups(
            dev.limit("max-compute-workgroups-per-dimension")),
    })
    return facts


def refuse_unsupported(dev: DeviceState, program: Program) -> None:
    """Refuse what ``dev`` would run wrongly: f16/f64 that failed the probe, workgroup
    buffers that take more than the device allows as WGSL declares them, and a loop
    whose static trip count exceeds the driver's silent loop budget (as routing does).
    Loops nested or in sequence share that budget, but how much of it they use depends on
    the driver's unrolling, so those are caught at run time: the kernel's status word
    flags a loop cut short (see ``submission.Recorder``)."""
    req = program.requirements()
    for dtype in ("f16", "f64"):
        if dtype in req.features and dev.probes.get(dtype) != "passed":
            raise UnsupportedFeatureError(
                f"backend 'wgpu' on {dev.name!r} does not run {dtype} "
                f"({dev.probes.get(dtype, 'not probed')})",
                f"Route the program to a backend with supports_{dtype}, e.g. "
                "backend='reference'.")
    if "subgroups" in req.features and program.workgroup[1:] != (1, 1):
        raise UnsupportedFeatureError(
            f"backend 'wgpu' runs subgroup operations in 1-D workgroups only; this program's "
            f"workgroup is {program.workgroup} (WGSL does not say how it forms subgroups of "
            "a 2-D or 3-D workgroup)",
            "Route it to another backend (omit backend='wgpu' and routing does), or use a "
            "1-D workgroup and compute 2-D indices from global_id(0).")
    if "subgroups" in req.features and req.subgroup_size != dev.subgroup_size:
        runs = "none" if dev.subgroup_size is None else f"only {dev.subgroup_size}"
        raise UnsupportedFeatureError(
            f"backend 'wgpu' on {dev.name!r} runs subgroups of {runs} lanes; this program "
            f"needs {req.subgroup_size} ({dev.probes.get('subgroups', 'not probed')})",
            "Route it to another backend (omit backend='wgpu' and routing does), or "
            "declare the subgroup size this device runs.")
    # WebGPU counts each workgroup variable rounded up to 16 bytes, and 8/16-bit ones are
    # whole u32 words: a little more than the program's own count, which routing checked
    storage = sum(-(-narrow_ints.declared_bytes(b.dtype, b.count) // 16) * 16
                  for b in program.buffers if b.access is Access.WORKGROUP)
    most = dev.limit("max-compute-workgroup-storage-size")
    if storage > most:
        raise UnsupportedFeatureError(
            f"backend 'wgpu' on {dev.name!r}: the program's workgroup buffers take {storage} "
            f"bytes as WGSL declares them (each rounded up to 16 bytes, 8/16-bit ones to "
            f"whole words), the device allows {most}",
            "Route it to another backend (omit backend='wgpu' and routing does), or make "
            "the workgroup buffers smaller.")
    limit, bound = dev.max_loop_trip, req.loop_trip_bound
    if limit is None or bound is None or bound <= limit:
        return  # run-time bounds and shared budgets: guarded by the status word
    raise UnsupportedFeatureError(
        f"backend 'wgpu' on {dev.name!r} (a software adapter) silently stops every "
        f"invocation after {limit} loop iterations; this program has a loop of {bound}",
        "Route it to another backend (omit backend='wgpu' and routing does), or keep "
        f"the loops of one invocation under {limit} iterations in total.")


def _probe_float(dev: Probed, dtype: DType, feature: str) -> str:
    if feature not in dev.features:
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
        kernel = dev.compile_wgsl(lowered, label=f"probe-{dtype.value}")
        (got,), _ = dev.run_program(kernel, program, [xs, ys], (1, 1, 1))
    except VyreError as exc:
        return f"failed: {exc.cause}"
    if got.tobytes() != expected.tobytes():
        return f"failed: {xs} + {ys} gave {got}, expected {expected}"
    return "passed"


def _probe_subgroups(dev: Probed) -> tuple[int | None, str]:
    """The one subgroup size the device forms subgroups of, in local index order. WGSL
    cannot choose the size, so a device that shows two sizes, or another order, runs
    no vyre subgroup program."""
    if "subgroup" not in dev.features:
        return None, "absent: the adapter has no subgroup feature"
    lanes = 64 * SUBGROUP_PROBE_WORKGROUPS
    lowered = Lowered(_SUBGROUP_PROBE, (BufferBinding("seen", 0, "read_write", 4),),
                      params_binding=1, params_words=8, status_binding=2,
                      features=frozenset({"subgroup"}))
    try:
        kernel = dev.compile_wgsl(lowered, label="probe-subgroups")
        (seen,), _ = dev.run(Launch(kernel, [None], (3 * lanes,),
                                    (SUBGROUP_PROBE_WORKGROUPS, 1, 1), (True,)))
    except VyreError as exc:
        return None, f"failed: {exc.cause}"
    size, lane, count = np.frombuffer(seen, np.uint32).reshape(lanes, 3).T
    sizes = sorted(set(size.tolist()))
    if len(sizes) != 1 or sizes[0] not in {1 << n for n in range(8)} or 64 % sizes[0]:
        return None, f"failed: subgroups of {sizes} lanes, not one power of two up to 128"
    width = sizes[0]
    if lane.tolist() != [i % width for i in range(lanes)] or set(count.tolist()) != {width}:
        return None, f"failed: subgroups of {width} lanes are not consecutive local indices"
    return width, f"passed: subgroups of {width} lanes"


def _probe_loop(dev: Probed) -> tuple[int | None, str]:
    """Run one loop of LOOP_PROBE_TRIPS iterations: a driver that stops loops early
    (lavapipe does, silently) shows its budget in the count."""
    lowered = Lowered(_LOOP_PROBE, (BufferBinding("trips", 0, "read", 4),
                                    BufferBinding("counted", 1, "read_write", 4)),
                      params_binding=2, params_words=8, status_binding=3,
                      features=frozenset())
    try:
        kernel = dev.compile_wgsl(lowered, label="probe-loop")
        (counted,), _ = dev.run(Launch(kernel, [np.array([LOOP_PROBE_TRIPS], np.uint32), None],
                                       (1, 1), (1, 1, 1), (False, True)))
    except VyreError as exc:
        return None, f"failed: {exc.cause}"
    count = int(np.frombuffer(counted, np.uint32)[0])
    if count >= LOOP_PROBE_TRIPS:
        return None, f"no limit observed up to {LOOP_PROBE_TRIPS} iterations"
    return count, f"a loop of {LOOP_PROBE_TRIPS} iterations stopped after {count}"
