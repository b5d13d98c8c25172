"""The cpu backend behind the contract: programs compiled to native code with numba
(``compiler.py``), run over workgroups on one thread or, for a large launch, on the
worker's threads (``threads.py``: by default the cores it may use).
Registration imports numpy only; numba is imported in the worker, at the first compile."""

from __future__ import annotations

import functools
import os
import sys
import time
from typing import Any

import numpy as np

from vyre_core import cancel
from vyre_core.contract import (
    CacheSnapshot,
    Capabilities,
    DeviceInfo,
    SequenceRun,
    TimedDispatch,
    Timing,
    hookimpl,
)
from vyre_core.contract.types import wall_clock_ns
from vyre_core.host_memory import HostMemory
from vyre_core.ir import Access, Program
from vyre_core.ir.requirements import ALL_OPS
from vyre_core.limits import NO_GRID_LIMIT
from vyre_core.mathlib.library import version as math_library_version
from vyre_core.sequence.run import step_config
from vyre_cpu import __version__
from vyre_cpu.threads import configured, parallel_worth, worth_measuring

VYRE_CONTRACT = 1

#: What the compiled kernels honour: every operation (workgroup memory and barriers in
#: lockstep per workgroup), f16 (rounded to binary16 after every operation) and f64.
CLAIMS = {
    "supports_f16": True,
    "supports_f64": True,
    "max_workgroup_size": (1024, 1024, 64),
    "max_invocations_per_workgroup": 1024,
    "max_workgroups_per_dimension": NO_GRID_LIMIT,  # no per-axis limit (docs/semantics.md)
    "max_storage_buffer_bytes": 2**31,
    "max_workgroup_memory_bytes": 1 << 20,
    "supported_ops": ALL_OPS,
    # subgroups of any size a program may declare (V034): lanes run side by side
    "supports_subgroup_ops": True,
    "subgroup_size_range": (1, 128),
    # native loops on the host, never a GPU API on a CPU: no probe can demote it, so
    # routing starts it without probing it apart first
    "extra": {"software_adapter": False},
}


@hookimpl
def vyre_backend_id() -> str:
    return "cpu"


@hookimpl
def vyre_backend_version() -> str:
    return __version__


#: Where routing tries it: after the device backends (wgpu: 100), before the reference
#: interpreter (900), whose bytes it gives and which it outruns on every example.
PRECEDENCE = 500


@hookimpl
def vyre_backend_precedence() -> int:
    return PRECEDENCE


@hookimpl
def vyre_backend_claims() -> dict:
    return dict(CLAIMS)


@hookimpl
def vyre_pipeline_cache_snapshot() -> CacheSnapshot:
    compiler = sys.modules.get("vyre_cpu.compiler")  # (not loaded: nothing compiled yet,
    # and counting is no reason to import numba)
    return CacheSnapshot(*compiler.cache_counts()) if compiler else CacheSnapshot(0, 0, 0)


@hookimpl
def vyre_lowers_math_library(version: str) -> bool:
    """The library this process has: its functions become numba helpers written from
    their own IR (``vyre_cpu.mathlib``), the same operations as written out."""
    return version == math_library_version()


@hookimpl
def vyre_devices() -> list[DeviceInfo]:
    """The host's CPU: every core runs the kernels, in host memory."""
    return [DeviceInfo.host_cpu("numba")]


@hookimpl
def vyre_prepare() -> None:
    """Check the thread count and the vector width before the first request: a bad
    ``VYRE_CPU_THREADS`` (or ``PoolOptions(threads=...)``) or ``VYRE_CPU_VECTOR_BITS``
    stops the worker's start with its reason and Fix."""
    from vyre_cpu import vectors

    _threads()
    vectors.widen()


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


# -- Resident buffers: the worker's host memory, which the kernels run on in place --------

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
    """The kernel runs on the buffers' own memory: nothing is copied in or out. A buffer
    it only reads that is also bound to a written one is read as it was before the
    dispatch (as the reference reads it)."""
    bound = _memory.bind(program, handles)
    by_name = dict(zip(bound, handles, strict=True))
    written = {by_name[b.name] for b in program.outputs}
    inputs = [bound[b.name].copy() if b.access is not Access.READ_WRITE
              and by_name[b.name] in written else bound[b.name] for b in program.inputs]
    start = wall_clock_ns()
    Pipeline(program, config).dispatch(inputs, config,
                                       into=[bound[b.name] for b in program.outputs])
    return TimedDispatch([], Timing(wall_clock_ns() - start, None, config.label))


@hookimpl
def vyre_dispatch_sequence(sequence, inputs, resident, config) -> SequenceRun:
    """Every step's kernel over arrays in this process; resident buffers are read in place
    and written back once, at the end. Kernels not compiled yet are compiled first, side
    by side (``vyre_cpu.ahead``)."""
    from vyre_cpu.ahead import for_sequence

    for_sequence(sequence, _threads())
    return _memory.run_sequence(
        sequence, inputs, resident, config,
        lambda step, step_inputs, into: Pipeline(step.program, config).dispatch(
            step_inputs, step_config(config, step.grid), into))


@hookimpl
def vyre_capabilities() -> Capabilities:
    import numba

    from vyre_cpu import vectors

    return Capabilities.from_claims({**CLAIMS, "extra": {
        **CLAIMS["extra"], "cores": os.cpu_count(), "threads": _threads(),
        "vector_bits": vectors.bits(),
        "numba": numba.__version__, "threading_layer": _threading_layer()}})


def _threading_layer() -> str:
    import numba

    try:
        return numba.threading_layer()
    except ValueError:  # (none chosen until the first parallel kernel runs)
        return "not started"


class Pipeline:
    """One program compiled (at construction, or loaded from the cache) for this
    backend: dispatches run its kernel over the bound inputs, on one thread or, for a
    launch large enough to gain from them (``threads.parallel_worth``), on the worker's
    threads (``threads.configured``)."""

    def __init__(self, program: Program, config: Any) -> None:
        from vyre_cpu.compiler import compiled

        self.program = program  # (as it runs: nothing else of the config changes its code)
        self.compiled = compiled(program, config.grid_override, _threads())
        self.compile_seconds = self.compiled.seconds
        self._f16 = any(b[3] == np.float16 for b in self.compiled.layout.buffers)

    def dispatch(self, inputs: list[np.ndarray], config: Any,
                 into: list[np.ndarray | None] | None = None) -> list[np.ndarray]:
        """Run the kernel over ``inputs`` (input ABI order) with ``config``'s grid; each
        output is a new array, or its array of ``into`` (output ABI order; None: a new
        one) written in place. A read_write buffer whose target is its input itself is
        updated in place, with no copy."""
        layout = self.compiled.layout
        arrays = []
        for access, source, target, dtype, count in layout.buffers:
            place = None if into is None else into[target]
            if access is Access.OUTPUT:
                if place is None:
                    array = np.zeros(count, dtype=dtype)
                else:
                    array = place
                    array.fill(0)
            elif access is Access.READ_WRITE:
                given = inputs[source]
                if place is None:
                    array = np.array(given, dtype=dtype)
                else:
                    array = place
                    if array is not given:
                        np.copyto(array, given)
            else:
                array = inputs[source]
                if array.flags.writeable or array.dtype != dtype:  # (the host's views are
                    array = np.asarray(array, dtype=dtype).view()  # read-only already)
                    array.flags.writeable = False  # (the kernel's signature: read-only)
            arrays.append(array)
        gx, gy, gz = config.grid_override
        threads, workgroups = _threads(), gx * gy * gz
        kernel = self.compiled.parallel() if parallel_worth(
            workgroups, layout.lanes, layout.loops, threads,
            self.compiled.seconds_each) else None
        threaded = kernel is not None
        if threaded:
            _use_threads(threads)
        else:
            kernel = self.compiled.kernel
        stop = cancel.words()
        words = [_words(a) for a in arrays] if self._f16 else arrays
        # (timed from its second run on one thread: the first pays numba's first call)
        timed = not threaded and self.compiled.ran_serially and worth_measuring(
            workgroups, layout.loops, threads)
        started = time.thread_time() if timed else 0.0
        if kernel(gx, gy, gz, stop, *words):  # (an assumption failed: workgroups undone)
            compiling = time.thread_time()  # (its fallback is compiled the first time: no
            fallback = self.compiled.fallback(threaded)  # part of the run's time, which
            started += time.thread_time() - compiling  # decides when threads pay)
            fallback(gx, gy, gz, stop, *words)
        self.compiled.ran_serially |= not threaded
        cancel.check()  # (stopped early: what it computed is not a result, nor its time)
        if timed:
            self.compiled.seconds_each = (time.thread_time() - started) / (
                workgroups * layout.lanes)
        return [arrays[i] for i in layout.outputs]


def _words(array: np.ndarray) -> np.ndarray:
    """What the kernel takes: the array itself, or an f16 array's 16-bit words."""
    return array.view(np.uint16) if array.dtype == np.float16 else array


@functools.cache
def _threads() -> int:
    """The worker's thread count (checked at ``vyre_prepare``: a bad setting stops the
    worker's start with its reason)."""
    return configured()


def _use_threads(threads: int) -> None:
    """The parallel kernel's threads: numba's setting is the calling thread's own."""
    import numba

    wanted = min(threads, numba.config.NUMBA_NUM_THREADS)
    if numba.get_num_threads() != wanted:
        numba.set_num_threads(wanted)
