"""wgpu backend figures, measured in this process through ``BackendHost`` (no worker
transport in any figure), each next to a baseline measured in the same run:

- per-dispatch overhead of a 4 KiB kernel (saxpy f32 x1024) as a compiled pipeline
  dispatch, p50 over 200 calls, against the reference backend doing the same;
- throughput of saxpy f32 over 16M elements (64 MiB per buffer) as a compiled pipeline
  dispatch, MB/s of input + output bytes, against the reference backend;
- compile time: ``host.compile`` of a program already in the pipeline cache against one
  never seen (a fresh random literal each time), and the same pair with the first
  dispatch included: software adapters (Mesa's lavapipe) JIT the shader at the first
  dispatch, not at pipeline creation, so the compile alone hides most of the cold cost;
- achieved bandwidth of the saxpy kernel on the device (``profile=True``: timestamp
  queries around the compute pass) against a 64 MiB ``copy_buffer_to_buffer`` timed on
  the same device the same way (both count bytes read + written);
- a resident dispatch (``y += a * x`` over two resident 4 KiB buffers, p50) against raw
  wgpu-py dispatching the same WGSL with its buffers and bind group prepared once: a
  pass, a submit and the 4-byte status readback vyre also waits on;
- the cost of IEEE-exact float arithmetic: device time of an ALU-bound f32 kernel as vyre
  lowers it against the same work written as plain WGSL, which the compiler may fold.

Mesa's on-disk shader cache would turn a "cold" first dispatch into a cache load: Mesa
reads ``MESA_SHADER_CACHE_DISABLE`` once, when the process first opens a Vulkan
instance, so it is set (and then restored) around opening the device when wgpu was not
yet loaded in this process; the names of the compile figures say whether that held. The
random literal makes every cold program new to any cache anyway.

The adapter's name is in every wgpu figure's name. The device stays open for the rest of
the process (``BackendHost.shutdown`` would close the backend's process-wide device)."""

from __future__ import annotations

import functools
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

from vyre_benchmarks.harness import Result, reps, samples
from vyre_core import ir
from vyre_core.config import DispatchConfig
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy
from vyre_workers.backend_host import BackendHost

REQUIRES = ("wgpu", "reference")
SMALL = 1024                  # 4 KiB per f32 buffer
BIG = 16 * 1024 * 1024        # 64 MiB per f32 buffer
SMALL_CALLS = 200
SMALL_WARMUP = 20
BIG_REPEAT = 5
COLD_COMPILES = 8
CACHED_COMPILES = 200
COPY_REPEAT = 7


def big_workgroup(host: BackendHost, n: int) -> int:
    """The smallest workgroup (256, 512, ...) whose grid for ``n`` fits one grid axis."""
    caps = host.capabilities()
    workgroup = 256
    while -(-n // workgroup) > caps.max_workgroups_per_dimension:
        workgroup *= 2
    if workgroup > min(caps.max_invocations_per_workgroup, caps.max_workgroup_size[0]):
        raise RuntimeError(f"saxpy x{n} needs a workgroup of {workgroup}, over the limits")
    return workgroup


# -- hosts ----------------------------------------------------------------------------------


@functools.cache
def _wgpu() -> tuple[BackendHost, str, str]:
    """The prepared wgpu host, the adapter's short name, and the Mesa disk cache state."""
    import vyre_wgpu.backend as backend

    host = BackendHost(backend)
    if "wgpu" in sys.modules:  # a Vulkan instance may exist already: Mesa has read its env
        host.prepare()
        mesa = "Mesa cache unknown"
    else:
        previous = os.environ.get("MESA_SHADER_CACHE_DISABLE")
        os.environ["MESA_SHADER_CACHE_DISABLE"] = "true"
        try:
            host.prepare()
        finally:
            if previous is None:
                del os.environ["MESA_SHADER_CACHE_DISABLE"]
            else:
                os.environ["MESA_SHADER_CACHE_DISABLE"] = previous
        mesa = "Mesa cache off" if previous in (None, "true", "1") else "Mesa cache on"
    profile = host.device_profile()
    name = str(profile.get("device") or profile.get("description") or "?").split(" (")[0]
    return host, name, mesa


def facts() -> dict[str, Any]:
    """The adapter the wgpu figures ran on, for the machine facts of ``vyre bench --json``;
    empty when no wgpu figure opened the device."""
    if not _wgpu.cache_info().currsize:
        return {}
    host, _, mesa = _wgpu()
    profile = host.device_profile()
    keep = ("device", "description", "vendor", "adapter_type", "backend_type",
            "software_adapter", "wgpu_version")
    return {"wgpu_adapter": {key: profile.get(key) for key in keep}, "mesa_shader_cache": mesa}


@functools.cache
def _reference() -> BackendHost:
    import vyre_reference.backend as backend

    host = BackendHost(backend)
    host.prepare()
    return host


@functools.cache
def _big_inputs() -> list[np.ndarray]:
    return saxpy_inputs(BIG)


def _check(outputs: Any, inputs: list[np.ndarray]) -> None:
    x, y, a = inputs
    if not np.allclose(outputs[0], a[0] * x + y, rtol=1e-6, atol=0):
        raise AssertionError("saxpy outputs differ from numpy")


# -- 1. per-dispatch overhead ---------------------------------------------------------------


def small_dispatch_overhead() -> Result:
    wgpu, adapter, _ = _wgpu()
    reference = _reference()
    program, inputs = saxpy(SMALL), saxpy_inputs(SMALL)
    medians = {}
    for label, host in (("wgpu", wgpu), ("reference", reference)):
        pipeline = host.compile(program)
        _check(pipeline.dispatch(inputs), inputs)
        medians[label] = statistics.median(
            samples(lambda p=pipeline: p.dispatch(inputs), reps(SMALL_CALLS, 20),
                    reps(SMALL_WARMUP, 5)))
    return Result(f"wgpu[{adapter}] compiled dispatch saxpy 4 KiB p50", medians["wgpu"] * 1e6,
                  "us", "reference compiled dispatch p50", medians["reference"] * 1e6)


# -- 2. throughput at 64 MiB ----------------------------------------------------------------


def big_throughput() -> Result:
    wgpu, adapter, _ = _wgpu()
    reference = _reference()
    inputs = _big_inputs()
    program = saxpy(BIG, big_workgroup(wgpu, BIG))
    moved = sum(a.nbytes for a in inputs) + BIG * 4  # inputs + the output
    rates = {}
    for label, host in (("wgpu", wgpu), ("reference", reference)):
        pipeline = host.compile(program)
        _check(pipeline.dispatch(inputs), inputs)  # also the warm-up
        seconds = statistics.median(samples(lambda p=pipeline: p.dispatch(inputs),
                                            reps(BIG_REPEAT, 1), 0))
        rates[label] = moved / seconds / 1e6
    return Result(f"wgpu[{adapter}] compiled saxpy 64 MiB (in+out)", rates["wgpu"], "MB/s",
                  "reference compiled saxpy 64 MiB", rates["reference"])


# -- 3. compile, cold and cached ------------------------------------------------------------


def _fresh_program(rng: np.random.Generator) -> ir.Program:
    return saxpy(SMALL, bias=float(rng.integers(1, 1 << 24)))  # exact in f32


def _cold_compiles(with_dispatch: bool) -> list[float]:
    """Seconds of ``host.compile`` (and the first dispatch) of programs never seen."""
    host = _wgpu()[0]
    rng = np.random.default_rng()  # fresh entropy: new to every cache, across runs too
    inputs = saxpy_inputs(SMALL)
    out = []
    for n in range(reps(COLD_COMPILES, 2) + 1):  # the first one is a warm-up
        program = _fresh_program(rng)
        before = host.pipeline_cache_snapshot()
        start = time.perf_counter()
        pipeline = host.compile(program)
        if with_dispatch:
            pipeline.dispatch(inputs)
        seconds = time.perf_counter() - start
        after = host.pipeline_cache_snapshot()
        assert (after.misses, after.hits) == (before.misses + 1, before.hits), (before, after)
        if n:
            out.append(seconds)
    return out


def _cached_compiles(with_dispatch: bool) -> list[float]:
    """Seconds of ``host.compile`` (and a dispatch) of a program already compiled."""
    host = _wgpu()[0]
    program, inputs = _fresh_program(np.random.default_rng()), saxpy_inputs(SMALL)
    host.compile(program).dispatch(inputs)  # the miss, and the JIT of its first dispatch
    before = host.pipeline_cache_snapshot()
    n, warmup = reps(CACHED_COMPILES, 20), reps(SMALL_WARMUP, 5)
    if with_dispatch:
        seconds = samples(lambda: host.compile(program).dispatch(inputs), n, warmup)
    else:
        seconds = samples(lambda: host.compile(program), n, warmup)
    after = host.pipeline_cache_snapshot()
    calls = n + warmup
    assert (after.misses, after.hits) == (before.misses, before.hits + calls), (before, after)
    return seconds


def compile_cached_vs_cold() -> Result:
    _, adapter, mesa = _wgpu()
    cold = statistics.median(_cold_compiles(with_dispatch=False))
    cached = statistics.median(_cached_compiles(with_dispatch=False))
    return Result(f"wgpu[{adapter}] compile, cached p50", cached * 1e3, "ms",
                  f"cold compile p50 ({mesa})", cold * 1e3)


def first_result_cached_vs_cold() -> Result:
    _, adapter, mesa = _wgpu()
    cold = statistics.median(_cold_compiles(with_dispatch=True))
    cached = statistics.median(_cached_compiles(with_dispatch=True))
    return Result(f"wgpu[{adapter}] compile+dispatch 4 KiB, cached", cached * 1e3, "ms",
                  f"cold compile+1st dispatch ({mesa})", cold * 1e3)


# -- 4. achieved bandwidth against the device's copy bandwidth ------------------------------


def _copy_seconds(nbytes: int) -> tuple[float, str]:
    """Median seconds of one ``copy_buffer_to_buffer`` of ``nbytes`` on the wgpu device:
    between the end-of-pass timestamps of an empty compute pass before and after it when
    the device has timestamp queries, else wall time around submit and wait."""
    import wgpu

    import vyre_wgpu.backend as backend

    host = _wgpu()[0]
    dev = backend.device()
    gpu, usage = dev.device, wgpu.BufferUsage
    src = gpu.create_buffer(label="bench-src", size=nbytes, usage=usage.COPY_SRC)
    dst = gpu.create_buffer(label="bench-dst", size=nbytes, usage=usage.COPY_DST)
    timed = dev.timestamps
    made = [src, dst]
    if timed:
        queries = gpu.create_query_set(type="timestamp", count=2)
        resolve = gpu.create_buffer(size=16, usage=usage.QUERY_RESOLVE | usage.COPY_SRC)
        readback = gpu.create_buffer(size=16, usage=usage.MAP_READ | usage.COPY_DST)
        made += [resolve, readback]
        period = getattr(dev, "_timestamp_period", 1.0)  # the device layer's ns per tick

    def once() -> float:
        encoder = gpu.create_command_encoder()
        if timed:  # end-of-pass writes wait for all earlier work (bottom of pipe)
            encoder.begin_compute_pass(timestamp_writes={
                "query_set": queries, "end_of_pass_write_index": 0}).end()
        encoder.copy_buffer_to_buffer(src, 0, dst, 0, nbytes)
        if timed:
            encoder.begin_compute_pass(timestamp_writes={
                "query_set": queries, "end_of_pass_write_index": 1}).end()
            encoder.resolve_query_set(queries, 0, 2, resolve, 0)
            encoder.copy_buffer_to_buffer(resolve, 0, readback, 0, 16)
        start = time.perf_counter()
        gpu.queue.submit([encoder.finish()])
        if not timed:
            host.flush()
            return time.perf_counter() - start
        readback.map_sync(wgpu.MapMode.READ)
        try:
            begin, end = np.frombuffer(readback.read_mapped(copy=True), np.uint64)
        finally:
            readback.unmap()
        return (int(end) - int(begin)) * period / 1e9

    try:
        once()  # warm-up (and wgpu's lazy zero-fill of the new buffers)
        seconds = statistics.median(once() for _ in range(reps(COPY_REPEAT, 2)))
    finally:
        for buf in made:
            buf.destroy()
    return seconds, "timestamps" if timed else "wall"


def device_bandwidth() -> Result:
    wgpu, adapter, _ = _wgpu()
    inputs = _big_inputs()
    program = saxpy(BIG, big_workgroup(wgpu, BIG))
    config = DispatchConfig(profile=True)
    pipeline = wgpu.compile(program)
    _check(pipeline.dispatch(inputs), inputs)  # compiled and JITted: not in the figure
    device_ns = []
    for _ in range(reps(BIG_REPEAT, 2)):
        timing = wgpu.dispatch(program, inputs, config).timing
        if timing is None or timing.device_ns is None:
            raise RuntimeError(f"wgpu on {adapter!r} gave no device time (no timestamps)")
        device_ns.append(timing.device_ns)
    moved = sum(a.nbytes for a in inputs) + BIG * 4  # read x, y, a; write out
    kernel = moved / (statistics.median(device_ns) / 1e9) / 1e9
    copy_seconds, how = _copy_seconds(BIG * 4)
    copy = 2 * BIG * 4 / copy_seconds / 1e9  # read + write
    return Result(f"wgpu[{adapter}] saxpy 64 MiB on device (r+w)", kernel, "GB/s",
                  f"copy_buffer_to_buffer 64 MiB ({how})", copy)



# -- 5. resident dispatch against raw wgpu-py -----------------------------------------------


def axpy_into(n: int) -> ir.Program:
    """``y[i] = y[i] + 0.5 * x[i]``: y read_write, so repeated dispatches chain."""
    k = ir.Kernel(workgroup=(256,))
    x = k.read("x", ir.f32)
    y = k.read_write("y", ir.f32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        y[i] = y[i] + x[i] * 0.5
    return k.build()


def _raw_resident_seconds(program: ir.Program, x: np.ndarray, y: np.ndarray) -> list[float]:
    """Raw wgpu-py on the backend's device: the pipeline vyre compiled ``program`` to
    (same WGSL, same layout), its buffers, params and bind group made once; each call
    encodes one pass, submits and maps the status word back. Checks the result against
    numpy."""
    import wgpu

    import vyre_wgpu.backend as backend
    from vyre_wgpu import __version__
    from vyre_wgpu.lowering import params_data
    from vyre_wgpu.submission import launch_grid, read_buffer

    dev = backend.device()
    gpu, usage = dev.device, wgpu.BufferUsage
    kernel = dev.compile_program(program, DispatchConfig(), __version__)  # (cached: shared)
    lowered, pipeline = kernel.lowered, kernel.pipeline
    n = len(x)
    grid = (-(-n // 256), 1, 1)
    dispatch, stride = launch_grid(grid, dev.limit("max-compute-workgroups-per-dimension"))
    made = []

    def buffer(size: int, flags: int, data: np.ndarray | None = None) -> Any:
        buf = gpu.create_buffer(size=size, usage=flags)
        made.append(buf)
        if data is not None:
            gpu.queue.write_buffer(buf, 0, data)
        return buf

    store = usage.STORAGE | usage.COPY_DST | usage.COPY_SRC
    bx, by = buffer(x.nbytes, store, x), buffer(y.nbytes, store, y)
    params = params_data(lowered, [n, n], grid, stride)
    bparams = buffer(params.nbytes, usage.UNIFORM | usage.COPY_DST, params)
    status = buffer(4, usage.STORAGE | usage.COPY_SRC)
    readback = buffer(4, usage.MAP_READ | usage.COPY_DST)
    bound = dict(zip((b.binding for b in lowered.buffers), (bx, by), strict=True))
    bound.update({lowered.params_binding: bparams, lowered.status_binding: status})
    bind_group = gpu.create_bind_group(layout=kernel.layout, entries=[
        {"binding": k, "resource": {"buffer": b, "offset": 0, "size": b.size}}
        for k, b in sorted(bound.items())])

    def once() -> None:
        encoder = gpu.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, bind_group)
        compute.dispatch_workgroups(*dispatch)
        compute.end()
        encoder.copy_buffer_to_buffer(status, 0, readback, 0, 4)
        gpu.queue.submit([encoder.finish()])
        readback.map_sync(wgpu.MapMode.READ)
        readback.unmap()

    try:
        once()
        expected = y + x * np.float32(0.5)
        got = np.frombuffer(read_buffer(dev, by, y.nbytes), np.float32)
        if got.tobytes() != expected.tobytes():
            raise AssertionError("raw wgpu-py result differs from numpy")
        return samples(once, reps(SMALL_CALLS, 20), reps(SMALL_WARMUP, 5))
    finally:
        for buf in made:
            buf.destroy()


def resident_dispatch() -> Result:
    host, adapter, _ = _wgpu()
    program = axpy_into(SMALL)
    x, y = saxpy_inputs(SMALL)[:2]
    handles = []
    for array in (x, y):
        handles.append(host.allocate_resident(array.nbytes))
        host.upload_resident(handles[-1], array.tobytes())
    try:
        host.dispatch_resident(program, handles)
        got = np.frombuffer(host.download_resident(handles[1]), np.float32)
        if got.tobytes() != (y + x * np.float32(0.5)).tobytes():
            raise AssertionError("resident dispatch result differs from numpy")
        vyre = samples(lambda: host.dispatch_resident(program, handles),
                       reps(SMALL_CALLS, 20), reps(SMALL_WARMUP, 5))
    finally:
        for handle in handles:
            host.free_resident(handle)
    raw = _raw_resident_seconds(program, x, y)
    return Result(f"wgpu[{adapter}] resident dispatch 4 KiB p50", statistics.median(vyre) * 1e6,
                  "us", "raw wgpu-py, prepared bind group p50", statistics.median(raw) * 1e6)


# -- 6. the cost of IEEE-exact float arithmetic ---------------------------------------------

ALU_LANES = 1 << 18
ALU_STEPS = 100

#: The same float work as ``_alu_program``, written as plain WGSL: the shader compiler may
#: fold and reassociate it (the baseline of what exactness costs).
_NATIVE_ALU = f"""
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: array<vec4<u32>, 2>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>, 1>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {{
    let i = g.x;
    if (i >= {ALU_LANES}u) {{ return; }}
    var v = x[i];
    for (var j = 0u; j < {ALU_STEPS}u; j = j + 1u) {{
        v = v * 0.999 + 0.001 - v * 0.5 * 0.01;
    }}
    out[i] = v;
}}
"""


def _alu_program() -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    x = k.read("x", ir.f32, ALU_LANES)
    out = k.output("out", ir.f32, ALU_LANES)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < ALU_LANES):
        v = k.let("v", x[i])
        with k.loop("j", 0, ALU_STEPS):
            k.assign(v, v * ir.f32(0.999) + ir.f32(0.001) - v * ir.f32(0.5) * ir.f32(0.01))
        out[i] = v
    return k.build()


def exact_float_cost() -> Result:
    """Device time of an ALU-bound f32 kernel as vyre lowers it (every literal and result
    behind the opaque-zero barrier, IEEE-exact) against the same work as plain WGSL that
    the compiler may fold, both launched the same way on the same device."""
    import vyre_wgpu.backend as backend
    from vyre_wgpu.buffers import Launch
    from vyre_wgpu.wgsl import BufferBinding, Lowered

    host, adapter, _ = _wgpu()
    program = _alu_program()
    x = np.random.default_rng(0).random(ALU_LANES, dtype=np.float32)
    exact, = host.dispatch(program, [x])
    if exact.tobytes() != _reference().dispatch(program, [x])[0].tobytes():
        raise AssertionError("the exact kernel differs from the reference")
    profiled = DispatchConfig(profile=True)
    dev = backend.device()
    kernel = dev.compile_wgsl(Lowered(_NATIVE_ALU, (BufferBinding("x", 0, "read", 4),
                                                    BufferBinding("out", 1, "read_write", 4)),
                                      params_binding=2, params_words=8, status_binding=3,
                                      features=frozenset()), key="bench-native-alu")
    launch = Launch(kernel, [x, None], (ALU_LANES, ALU_LANES), (ALU_LANES // 256, 1, 1),
                    (False, True))
    lowered, native = [], []
    for _ in range(reps(15, 2)):  # in turns: the machine's drift moves both alike
        lowered.append(host.dispatch(program, [x], profiled).timing.device_ns)
        native.append(dev.run(launch, timed=True)[1])
    if None in lowered or None in native:
        raise RuntimeError(f"wgpu on {adapter!r} gave no device time (no timestamps)")
    return Result(f"wgpu[{adapter}] f32 ALU kernel, IEEE-exact lowering, device p50",
                  statistics.median(lowered) / 1e6, "ms",
                  "the same as plain WGSL (compiler may fold)", statistics.median(native) / 1e6)


BENCHMARKS = [small_dispatch_overhead, big_throughput, compile_cached_vs_cold,
              first_result_cached_vs_cold, device_bandwidth, resident_dispatch,
              exact_float_cost]
