"""Every Driver verb has one shape, ``(work, inputs, *, backend=None, config=None, ...)``,
and takes a program or a sequence where both make sense; vyre 0.1's call forms give the
same bytes, warning once with their Fix, until 1.0.0 refuses them. Real workers (the
reference backend); bytes compared exactly."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vyre_core
from vyre_core import (
    CompiledPipeline,
    CompiledSequence,
    DispatchConfig,
    Explanations,
    RouteDecision,
    deprecations,
    ir,
)
from vyre_core.deprecations import Deprecation, VyreDeprecationWarning
from vyre_core.errors import InvalidConfigError, InvalidInputError
from vyre_core.registry import Registry
from vyre_core.sequence import SequenceBuilder

pytestmark = pytest.mark.processes

N = 8
X = np.arange(N, dtype=np.float32)
TWICE = (X * 2).tobytes()


def doubled() -> ir.Program:
    k = ir.Kernel(workgroup=(N,))
    x = k.read("x", ir.f32, N)
    out = k.output("out", ir.f32, N)
    out[ir.global_id(0)] = x[ir.global_id(0)] * 2.0
    return k.build()


def doubled_twice() -> vyre_core.Sequence:
    s = SequenceBuilder()
    s.input("x", ir.f32, N)
    s.transient("mid", ir.f32, N)
    s.transient("out", ir.f32, N)
    s.step(doubled(), {"x": "x", "out": "mid"})
    s.step(doubled(), {"x": "mid", "out": "out"})
    return s.build(returns=["out"])


@vyre_core.kernel
def scaled(a: vyre_core.f32, x: vyre_core.Array[vyre_core.f32],
           out: vyre_core.Array[vyre_core.f32]) -> None:
    i = vyre_core.global_id(0)
    out[i] = a * x[i]


@pytest.fixture(scope="module")
def drv():
    with vyre_core.Driver(Registry.discover("reference")) as d:
        yield d


@pytest.fixture
def fresh(monkeypatch):
    """As in a new process: nothing warned yet."""
    monkeypatch.setattr(deprecations, "_warned", {})


def old(call, name: str):
    """``call()`` in an old form: it warns once, naming the form and its Fix; a second
    call says nothing."""
    entry = deprecations.of_kind("call")[name]
    with pytest.warns(VyreDeprecationWarning) as seen:
        got = call()
    assert [str(w.message) for w in seen] == [
        f"{entry.describe(seen[0].message.args[0].split(' uses ')[0])}. "
        f"Fix: {entry.replacement}"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call()
    return got


def test_a_program_and_a_sequence_go_through_the_same_verbs(drv):
    (once,) = drv.dispatch(doubled(), [X], backend="reference")
    (twice,) = drv.dispatch(doubled_twice(), [X], backend="reference")
    assert once.tobytes() == TWICE and twice.tobytes() == (X * 4).tobytes()
    assert isinstance(drv.compile(doubled()), CompiledPipeline)
    sequence = drv.compile(doubled_twice(), config=DispatchConfig(timeout=60))
    assert isinstance(sequence, CompiledSequence)
    assert sequence.dispatch([X])[0].tobytes() == twice.tobytes()
    assert drv.route(doubled_twice()).backend == "reference"
    assert isinstance(drv.route(doubled(), [X]), RouteDecision)
    assert isinstance(drv.explain(doubled(), [X], config=DispatchConfig(timeout=60)),
                      Explanations)
    out = np.zeros(N, np.float32)
    drv.launch(scaled, (2.0, X, out), dim=N)
    assert out.tobytes() == TWICE
    out[:] = 0
    drv.launch_async(scaled, (2.0, X, out), dim=N).result(timeout=60)
    assert out.tobytes() == TWICE
    pending = drv.dispatch_async(doubled_twice(), [X], config=DispatchConfig(fuse=True))
    (started,) = pending.result(timeout=60)
    assert started.tobytes() == twice.tobytes() and pending.result().loops == []


def test_dispatch_async_takes_what_dispatch_takes():
    """One shape: the started form of a verb has the verb's own parameters."""
    import inspect

    def shape(verb):
        return {name: (p.kind, p.default) for name, p in
                inspect.signature(getattr(vyre_core.Driver, verb)).parameters.items()}

    assert shape("dispatch_async") == shape("dispatch")
    assert shape("launch_async") == shape("launch")


def test_dispatch_async_writes_into_out_and_runs_on_resident_buffers(drv):
    out = np.full(N, 7, np.float32)
    pending = drv.dispatch_async(doubled(), [X], backend="reference", out=[out])
    (got,) = pending.result(timeout=60)
    assert got is out and out.tobytes() == TWICE
    shared = drv.empty(N, np.float32)  # (the worker writes straight into it)
    (got,) = drv.dispatch_async(doubled_twice(), [X], out=[shared]).result(timeout=60)
    assert got is shared and shared.tobytes() == (X * 4).tobytes()
    out[:] = 0  # (result() fills the arrays once: asked again, it answers them as they are)
    assert pending.result()[0] is out and not out.any()

    b = SequenceBuilder()
    b.input("x", ir.f32, N)
    b.resident("acc", ir.f32, N)
    b.step(doubled(), {"x": "x", "out": "acc"})
    acc = drv.allocate_resident(N * 4, backend="reference")
    assert list(drv.dispatch_async(b.build(), [X], resident={"acc": acc}).result(60)) == []
    assert acc.download() == TWICE
    with pytest.raises(InvalidInputError, match="out= array for 'out' has 4 elements"):
        drv.dispatch_async(doubled(), [X], out=[np.zeros(4, np.float32)])  # (at once)
    with pytest.raises(InvalidInputError, match="resident= names a sequence's resident"):
        drv.dispatch_async(doubled(), [X], resident={"acc": acc})


def test_backend_and_config_by_position_still_work_and_warn_once(drv, fresh):
    got = old(lambda: drv.dispatch(doubled(), [X], "reference",
                                   DispatchConfig(timeout=60)), "positional backend and config")
    assert got[0].tobytes() == TWICE
    for call in (lambda: drv.dispatch_async(doubled(), [X], "reference").result(timeout=60),
                 lambda: drv.compile(doubled(), "reference").dispatch([X])):
        with pytest.warns(VyreDeprecationWarning, match="positional backend and config"):
            assert call()[0].tobytes() == TWICE
    label = DispatchConfig(label="tuned")
    with pytest.warns(VyreDeprecationWarning, match="positional backend and config"):
        chosen = drv.tuned_config(doubled(), [X], "reference", label)
    assert chosen == drv.tuned_config(doubled(), [X], backend="reference", config=label)
    assert chosen.label == "tuned"
    with pytest.warns(VyreDeprecationWarning, match="positional backend and config"):
        assert drv.probe("reference", 60.0) == drv.probe("reference")
    with pytest.warns(VyreDeprecationWarning, match="positional backend and config"):
        buffer = drv.allocate_resident(16, "reference", 60.0)
    assert buffer.byte_len == 16 and buffer.pool.backend == "reference"


def test_launch_with_dim_before_args_still_works(drv, fresh):
    out = np.zeros(N, np.float32)
    old(lambda: drv.launch(scaled, N, (2.0, X, out)), "Driver.launch(kernel, dim, args)")
    assert out.tobytes() == TWICE
    out[:] = 0
    with pytest.warns(VyreDeprecationWarning, match="positional backend and config"):
        drv.launch(scaled, N, args=(2.0, X, out), config=DispatchConfig(timeout=60))
        drv.launch_async(scaled, N, (2.0, X, out), "reference").result(timeout=60)
    assert out.tobytes() == TWICE


def test_the_sequence_verbs_are_dispatch_and_compile(drv, fresh):
    (got,) = old(lambda: drv.dispatch_sequence(doubled_twice(), [X], None, "reference"),
                 "Driver.dispatch_sequence")
    assert got.tobytes() == (X * 4).tobytes()
    handle = old(lambda: drv.compile_sequence(doubled_twice(), "reference"),
                 "Driver.compile_sequence")
    assert handle.dispatch([X])[0].tobytes() == got.tobytes()


def test_timeout_beside_a_config_is_the_configs(drv, fresh):
    decision = old(lambda: drv.route(doubled(), timeout=60.0), "timeout= beside config=")
    assert decision.backend == "reference"
    with pytest.warns(VyreDeprecationWarning):  # (backend and timeout by position)
        assert drv.route(doubled(), "reference", 60.0).backend == "reference"
        assert isinstance(drv.explain(doubled(), 60.0), Explanations)
    with pytest.warns(VyreDeprecationWarning, match="timeout= beside config="):
        assert drv.compile(doubled(), timeout=60.0).dispatch([X])[0].tobytes() == TWICE
    with pytest.raises(InvalidConfigError,
                       match=r"got timeout=1\.0 and config\.timeout=2\.0") as e:
        drv.compile(doubled(), timeout=1.0, config=DispatchConfig(timeout=2.0))
    assert "bounds the whole call" in e.value.fix


def test_dispatch_resident_answers_outputs_with_its_timing(drv, fresh):
    x = drv.allocate_resident(4 * N, backend="reference")
    out = drv.allocate_resident(4 * N, backend="reference")
    x.upload(X)
    got = drv.dispatch_resident(doubled(), [x, out], config=DispatchConfig(label="r"))
    assert got == [] and got.timing.wall_ns > 0 and got.timing.label == "r"
    assert out.download() == TWICE
    assert old(lambda: got.wall_ns, "Driver.dispatch_resident's Timing") == \
        got.timing.wall_ns
    with pytest.warns(VyreDeprecationWarning, match="positional backend and config"):
        drv.dispatch_resident(doubled(), [x, out], DispatchConfig(label="again"))
    with pytest.warns(VyreDeprecationWarning, match="ResidentBuffer.upload uses"):
        x.upload(X * 2, 60.0)
    assert x.download(timeout=60.0) == TWICE


def test_wrong_calls_are_refused_with_a_fix(drv):
    cases = [
        (lambda: drv.dispatch(doubled(), [X], "reference", None, None, "extra"),
         InvalidConfigError, "takes 2 arguments by position, and 6 were given"),
        (lambda: drv.dispatch(doubled(), [X], "reference", backend="reference"),
         InvalidConfigError, "got backend twice"),
        (lambda: drv.dispatch(doubled(), [X], grid=(4,)),
         InvalidConfigError, "unknown keyword argument grid="),
        (lambda: drv.probe("reference", wait=3),
         InvalidConfigError, "unknown keyword argument wait="),
        (lambda: drv.dispatch(doubled(), [X], resident={}),
         InvalidInputError, "resident= names a sequence's resident buffers"),
        (lambda: drv.dispatch(doubled_twice(), [X], dim=N),
         InvalidConfigError, "its steps say their own grids"),
        (lambda: drv.dispatch_async(doubled_twice(), [X], dim=N),
         InvalidConfigError, "its steps say their own grids"),
        (lambda: drv.launch(scaled, N, (2.0, X, np.zeros(N, np.float32)), dim=N),
         InvalidConfigError, "got dim twice"),
        (lambda: drv.compile(doubled(), timeout=5.0, config="fast"),
         InvalidConfigError, "config must be a DispatchConfig, got str"),
    ]
    for call, error, said in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", VyreDeprecationWarning)
            with pytest.raises(error, match=said) as e:
                call()
        assert e.value.fix, said
    with pytest.raises(InvalidConfigError) as e:
        drv.probe("reference", wait=3)
    assert e.value.fix == "Call it as Driver.probe(backend, *, timeout=...)."


def test_from_its_removal_version_an_old_form_is_refused(drv, monkeypatch):
    monkeypatch.setattr(deprecations, "DEPRECATIONS", (
        Deprecation("call", "Driver.launch(kernel, dim, args)", "0.0.1", "0.1.0",
                    "Write drv.launch(kernel, args, dim=dim)."),))
    with pytest.raises(InvalidConfigError, match=r"removed in vyre 0\.1\.0, and this is vyre"):
        drv.launch(scaled, N, (2.0, X, np.zeros(N, np.float32)))
