"""A launch is planned once per (program, config, input shapes) (``PlannedLaunches``) and
a config takes a launch's ``dim`` without checking its other fields again
(``DispatchConfig.with_dim``): what a repeated launch saves must never let a bad launch
through, so each test here pairs a saved step with the refusal it must still give."""

from __future__ import annotations

import numpy as np
import pytest

from vyre_core import abi, ir, launch
from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidConfigError, InvalidInputError
from vyre_core.launch import PlannedLaunches

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)


def add_one() -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x = k.read_write("x", ir.f32)
    i = ir.global_id(0)
    x[i] = x[i] + ir.f32(1.0)
    return k.build()


def bound(program: ir.Program, n: int) -> list[np.ndarray]:
    return abi.bind_inputs(program, [np.zeros(n, np.float32)] * len(program.inputs))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a launch was planned from scratch."""
    calls: list[int] = []
    real = launch.launch_of

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(launch, "launch_of", counting)
    return calls


def test_a_repeated_launch_is_planned_once(counted: list[int]) -> None:
    plans, program = PlannedLaunches(), add_one()
    config = DispatchConfig().with_dim(100)
    first = plans.plan(program, config, bound(program, 100))
    again = plans.plan(program, DispatchConfig().with_dim(100), bound(program, 100))
    assert len(counted) == 1
    assert again[1] is first[1] and again[0] == first[0]
    assert first[0].grid == (2, 1, 1) and first[2] == [(np.dtype(np.float32), 100)]
    assert first[1]["grid_override"] == (2, 1, 1) and first[1].get("dim") is None


def test_other_shapes_a_config_or_a_program_are_planned_again(counted: list[int]) -> None:
    plans, program = PlannedLaunches(), add_one()
    plans.plan(program, DispatchConfig(), bound(program, 100))
    plans.plan(program, DispatchConfig(), bound(program, 200))
    plans.plan(program, DispatchConfig(label="other"), bound(program, 200))
    plans.plan(add_one(), DispatchConfig(), bound(program, 200))  # (equal IR, another object)
    assert len(counted) == 4


def test_a_launch_refused_once_is_refused_again(counted: list[int]) -> None:
    plans, program = PlannedLaunches(), add_one()
    over = DispatchConfig(max_output_bytes=100)
    for _ in range(2):
        with pytest.raises(Exception, match="max_output_bytes=100"):
            plans.plan(program, over, bound(program, 100))
    assert len(counted) == 2  # (a refusal is never kept)
    plans.plan(program, over, bound(program, 25))  # (25 floats fit)


def test_the_memo_is_bounded() -> None:
    plans, program = PlannedLaunches(), add_one()
    for n in range(1, PlannedLaunches.SIZE * 2):
        plans.plan(program, DispatchConfig(), bound(program, n))
    assert len(plans._entries) <= PlannedLaunches.SIZE


def test_with_dim_is_replace_for_a_good_dim() -> None:
    config = DispatchConfig(label="x", timeout=5.0)
    for dim in (7, (7,), [4, 3], (np.int64(2), 3, 1), 2**32):
        assert config.with_dim(dim) == config.replace(dim=dim)


@pytest.mark.parametrize("dim", [0, True, (1, 2, 3, 4), 2**32 + 1, -1, 1.5, (np.bool_(1),)])
def test_with_dim_refuses_what_replace_refuses(dim) -> None:
    with pytest.raises(InvalidConfigError, match="dim=") as replaced:
        DispatchConfig().replace(dim=dim)
    with pytest.raises(InvalidConfigError, match="dim=") as with_dim:
        DispatchConfig().with_dim(dim)
    assert str(with_dim.value) == str(replaced.value)


def test_with_dim_refuses_a_second_answer_to_how_many_run() -> None:
    for config in (DispatchConfig(grid_override=(4,)), DispatchConfig(dispatch_elements=9)):
        with pytest.raises(InvalidConfigError, match="two answers"):
            config.with_dim(8)


def test_an_input_of_the_wrong_length_is_still_refused_after_a_good_launch() -> None:
    """The inferred grid of a program that reads an input at its global id must cover
    it: planned once for 64 elements, a launch whose input is longer is planned anew and
    refused."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f32)
    out = k.output("out", ir.f32, 64)
    out[ir.global_id(0)] = x[ir.global_id(0)]
    program, plans = k.build(), PlannedLaunches()
    plans.plan(program, DispatchConfig(), bound(program, 64))
    with pytest.raises(InvalidInputError, match="never be read"):
        plans.plan(program, DispatchConfig(), bound(program, 100))
