"""The backend contract's defaults and overrides, observed through ``BackendHost``.

A MINIMAL backend (only ``vyre_backend_id`` and ``vyre_dispatch``) must report every
default of vyre_core/contract/hookspec.py exactly; a FULL backend overrides every hook
with a distinguishable answer and each override must win (even when it returns None);
malformed plugins are refused at load time with a ``Fix:``; exceptions raised by a
backend leave the host as members of the VyreError family.
"""

from __future__ import annotations

import types
import warnings
from dataclasses import fields

import numpy as np
import pytest

from vyre_core import deprecations, ir
from vyre_core.config import DispatchConfig
from vyre_core.contract import (
    HOOK_NAMES,
    CacheSnapshot,
    Capabilities,
    DeviceInfo,
    LoadedBackend,
    ReadyPending,
    SequenceRun,
    TimedDispatch,
    Timing,
    hookimpl,
)
from vyre_core.deprecations import CAPABILITY_QUERIES as CAPABILITY_HOOKS
from vyre_core.deprecations import VyreDeprecationWarning
from vyre_core.errors import (
    DispatchError,
    InvalidConfigError,
    InvalidInputError,
    InvalidSequenceError,
    LaunchLimitError,
    PipelineInvalidatedError,
    PluginLoadError,
    UnsupportedFeatureError,
    VyreError,
)
from vyre_core.mathlib.library import version as math_library_version
from vyre_core.pipeline import CompiledPipeline, pipeline_cache_key
from vyre_core.sequence import Sequence, SequenceBuilder
from vyre_reference import run as reference_run
from vyre_workers.backend_host import BackendHost

pytestmark = [
    pytest.mark.fast,  # the fast tier: pure, no process (make test-fast)
    # FullBackend implements every hook, the deprecated vyre_subgroup_size too
    pytest.mark.filterwarnings("ignore::vyre_core.deprecations.VyreDeprecationWarning"),
]

# -- programs ---------------------------------------------------------------------------------


def sum4_program(workgroup=(1,)) -> ir.Program:
    """One invocation: out[0] = x[0] + x[1] + x[2] + x[3] (u32, wrapping)."""
    k = ir.Kernel(workgroup=workgroup)
    x = k.read("x", ir.u32, 4)
    out = k.output("out", ir.u32, 1)
    out[0] = x[0] + x[1] + x[2] + x[3]
    return k.build()


def xor_program(workgroup=(4,), n: int = 8) -> ir.Program:
    k = ir.Kernel(workgroup=workgroup)
    a = k.read("a", ir.u32, n)
    b = k.read("b", ir.u32, n)
    out = k.output("out", ir.u32, n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < a.len):
        out[i] = a[i] ^ b[i]
    return k.build()


X4 = np.array([1, 2, 3, 2**32 - 1], dtype=np.uint32)
SUM4 = [np.uint32(5)]  # 1 + 2 + 3 + (2**32 - 1) wraps to 5

# -- the minimal backend ----------------------------------------------------------------------


def minimal_backend(**extra_hooks) -> types.ModuleType:
    """A module with VYRE_CONTRACT = 1, vyre_backend_id and vyre_dispatch only (plus any
    ``extra_hooks``). Its dispatch runs the reference interpreter, then scribbles over
    its (owned) inputs, and records what it was given."""
    plugin = types.ModuleType("minimal_backend")
    plugin.VYRE_CONTRACT = 1
    plugin.received = []

    @hookimpl
    def vyre_backend_id():
        return "minimal"

    @hookimpl
    def vyre_dispatch(program, inputs, config):
        plugin.received.append([(a.flags.writeable, a.copy()) for a in inputs])
        outputs = reference_run(program, inputs, grid=config.grid_override)
        for a in inputs:
            a[...] = 0xDEAD  # allowed: dispatch inputs are owned
        plugin.received_arrays = inputs
        return outputs

    plugin.vyre_backend_id = vyre_backend_id
    plugin.vyre_dispatch = vyre_dispatch
    for name, fn in extra_hooks.items():
        setattr(plugin, name, hookimpl(fn))
    return plugin


@pytest.fixture
def minimal():
    plugin = minimal_backend()
    return plugin, BackendHost(plugin)


def test_minimal_backend_implements_only_the_two_required_hooks(minimal):
    _, host = minimal
    implemented = {h for h in HOOK_NAMES if host.loaded.implements(h)}
    assert implemented == {"vyre_backend_id", "vyre_dispatch"}


def test_minimal_identity_defaults(minimal):
    _, host = minimal
    assert host.id() == "minimal"
    assert host.version() == "unspecified"
    assert host.precedence() == 1000
    assert host.loaded.call("vyre_backend_claims") == {}
    assert host.is_reference_oracle() is False
    assert host.loaded.call("vyre_lowers_math_library", version="any") is False
    # (the ops newer than contract 1 only when named: a plugin written before them is
    # never routed a program it would misread)
    assert host.supported_ops() == ir.DEFAULT_OPS == ir.ALL_OPS - ir.NEWER_OPS
    assert {"stmt.loop_step", "stmt.while", "subgroup.add", "unop.clz"} <= ir.NEWER_OPS


def test_a_backend_is_given_programs_with_the_math_library_written_out(minimal):
    """The default (``vyre_lowers_math_library`` False): every hook that takes a program
    gets it with the library's functions written out, made once per program."""
    _, host = minimal
    k = ir.Kernel(workgroup=(8,))
    x, out = k.read("x", ir.f32), k.output("out", ir.f32, 8)
    i = k.let("i", ir.global_id())
    out[i] = ir.exp2(x[i])
    program = k.build()
    given = host.runnable(program)
    assert "unop.exp2" in program.requirements().ops
    assert "unop.exp2" not in given.requirements().ops and given.check() is given
    assert host.runnable(program) is given
    plain = xor_program()
    assert host.runnable(plain) is plain


def test_minimal_capability_defaults(minimal):
    _, host = minimal
    caps = host.capabilities()
    assert caps.supported_ops == ir.DEFAULT_OPS
    for name in ("supports_subgroup_ops", "supports_f16", "supports_bf16", "supports_f64",
                 "supports_tensor_cores", "supports_async_compute",
                 "supports_indirect_dispatch", "supports_grid_sync"):
        assert getattr(caps, name) is False, name
    assert caps.is_distributed is False
    assert caps.max_workgroup_size == (1, 1, 1)
    assert caps.max_workgroups_per_dimension == 1
    assert caps.max_invocations_per_workgroup == 1
    assert caps.subgroup_size is None
    assert caps.max_storage_buffer_bytes == 0
    assert caps.max_workgroup_memory_bytes == 0
    # ... which is exactly the conservative floor, field by field
    floor = Capabilities()
    for f in fields(Capabilities):
        if f.name != "extra":
            assert getattr(caps, f.name) == getattr(floor, f.name), f.name
    assert caps == floor
    assert caps.extra == {}  # (no facts: it implements no profile)
    # every supports_* hook of the contract is covered above
    assert {h.removeprefix("vyre_") for h in HOOK_NAMES if h.startswith("vyre_supports_")} == {
        n for n in CAPABILITY_HOOKS if n.startswith("supports_") and n != "supported_ops"}


def test_default_invocations_are_derived_from_the_workgroup_size():
    plugin = minimal_backend(vyre_max_workgroup_size=lambda: (4, 2, 3))
    host = BackendHost(plugin)
    assert host.capabilities().max_invocations_per_workgroup == 24
    assert host.capabilities().max_workgroup_size == (4, 2, 3)


def test_minimal_device_profile_has_the_id_and_every_capability(minimal):
    _, host = minimal
    profile = host.device_profile()
    assert profile["backend"] == "minimal"
    assert profile == {"backend": "minimal",
                       **{k: v for k, v in Capabilities().to_dict().items() if k != "extra"}}
    for name in CAPABILITY_HOOKS:
        assert name in profile, name
    assert profile["max_workgroup_size"] == [1, 1, 1]
    assert profile["supported_ops"] == sorted(ir.DEFAULT_OPS)


def test_minimal_has_no_pipeline_cache(minimal):
    _, host = minimal
    assert host.pipeline_cache_snapshot() is None


def test_minimal_dispatch_runs_the_backends_dispatch(minimal):
    plugin, host = minimal
    out = host.dispatch(sum4_program(), [X4])
    assert [o.tolist() for o in out] == [[5]]
    assert out.timing is None
    assert len(plugin.received) == 1


def test_default_borrowed_gives_the_backend_owned_writable_copies(minimal):
    plugin, host = minimal
    caller = X4.copy()
    out = host.dispatch(sum4_program(), [caller])
    assert out[0].tolist() == [5]
    (writeable, seen), = plugin.received[0]
    assert writeable is True
    assert seen.tolist() == X4.tolist()
    # the backend wrote 0xDEAD into its inputs; those were copies, not the caller's array
    assert plugin.received_arrays[0].tolist() == [0xDEAD] * 4
    assert not np.shares_memory(plugin.received_arrays[0], caller)
    assert caller.tolist() == X4.tolist()
    assert caller.flags.writeable


def test_default_timed_dispatch_measures_wall_time_only(minimal):
    plugin, host = minimal
    out = host.dispatch(sum4_program(), [X4], DispatchConfig(profile=True, label="sum4"))
    assert out[0].tolist() == [5]
    assert isinstance(out.timing, Timing)
    assert out.timing.wall_ns > 0
    assert out.timing.device_ns is None
    assert out.timing.label == "sum4"
    assert len(plugin.received) == 1  # went down to the backend's vyre_dispatch
    timed = host.loaded.call("vyre_dispatch_timed", program=sum4_program(),
                             inputs=[X4.copy()], config=DispatchConfig(grid_override=(1,),
                                                                       label="raw"))
    assert isinstance(timed, TimedDispatch)
    assert timed.timing.wall_ns > 0 and timed.timing.device_ns is None
    assert timed.timing.label == "raw"


def test_default_dispatch_into_fills_caller_owned_arrays(minimal):
    plugin, host = minimal
    target = np.full(1, 7, dtype=np.uint32)
    assert host.dispatch_into(sum4_program(), [X4], [target]) is None
    assert target.tolist() == [5]
    assert len(plugin.received) == 1


def test_default_dispatch_async_returns_a_ready_handle(minimal):
    plugin, host = minimal
    handle = host.dispatch_async(sum4_program(), [X4])
    assert len(plugin.received) == 1  # the default ran the dispatch before returning
    assert handle.is_ready() is True
    assert [o.tolist() for o in handle.result(timeout=1.0)] == [[5]]
    assert len(plugin.received) == 1
    raw = host.loaded.call("vyre_dispatch_async", program=sum4_program(), inputs=[X4],
                           config=DispatchConfig(grid_override=(1,)))
    assert isinstance(raw, ReadyPending)  # the hook's own default answer


def test_default_compile_is_a_passthrough_over_vyre_dispatch(minimal):
    plugin, host = minimal
    pipeline = host.compile(sum4_program())
    assert isinstance(pipeline, CompiledPipeline)
    assert pipeline.backend == "minimal" and pipeline.generation == 0 and pipeline.valid
    assert plugin.received == []  # compiling dispatches nothing
    assert pipeline.dispatch([X4])[0].tolist() == [5]
    assert pipeline.dispatch([np.arange(4, dtype=np.uint32)])[0].tolist() == [6]
    assert len(plugin.received) == 2


@pytest.mark.parametrize(("method", "args", "what"), [
    ("allocate_resident", (16,), "resident buffer allocation"),
    ("upload_resident", (1, b"\x00" * 16), "resident buffer upload"),
    ("download_resident", (1,), "resident buffer download"),
    ("free_resident", (1,), "resident buffer free"),
])
def test_default_resident_hooks_are_unsupported(minimal, method, args, what):
    plugin, host = minimal
    with pytest.raises(UnsupportedFeatureError) as err:
        getattr(host, method)(*args)
    assert "'minimal'" in str(err.value)
    assert what in str(err.value)
    assert "\nFix: " in str(err.value)
    assert plugin.received == []


def test_default_dispatch_resident_hook_is_unsupported(minimal):
    plugin, host = minimal
    with pytest.raises(UnsupportedFeatureError) as err:
        host.loaded.call("vyre_dispatch_resident", program=sum4_program(), handles=[1, 2],
                         config=DispatchConfig())
    assert "backend 'minimal' does not support resident dispatch" in str(err.value)
    assert "\nFix: " in str(err.value)
    assert plugin.received == []


def serial_xor_program() -> ir.Program:
    """One invocation xors all 8 elements (the minimal backend's limits: one of each)."""
    k = ir.Kernel(workgroup=(1,))
    a, b = k.read("a", ir.u32, 8), k.read("b", ir.u32, 8)
    out = k.output("out", ir.u32, 8)
    with k.loop("j", 0, 8) as j:
        out[j] = a[j] ^ b[j]
    return k.build()


def test_default_sequence_runs_each_step_through_borrowed_dispatch(minimal):
    """The default runs the steps one by one in the worker, through the backend's own
    dispatch (which scribbles over its owned inputs: the default's copies absorb that)."""
    plugin, host = minimal
    b = SequenceBuilder()
    b.input("a", ir.u32, 8)
    b.input("b", ir.u32, 8)
    b.transient("t", ir.u32, 8)
    b.transient("out", ir.u32, 8)
    b.step(serial_xor_program(), {"out": "t"}, grid=1)
    b.step(serial_xor_program(), {"a": "t", "out": "out"}, grid=1)  # (a ^ b) ^ b == a
    run = host.dispatch_sequence(b.build(returns=["out", "t"]), [A8, B8], {})
    assert [o.tolist() for o in run.outputs] == [A8.tolist(), XOR8]
    assert len(plugin.received) == 2 and run.loops == []
    assert A8.tolist() == [3 * i for i in range(8)]  # the caller's input is untouched


def test_default_sequence_without_resident_support_refuses_resident_buffers(minimal):
    _, host = minimal
    with pytest.raises(InvalidSequenceError, match="resident buffer 'r' is bound to handle 1"):
        host.dispatch_sequence(resident_sequence(), [], {"r": 1})


def resident_sequence() -> Sequence:
    b = SequenceBuilder()
    b.resident("r", ir.u32, 8)
    b.constant("k", ir.u32, np.arange(8))
    b.step(serial_xor_program(), {"a": "k", "b": "k", "out": "r"}, grid=1)
    return b.build()


def test_dispatch_resident_on_a_backend_without_resident_support_is_unsupported():
    """Without resident support the contract's default answers (UnsupportedFeatureError),
    before any handle is looked at."""
    plugin = minimal_backend()
    host = BackendHost(plugin)
    with pytest.raises(UnsupportedFeatureError) as err:
        host.dispatch_resident(sum4_program(), [1, 2])
    assert "'minimal'" in str(err.value) and "resident dispatch" in str(err.value)
    assert "\nFix: " in str(err.value)


def test_default_lifecycle_hooks_are_no_ops(minimal):
    plugin, host = minimal
    assert host.prepare() is None
    assert host.prepare() is None
    assert host.flush() is None
    assert host.shutdown() is None
    assert host.device_lost() is False
    assert plugin.received == []


def test_default_devices_are_one_device_that_only_0_selects(minimal):
    plugin, host = minimal
    assert host.devices() == [DeviceInfo(0, "minimal")]
    host.select_device(0)
    assert host.device == 0
    with pytest.raises(InvalidConfigError) as err:
        host.select_device(2)
    assert "has no device 2; its devices: 0 (minimal)" in str(err.value)
    assert "\nFix: " in str(err.value) and host.device == 0
    assert plugin.received == []


class Lister:
    """A backend that lists ``devices`` and implements nothing else of them."""

    VYRE_CONTRACT = 1

    def __init__(self, devices) -> None:
        self.devices = devices

    @hookimpl
    def vyre_backend_id(self):
        return "lister"

    @hookimpl
    def vyre_dispatch(self, program, inputs, config):
        raise AssertionError("not called")

    @hookimpl
    def vyre_devices(self):
        return self.devices


def test_a_backend_that_lists_devices_but_cannot_select_one_runs_on_device_0_only():
    host = BackendHost(Lister([DeviceInfo(0, "a"), DeviceInfo(1, "b")]))
    with pytest.raises(UnsupportedFeatureError) as err:
        host.select_device(1)
    assert "does not implement vyre_select_device" in str(err.value)
    assert host.device is None
    host.select_device(0)
    assert host.device == 0


@pytest.mark.parametrize("answer, words", [
    ([], "not a list of devices"),
    ("gpu0", "not a list of devices"),
    ([{"id": 0, "name": "a"}, {"id": 0, "name": "b"}], "duplicate ids [0, 0]"),
    ([{"id": -1, "name": "a"}], "id=-1"),
    ([{"id": True, "name": "a"}], "id=True"),
    ([{"name": "a"}], "bad device description"),
    ([{"id": 0, "name": "a", "colour": "red"}], "bad device description"),
    ([{"id": 0, "name": "a", "memory_bytes": 1.5}], "memory_bytes=1.5"),
    ([{"id": 0, "name": "a", "software": "yes"}], "software='yes'"),
])
def test_a_malformed_device_list_is_refused_with_a_fix(answer, words):
    with pytest.raises(InvalidConfigError) as err:
        BackendHost(Lister(answer)).devices()
    assert words in str(err.value) and "vyre_devices" in str(err.value)


def test_default_try_recover_raises_and_keeps_the_generation(minimal):
    _, host = minimal
    pipeline = host.compile(sum4_program())
    with pytest.raises(UnsupportedFeatureError) as err:
        host.try_recover()
    assert "device recovery" in str(err.value) and "'minimal'" in str(err.value)
    assert "\nFix: " in str(err.value)
    assert host.generation == 0
    assert pipeline.valid and pipeline.dispatch([X4])[0].tolist() == [5]


@pytest.mark.parametrize(("program", "grid", "needle"), [
    (sum4_program(workgroup=(2,)), None, "workgroup axis x is 2, the limit is 1"),
    (sum4_program(workgroup=(1, 2)), None, "workgroup axis y is 2, the limit is 1"),
    (sum4_program(), (2,), "grid axis x has 2 workgroups, the limit is 1"),
    (sum4_program(), (1, 1, 2), "grid axis z has 2 workgroups, the limit is 1"),
])
def test_minimal_limits_refuse_a_two_invocation_launch(minimal, program, grid, needle):
    plugin, host = minimal
    with pytest.raises(LaunchLimitError) as err:
        host.dispatch(program, [X4], DispatchConfig(grid_override=grid))
    assert needle in str(err.value)
    assert "backend 'minimal'" in str(err.value) and "\nFix: " in str(err.value)
    assert plugin.received == []  # refused before the backend ran


def test_minimal_limits_refuse_a_two_invocation_compiled_dispatch(minimal):
    plugin, host = minimal
    pipeline = host.compile(sum4_program(workgroup=(2,)))
    with pytest.raises(LaunchLimitError, match="workgroup axis x is 2, the limit is 1"):
        pipeline.dispatch([X4])
    assert plugin.received == []


# -- the full backend -------------------------------------------------------------------------

#: Output tags: every dispatch path answers xor + its own tag, so the result says which
#: implementation ran.
TAGS = {"vyre_dispatch": 0, "vyre_dispatch_borrowed": 1000, "vyre_dispatch_timed": 2000,
        "vyre_dispatch_into": 3000, "pipeline": 4000, "vyre_dispatch_async": 5000}

FULL_CAPS = {
    "supported_ops": frozenset({"binop.xor", "binop.lt", "expr.load", "expr.buffer_len",
                                "expr.var", "id.global", "stmt.let", "stmt.if", "stmt.store"}),
    "supports_subgroup_ops": True, "supports_f16": True, "supports_bf16": True,
    "supports_f64": True, "supports_tensor_cores": True, "supports_async_compute": True,
    "supports_indirect_dispatch": True, "supports_grid_sync": True, "is_distributed": True,
    "max_workgroup_size": (8, 2, 1), "max_workgroups_per_dimension": 4,
    "max_invocations_per_workgroup": 7,  # not 8 * 2 * 1: the override wins over the product
    "subgroup_size": 32, "subgroup_size_range": (8, 64), "max_storage_buffer_bytes": 1 << 20,
    "max_workgroup_memory_bytes": 4096,
}
FULL_PROFILE = {"backend": "full", "adapter": "FullCard 9000", "driver": "42.0"}
FULL_FACTS = {"adapter": "FullCard 9000", "driver": "42.1"}  # (its record's: not the profile's)


def xor_tagged(inputs, tag: int) -> list[np.ndarray]:
    a, b = (np.asarray(x) for x in inputs)
    return [(a ^ b) + np.uint32(tag)]


class FullPipeline:
    def __init__(self, backend: FullBackend, program) -> None:
        self.backend = backend
        self.program = program

    def dispatch(self, inputs, config):
        self.backend.calls.append("pipeline.dispatch")
        return xor_tagged(inputs, TAGS["pipeline"])


class FullPending:
    def __init__(self, outputs) -> None:
        self._outputs = outputs
        self.polled = 0

    def is_ready(self) -> bool:
        self.polled += 1
        return self.polled > 1  # "still running" on the first poll

    def result(self, timeout=None):
        return self._outputs


class FullBackend:
    """Overrides every hook of the contract with an answer no default gives."""

    VYRE_CONTRACT = 1

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.resident: dict[int, bytes] = {}
        self.next_handle = 41

    def _seen(self, hook: str) -> None:
        self.calls.append(hook)

    # identity
    @hookimpl
    def vyre_backend_id(self):
        self._seen("vyre_backend_id")
        return "full"

    @hookimpl
    def vyre_backend_version(self):
        self._seen("vyre_backend_version")
        return "3.1.4-full"

    @hookimpl
    def vyre_backend_precedence(self):
        self._seen("vyre_backend_precedence")
        return 7

    @hookimpl
    def vyre_backend_claims(self):
        self._seen("vyre_backend_claims")
        return {"supports_f64": True, "max_workgroup_size": [8, 2, 1], "subgroup_size": 32}

    @hookimpl
    def vyre_is_reference_oracle(self):
        self._seen("vyre_is_reference_oracle")
        return True

    @hookimpl
    def vyre_supported_ops(self):
        self._seen("vyre_supported_ops")
        return FULL_CAPS["supported_ops"]

    @hookimpl
    def vyre_lowers_math_library(self, version):
        self._seen("vyre_lowers_math_library")
        self.math_version = version
        return True

    # dispatch
    @hookimpl
    def vyre_dispatch(self, program, inputs, config):
        self._seen("vyre_dispatch")
        return xor_tagged(inputs, TAGS["vyre_dispatch"])

    @hookimpl
    def vyre_dispatch_borrowed(self, program, inputs, config):
        self._seen("vyre_dispatch_borrowed")
        assert not any(a.flags.writeable for a in inputs)  # borrowed: read-only views
        return [o + np.uint32(TAGS["vyre_dispatch_borrowed"])
                for o in self.vyre_dispatch(program, [a.copy() for a in inputs], config)]

    @hookimpl
    def vyre_dispatch_timed(self, program, inputs, config):
        self._seen("vyre_dispatch_timed")
        return TimedDispatch(xor_tagged(inputs, TAGS["vyre_dispatch_timed"]),
                             Timing(wall_ns=123_456, device_ns=789, label=config.label))

    @hookimpl
    def vyre_dispatch_into(self, program, inputs, config, outputs):
        self._seen("vyre_dispatch_into")
        for target, result in zip(outputs, xor_tagged(inputs, TAGS["vyre_dispatch_into"]),
                                  strict=True):
            target[...] = result

    @hookimpl
    def vyre_compile(self, program, config):
        self._seen("vyre_compile")
        return FullPipeline(self, program)

    @hookimpl
    def vyre_pipeline_cache_snapshot(self):
        self._seen("vyre_pipeline_cache_snapshot")
        return CacheSnapshot(hits=3, misses=1, entries=2)

    @hookimpl
    def vyre_dispatch_async(self, program, inputs, config):
        self._seen("vyre_dispatch_async")
        return FullPending(xor_tagged(inputs, TAGS["vyre_dispatch_async"]))

    # resident buffers (answers of None must not fall through to the raising defaults)
    @hookimpl
    def vyre_allocate_resident(self, byte_len):
        self._seen("vyre_allocate_resident")
        handle, self.next_handle = self.next_handle, self.next_handle + 1
        self.resident[handle] = bytes(byte_len)
        return handle

    @hookimpl
    def vyre_upload_resident(self, handle, data):
        self._seen("vyre_upload_resident")
        assert len(data) == len(self.resident[handle])
        self.resident[handle] = bytes(data)

    @hookimpl
    def vyre_download_resident(self, handle):
        self._seen("vyre_download_resident")
        return self.resident[handle]

    @hookimpl
    def vyre_free_resident(self, handle):
        self._seen("vyre_free_resident")
        del self.resident[handle]

    @hookimpl
    def vyre_dispatch_resident(self, program, handles, config):
        self._seen("vyre_dispatch_resident")
        a, b = (np.frombuffer(self.resident[h], dtype=np.uint32) for h in handles[:2])
        self.resident[handles[2]] = (a ^ b).tobytes()
        return TimedDispatch([], Timing(wall_ns=11, device_ns=5, label=config.label))

    @hookimpl
    def vyre_dispatch_sequence(self, sequence, inputs, resident, config):
        self._seen("vyre_dispatch_sequence")
        a, b = inputs["a"], inputs["b"]
        return SequenceRun([(a ^ b) + np.uint32(6000)], [], Timing(7, None, config.label))

    # capabilities
    @hookimpl
    def vyre_supports_subgroup_ops(self):
        self._seen("vyre_supports_subgroup_ops")
        return FULL_CAPS["supports_subgroup_ops"]

    @hookimpl
    def vyre_supports_f16(self):
        self._seen("vyre_supports_f16")
        return FULL_CAPS["supports_f16"]

    @hookimpl
    def vyre_supports_bf16(self):
        self._seen("vyre_supports_bf16")
        return FULL_CAPS["supports_bf16"]

    @hookimpl
    def vyre_supports_f64(self):
        self._seen("vyre_supports_f64")
        return FULL_CAPS["supports_f64"]

    @hookimpl
    def vyre_supports_tensor_cores(self):
        self._seen("vyre_supports_tensor_cores")
        return FULL_CAPS["supports_tensor_cores"]

    @hookimpl
    def vyre_supports_async_compute(self):
        self._seen("vyre_supports_async_compute")
        return FULL_CAPS["supports_async_compute"]

    @hookimpl
    def vyre_supports_indirect_dispatch(self):
        self._seen("vyre_supports_indirect_dispatch")
        return FULL_CAPS["supports_indirect_dispatch"]

    @hookimpl
    def vyre_supports_grid_sync(self):
        self._seen("vyre_supports_grid_sync")
        return FULL_CAPS["supports_grid_sync"]

    @hookimpl
    def vyre_is_distributed(self):
        self._seen("vyre_is_distributed")
        return FULL_CAPS["is_distributed"]

    @hookimpl
    def vyre_max_workgroup_size(self):
        self._seen("vyre_max_workgroup_size")
        return FULL_CAPS["max_workgroup_size"]

    @hookimpl
    def vyre_max_workgroups_per_dimension(self):
        self._seen("vyre_max_workgroups_per_dimension")
        return FULL_CAPS["max_workgroups_per_dimension"]

    @hookimpl
    def vyre_max_invocations_per_workgroup(self):
        self._seen("vyre_max_invocations_per_workgroup")
        return FULL_CAPS["max_invocations_per_workgroup"]

    @hookimpl
    def vyre_subgroup_size(self):
        self._seen("vyre_subgroup_size")
        return FULL_CAPS["subgroup_size"]

    @hookimpl
    def vyre_subgroup_size_range(self):
        self._seen("vyre_subgroup_size_range")
        return FULL_CAPS["subgroup_size_range"]

    @hookimpl
    def vyre_max_storage_buffer_bytes(self):
        self._seen("vyre_max_storage_buffer_bytes")
        return FULL_CAPS["max_storage_buffer_bytes"]

    @hookimpl
    def vyre_max_workgroup_memory_bytes(self):
        self._seen("vyre_max_workgroup_memory_bytes")
        return FULL_CAPS["max_workgroup_memory_bytes"]

    @hookimpl
    def vyre_device_profile(self):
        self._seen("vyre_device_profile")
        return dict(FULL_PROFILE)

    @hookimpl
    def vyre_capabilities(self):
        self._seen("vyre_capabilities")
        return Capabilities(**FULL_CAPS, extra=dict(FULL_FACTS))

    # devices
    @hookimpl
    def vyre_devices(self):
        self._seen("vyre_devices")
        return [DeviceInfo(0, "full zero", "vyre", 2**30), {"id": 3, "name": "full three"}]

    @hookimpl
    def vyre_select_device(self, device_id):
        self._seen("vyre_select_device")
        self.selected = device_id

    # lifecycle
    @hookimpl
    def vyre_prepare(self):
        self._seen("vyre_prepare")

    @hookimpl
    def vyre_flush(self):
        self._seen("vyre_flush")

    @hookimpl
    def vyre_shutdown(self):
        self._seen("vyre_shutdown")

    @hookimpl
    def vyre_device_lost(self):
        self._seen("vyre_device_lost")
        return True

    @hookimpl
    def vyre_try_recover(self):
        self._seen("vyre_try_recover")  # returns None: recovered


A8 = np.arange(8, dtype=np.uint32) * 3
B8 = np.array([5, 0, 7, 2**31, 9, 1, 0xFFFF, 3], dtype=np.uint32)
XOR8 = (A8 ^ B8).tolist()


def tagged(tag: str) -> list[int]:
    return [(v + TAGS[tag]) % 2**32 for v in XOR8]


# Each check exercises one hook through BackendHost and asserts the override's answer.


def check_backend_id(host, backend):
    assert host.id() == "full"  # read once, when the host loaded the backend
    assert BackendHost(backend, name="full-again").id() == "full"


def check_backend_version(host, backend):
    assert host.version() == "3.1.4-full"
    # the version is part of every pipeline cache key
    assert host.compile(xor_program()).key == pipeline_cache_key(
        xor_program(), DispatchConfig(), "full", "3.1.4-full")


def check_backend_precedence(host, backend):
    assert host.precedence() == 7


def check_backend_claims(host, backend):
    # claims are read in the parent at registration; the host's loaded backend answers them
    assert host.loaded.call("vyre_backend_claims") == {
        "supports_f64": True, "max_workgroup_size": [8, 2, 1], "subgroup_size": 32}
    from vyre_core.registry import register_plugin
    claims = register_plugin(FullBackend()).claims
    assert claims.supports_f64 is True and claims.subgroup_size == 32
    assert claims.max_workgroup_size == (8, 2, 1)
    assert claims.max_invocations_per_workgroup == 16


def check_is_reference_oracle(host, backend):
    assert host.is_reference_oracle() is True


def check_supported_ops(host, backend):
    # (contract 1's query: the host reads the record, so it is asked only directly)
    assert host.loaded.call("vyre_supported_ops") == FULL_CAPS["supported_ops"]
    assert host.supported_ops() == FULL_CAPS["supported_ops"] <= ir.ALL_OPS


def check_lowers_math_library(host, backend):
    """A backend that computes the math library itself is given programs as they are
    (and is asked about the library version the worker has)."""
    program = xor_program()
    assert host.runnable(program) is program
    assert backend.math_version == math_library_version()


def check_dispatch(host, backend):
    # the framework enters through the (overridden) borrowed hook, which calls dispatch
    out = host.dispatch(xor_program(), [A8, B8])
    assert out[0].tolist() == tagged("vyre_dispatch_borrowed")
    assert backend.calls.index("vyre_dispatch") > backend.calls.index("vyre_dispatch_borrowed")
    raw = host.loaded.call("vyre_dispatch", program=xor_program(), inputs=[A8, B8],
                           config=DispatchConfig(grid_override=(2,)))
    assert raw[0].tolist() == tagged("vyre_dispatch")


def check_dispatch_borrowed(host, backend):
    out = host.dispatch(xor_program(), [A8, B8])
    assert out[0].tolist() == tagged("vyre_dispatch_borrowed")
    assert backend.calls.count("vyre_dispatch_borrowed") == 1


def check_dispatch_timed(host, backend):
    out = host.dispatch(xor_program(), [A8, B8], DispatchConfig(profile=True, label="xor"))
    assert out[0].tolist() == tagged("vyre_dispatch_timed")
    assert out.timing == Timing(wall_ns=123_456, device_ns=789, label="xor")
    assert "vyre_dispatch_borrowed" not in backend.calls


def check_dispatch_into(host, backend):
    target = np.zeros(8, dtype=np.uint32)
    host.dispatch_into(xor_program(), [A8, B8], [target])
    assert target.tolist() == tagged("vyre_dispatch_into")
    assert "vyre_dispatch_borrowed" not in backend.calls


def check_compile(host, backend):
    pipeline = host.compile(xor_program())
    assert backend.calls.count("vyre_compile") == 1
    assert pipeline.dispatch([A8, B8])[0].tolist() == tagged("pipeline")
    assert pipeline.dispatch([A8, B8])[0].tolist() == tagged("pipeline")
    assert backend.calls.count("pipeline.dispatch") == 2
    assert backend.calls.count("vyre_compile") == 1
    assert "vyre_dispatch_borrowed" not in backend.calls


def check_pipeline_cache_snapshot(host, backend):
    assert host.pipeline_cache_snapshot() == CacheSnapshot(hits=3, misses=1, entries=2)


def check_dispatch_async(host, backend):
    handle = host.dispatch_async(xor_program(), [A8, B8])
    assert handle.is_ready() is False and handle.is_ready() is True  # FullPending's polls
    assert handle.result(timeout=1.0)[0].tolist() == tagged("vyre_dispatch_async")
    assert "vyre_dispatch_borrowed" not in backend.calls


def _resident_round_trip(host, backend):
    handles = [host.allocate_resident(32) for _ in range(3)]
    assert len(set(handles)) == 3 and all(backend.resident[h] == bytes(32) for h in handles)
    host.upload_resident(handles[0], A8.tobytes())
    host.upload_resident(handles[1], B8.tobytes())
    timed = host.dispatch_resident(xor_program(), handles, DispatchConfig(label="res"))
    assert timed == TimedDispatch([], Timing(wall_ns=11, device_ns=5, label="res"))
    assert np.frombuffer(host.download_resident(handles[2]), np.uint32).tolist() == XOR8
    for h in handles:
        assert host.free_resident(h) is None
    assert not set(handles) & set(backend.resident)


def check_allocate_resident(host, backend):
    assert host.allocate_resident(8) == 41
    assert backend.resident == {41: bytes(8)}


def check_upload_resident(host, backend):
    handle = host.allocate_resident(4)
    assert host.upload_resident(handle, b"\x01\x02\x03\x04") is None  # None is the answer
    assert backend.resident[handle] == b"\x01\x02\x03\x04"
    _resident_round_trip(host, backend)


def check_download_resident(host, backend):
    handle = host.allocate_resident(4)
    backend.resident[handle] = b"abcd"
    assert host.download_resident(handle) == b"abcd"


def check_free_resident(host, backend):
    handle = host.allocate_resident(4)
    assert host.free_resident(handle) is None  # None is the answer, not "fall through"
    assert handle not in backend.resident


def check_dispatch_resident(host, backend):
    _resident_round_trip(host, backend)
    assert backend.calls.count("vyre_dispatch_resident") == 1


def xor_sequence() -> Sequence:
    b = SequenceBuilder()
    b.input("a", ir.u32, 8)
    b.input("b", ir.u32, 8)
    b.transient("out", ir.u32, 8)
    b.step(xor_program())
    return b.build(returns=["out"])


def check_dispatch_sequence(host, backend):
    run = host.dispatch_sequence(xor_sequence(), [A8, B8], {}, DispatchConfig(label="s"))
    assert [o.tolist() for o in run.outputs] == [[x + 6000 for x in XOR8]]
    assert run.timing == Timing(7, None, "s")
    assert "vyre_dispatch_borrowed" not in backend.calls


def check_device_profile(host, backend):
    assert host.device_profile() == FULL_PROFILE
    assert host.capabilities().extra == FULL_FACTS  # (the record's, not the profile's)


def check_capabilities(host, backend):
    caps = host.capabilities()
    assert caps == Capabilities(**FULL_CAPS) and caps.extra == FULL_FACTS
    host.capabilities()
    assert backend.calls == ["vyre_capabilities"]  # asked once, and nothing else


def check_devices(host, backend):
    assert host.devices() == [DeviceInfo(0, "full zero", "vyre", 2**30, False),
                              DeviceInfo(3, "full three")]
    host.devices()
    assert backend.calls == ["vyre_devices"]  # listed once


def check_select_device(host, backend):
    host.select_device(3)
    assert backend.selected == 3 and host.device == 3
    with pytest.raises(InvalidConfigError) as err:
        host.select_device(1)
    assert "no device 1; its devices: 0 (full zero), 3 (full three)" in str(err.value)
    assert "PoolOptions(devices=...)" in str(err.value) and host.device == 3
    host.prepare()
    with pytest.raises(InvalidInputError, match="prepared on device 3"):
        host.select_device(0)
    assert backend.calls == ["vyre_devices", "vyre_select_device", "vyre_prepare"]


def check_prepare(host, backend):
    host.prepare()
    host.prepare()
    assert backend.calls.count("vyre_prepare") == 1  # the host prepares once


def check_flush(host, backend):
    host.flush()
    assert backend.calls == ["vyre_flush"]


def check_shutdown(host, backend):
    host.prepare()
    host.shutdown()
    host.prepare()  # prepared again after a shutdown
    assert backend.calls == ["vyre_prepare", "vyre_shutdown", "vyre_prepare"]


def check_device_lost(host, backend):
    assert host.device_lost() is True


def check_try_recover(host, backend):
    before = host.compile(xor_program())
    host.capabilities()
    probes = backend.calls.count("vyre_capabilities")
    assert host.generation == 0 and before.valid
    assert host.try_recover() is None  # the default would have raised
    assert host.generation == 1
    assert not before.valid
    with pytest.raises(PipelineInvalidatedError) as err:
        before.dispatch([A8, B8])
    assert "generation 0" in str(err.value) and "\nFix: " in str(err.value)
    assert err.value.details == {"generation": 0, "backend": "full"}
    after = host.compile(xor_program())
    assert after.generation == 1 and after.valid
    assert after.dispatch([A8, B8])[0].tolist() == tagged("pipeline")
    # capabilities are probed again in the new generation
    host.capabilities()
    assert backend.calls.count("vyre_capabilities") == probes + 1


def _capability_check(name: str):
    """Contract 1's query of ``name``: the host reads the record, so it is asked directly."""
    def check(host, backend):
        answer = host.loaded.call(f"vyre_{name}")
        assert answer == FULL_CAPS[name] == getattr(host.capabilities(), name)
        assert answer != getattr(Capabilities(), name)  # not the default
    return check


FULL_CHECKS = {
    "vyre_backend_id": check_backend_id,
    "vyre_backend_version": check_backend_version,
    "vyre_backend_precedence": check_backend_precedence,
    "vyre_backend_claims": check_backend_claims,
    "vyre_is_reference_oracle": check_is_reference_oracle,
    "vyre_supported_ops": check_supported_ops,
    "vyre_lowers_math_library": check_lowers_math_library,
    "vyre_dispatch": check_dispatch,
    "vyre_dispatch_borrowed": check_dispatch_borrowed,
    "vyre_dispatch_timed": check_dispatch_timed,
    "vyre_dispatch_into": check_dispatch_into,
    "vyre_compile": check_compile,
    "vyre_pipeline_cache_snapshot": check_pipeline_cache_snapshot,
    "vyre_dispatch_async": check_dispatch_async,
    "vyre_allocate_resident": check_allocate_resident,
    "vyre_upload_resident": check_upload_resident,
    "vyre_download_resident": check_download_resident,
    "vyre_free_resident": check_free_resident,
    "vyre_dispatch_resident": check_dispatch_resident,
    "vyre_dispatch_sequence": check_dispatch_sequence,
    **{f"vyre_{name}": _capability_check(name) for name in CAPABILITY_HOOKS
       if name != "supported_ops"},
    "vyre_device_profile": check_device_profile,
    "vyre_capabilities": check_capabilities,
    "vyre_devices": check_devices,
    "vyre_select_device": check_select_device,
    "vyre_prepare": check_prepare,
    "vyre_flush": check_flush,
    "vyre_shutdown": check_shutdown,
    "vyre_device_lost": check_device_lost,
    "vyre_try_recover": check_try_recover,
}


def test_full_backend_tests_cover_every_hook_of_the_contract():
    """A hook added to the contract without a FullBackend override and a check fails here."""
    assert set(FULL_CHECKS) == set(HOOK_NAMES)
    loaded = LoadedBackend(FullBackend())
    assert [h for h in HOOK_NAMES if not loaded.implements(h)] == []
    assert {n for n in vars(FullBackend) if n.startswith("vyre_")} == set(HOOK_NAMES)


@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_full_backend_override_wins(hook):
    backend = FullBackend()
    host = BackendHost(backend)
    backend.calls.clear()
    FULL_CHECKS[hook](host, backend)
    assert hook in backend.calls, f"{hook} was answered by someone other than the backend"


def test_full_invocation_limit_is_enforced_over_the_workgroup_product():
    backend = FullBackend()
    host = BackendHost(backend)
    # (8, 1, 1) fits max_workgroup_size (8, 2, 1) but not max_invocations_per_workgroup 7
    with pytest.raises(LaunchLimitError, match="has 8 invocations, the limit is 7"):
        host.dispatch(xor_program(workgroup=(8,)), [A8, B8])
    with pytest.raises(LaunchLimitError, match="grid axis x has 8 workgroups, the limit is 4"):
        host.dispatch(xor_program(workgroup=(1,)), [A8, B8])
    with pytest.raises(LaunchLimitError, match="workgroup axis y is 4, the limit is 2"):
        host.dispatch(xor_program(workgroup=(1, 4)), [A8, B8])
    assert "vyre_dispatch_borrowed" not in backend.calls
    assert host.dispatch(xor_program(workgroup=(7,)), [A8, B8])[0].tolist() == tagged(
        "vyre_dispatch_borrowed")


def test_a_backend_returning_none_is_not_overruled_by_a_default():
    """The backend's implementation wins even when its answer is None: a compile hook
    that returns None gives the passthrough pipeline (not the default's), and a
    subgroup_size of None stays None."""
    plugin = minimal_backend(vyre_compile=lambda program, config: None,
                             vyre_subgroup_size=lambda: None,
                             vyre_upload_resident=lambda handle, data: None)
    host = BackendHost(plugin)
    assert host.loaded.implements("vyre_upload_resident")
    assert host.upload_resident(1, b"xy") is None  # the default would raise
    assert host.capabilities().subgroup_size is None
    assert host.capabilities().subgroup_size_range is None
    assert host.compile(sum4_program()).dispatch([X4])[0].tolist() == [5]


def test_the_subgroup_range_defaults_to_the_deprecated_width(monkeypatch):
    """A backend still on vyre_subgroup_size gets (n, n) as its range, and is warned."""
    monkeypatch.setattr(deprecations, "_warned", {})  # (as in a fresh process)
    with pytest.warns(VyreDeprecationWarning, match="with subgroup_size_range in its record"):
        host = BackendHost(minimal_backend(vyre_subgroup_size=lambda: 32))
    caps = host.capabilities()
    assert (caps.subgroup_size, caps.subgroup_size_range) == (32, (32, 32))
    assert Capabilities.from_dict(caps.to_dict()) == caps


# -- one capabilities hook, and contract 1's queries beside it ---------------------------------


class ContractOneBackend(FullBackend):
    """The full backend as contract 1 wrote it: every per-capability query and the
    profile, no ``vyre_capabilities``."""

    vyre_capabilities = None


def test_a_contract_1_backend_gets_its_record_from_its_queries_and_profile(monkeypatch):
    """The default of vyre_capabilities asks each old query once and takes the profile's
    facts (the keys that are no field) as ``extra``: a plugin written before the hook
    sees no change, and is told the Fix."""
    monkeypatch.setattr(deprecations, "_warned", {})
    with pytest.warns(VyreDeprecationWarning, match="Fix: Implement vyre_capabilities"):
        backend = ContractOneBackend()
        host = BackendHost(backend)
    assert not host.loaded.implements("vyre_capabilities")
    backend.calls.clear()
    caps = host.capabilities()
    assert caps == Capabilities(**FULL_CAPS) and caps.extra == FULL_PROFILE
    assert sorted(backend.calls) == sorted(
        [f"vyre_{name}" for name in CAPABILITY_HOOKS] + ["vyre_device_profile"])


def test_a_contract_1_profiles_loop_trip_limit_is_the_field_it_became(monkeypatch):
    """vyre 0.1 read the loop trip limit from the device profile: a contract 1 backend that
    reports it there still has its loops routed by it, and says nothing new."""
    monkeypatch.setattr(deprecations, "_warned", {})

    class Limited(ContractOneBackend):
        @hookimpl
        def vyre_device_profile(self):
            return {**FULL_PROFILE, "max_loop_trip": 65535}

    with pytest.warns(VyreDeprecationWarning, match="Fix: Implement vyre_capabilities"):
        host = BackendHost(Limited())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        caps = host.capabilities()
    assert caps.max_loop_trip == 65535 and caps.extra == FULL_PROFILE

    class NotACount(ContractOneBackend):  # (ignored, as vyre 0.1's routing ignored it)
        @hookimpl
        def vyre_device_profile(self):
            return {**FULL_PROFILE, "max_loop_trip": 1e6}

    with pytest.warns(VyreDeprecationWarning):
        odd = BackendHost(NotACount()).capabilities()
    assert odd.max_loop_trip is None and odd.extra == FULL_PROFILE


def test_the_old_queries_answer_from_the_record_of_a_backend_that_gives_one():
    """A caller still on contract 1's queries (a plugin's own tests, a tool) and the host
    reading the record never disagree; a dict of fields is a record too; the profile's
    default is the record, flat, with the backend's id."""
    record = {"supports_f16": True, "max_workgroup_size": [16, 4, 1],
              "subgroup_size_range": [4, 32], "supported_ops": ["binop.add"],
              "extra": {"device": "card"}}
    host = BackendHost(minimal_backend(vyre_capabilities=lambda: dict(record)))
    caps = host.capabilities()
    assert (caps.supports_f16, caps.max_workgroup_size, caps.subgroup_size_range) == (
        True, (16, 4, 1), (4, 32))
    assert caps.max_invocations_per_workgroup == 64  # (derived from the size, as in claims)
    assert caps.extra == {"device": "card"}
    for name in CAPABILITY_HOOKS:
        assert host.loaded.call(f"vyre_{name}") == getattr(caps, name), name
    assert host.device_profile() == {
        "backend": "minimal", "device": "card",
        **{k: v for k, v in caps.to_dict().items() if k != "extra"}}


@pytest.mark.parametrize("answer, cause", [
    (42, "vyre_capabilities answered 42, not a Capabilities record"),
    (None, "vyre_capabilities answered None, not a Capabilities record"),
    ({"supports_f17": True}, "unknown capability claims ['supports_f17']"),
])
def test_a_bad_record_is_refused_with_a_fix(answer, cause):
    host = BackendHost(minimal_backend(vyre_capabilities=lambda: answer))
    with pytest.raises(InvalidConfigError) as caught:
        host.capabilities()
    assert caught.value.cause == cause
    assert "vyre_capabilities" in caught.value.fix or "Claim only" in caught.value.fix


# -- load-time refusals -----------------------------------------------------------------------


def _plugin(contract=1, **hooks) -> types.ModuleType:
    plugin = types.ModuleType("refused_backend")
    if contract is not None:
        plugin.VYRE_CONTRACT = contract
    for name, (marked, fn) in hooks.items():
        setattr(plugin, name, hookimpl(fn) if marked else fn)
    return plugin


def _backend_id():
    return "refused"


def _dispatch(program, inputs, config):
    return []


BOTH = {"vyre_backend_id": (True, _backend_id), "vyre_dispatch": (True, _dispatch)}


def _refused(plugin) -> PluginLoadError:
    with pytest.raises(PluginLoadError) as err:
        BackendHost(plugin)
    message = str(err.value)
    assert "\nFix: " in message
    assert "'refused_backend'" in message
    return err.value


def test_the_refusal_fixture_is_otherwise_loadable():
    assert BackendHost(_plugin(**BOTH)).id() == "refused"


def test_refused_without_id_and_dispatch():
    message = str(_refused(_plugin()))
    assert "vyre_backend_id" in message and "vyre_dispatch" in message
    assert "does not implement ['vyre_backend_id', 'vyre_dispatch']" in message


@pytest.mark.parametrize("present", ["vyre_backend_id", "vyre_dispatch"])
def test_refused_with_only_one_required_hook(present):
    missing = ({"vyre_backend_id", "vyre_dispatch"} - {present}).pop()
    message = str(_refused(_plugin(**{present: BOTH[present]})))
    assert f"does not implement [{missing!r}]" in message


def test_refused_without_vyre_contract():
    message = str(_refused(_plugin(contract=None, **BOTH)))
    assert "does not declare the contract" in message
    assert "VYRE_CONTRACT = 1" in message


def test_refused_with_another_contract_major():
    message = str(_refused(_plugin(contract=2, **BOTH)))
    assert "targets contract 2" in message and "implements contract 1" in message


@pytest.mark.parametrize("marked", [True, False], ids=["marked", "unmarked"])
def test_refused_with_an_unknown_hook(marked):
    def vyre_dispatchh(program, inputs, config):  # a fresh function: never marked before
        return []

    typo = {"vyre_dispatchh": (marked, vyre_dispatchh)}
    message = str(_refused(_plugin(**BOTH, **typo)))
    assert "unknown hooks ['vyre_dispatchh']" in message
    # the closest hook, not all of them (39 names were dumped)
    assert "Did you mean vyre_dispatchh -> vyre_dispatch? " in message
    assert "vyre_free_resident" not in message


def test_an_unknown_hook_like_no_contract_hook_is_refused_without_a_guess():
    def vyre_make_coffee(program):
        return []

    message = str(_refused(_plugin(**BOTH, vyre_make_coffee=(True, vyre_make_coffee))))
    assert "unknown hooks ['vyre_make_coffee']" in message
    assert "Did you mean" not in message and "hookspec.py lists them" in message


def test_refused_with_an_argument_not_in_the_spec():
    def vyre_dispatch(program, inputs, config, stream):
        return []

    message = str(_refused(_plugin(**{**BOTH, "vyre_dispatch": (True, vyre_dispatch)})))
    assert "bad hook" in message and "stream" in message
    assert "hookspec.py" in message  # the Fix points at the contract


def test_a_subset_of_the_spec_arguments_is_accepted():
    plugin = _plugin(**BOTH, vyre_compile=(True, lambda program: None))
    assert BackendHost(plugin).loaded.implements("vyre_compile")


# -- backend exceptions -----------------------------------------------------------------------


def test_a_foreign_exception_in_dispatch_becomes_a_dispatch_error():
    def vyre_dispatch(program, inputs, config):
        return [np.array([1 // (len(inputs) - 1)], dtype=np.uint32)]  # ZeroDivisionError

    host = BackendHost(minimal_backend(vyre_dispatch=vyre_dispatch))
    with pytest.raises(DispatchError) as err:
        host.dispatch(sum4_program(), [X4])
    assert type(err.value) is DispatchError
    assert "ZeroDivisionError" in err.value.cause
    assert "'minimal'" in err.value.cause and "\nFix: " in str(err.value)
    trace = err.value.details["traceback"]
    assert "ZeroDivisionError" in trace and "in vyre_dispatch" in trace
    assert isinstance(err.value.__cause__, ZeroDivisionError)


def test_a_vyre_error_from_the_backend_passes_through_unchanged():
    raised = InvalidInputError("the minimal backend refuses these bytes", "Send others.")

    def vyre_dispatch(program, inputs, config):
        raise raised

    host = BackendHost(minimal_backend(vyre_dispatch=vyre_dispatch))
    with pytest.raises(VyreError) as err:
        host.dispatch(sum4_program(), [X4])
    assert type(err.value) is InvalidInputError
    assert err.value is raised
    assert err.value.fix == "Send others."


def test_a_compile_hook_returning_a_non_pipeline_is_refused():
    plugin = minimal_backend(vyre_compile=lambda program, config: "not a pipeline")
    with pytest.raises(DispatchError) as err:
        BackendHost(plugin).compile(sum4_program())
    assert "vyre_compile returned str, which has no dispatch method" in str(err.value)
    assert "\nFix: " in str(err.value)


# -- every host dispatch path applies the config and checks the outputs ----------------------


def counter_program() -> ir.Program:
    """A read_write counter: each pass adds 1 until it reaches 5 (a fixpoint)."""
    k = ir.Kernel(workgroup=(1,))
    c = k.read_write("c", ir.u32, 1)
    with k.if_(c[0] < 5):
        c[0] = c[0] + 1
    return k.build()


def test_dispatch_into_applies_fixpoint_iterations():
    """With the reference backend, a read_write counter and fixpoint_iterations=10,
    dispatch_into writes what dispatch returns: [5], not the single pass [1]."""
    import vyre_reference.backend as reference_plugin

    host = BackendHost(reference_plugin)
    config = DispatchConfig(fixpoint_iterations=10)
    assert host.dispatch(counter_program(), [np.zeros(1, np.uint32)], config)[0].tolist() == [5]
    target = np.zeros(1, dtype=np.uint32)
    host.dispatch_into(counter_program(), [np.zeros(1, np.uint32)], [target], config)
    assert target.tolist() == [5]


def test_dispatch_async_applies_fixpoint_iterations():
    import vyre_reference.backend as reference_plugin

    host = BackendHost(reference_plugin)
    config = DispatchConfig(fixpoint_iterations=10)
    handle = host.dispatch_async(counter_program(), [np.zeros(1, np.uint32)], config)
    assert [o.tolist() for o in handle.result()] == [[5]]


def test_dispatch_async_checks_the_backend_outputs_like_dispatch():
    """Bytes outputs (allowed by the contract) come back as arrays, and a wrong-length
    output is refused, through dispatch_async exactly as through dispatch."""
    as_bytes = minimal_backend(vyre_dispatch=lambda program, inputs, config: [
        o.tobytes() for o in reference_run(program, inputs, grid=config.grid_override)])
    host = BackendHost(as_bytes)
    assert [o.tolist() for o in host.dispatch(sum4_program(), [X4])] == [[5]]
    result = host.dispatch_async(sum4_program(), [X4]).result()
    assert all(isinstance(o, np.ndarray) for o in result), result
    assert [o.tolist() for o in result] == [[5]]

    too_long = minimal_backend(
        vyre_dispatch=lambda program, inputs, config: [np.zeros(3, np.uint32)])
    host = BackendHost(too_long)
    with pytest.raises(DispatchError, match="returned 3 elements"):
        host.dispatch(sum4_program(), [X4])
    with pytest.raises(DispatchError, match="returned 3 elements"):
        host.dispatch_async(sum4_program(), [X4]).result()


def test_dispatch_async_result_failure_leaves_as_a_dispatch_error():
    """An exception raised by the backend's handle in result() leaves the host as a
    DispatchError with the traceback in details, like every other plugin failure."""

    class FailingPending:
        def is_ready(self):
            return True

        def result(self, timeout=None):
            return [np.array([1 // 0], dtype=np.uint32)]

    plugin = minimal_backend(vyre_dispatch_async=lambda program, inputs, config:
                             FailingPending())
    handle = BackendHost(plugin).dispatch_async(sum4_program(), [X4])
    with pytest.raises(DispatchError) as err:
        handle.result()
    assert "ZeroDivisionError" in err.value.details["traceback"]
