"""Kernels launched through real workers: the issue's saxpy and blur give, on the
reference, cpu and wgpu backends, exactly the bytes of the same program built with the
builder (its twin, in builder_twins.py) and numpy's; the caller's arrays are filled in place,
and a new size or a new scalar value is not a new compile."""

from __future__ import annotations

import numpy as np
import pytest
from builder_twins import blur_twin, saxpy_twin
from kernels import blur, saxpy

import vyre_core as vyre
from vyre_core import u32
from vyre_core.errors import InvalidInputError

pytestmark = [pytest.mark.processes]

BACKENDS = ["reference", "cpu", "wgpu"]


def blur_numpy(img: np.ndarray) -> np.ndarray:
    want = np.full_like(img, -5.0)
    acc = np.zeros_like(img[1:-1, 1:-1])
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            acc = acc + img[1 + dr:img.shape[0] - 1 + dr, 1 + dc:img.shape[1] - 1 + dc]
    want[1:-1, 1:-1] = acc / np.float32(9)
    return want


@pytest.fixture(scope="module")
def drv():
    with vyre.Driver() as d:
        yield d


def test_the_kernels_are_their_builder_twins():
    x = np.zeros(8, np.float32)
    assert saxpy.program(dim=8, args=(2.0, x, x, x)) == saxpy_twin()
    img = np.zeros((4, 4), np.float32)
    assert blur.program(dim=(4, 4), args=(img, img)).to_wire() == blur_twin().to_wire()


@pytest.mark.parametrize("backend", BACKENDS)
def test_saxpy_and_blur_run_as_written_with_the_twins_bytes(drv, backend):
    n = 1000
    x = np.arange(n, dtype=np.float32) / np.float32(7)
    y = np.ones(n, np.float32)
    out = np.full(n, -1.0, np.float32)
    drv.launch(saxpy, dim=n, args=(2.0, x, y, out), backend=backend)
    twin, = drv.dispatch(saxpy_twin(), [np.array([2.0], np.float32), x, y,
                                        np.full(n, -1.0, np.float32),
                                        np.array([n], np.uint32)],
                         backend=backend, dim=n)
    assert out.tobytes() == twin.tobytes() == (np.float32(2.0) * x + y).tobytes()

    img = np.random.default_rng(7).random((37, 29), dtype=np.float32)
    out2 = np.full_like(img, -5.0)                 # the border is not written: kept
    drv.launch(blur, dim=img.shape, args=(img, out2), backend=backend)
    twin2, = drv.dispatch(blur_twin(), [img, np.full_like(img, -5.0),
                                        np.array([37, 29, 37, 29, 37, 29], np.uint32)],
                          backend=backend, dim=img.shape)
    assert out2.tobytes() == twin2.tobytes()
    np.testing.assert_array_max_ulp(out2, blur_numpy(img), maxulp=0)


def test_a_new_size_or_scalar_is_not_a_new_compile(drv):
    kernel = vyre.kernel(saxpy.fn)
    for n, a in ((10, 2.0), (333, 0.5), (4096, -3.0)):
        x = np.arange(n, dtype=np.float32)
        out = np.zeros(n, np.float32)
        drv.launch(kernel, dim=n, args=(a, x, x, out), backend="cpu")
        assert out.tobytes() == (np.float32(a) * x + x).tobytes()
    assert kernel.compiles == 1 and len(kernel._compiled) == 1


def test_launch_async_fills_the_arrays_when_result_returns(drv):
    n = 300
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    pending = drv.launch_async(saxpy, dim=n, args=(3.0, x, x, out), backend="reference")
    got = pending.result(timeout=60)
    assert out.tobytes() == (np.float32(3.0) * x + x).tobytes()
    assert got[0].tobytes() == out.tobytes()


def test_a_non_contiguous_array_is_filled_through_a_copy(drv):
    n = 64
    x = np.arange(n, dtype=np.float32)
    backing = np.zeros(2 * n, np.float32)
    out = backing[::2]                              # a view: written back after the launch
    drv.launch(saxpy, dim=n, args=(1.0, x, x, out), backend="reference")
    assert out.tolist() == (x + x).tolist() and backing[1::2].sum() == 0


def test_launch_refuses_what_is_not_a_kernel(drv):
    with pytest.raises(InvalidInputError, match=r"@vyre\.kernel"):
        drv.launch(saxpy_twin(), dim=4, args=())


@pytest.mark.fast
@pytest.mark.parametrize("value", [-1, 2**40, 1.5])
def test_a_scalar_argument_its_type_cannot_hold_is_refused_with_a_fix(value):
    """Raised the frontend's internal Refusal, not a vyre error, before this commit."""
    @vyre.kernel
    def fill(a: u32, x: vyre.Array[u32]):
        i = vyre.global_id(0)
        if i < len(x):
            x[i] = a

    with pytest.raises(InvalidInputError, match="argument 'a': ") as info:
        fill.plan(4, (value, np.zeros(4, np.uint32)))
    assert info.value.fix == ("Pass 'a' as a u32 value from 0 to 4294967295, or annotate "
                              "the parameter with a type that holds it.")
