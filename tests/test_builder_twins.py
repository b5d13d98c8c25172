"""Every example written as a kernel gives the same bytes as its builder twin
(builder_twins.py), on the reference, wgpu (lavapipe here) and cpu backends: the kernel's
program, from Python source, computes what the program built by hand did, output by
output, for the example's own inputs (at sizes that keep the run short)."""

from __future__ import annotations

import importlib

import builder_twins as twins
import numpy as np
import pytest
import vyre_cpu.backend

import vyre_reference.backend
import vyre_wgpu.backend
from vyre_core import DispatchConfig, Example
from vyre_examples import saxpy
from vyre_workers.backend_host import BackendHost

BACKENDS = {"reference": vyre_reference.backend, "wgpu": vyre_wgpu.backend,
            "cpu": vyre_cpu.backend}


def _grid(n: int) -> DispatchConfig:
    return DispatchConfig(grid_override=(-(-n // 256),))


#: example -> (its build() arguments, its builder twin's program for them, the twin's
#: config, the twin's inputs when not the kernel's by buffer name)
TWINS = {
    "saxpy": ({"n": 5000}, lambda: saxpy.program(5000), None, None),
    "xor": ({"n": 3000, "key_words": 5}, lambda: twins.xor_program(3000), None, None),
    "histogram": ({"n": 5000}, twins.histogram_program, _grid(5000), None),
    "f64_kernel": ({"n": 2000}, lambda: twins.f64_kernel_program(2000), None, None),
    "reduction": ({"n": 3000}, lambda: twins.reduction_program(12), _grid(3000), None),
    "mandelbrot": ({"width": 50, "height": 37, "max_iter": 64},
                   lambda: twins.mandelbrot_program(50, 37, 64),
                   DispatchConfig(grid_override=(7, 5)),
                   lambda inputs: [np.concatenate(inputs[:3])]),
    "fault_tolerance": ({"rounds": 100}, twins.fault_tolerance_program, None, None),
    "chain": ({"n": 4000}, lambda: twins.chain_sequence(4000), None, None),
    "reduce": ({"n": 1 << 12}, lambda: twins.reduce_sequence(1 << 12), None, None),
    "scan": ({"n": 1 << 12}, lambda: twins.scan_sequence(1 << 12), None, None),
    "sort": ({"n": 1 << 10}, lambda: twins.sort_sequence(1 << 10), None, None),
    "jacobi": ({"side": 20}, lambda: twins.jacobi_sequence(20), None, None),
    "matmul": ({"m": 37, "k_dim": 40, "n": 21}, lambda: twins.matmul_program(37, 40, 21),
               None, None),
    "matmul_int8": ({"m": 9, "k_dim": 30, "n": 7},
                    lambda: twins.matmul_int8_program(9, 30, 7),
                    DispatchConfig(grid_override=(-(-9 * 7 * 8 // 64), 1, 1)), None),
}


def _twin(example: Example, program, config, inputs) -> Example:
    """The builder twin run on the kernel example's data: inputs matched by buffer name
    (a one-element uniform of the kernel's dtype as the twin's), unless given."""
    if inputs is not None:
        data = inputs(list(example.inputs))
    elif hasattr(program, "inputs") and not hasattr(program, "steps"):
        by_name = {b.name: a for b, a in zip(example.program.inputs, example.inputs,
                                             strict=True)}
        data = [by_name[b.name].astype(b.dtype.storage_np) for b in program.inputs]
    else:
        data = list(example.inputs)
    return Example(program, data, config=config, resident=example.resident)


@pytest.fixture(scope="module", params=list(BACKENDS))
def host(request):
    with BackendHost(BACKENDS[request.param]) as host:
        yield host


def test_every_kernel_example_has_a_builder_twin():
    from vyre_core.cli.targets import bundled_examples

    assert set(TWINS) == set(bundled_examples())


@pytest.fixture(scope="module")
def reference():
    with BackendHost(vyre_reference.backend) as host:
        yield host


@pytest.mark.parametrize("name", list(TWINS))
def test_kernel_example_gives_its_builder_twins_bytes(host, reference, name):
    """On cpu the twin's bytes are the reference's: its programs differ from the
    kernel's (their fingerprints), so running it there too compiled each example twice
    with numba (about 30 s of the module's 37), for builder programs that the cpu
    backend's own tests check against the reference."""
    kwargs, program, config, inputs = TWINS[name]
    example = importlib.import_module(f"vyre_examples.{name}").build(**kwargs)
    twin = _twin(example, program(), config, inputs)
    got = example.run_in(host)
    want = twin.run_in(reference if host.id() == "cpu" else host)
    assert len(got) == len(want) >= 1
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()
    assert example.mismatch(got) is None
