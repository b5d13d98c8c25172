"""Specialization constants: declared in the builder, chosen per dispatch or compile (or
per sequence step), checked against their type and range, part of the program's identity
and pipeline key, and substituted before any backend sees the program."""

from __future__ import annotations

import types

import msgpack
import numpy as np
import pytest

import vyre_reference.backend as reference_plugin
from vyre_core import DispatchConfig, Driver, SequenceBuilder, ir
from vyre_core.contract import hookimpl
from vyre_core.errors import InvalidConfigError, InvalidSequenceError, ValidationError
from vyre_core.ir import wire
from vyre_core.ir.nodes import Lit, SpecConstant, SpecRef, walk
from vyre_core.launch import effective_program, plan_launch
from vyre_core.pipeline import pipeline_cache_key
from vyre_core.sequence import Sequence, Step
from vyre_core.testing import dispatch_on
from vyre_reference import run as reference_run
from vyre_workers.backend_host import BackendHost

N = 16


def scaled(default: int = 3, low: int | None = 1, high: int | None = 8) -> ir.Program:
    """out[i] = i * SCALE, summed STEPS times (STEPS a loop bound), plus an f32 gain."""
    k = ir.Kernel(workgroup=(8,))
    scale = k.constant("SCALE", ir.u32, default, low=low, high=high)
    steps = k.constant("STEPS", ir.u32, 1)
    gain = k.constant("GAIN", ir.f32, 0.5)
    out = k.output("out", ir.u32, N)
    f = k.output("f", ir.f32, N)
    i = k.let("i", ir.global_id())
    acc = k.let("acc", ir.u32(0))
    with k.loop("s", 0, steps):
        k.assign(acc, acc + i * scale)
    out[i] = acc
    f[i] = i.cast(ir.f32) * gain
    return k.build()


def expected(scale: int = 3, steps: int = 1, gain: float = 0.5) -> list[np.ndarray]:
    i = np.arange(N, dtype=np.uint64)
    return [(i * scale * steps % 2**32).astype(np.uint32),
            np.arange(N, dtype=np.float32) * np.float32(gain)]


def same_bytes(got, want) -> None:
    assert [a.tobytes() for a in got] == [b.tobytes() for b in want]


# -- the program ------------------------------------------------------------------------

@pytest.mark.fast
def test_a_constant_is_declared_typed_and_round_trips_through_the_wire_form():
    p = scaled()
    assert [(c.name, c.dtype, c.default.value) for c in p.constants] == [
        ("SCALE", ir.u32, 3), ("STEPS", ir.u32, 1), ("GAIN", ir.f32, 0.5)]
    assert (p.constants[0].low.value, p.constants[0].high.value) == (1, 8)
    data = p.to_wire()
    assert data[4] == wire.FORMAT_VERSION == 2
    again = ir.Program.from_wire(data)
    assert again == p and again.fingerprint() == p.fingerprint()


@pytest.mark.fast
def test_programs_without_constants_keep_the_bytes_they_always_had():
    """Version 1 and the same layout: fingerprints (and every cache keyed by them) stay."""
    from vyre_examples.saxpy import program as saxpy

    data = saxpy(1000).to_wire()
    assert data[4] == wire.PLAIN_FORMAT_VERSION == 1
    assert len(msgpack.unpackb(data[5:])) == 3


@pytest.mark.fast
def test_the_declaration_is_part_of_the_identity():
    assert len({scaled().fingerprint(), scaled(default=4).fingerprint(),
                scaled(high=9).fingerprint(), scaled(low=None).fingerprint()}) == 4


@pytest.mark.fast
def test_specialize_substitutes_literals_and_declares_nothing():
    p = scaled().specialize(SCALE=5, GAIN=2.0)
    assert p.constants == ()
    assert not any(isinstance(n, SpecRef) for n in walk(p.body))
    lits = {n for n in walk(p.body) if isinstance(n, Lit)}
    assert {Lit.of(ir.u32, 5), Lit.of(ir.u32, 1), Lit.of(ir.f32, 2.0)} <= lits


@pytest.mark.fast
def test_a_default_given_or_left_out_is_the_same_program():
    p = scaled()
    assert p.specialize().fingerprint() == p.specialize(SCALE=3, STEPS=1, GAIN=0.5).fingerprint()
    assert p.specialize(SCALE=4).fingerprint() != p.specialize().fingerprint()
    assert p.specialize({"SCALE": 4}) is p.specialize(SCALE=4)  # (cached)


@pytest.mark.fast
def test_a_program_without_constants_specializes_to_itself():
    from vyre_examples.saxpy import program as saxpy

    p = saxpy(64)
    assert p.specialize() is p


@pytest.mark.fast
@pytest.mark.parametrize(("values", "message"), [
    ({"SCALEE": 2}, "has no constant 'SCALEE' (did you mean 'SCALE'?) (it declares: GAIN, "
                    "SCALE, STEPS)"),
    ({"SCALE": 2.0}, "constant 'SCALE' (u32) is given 2.0, a float"),
    ({"SCALE": True}, "constant 'SCALE' (u32) is given True, a bool"),
    ({"SCALE": 9}, "constant 'SCALE' (u32) = 9 lies outside its declared range [1, 8]"),
    ({"SCALE": 0}, "lies outside its declared range [1, 8]"),
    ({"STEPS": -1}, "constant 'STEPS' (u32) cannot hold -1"),
    ({"STEPS": 2**32}, "constant 'STEPS' (u32) cannot hold 4294967296"),
    ({"GAIN": "1.0"}, "is a str, not a bool or a number"),
    ({"GAIN": None}, "is a NoneType, not a bool or a number"),
])
def test_a_bad_value_is_refused_with_a_fix(values, message):
    with pytest.raises(InvalidConfigError) as caught:
        scaled().specialize(values)
    assert message in caught.value.cause
    assert caught.value.fix


@pytest.mark.fast
def test_a_float_constant_takes_an_int_and_refuses_nan_outside_its_range():
    k = ir.Kernel()
    gain = k.constant("GAIN", ir.f32, 0.5, low=0.0, high=1.0)
    out = k.output("out", ir.f32, 1)
    out[0] = gain
    p = k.build()
    assert p.specialize(GAIN=1).fingerprint() == p.specialize(GAIN=1.0).fingerprint()
    with pytest.raises(InvalidConfigError, match="lies outside its declared range"):
        p.specialize(GAIN=float("nan"))


@pytest.mark.fast
def test_a_bool_constant_takes_only_a_bool():
    k = ir.Kernel()
    flip = k.constant("FLIP", ir.bool_, False)
    out = k.output("out", ir.u32, 1)
    out[0] = ir.select(flip, 1, 2)
    p = k.build()
    p.specialize(FLIP=True)
    with pytest.raises(InvalidConfigError, match="is given 1, a int"):
        p.specialize(FLIP=1)


@pytest.mark.fast
def test_the_builder_refuses_a_default_of_the_wrong_type():
    k = ir.Kernel()
    with pytest.raises(TypeError, match=r"constant 'TILE': default is given 1.5, a float\. "
                                        r"Fix: Give it an int\."):
        k.constant("TILE", ir.u32, 1.5)
    with pytest.raises(TypeError, match=r"constant 'TILE': high cannot hold -1: -1 does not "
                                        r"fit in u32"):
        k.constant("TILE", ir.u32, 1, high=-1)


@pytest.mark.fast
def test_an_invalid_declaration_is_a_validation_error():
    k = ir.Kernel()
    k.constant("K", ir.u32, 9, low=1, high=8)
    with pytest.raises(ValidationError, match="V028"):
        k.build()


@pytest.mark.fast
def test_requirements_weigh_the_defaults():
    assert scaled().requirements().loop_trip_bound == 1
    assert "expr.literal" in scaled().requirements().ops


# -- the config -------------------------------------------------------------------------

@pytest.mark.fast
def test_config_constants_are_canonical_pairs():
    a = DispatchConfig(constants={"b": 1, "a": np.float32(0.5)})
    b = DispatchConfig(constants=[("a", 0.5), ("b", 1)])
    assert a.constants == (("a", 0.5), ("b", 1)) and a == b and hash(a) == hash(b)
    assert type(a.constants[0][1]) is float
    assert DispatchConfig.from_dict(a.to_dict()) == a  # (as msgpack carries it: lists)
    assert DispatchConfig(constants={}).constants == DispatchConfig().constants == ()


@pytest.mark.fast
def test_configs_with_values_equal_in_python_but_not_as_constants_differ():
    """-0.0 == 0.0 and True == 1 in Python; as constants they are other programs, and a
    cache keyed by the config (the worker's launch plans) must not take one for the other."""
    for a, b in ((-0.0, 0.0), (True, 1), (1, 1.0)):
        ca, cb = DispatchConfig(constants={"K": a}), DispatchConfig(constants={"K": b})
        assert ca != cb and len({ca, cb}) == 2


@pytest.mark.fast
def test_a_host_does_not_reuse_the_plan_of_an_equal_looking_value():
    host = BackendHost(reference_plugin)
    zero = host.dispatch(scaled(), [], DispatchConfig(constants={"GAIN": 0.0}))
    negative = host.dispatch(scaled(), [], DispatchConfig(constants={"GAIN": -0.0}))
    same_bytes(zero, expected(gain=0.0))
    same_bytes(negative, expected(gain=-0.0))
    assert zero[1].tobytes() != negative[1].tobytes()


@pytest.mark.fast
@pytest.mark.parametrize(("constants", "message"), [
    (5, "is not a dict of values"),
    ("TILE=4", "is not a dict of values"),
    ({1: 2}, "constant name 1 is not a str"),
    ({"T": [1]}, "is a list, not a bool or a number"),
    ([("T", 1), ("T", 2)], "constant 'T' is given twice"),
    ([("T", 1, 2)], "is not a (name, value) pair"),
])
def test_config_refuses_what_can_never_be_a_value(constants, message):
    with pytest.raises(InvalidConfigError) as caught:
        DispatchConfig(constants=constants)
    assert message in caught.value.cause


@pytest.mark.fast
def test_the_pipeline_key_is_that_of_the_program_as_it_runs():
    p = scaled()
    key = lambda config: pipeline_cache_key(p, config, "b", "1")  # noqa: E731
    assert key(DispatchConfig()) == key(DispatchConfig(constants={"SCALE": 3}))
    assert key(DispatchConfig(constants={"SCALE": 4})) == pipeline_cache_key(
        p.specialize(SCALE=4), DispatchConfig(), "b", "1")
    assert key(DispatchConfig(constants={"SCALE": 4})) != key(DispatchConfig())


@pytest.mark.fast
def test_a_launch_consumes_the_constants():
    plan = plan_launch(scaled(), [], DispatchConfig(constants={"SCALE": 4}))
    assert plan.config.constants == () and plan.program.constants == ()
    assert plan.program == scaled().specialize(SCALE=4)
    overridden = effective_program(scaled(), DispatchConfig(constants={"SCALE": 4},
                                                            workgroup_override=(4,)))
    assert overridden.workgroup == (4, 1, 1)
    assert overridden.body == scaled().specialize(SCALE=4).body


# -- in a backend host (in-process: what a worker runs) ---------------------------------

@pytest.mark.fast
def test_a_backend_sees_only_specialized_programs():
    seen = []
    plugin = types.ModuleType("spy")  # the reference backend, recording what it is given
    vars(plugin).update({name: value for name, value in vars(reference_plugin).items()
                         if name.startswith(("vyre_", "VYRE_"))})

    @hookimpl
    def vyre_dispatch_borrowed(program, inputs, config):
        seen.append((program, config))
        return reference_run(program, inputs, grid=config.grid_override)

    plugin.vyre_dispatch_borrowed = vyre_dispatch_borrowed
    host = BackendHost(plugin)
    same_bytes(host.dispatch(scaled(), [], DispatchConfig(constants={"SCALE": 5, "STEPS": 2})),
               expected(5, 2))
    program, config = seen[-1]
    assert program.constants == () and config.constants == ()
    same_bytes(host.dispatch(scaled(), []), expected())


@pytest.mark.fast
def test_a_compiled_pipeline_keeps_its_values_and_refuses_others():
    host = BackendHost(reference_plugin)
    pipeline = host.compile(scaled(), DispatchConfig(constants={"SCALE": 7}))
    assert pipeline.program == scaled().specialize(SCALE=7)
    assert pipeline.key == pipeline_cache_key(scaled(), DispatchConfig(constants={"SCALE": 7}),
                                              host.id(), host.version())
    same_bytes(pipeline.dispatch([]), expected(7))
    same_bytes(pipeline.dispatch([], DispatchConfig(constants={"SCALE": 7})), expected(7))
    with pytest.raises(InvalidConfigError, match=r"constants \{'SCALE': 6\} differ from the "
                                                 "values this pipeline was compiled with"):
        pipeline.dispatch([], DispatchConfig(constants={"SCALE": 6}))
    with pytest.raises(InvalidConfigError, match="has no constant 'NOPE'"):
        pipeline.dispatch([], DispatchConfig(constants={"NOPE": 6}))


# -- sequences --------------------------------------------------------------------------

def _sequence(**constants) -> Sequence:
    b = SequenceBuilder()
    b.transient("out", ir.u32, N)
    b.transient("f", ir.f32, N)
    b.step(scaled(), constants=constants or None)
    return b.build(returns=["out", "f"])


@pytest.mark.fast
def test_a_sequence_step_runs_its_program_specialized():
    step = _sequence(SCALE=2).items[0]
    assert step.program == scaled().specialize(SCALE=2)
    assert _sequence().items[0].program == scaled().specialize()
    with pytest.raises(InvalidConfigError, match="lies outside its declared range"):
        _sequence(SCALE=99)


@pytest.mark.fast
def test_a_sequence_with_an_unchosen_program_is_refused():
    good = _sequence()
    with pytest.raises(InvalidSequenceError, match=r"step 0's program declares constants "
                                                   r"\(SCALE, STEPS, GAIN\), unchosen"):
        Sequence(good.buffers, (Step(scaled(), good.items[0].bindings, good.items[0].grid),),
                 good.returns).check()


# -- through real workers ---------------------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_every_backend_gives_the_bytes_of_the_chosen_values(driver, backend):
    config = DispatchConfig(constants={"SCALE": 8, "STEPS": 3, "GAIN": -0.25})
    same_bytes(driver.dispatch(scaled(), [], backend=backend, config=config), expected(8, 3, -0.25))
    same_bytes(driver.dispatch(scaled(), [], backend=backend), expected())
    same_bytes(driver.dispatch_async(scaled(), [], backend=backend, config=config).result(60),
               expected(8, 3, -0.25))


def test_compile_in_a_worker_keeps_the_values(driver):
    pipeline = driver.compile(scaled(), backend="reference",
                              config=DispatchConfig(constants={"SCALE": 2}))
    other = driver.compile(scaled(), backend="reference",
                           config=DispatchConfig(constants={"SCALE": 4}))
    assert pipeline.key != other.key
    same_bytes(pipeline.dispatch([]), expected(2))
    same_bytes(other.dispatch([], DispatchConfig(constants={"SCALE": 4})), expected(4))
    with pytest.raises(InvalidConfigError, match="differ from the values"):
        other.dispatch([], DispatchConfig(constants={"SCALE": 2}))


def test_a_sequence_runs_specialized_steps_and_refuses_config_constants(driver):
    same_bytes(driver.dispatch(_sequence(SCALE=5, STEPS=2), backend="reference"),
               expected(5, 2))
    with pytest.raises(InvalidConfigError, match="a sequence's config sets constants"):
        driver.dispatch(_sequence(), backend="reference",
                        config=DispatchConfig(constants={"SCALE": 5}))


def test_a_bad_value_is_refused_before_any_worker_starts():
    with Driver() as drv:
        with pytest.raises(InvalidConfigError, match="lies outside its declared range"):
            drv.dispatch(scaled(), [], config=DispatchConfig(constants={"SCALE": 0}))
        assert all(pool["state"] == "not started" for pool in drv.status()["pools"].values())


def test_unused_spec_constant_values_stay_apart_in_the_cpu_cache(driver):
    """Two values of one program are two native kernels (two pipeline keys), not one
    reused: the second value's bytes come back, not the first's."""
    for scale in (2, 6, 2):
        config = DispatchConfig(constants={"SCALE": scale})
        same_bytes(driver.dispatch(scaled(), [], backend="cpu", config=config), expected(scale))


def test_lit_of_a_constant_default_survives_a_worker_round_trip(driver):
    """A constant whose default is -0.0 keeps its sign through the wire form."""
    k = ir.Kernel()
    z = k.constant("Z", ir.f32, -0.0)
    out = k.output("out", ir.f32, 1)
    out[0] = z
    got = driver.dispatch(k.build(), [], backend="reference")[0]
    assert got.tobytes() == np.float32(-0.0).tobytes()
    assert SpecConstant("Z", Lit.of(ir.f32, -0.0)).default.bits == 0x80000000


# -- what a review found ----------------------------------------------------------------

def _reciprocal() -> ir.Program:
    k = ir.Kernel(workgroup=(4,))
    g = k.constant("G", ir.f32, 1.0)
    out = k.output("out", ir.f32, 4)
    out[ir.global_id()] = ir.f32(1.0) / g
    return k.build()


def test_a_worker_does_not_take_a_zero_of_one_sign_for_the_other(driver):
    """The worker's config shortcut compared decoded dicts: [G, -0.0] == [G, 0.0]."""
    for value, want in ((0.0, np.inf), (-0.0, -np.inf), (0.0, np.inf)):
        got = driver.dispatch(_reciprocal(), [], backend="reference",
                              config=DispatchConfig(constants={"G": value}))[0]
        assert got.tobytes() == np.full(4, want, np.float32).tobytes(), value


@pytest.mark.fast
def test_a_pipeline_compiled_with_a_workgroup_override_keeps_its_constants():
    host = BackendHost(reference_plugin)
    config = DispatchConfig(workgroup_override=(2,), constants={"SCALE": 5})
    pipeline = host.compile(scaled(), config)
    same_bytes(pipeline.dispatch([], config), expected(5))
    same_bytes(pipeline.dispatch([], DispatchConfig(constants={"SCALE": 5})), expected(5))
    with pytest.raises(InvalidConfigError, match="differ from the values"):
        pipeline.dispatch([], DispatchConfig(constants={"SCALE": 4}))


@pytest.mark.fast
@pytest.mark.parametrize(("dtype", "default", "low", "message"), [
    (ir.u32, None, None, "constant 'C': default is given None"),
    (ir.bool_, "no", None, "constant 'C': default is given 'no', a str"),
    (ir.u32, True, None, "constant 'C': default is given True, a bool"),
    (ir.f32, 2**1100, None, "constant 'C': default cannot hold"),
    (ir.f32, 1e39, None, "does not fit in f32: it rounds to infinity"),
    (ir.u32, 1, 0.5, "constant 'C': low is given 0.5, a float"),
])
def test_the_builder_checks_a_declaration_as_a_dispatch_checks_a_value(dtype, default, low,
                                                                        message):
    with pytest.raises(TypeError) as caught:
        ir.Kernel().constant("C", dtype, default, low=low)
    assert message in str(caught.value) and "Fix:" in str(caught.value)


@pytest.mark.fast
def test_a_float_that_rounds_to_infinity_is_refused_as_a_value():
    k = ir.Kernel()
    half = k.constant("H", ir.f16, 1.0)
    out = k.output("out", ir.f16, 1)
    out[0] = half
    with pytest.raises(InvalidConfigError, match=r"cannot hold 70000: .* it rounds to infinity"):
        k.build().specialize(H=70000)
    assert k.build().specialize(H=float("inf")).body  # (an infinity asked for is fine)


@pytest.mark.fast
def test_nan_payloads_are_different_values():
    nan1, nan2 = (float(np.frombuffer(np.uint32(bits).tobytes(), np.float32)[0])
                  for bits in (0x7FC00000, 0x7FC00001))
    program = _reciprocal()
    first, second = program.specialize(G=nan1), program.specialize(G=nan2)
    assert first is not second
    assert DispatchConfig(constants={"G": nan1}) != DispatchConfig(constants={"G": nan2})


@pytest.mark.fast
def test_an_array_of_constants_is_refused_with_a_fix():
    with pytest.raises(InvalidConfigError, match="is not a dict of values"):
        DispatchConfig(constants=np.array([1, 2]))


def test_routing_and_a_dispatch_on_weigh_the_chosen_values():
    """route/explain take the config; dispatch_on refuses a bad value before any worker."""
    with Driver() as drv:
        with pytest.raises(InvalidConfigError, match="cannot hold -1"):
            dispatch_on(drv, "reference", scaled(), [],
                        config=DispatchConfig(constants={"STEPS": -1}))
        assert all(pool["state"] == "not started" for pool in drv.status()["pools"].values())
        config = DispatchConfig(constants={"STEPS": 7})
        assert drv.route(scaled(), backend="reference", config=config).backend == "reference"
        weighed = [e for e in drv.explain(scaled(), config=config) if e.backend == "reference"]
        assert weighed and weighed[0].accepted
