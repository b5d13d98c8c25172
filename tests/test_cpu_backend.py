"""The cpu backend (plugins/vyre-cpu): every corpus program compiled with numba against its
expected outputs (workgroup memory and barriers in lockstep, f16 rounded by hand); the
kernel cache on disk reused by a second compile and left alone when it cannot be
written; a program numba cannot take refused with its fingerprint, never a crash;
resident buffers run on in place; and, through a Driver, routing picks it ahead of the
reference with the same bytes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import vyre_cpu.backend
import vyre_cpu.mathlib
from vyre_cpu import codegen, compiler

from vyre_core import Driver, ir
from vyre_core.compare import first_divergence
from vyre_core.config import DispatchConfig
from vyre_core.conformance.corpus import CASES
from vyre_core.errors import InvalidInputError, InvalidProgramError
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy
from vyre_workers.backend_host import BackendHost


def _refused(case) -> str | None:
    return codegen.refusal(case.program)


@pytest.fixture(scope="module")
def host():
    with BackendHost(vyre_cpu.backend) as host:
        yield host


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_cpu_matches_corpus(host, c):
    actual = host.dispatch(c.program, c.inputs,
                           DispatchConfig(grid_override=c.grid, constants=c.constants))
    for buffer, expected, got in zip(c.program.outputs, c.expected, actual, strict=True):
        divergence = first_divergence(expected, got, buffer.dtype, c.ulp)
        assert divergence is None, (
            f"case {c.name}, output {buffer.name!r} ({buffer.dtype.value}): {divergence}")


def test_it_runs_every_corpus_program():
    assert {c.name: _refused(c) for c in CASES if _refused(c) is not None} == {}


def test_cpu_passes_the_honesty_probes_through_its_worker():
    """The capability-honesty probes, judged by the runner ``vyre conform`` and the kit
    use, through the cpu's own worker: every claimed probe passes, the over-limit
    workgroup is the one unclaimed (as ``vyre conform`` reported it on every backend)."""
    from vyre_core.conformance import honesty
    from vyre_core.conformance.runner import run_any

    with Driver() as drv:
        caps = drv.probe("cpu")
        verdicts = {r.case: r.verdict for r in (run_any(drv, "cpu", caps, case)
                                                for case in honesty.probes(caps))}
    assert len(verdicts) == len(honesty.PROBES)
    assert sorted(verdicts.values()) == ["pass"] * (len(verdicts) - 1) + ["unclaimed"], verdicts


def test_a_kernel_compiled_once_is_loaded_from_the_disk_cache_after(monkeypatch, tmp_path):
    monkeypatch.setenv(compiler.ENV, str(tmp_path))
    monkeypatch.setattr(compiler, "_loaded", compiler.collections.OrderedDict())
    program = saxpy(256, bias=1.25)  # (a program no other test compiles)
    first = vyre_cpu.backend.Pipeline(program, DispatchConfig())
    assert not first.compiled.cached and first.compile_seconds > 0
    made, = tmp_path.glob("vyre_cpu_kernel_*.py")
    assert made.stem.endswith(compiler.generator_digest())
    compiler._loaded.clear()  # (as a new process would: nothing in memory)
    compiler.sys.modules.pop(next(iter(tmp_path.glob("*.py"))).stem, None)
    second = vyre_cpu.backend.Pipeline(program, DispatchConfig())
    assert second.compiled.cached and second.compile_seconds < first.compile_seconds


def test_a_changed_helper_names_new_kernels_instead_of_loading_stale_ones(monkeypatch):
    """numba's cache checks only the kernel file's stamp; the helpers compiled into it
    (runtime/) and the code that writes it are part of its name."""
    before = compiler.generator_digest.__wrapped__()
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: real(self) + (
        b"# changed" if self.name == "floats.py" else b""))
    assert compiler.generator_digest.__wrapped__() != before


def test_a_cache_directory_that_cannot_be_written_costs_a_compile_not_a_failure(
        monkeypatch, tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the directory should be")
    monkeypatch.setenv(compiler.ENV, str(blocked / "kernels"))
    monkeypatch.setattr(compiler, "_loaded", compiler.collections.OrderedDict())
    program = saxpy(256, bias=2.5)
    data = saxpy_inputs(256, 1)
    out, = vyre_cpu.backend.Pipeline(program, DispatchConfig()).dispatch(
        data, DispatchConfig(grid_override=(1, 1, 1)))
    from vyre_reference import run

    assert out.tobytes() == run(program, data)[0].tobytes()
    assert "compiling in memory" in caplog.text
    # the math library's helpers too, and a kernel that imports them (by module name)
    compiler.helpers_module.cache_clear()
    compiler.sys.modules.pop(vyre_cpu.mathlib.MODULE, None)
    x = np.linspace(-10, 10, 256, dtype=np.float32)
    out, = vyre_cpu.backend.Pipeline(exp2_calls(8), DispatchConfig()).dispatch(
        [x], DispatchConfig(grid_override=(4, 1, 1)))
    assert out.tobytes() == run(exp2_calls(8), [x])[0].tobytes()


def exp2_calls(count: int, dtype: ir.DType = ir.f32) -> ir.Program:
    """``count`` calls of ``exp2``, each on the last one's result."""
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", dtype), k.output("out", dtype, 256)
    i = k.let("i", ir.global_id())
    acc = k.let("acc", x[i])
    for j in range(count):
        acc += ir.exp2(acc * 0.125 - float(j))
    out[i] = acc
    return k.build()


@pytest.mark.parametrize("dtype", [ir.f32, ir.f16], ids=str)
def test_the_math_library_is_one_helper_its_kernels_call(host, dtype):
    """The cpu backend computes the math library itself (``vyre_lowers_math_library``,
    for this version of it): a kernel with few calls has them written out (vectorized),
    one with more calls one numba helper per function written from its IR
    (``vyre_cpu.mathlib``), not the body at every call; the bytes are the written-out
    program's (the reference's) either way."""
    from vyre_core.mathlib.inline import expand
    from vyre_core.mathlib.library import version
    from vyre_reference import run

    assert vyre_cpu.backend.vyre_lowers_math_library(version()) is True
    assert vyre_cpu.backend.vyre_lowers_math_library("0" * 32) is False
    few = exp2_calls(vyre_cpu.mathlib.INLINE_CALLS, dtype)
    assert "mathlib_exp2" not in codegen.generate(few).source
    program = exp2_calls(8, dtype)
    assert host.runnable(program) is program
    source = codegen.generate(program).source
    assert source.count(f"mathlib_exp2_{dtype.value}(") >= 8
    assert len(source) * 4 < len(codegen.generate(expand(program)).source)
    x = np.linspace(-30, 30, 256).astype(dtype.storage_np)
    # (the bytes of a written-out kernel on one call: numba's compile of written-out calls
    # grows faster than their count, and the rule's bound is checked on the source above)
    for calls in (exp2_calls(1, dtype), program):
        got, = host.dispatch(calls, [x])
        assert got.tobytes() == run(calls, [x])[0].tobytes()


def test_an_expression_as_deep_as_the_ir_allows_compiles(host):
    """The IR allows 200 levels; Python's parser stops at 200 nested parentheses, and the
    kernel's source nests up to three calls per level (an f32 sqrt)."""

    def chain(depth: int) -> ir.Program:
        k = ir.Kernel(workgroup=(64,))
        x = k.read("x", ir.f32, 64)
        out = k.output("out", ir.f32, 64)
        i = k.let("i", ir.global_id(0))
        value = x[i]
        for step in range(depth):
            value = ir.sqrt(value) if step % 2 else value + 1.0
        out[i] = value
        return k.build()

    depth = 150
    while True:  # (the deepest chain the IR takes)
        try:
            chain(depth + 1).to_wire()
        except InvalidProgramError:
            break
        depth += 1
    program = chain(depth)
    data = [np.arange(64, dtype=np.float32)]
    got, = host.dispatch(program, data, DispatchConfig(grid_override=(1, 1, 1)))
    from vyre_reference import run

    assert got.tobytes() == run(program, data)[0].tobytes()


def test_through_a_driver_routing_picks_it_before_the_reference_with_the_same_bytes():
    program, data = saxpy(1 << 16), saxpy_inputs(1 << 16, 7)
    with Driver() as drv:
        assert drv.route(program).backend == "cpu"  # (lavapipe is demoted here)
        out, = drv.dispatch(program, data)
        ref, = drv.dispatch(program, data, backend="reference")
        assert out.tobytes() == ref.tobytes()
        compiled = drv.compile(program)
        assert compiled.backend == "cpu"
        assert compiled.dispatch(data)[0].tobytes() == ref.tobytes()


def test_a_second_process_loads_the_kernel_a_first_compiled_and_compile_says_how_long():
    """Driver.compile reports the worker's compile time; a new Driver (new workers) finds
    the kernel in the disk cache and writes nothing there."""
    program = saxpy(512, bias=0.123456)  # (a program no other test compiles)
    cache = Path(os.environ[compiler.ENV])
    with Driver() as drv:
        first = drv.compile(program, backend="cpu")
    assert first.compile_seconds is not None and first.compile_seconds > 0
    def kernel_files() -> dict[str, int]:  # (the source, and numba's index and code)
        return {p.name: p.stat().st_mtime_ns for p in cache.rglob("*")
                if p.name.startswith(f"vyre_cpu_kernel_{first.key[:32]}")}

    files = kernel_files()
    assert {Path(name).suffix for name in files} >= {".py", ".nbi", ".nbc"}
    with Driver() as drv:
        second = drv.compile(program, backend="cpu")
        out, = second.dispatch(saxpy_inputs(512, 1))
    assert second.compile_seconds is not None and second.key == first.key
    assert kernel_files() == files
    x, y, a = saxpy_inputs(512, 1)
    assert out.tobytes() == (a[0] * x + y + np.float32(0.123456)).tobytes()


def _affine() -> ir.Program:
    """``out = 3 x + acc`` and ``acc += x``: a read buffer, a read_write one, an output."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f32)
    acc = k.read_write("acc", ir.f32)
    out = k.output("out", ir.f32, count=1000)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] * ir.lit(3.0, ir.f32) + acc[i]
        acc[i] = acc[i] + x[i]
    return k.build()


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_resident_buffers_run_in_place_in_the_worker_with_the_reference_bytes(backend):
    """The kernel runs on the worker's memory: acc keeps what each dispatch wrote, and a
    buffer bound both as the read x and the written out is read as it was before."""
    rng = np.random.default_rng(3)
    x0, acc0 = rng.standard_normal(1000, np.float32), rng.standard_normal(1000, np.float32)
    program = _affine()
    with Driver() as drv:
        x, acc, out = (drv.allocate_resident(4000, backend=backend) for _ in range(3))
        x.upload(x0)
        acc.upload(acc0)
        out.upload(np.full(1000, 7, np.float32))
        for _ in range(2):
            drv.dispatch_resident(program, [x, acc, out])
        assert out.download() == (x0 * np.float32(3) + (acc0 + x0)).tobytes()
        assert acc.download() == (acc0 + x0 + x0).tobytes()
        drv.dispatch_resident(program, [out, acc, out])  # x is out: read before written
        before = x0 * np.float32(3) + (acc0 + x0)
        assert out.download() == (before * np.float32(3) + (acc0 + x0 + x0)).tobytes()


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_resident_buffers_of_the_wrong_size_or_bound_twice_where_written_are_refused(backend):
    """Both keep resident buffers in host memory (vyre_core/host_memory.py), by wgpu's
    rules: whole elements, a fixed-size buffer exactly its count, a written one once."""
    program = _affine()
    with Driver() as drv:
        x, acc = (drv.allocate_resident(4000, backend=backend) for _ in range(2))
        out = drv.allocate_resident(4000, near=x)
        odd = drv.allocate_resident(3999, near=x)
        short = drv.allocate_resident(3996, near=x)
        cases = [([x, odd, out], "'acc' holds 3999 bytes, not a whole number of f32"),
                 ([x, acc, short], "'out' holds 3996 bytes, not exactly 1000 f32"),
                 ([x, out, out], "bind one buffer to two of the buffers")]
        for buffers, match in cases:
            with pytest.raises(InvalidInputError, match=match) as err:
                drv.dispatch_resident(program, buffers)
            assert "\nFix: " in str(err.value)
        drv.dispatch_resident(program, [x, acc, out])  # the worker serves on
        assert out.download() == bytes(4000)


def test_the_chain_example_runs_on_resident_buffers_through_a_driver():
    from vyre_core.cli.targets import load_target

    example = load_target("chain").example
    with Driver() as drv:
        assert example.mismatch(example.run(drv, "cpu")) is None


def test_lanes_that_return_inside_loops_of_a_lockstep_program_stop_there(host):
    """Returns nested in loops and ifs after the last barrier (V016 allows none before
    one): each lane leaves at its own iteration and the others go on (the reference's
    bytes)."""
    k = ir.Kernel(workgroup=(32,))
    out = k.output("out", ir.u32, count=64)
    shared = k.workgroup_buffer("shared", ir.u32, count=32)
    lid = k.let("lid", ir.local_id(0))
    gid = k.let("gid", ir.global_id(0))
    shared[lid] = lid * ir.u32(7) + ir.workgroup_id(0)
    k.barrier()
    with k.loop("i", 0, 8) as i, k.loop("j", 0, 3) as j:
        out[gid] = out[gid] + shared[(lid + i + j) % ir.u32(32)]
        with k.if_((i == lid % ir.u32(7)) & (j == ir.u32(1))):
            k.ret()
    out[gid] = out[gid] + ir.u32(1_000_000)
    program = k.build()
    got, = host.dispatch(program, [], DispatchConfig(grid_override=(2, 1, 1)))
    from vyre_reference import run

    want, = run(program, [], grid=(2, 1, 1))
    assert got.tobytes() == want.tobytes()
    assert len(set(want.tolist())) > 10  # (lanes left at different points)


def test_a_load_every_lane_shares_is_read_once_unless_the_program_writes_its_buffer(host):
    """``a[0]`` of a buffer the program only reads is read once, before the workgroups
    start (saxpy: LLVM reads it again after every store otherwise); ``acc[0]``, which an
    invocation writes before it reads it, is read where the program reads it."""
    k = ir.Kernel(workgroup=(64,))
    a = k.uniform("a", ir.u32)
    acc = k.read_write("acc", ir.u32)
    out = k.output("out", ir.u32, count=64)
    i = k.let("i", ir.global_id(0))
    with k.if_(i == ir.u32(0)):
        acc[0] = a[0] + ir.u32(40)
    out[i] = acc[0] + a[0] * ir.u32(1000)
    program = k.build()
    kernel = codegen.generate(program).source.split("def kernel(")[1].split("\n\n\n")[0]
    assert kernel.count("load(b0, K") == 1 and "    v" in kernel.split(" in prange(")[0]
    acc_after, out_after = host.dispatch(
        program, [np.array([2], np.uint32), np.array([5], np.uint32)],
        DispatchConfig(grid_override=(1, 1, 1)))
    assert acc_after.tolist() == [42]
    assert out_after[0] == 42 + 2 * 1000  # (its own store, then its load: program order)


@pytest.mark.parametrize("short", [31, 32, 33, 63, 64, 65])
def test_accesses_at_the_global_id_past_a_buffers_end_read_zero_and_are_dropped(host, short):
    """Workgroups wholly inside the buffers they read and write at the global id run
    without bounds checks; the one a buffer ends in keeps them, to the element (``y``
    is a view of a longer array whose next elements are not zero)."""
    k = ir.Kernel(workgroup=(32,))
    x = k.read("x", ir.u32)
    y = k.read("y", ir.u32)
    out = k.output("out", ir.u32, count=96)
    short_out = k.output("short_out", ir.u32, count=short)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i] + y[i]
    short_out[i] = x[i] * ir.u32(3)
    program = k.build()
    assert "load_in(" in codegen.generate(program).source
    x_data = np.arange(1, 97, dtype=np.uint32)
    longer = np.full(200, 7_000_000, np.uint32)
    longer[:short] = np.arange(short, dtype=np.uint32) * 1000
    got = host.dispatch(program, [x_data, longer[:short]],
                        DispatchConfig(grid_override=(3, 1, 1)))
    assert got[0].tolist() == [int(v) + (j * 1000 if j < short else 0)
                               for j, v in enumerate(x_data)]
    assert got[1].tolist() == (x_data[:short] * 3).tolist()
    assert longer[short:].tolist() == [7_000_000] * (200 - short)


def test_u32_division_by_a_divisor_every_lane_shares_is_exact_at_the_edges(host):
    """``x / d`` and ``x % d`` with ``d`` read once for the dispatch run as a product with
    its reciprocal, corrected by one: the quotient and remainder of every edge (0, 1,
    multiples of d and their neighbours, 2**32 - 1) match numpy's, and division by 0
    gives the IR's 0xFFFFFFFF and 0."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    d = k.uniform("d", ir.u32)
    quotient = k.output("quotient", ir.u32, count=4096)
    remainder = k.output("remainder", ir.u32, count=4096)
    i = k.let("i", ir.global_id(0))
    quotient[i] = x[i] / d[0]
    remainder[i] = x[i] % d[0]
    program = k.build()
    assert "rem_u32_by(" in codegen.generate(program).source
    rng = np.random.default_rng(7)
    top = 2**32 - 1
    for divisor in [0, 1, 2, 3, 7, 10, 255, 65537, 2**20 + 1, 2**31 - 1, 2**31, top - 4, top,
                    *rng.integers(1, 2**32, 8).tolist()]:
        near = [m * divisor + e for m in (1, 2, 3, top // max(divisor, 1) - 1,
                                          top // max(divisor, 1)) for e in (-1, 0, 1)]
        values = np.array([0, 1, top, top - 1, *near, *rng.integers(0, 2**32, 4000)],
                          dtype=np.int64)
        data = np.resize((values % 2**32).astype(np.uint32), 4096)
        got_q, got_r = host.dispatch(program, [data, np.array([divisor], np.uint32)],
                                     DispatchConfig(grid_override=(64, 1, 1)))
        if divisor == 0:
            assert set(got_q.tolist()) == {top} and set(got_r.tolist()) == {0}
            continue
        assert got_q.tolist() == (data // np.uint32(divisor)).tolist(), divisor
        assert got_r.tolist() == (data % np.uint32(divisor)).tolist(), divisor


def test_a_workgroup_buffers_length_is_not_taken_for_a_value_of_the_whole_dispatch(host):
    """``x / len(shared)`` put ``shared``'s length before the workgroups start, where
    ``shared`` (each workgroup's own array) does not exist: the kernel did not compile
    (found in review)."""
    k = ir.Kernel(workgroup=(4,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, count=8)
    shared = k.workgroup_buffer("shared", ir.u32, count=4)
    lid = k.let("lid", ir.local_id(0))
    gid = k.let("gid", ir.global_id(0))
    shared[lid] = lid
    k.barrier()
    out[gid] = x[gid] / shared.len + x[shared.len]
    program = k.build()
    data = [np.arange(8, dtype=np.uint32) * 5]
    got, = host.dispatch(program, data, DispatchConfig(grid_override=(2, 1, 1)))
    from vyre_reference import run

    assert got.tobytes() == run(program, data, grid=(2, 1, 1))[0].tobytes()


def test_binary16_rounding_and_bits_match_numpy_for_every_pattern():
    """numba has no binary16: the backend's own rounding (ties to even, subnormals,
    overflow) and bit conversions, against numpy's, over every f16 pattern and f64 values
    around every scale."""
    from vyre_cpu.runtime import f16_bits, f16_value, to_f16

    for bits in range(0, 1 << 16, 3):
        value = np.uint16(bits).view(np.float16)
        got = f16_value(np.uint16(bits))
        if np.isnan(value):
            assert np.isnan(got) and f16_bits(got) == 0x7E00
        else:
            assert np.float32(value).tobytes() == np.float32(got).tobytes()
            assert f16_bits(got) == bits
    rng = np.random.default_rng(2)
    samples = np.concatenate([rng.standard_normal(4000) * 10.0 ** rng.integers(-9, 6, 4000),
                              [65504.0, 65519.99, 65520.0, -0.0, 2.0 ** -25, 1.5 * 2.0 ** -24,
                               2.5 * 2.0 ** -24, np.inf, -np.inf]])
    with np.errstate(over="ignore"):
        want = samples.astype(np.float16).astype(np.float32)
    got = np.array([to_f16(v) for v in samples], dtype=np.float32)
    assert want.tobytes() == got.tobytes()


def test_the_runtimes_float_operations_round_once_and_take_their_own_type_only():
    """``add_f32`` is the f64 sum rounded once to f32, and an operand of another type is
    refused when numba types the call (a conversion there would round twice), as
    ``mul_f64`` refuses an f32."""
    from numba import njit
    from numba.core.errors import TypingError
    from vyre_cpu.runtime import add_f32, mul_f64

    a, b = np.float32(16777216.0), np.float32(1.0000001)
    add = njit(lambda x, y: add_f32(x, y))
    assert np.float32(add(a, b)).tobytes() == np.float32(np.float64(a) + np.float64(b)).tobytes()
    assert njit(lambda x, y: mul_f64(x, y))(0.1, 3.0) == 0.1 * 3.0
    with pytest.raises(TypingError):
        add(np.float64(a), b)
    with pytest.raises(TypingError):
        njit(lambda x, y: mul_f64(x, y))(a, 3.0)
