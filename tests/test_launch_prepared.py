"""A launch prepared once (issue 39 items 2 and 5): what a repeated launch does not do
again in the worker's backend host (coerce its inputs, plan it, check its config's
fields), and every check that protects a caller still made on each call: a closed
driver's array, a view that cannot cross, inputs that are not a list, a wrong dtype or
count, a read-only or misshapen output array, a bad config however often it is made.
In process, on the reference and cpu backends (numba's compile: not the fast tier);
bytes against the reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import vyre_cpu.backend
from counting_backend import CountingBackend

import vyre_reference
import vyre_reference.backend
from vyre_core import abi, config, ir, shared_arrays
from vyre_core.config import DispatchConfig
from vyre_core.errors import DispatchError, InvalidConfigError, InvalidInputError
from vyre_workers.backend_host import BackendHost


def mix(n: int = 64) -> ir.Program:
    """``o[i] = x[i] * 3 + y[i]`` over the runtime-sized ``x``; ``c`` (count 4, padded
    when shorter) added at ``i % 4``."""
    k = ir.Kernel(workgroup=(16,))
    x = k.read("x", ir.u32)
    y = k.read("y", ir.u32)
    c = k.read("c", ir.u32, count=4)
    o = k.output("o", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        o[i] = x[i] * 3 + y[i] + c[i % 4]
    return k.build()


def inputs(seed: int, n: int = 64, c: int = 4) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 2**32, n, dtype=np.uint32) for _ in range(2)] + [
        rng.integers(0, 2**32, c, dtype=np.uint32)]


@pytest.fixture(params=[pytest.param("reference", marks=pytest.mark.fast), "cpu"])
def host(request) -> BackendHost:
    plugin = vyre_reference.backend if request.param == "reference" else vyre_cpu.backend
    made = BackendHost(plugin, request.param, 1)
    made.prepare()
    return made


def test_a_repeated_launch_is_bound_without_coercing_its_inputs_again(host, monkeypatch):
    """Fails on main before this commit (every launch coerced every input in full)."""
    program, config_ = mix(), DispatchConfig(dim=64)
    data = [inputs(seed) for seed in range(4)]
    short = inputs(9, c=3)  # (a count it pads: coerced in full every time)
    want = [vyre_reference.run(program, d)[0].tobytes() for d in [*data, short]]
    coerced = []
    coerce = abi.coerce_input
    monkeypatch.setattr(abi, "coerce_input", lambda b, d: coerced.append(b.name) or coerce(b, d))
    for d, expected in zip(data, want, strict=False):
        out = np.empty(64, np.uint32)
        host.dispatch_into(program, d, [out], config_)
        assert out.tobytes() == expected
        assert host.dispatch(program, d, config_)[0].tobytes() == expected
    assert coerced == ["x", "y", "c"]  # the first launch's, checked in full once
    for _ in range(2):
        assert host.dispatch(program, short, config_)[0].tobytes() == want[-1]
    assert coerced == ["x", "y", "c"] * 2 + ["c"]


def pair() -> ir.Program:
    """``o[i] = x[i] ^ y[i]``, both runtime-sized."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    y = k.read("y", ir.u32)
    o = k.output("o", ir.u32, count=64)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        o[i] = x[i] ^ y[i]
    return k.build()


def test_a_prepared_launch_still_refuses_what_each_call_brings(host):
    n = 1 << 16  # (shared memory: large enough to be lent)
    wide, big = mix(n), DispatchConfig(dim=n)
    arrays = shared_arrays.SharedArrays()
    x = arrays.empty(2 * n, np.uint32)
    good = [np.zeros(n, np.uint32), np.ones(n, np.uint32), np.ones(4, np.uint32)]
    host.dispatch(wide, good, big)
    host.dispatch(wide, [x[:n], *good[1:]], big)  # (a live shared array: fine)
    with pytest.raises(InvalidInputError, match="not C-contiguous") as err:
        host.dispatch(wide, [x[::2], *good[1:]], big)  # (the same dtype and shape)
    assert err.value.fix
    arrays.close()
    with pytest.raises(InvalidInputError, match="closed"):
        host.dispatch(wide, [x[:n], *good[1:]], big)
    program, config_ = mix(), DispatchConfig(dim=64)
    data = inputs(1)
    host.dispatch(program, data, config_)
    with pytest.raises(InvalidInputError, match="dtype"):
        host.dispatch(program, [data[0].view(np.int32), *data[1:]], config_)
    with pytest.raises(InvalidInputError, match="declared count"):
        host.dispatch(program, [*data[:2], np.zeros(5, np.uint32)], config_)
    with pytest.raises(InvalidInputError, match="input"):
        host.dispatch(program, data[:2], config_)
    two = data[:2]
    host.dispatch(pair(), two, config_)
    with pytest.raises(InvalidInputError, match="list or tuple"):  # (rows of that signature)
        host.dispatch(pair(), np.stack(two), config_)
    out = np.empty(64, np.uint32)
    host.dispatch_into(program, data, [out], config_)
    read_only = np.empty(64, np.uint32)
    read_only.flags.writeable = False
    for bad in (out[:63], out.astype(np.int32), read_only):
        with pytest.raises(DispatchError, match="output array") as err:
            host.dispatch_into(program, data, [bad], config_)
        assert "np.empty" in err.value.fix
    with pytest.raises(ValueError):  # (one array per output: two is a caller's bug)
        host.dispatch_into(program, data, [out, out], config_)


def test_a_compiled_pipelines_repeated_launch_binds_its_inputs_and_checks_them(host):
    program, config_ = mix(), DispatchConfig(dim=64)
    pipeline = host.compile(program)
    for seed in range(3):
        data = inputs(seed)
        assert pipeline.dispatch(data, config_)[0].tobytes() == \
            vyre_reference.run(program, data)[0].tobytes()
    with pytest.raises(InvalidInputError, match="declared count"):
        pipeline.dispatch([*inputs(0)[:2], np.zeros(5, np.uint32)], config_)
    two = pair()
    paired = host.compile(two)
    paired.dispatch(inputs(0)[:2], config_)
    with pytest.raises(InvalidInputError, match="list or tuple"):
        paired.dispatch(np.stack(inputs(0)[:2]), config_)


@pytest.mark.fast
def test_a_config_made_again_is_not_checked_again_and_a_bad_one_always_is(monkeypatch):
    """Fails on main before this commit (every config was checked in full)."""
    checked = []
    dim = config._dim
    monkeypatch.setattr(config, "_dim", lambda v: checked.append(v) or dim(v))
    monkeypatch.setattr(config, "_VALIDATED", {}, raising=False)
    first, second = DispatchConfig(dim=(403, 7), label="a"), DispatchConfig(dim=(403, 7),
                                                                            label="a")
    assert first == second and second.dim == (403, 7) and checked == [(403, 7)]
    assert DispatchConfig(dim=403).dim == (403,)  # (another value: checked)
    assert DispatchConfig(dim=(np.int64(403), 7)).dim == (403, 7)  # (numpy: every time)
    assert type(DispatchConfig(dim=(np.int64(403), 7)).dim[0]) is int
    assert len(checked) == 4
    for _ in range(2):  # equal values of other types, and bad values, refused every time
        with pytest.raises(InvalidConfigError, match="dim"):
            DispatchConfig(dim=(True, 7))
        with pytest.raises(InvalidConfigError, match="dim"):
            DispatchConfig(dim=(403.0, 7))
        with pytest.raises(InvalidConfigError, match="profile"):
            DispatchConfig(dim=(403, 7), label="a", profile=1)
        with pytest.raises(InvalidConfigError, match="timeout"):
            DispatchConfig(timeout=-0.0)
        with pytest.raises(InvalidConfigError, match="label"):
            DispatchConfig(label="\ud800")
        with pytest.raises(InvalidConfigError, match="grid_override"):
            DispatchConfig(grid_override=[0])
    assert DispatchConfig(timeout=2.0) == DispatchConfig(timeout=2.0)
    with pytest.raises(InvalidConfigError, match="timeout"):
        DispatchConfig(timeout=math.nan)
    zero, negative = (DispatchConfig(constants={"k": v}) for v in (0.0, -0.0))
    assert np.signbit(dict(negative.constants)["k"]) and not np.signbit(
        dict(zero.constants)["k"])  # (constants: checked and kept every time)
    grid = DispatchConfig(grid_override=[4, 2])  # (a list: checked, made a tuple)
    assert grid.grid_override == (4, 2, 1) and DispatchConfig(grid_override=(4, 2)) == grid


class Recovering(CountingBackend):
    """The reference behind the contract, with a device that recovers."""

    def vyre_try_recover(self) -> None:
        pass


@pytest.mark.fast
def test_a_launch_found_by_its_objects_is_planned_again_after_a_recovery(monkeypatch):
    import vyre_workers.backend_host as backend_host

    planned = []
    plan_launch = backend_host.plan_launch
    monkeypatch.setattr(backend_host, "plan_launch",
                        lambda *a: planned.append(a[1]) or plan_launch(*a))
    host = BackendHost(Recovering(), "counting", 1)
    host.prepare()
    program, config_, data = mix(), DispatchConfig(dim=64), inputs(3)
    want = vyre_reference.run(program, data)[0].tobytes()
    for _ in range(3):  # (the third found by the identity of its program and config)
        assert host.dispatch(program, data, config_)[0].tobytes() == want
    assert len(planned) == 1
    with pytest.raises(InvalidInputError, match="declared count"):  # (another signature)
        host.dispatch(program, [*data[:2], np.zeros(5, np.uint32)], config_)
    host.try_recover()
    assert host.dispatch(program, data, config_)[0].tobytes() == want
    assert len(planned) == 3  # (the refusal, and once again after the recovery)
