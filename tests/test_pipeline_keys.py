"""Pipeline cache keys and compiled-pipeline handles: equal IR shares a key however it
was built; every part that changes compiled code changes the key and nothing else does;
a compiled pipeline dispatches exactly like the host and dies with its generation."""

from __future__ import annotations

import numpy as np
import pytest

import vyre_reference
import vyre_reference.backend
from vyre_core import ir
from vyre_core.config import DispatchConfig
from vyre_core.contract import Capabilities
from vyre_core.errors import PipelineInvalidatedError, VyreError
from vyre_core.ir import (
    Access,
    Binary,
    BinOp,
    Buffer,
    BufLen,
    DType,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Program,
    Store,
    Var,
)
from vyre_core.pipeline import CompiledPipeline, pipeline_cache_key
from vyre_examples.saxpy import program as saxpy
from vyre_workers.backend_host import BackendHost

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

N = 64


def saxpy_built(n: int = N) -> Program:
    """examples/saxpy.py's program, a workgroup of 16."""
    return saxpy(n, workgroup=16)


def saxpy_nodes(n: int = N) -> Program:
    """The same program as ``saxpy_built``, constructed node by node."""
    i = Var("i")
    value = Binary(BinOp.ADD,
                   Binary(BinOp.MUL, Load("a", Lit.of(DType.U32, 0)), Load("x", i)),
                   Load("y", i))
    return Program(
        buffers=(Buffer("x", 0, DType.F32, Access.READ),
                 Buffer("y", 1, DType.F32, Access.READ),
                 Buffer("a", 2, DType.F32, Access.UNIFORM, 1),
                 Buffer("out", 3, DType.F32, Access.OUTPUT, n)),
        workgroup=(16, 1, 1),
        body=(Let("i", InvocationId(IdKind.GLOBAL, 0)),
              If(Binary(BinOp.LT, i, BufLen("x")), (Store("out", i, value),))),
    ).check()


def key(program: Program, config: DispatchConfig | None = None, backend: str = "reference",
        version: str = "0.1.0") -> str:
    return pipeline_cache_key(program, config or DispatchConfig(), backend, version)


def saxpy_inputs(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float32),
            rng.standard_normal(n).astype(np.float32),
            np.array([rng.standard_normal()], np.float32)]


@pytest.fixture
def host() -> BackendHost:
    return BackendHost(vyre_reference.backend)


# -- pipeline_cache_key ----------------------------------------------------------------------


def test_equal_ir_built_two_ways_shares_a_key():
    built, nodes = saxpy_built(), saxpy_nodes()
    assert built is not nodes
    assert built.to_wire() == nodes.to_wire()
    assert key(built) == key(nodes)
    assert key(Program.from_wire(built.to_wire())) == key(built)
    cfg = DispatchConfig(workgroup_override=(32,), ulp_budget=1)
    assert key(built, cfg) == key(nodes, cfg)


def test_key_is_a_stable_hex_digest():
    k = key(saxpy_built())
    assert k == key(saxpy_built())
    assert len(k) == 64 and int(k, 16) >= 0


def test_different_programs_have_different_keys():
    assert key(saxpy_built(N)) != key(saxpy_built(N + 1))


def test_each_code_changing_part_changes_the_key():
    prog = saxpy_built()
    keys = {
        "base": key(prog),
        "workgroup 32": key(prog, DispatchConfig(workgroup_override=(32,))),
        "workgroup 8x2": key(prog, DispatchConfig(workgroup_override=(8, 2))),
        "ulp 4": key(prog, DispatchConfig(ulp_budget=4)),
        "ulp 5": key(prog, DispatchConfig(ulp_budget=5)),
        "backend": key(prog, backend="wgpu"),
        "version": key(prog, version="0.1.1"),
        "both ulp and workgroup": key(prog, DispatchConfig(workgroup_override=(32,),
                                                           ulp_budget=4)),
    }
    assert len(set(keys.values())) == len(keys), keys


def test_backend_id_and_version_are_not_confused():
    prog = saxpy_built()
    assert key(prog, backend="a", version="bc") != key(prog, backend="ab", version="c")


@pytest.mark.parametrize("change", [
    {"label": "saxpy"}, {"profile": True}, {"timeout": 3.0}, {"retries": 0},
    {"max_output_bytes": 1 << 20}, {"fixpoint_iterations": 7}, {"grid_override": (4,)},
    {"dispatch_elements": 9},
], ids=lambda c: next(iter(c)))
def test_fields_that_do_not_change_compiled_code_keep_the_key(change):
    prog = saxpy_built()
    assert key(prog, DispatchConfig(**change)) == key(prog)
    cfg = DispatchConfig(workgroup_override=(32,), ulp_budget=2)
    assert key(prog, cfg.replace(**change)) == key(prog, cfg)


# -- BackendHost.compile ---------------------------------------------------------------------


def test_compile_returns_a_pipeline_keyed_like_pipeline_cache_key(host):
    prog = saxpy_built()
    for cfg in (DispatchConfig(), DispatchConfig(ulp_budget=0, label="s", profile=True)):
        pipeline = host.compile(prog, cfg)
        assert isinstance(pipeline, CompiledPipeline)
        assert pipeline.key == pipeline_cache_key(prog, cfg, host.id(), host.version())
        assert pipeline.backend == "reference"
        assert pipeline.generation == host.generation == 0
        assert pipeline.valid
    assert host.compile(saxpy_nodes()).key == host.compile(saxpy_built()).key


def test_compiled_dispatch_equals_host_dispatch_byte_for_byte(host):
    prog = saxpy_built()
    pipeline = host.compile(prog)
    for n, seed in [(N, 0), (N, 1), (N // 2, 2), (1, 3), (N - 3, 4)]:
        inputs = saxpy_inputs(n, seed)
        expected, = host.dispatch(prog, inputs)
        got, = pipeline.dispatch(inputs)
        assert got.dtype == expected.dtype == np.float32
        assert got.tobytes() == expected.tobytes()
        x, y, a = inputs
        assert got[:n].tobytes() == (a[0] * x + y).tobytes()
        assert not got[n:].any()


def test_compiled_dispatch_with_bytes_inputs_equals_array_inputs(host):
    pipeline = host.compile(saxpy_built())
    inputs = saxpy_inputs(N, 7)
    from_arrays, = pipeline.dispatch(inputs)
    from_bytes, = pipeline.dispatch([a.tobytes() for a in inputs])
    assert from_arrays.tobytes() == from_bytes.tobytes()


def test_compiled_with_workgroup_override_equals_host_dispatch(host):
    k = ir.Kernel(workgroup=(4,))
    lid = k.output("lid", ir.u32, 16)
    wid = k.output("wid", ir.u32, 16)
    g = k.let("g", ir.global_id(0))
    lid[g] = ir.local_id(0)
    wid[g] = ir.workgroup_id(0)
    prog = k.build()
    cfg = DispatchConfig(workgroup_override=(8,))
    pipeline = host.compile(prog, cfg)
    assert pipeline.program.workgroup == (8, 1, 1)
    got = pipeline.dispatch([])
    expected = host.dispatch(prog, [], cfg)
    assert [a.tobytes() for a in got] == [a.tobytes() for a in expected]
    assert got[0].tolist() == [*range(8), *range(8)]
    assert got[1].tolist() == [0] * 8 + [1] * 8


def test_compiled_dispatch_honours_a_per_call_config(host):
    pipeline = host.compile(saxpy_built())
    inputs = saxpy_inputs(N, 5)
    out = pipeline.dispatch(inputs, DispatchConfig(profile=True, label="again"))
    assert out.timing is not None and out.timing.label == "again" and out.timing.wall_ns > 0
    assert out[0].tobytes() == host.dispatch(saxpy_built(), inputs)[0].tobytes()
    assert pipeline.dispatch(inputs).timing is None


def test_old_generation_handle_is_invalidated(host):
    prog = saxpy_built()
    inputs = saxpy_inputs(N, 9)
    old = host.compile(prog)
    before, = old.dispatch(inputs)
    host.generation += 1
    assert not old.valid
    with pytest.raises(PipelineInvalidatedError) as caught:
        old.dispatch(inputs)
    err = caught.value
    assert "Fix: " in str(err)
    assert "compile" in err.fix
    assert str(err).splitlines()[-1] == f"Fix: {err.fix}"
    assert err.details["generation"] == 0 and err.details["backend"] == "reference"
    new = host.compile(prog)
    assert new.valid and new.generation == 1
    assert new.key == old.key  # same program, same backend: same cache key
    after, = new.dispatch(inputs)
    assert after.tobytes() == before.tobytes()


def test_invalidated_handle_does_not_run_the_backend():
    calls = []

    class Counting:
        VYRE_CONTRACT = 1

        def vyre_backend_id(self) -> str:
            return "counting"

        def vyre_dispatch(self, program, inputs, config):
            calls.append(1)
            return vyre_reference.run(program, inputs, grid=config.grid_override)

        def vyre_capabilities(self) -> Capabilities:
            return Capabilities.from_claims({"max_workgroup_size": (64, 1, 1),
                                             "max_workgroups_per_dimension": 1024})

    host = BackendHost(Counting(), "counting")
    pipeline = host.compile(saxpy_built())
    pipeline.dispatch(saxpy_inputs(N, 0))
    assert len(calls) == 1
    host.generation += 1
    with pytest.raises(PipelineInvalidatedError, match="compile"):
        pipeline.dispatch(saxpy_inputs(N, 0))
    assert len(calls) == 1


# -- known bugs ------------------------------------------------------------------------------


class NativeBackend:
    """A backend whose vyre_compile returns a native pipeline (the reference underneath)."""

    VYRE_CONTRACT = 1

    class Pipeline:
        def __init__(self, program: Program) -> None:
            self.program = program

        def dispatch(self, inputs, config):
            return vyre_reference.run(self.program, inputs, grid=config.grid_override)

    def vyre_backend_id(self) -> str:
        return "native"

    def vyre_dispatch(self, program, inputs, config):
        return vyre_reference.run(program, inputs, grid=config.grid_override)

    def vyre_compile(self, program, config):
        return NativeBackend.Pipeline(program)

    def vyre_capabilities(self) -> Capabilities:
        return Capabilities.from_claims({"max_workgroup_size": (64, 1, 1),
                                         "max_workgroups_per_dimension": 1024})


def test_native_pipeline_dispatch_equals_host_dispatch():
    host = BackendHost(NativeBackend(), "native")
    pipeline = host.compile(saxpy_built())
    for seed in range(3):
        inputs = saxpy_inputs(N, seed)
        assert pipeline.dispatch(inputs)[0].tobytes() == \
            host.dispatch(saxpy_built(), inputs)[0].tobytes()


def test_profiled_native_pipeline_reports_wall_time_and_unknown_device_time():
    """Profiling a native pipeline measures wall time around it; device time stays None
    because nothing measured it."""
    host = BackendHost(NativeBackend(), "native")
    out = host.compile(saxpy_built()).dispatch(saxpy_inputs(N, 0),
                                               DispatchConfig(profile=True, label="nat"))
    assert out.timing is not None and out.timing.label == "nat"
    assert out.timing.wall_ns > 0
    assert out.timing.device_ns is None


def test_compiled_key_with_workgroup_override_equals_pipeline_cache_key(host):
    """CompiledPipeline.key equals pipeline_cache_key for the (program, config) compiled,
    with or without a workgroup override, so a cache keyed by either finds the other."""
    prog = saxpy_built()
    cfg = DispatchConfig(workgroup_override=(32,))
    assert host.compile(prog, cfg).key == pipeline_cache_key(prog, cfg, host.id(),
                                                             host.version())


def test_compiled_dispatch_refuses_a_different_workgroup_override(host):
    """A per-call workgroup_override other than the compiled one is honoured or refused
    with a Fix, never silently dropped."""
    k = ir.Kernel(workgroup=(4,))
    lid = k.output("lid", ir.u32, 8)
    lid[ir.global_id(0)] = ir.local_id(0)
    prog = k.build()
    pipeline = host.compile(prog)
    cfg = DispatchConfig(workgroup_override=(2,))
    expected, = host.dispatch(prog, [], cfg)
    assert expected.tolist() == [0, 1] * 4
    try:
        got, = pipeline.dispatch([], cfg)
    except VyreError as err:  # refusing is fine, with a Fix
        assert "Fix: " in str(err)
    else:
        assert got.tobytes() == expected.tobytes()
