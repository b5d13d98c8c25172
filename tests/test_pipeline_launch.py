"""A compiled pipeline's launch in the worker (``BackendHost.compile``): planned once per
config and input shapes, so a repeated launch only binds its inputs (issue 39, the
launch); a launch with other shapes or another config is planned, and checked, again."""

from __future__ import annotations

import numpy as np
import pytest
import vyre_cpu.backend

from vyre_core import Driver
from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidInputError, LaunchLimitError
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy
from vyre_reference import run
from vyre_workers.backend_host import BackendHost


@pytest.fixture(scope="module")
def host():
    with BackendHost(vyre_cpu.backend) as host:
        yield host


def test_a_repeated_launch_binds_its_new_inputs(host):
    pipeline = host.compile(saxpy(256, 64))
    config = DispatchConfig()
    for seed in range(3):
        data = saxpy_inputs(256, seed)
        got, = pipeline.dispatch(data, config)
        assert got.tobytes() == run(saxpy(256, 64), data)[0].tobytes()


def test_a_launch_of_other_shapes_or_config_is_checked_again(host):
    program = saxpy(256, 64)
    pipeline = host.compile(program)
    config = DispatchConfig()
    data = saxpy_inputs(256, 1)
    pipeline.dispatch(data, config)
    with pytest.raises(InvalidInputError):  # (x of 300: its last 44 never read)
        pipeline.dispatch(saxpy_inputs(300, 1), config)
    with pytest.raises(InvalidInputError, match="dtype float64"):
        pipeline.dispatch([data[0].astype(np.float64), *data[1:]], config)
    with pytest.raises(LaunchLimitError):
        pipeline.dispatch(data, DispatchConfig(grid_override=(2**27, 1, 1)))
    got, = pipeline.dispatch(data, config)
    assert got.tobytes() == run(program, data)[0].tobytes()


@pytest.mark.processes
@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_a_driver_pipeline_checks_each_new_launch_once(backend):
    """The caller checks a launch once per config and input shapes too."""
    program = saxpy(256, 64)
    data = saxpy_inputs(256, 2)
    with Driver() as drv:
        pipeline = drv.compile(program, backend=backend)
        for _ in range(2):
            got, = pipeline.dispatch(data)
            assert got.tobytes() == run(program, data)[0].tobytes()
        with pytest.raises(InvalidInputError):  # (x of 300: its last 44 never read)
            pipeline.dispatch(saxpy_inputs(300, 2))
        with pytest.raises(LaunchLimitError):
            pipeline.dispatch(data, DispatchConfig(grid_override=(2**27, 1, 1)))
        got, = pipeline.dispatch(data)
        assert got.tobytes() == run(program, data)[0].tobytes()
