"""A launch whose arguments are resident buffers runs in the worker that holds them and
writes them in place; numpy arrays mix in (read as inputs, written ones filled);
arrays a dispatch returned (read-only views of shared memory) are read without a copy
and refused, with a Fix, as arrays the kernel writes. Exact bytes against the same
kernel launched with numpy arrays, on the reference, cpu and wgpu backends."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from kernels import axpy_into, blur, saxpy
from waiting import wait_for, workers

import vyre_core as vyre
from vyre_core import DispatchConfig, f32, i32, u32
from vyre_core.driver import ResidentBuffer
from vyre_core.errors import (
    InvalidConfigError,
    InvalidInputError,
    InvalidSequenceError,
    PipelineInvalidatedError,
)

BACKENDS = ["reference", "cpu", "wgpu"]
N = 1 << 15          # 128 KiB of f32: over the data plane's 64 KiB, in shared memory


@pytest.fixture(scope="module")
def drv():
    with vyre.Driver() as d:
        yield d


def resident(drv, data: np.ndarray, backend: str | None = None,
             near: ResidentBuffer | None = None) -> ResidentBuffer:
    buf = drv.allocate_resident(data.nbytes, backend=backend, near=near)
    buf.upload(data)
    return buf


def held(buf: ResidentBuffer, like: np.ndarray) -> np.ndarray:
    return np.frombuffer(buf.download(), like.dtype).reshape(like.shape)


@vyre.kernel
def scale_in_place(k, v: vyre.Array[i32]):       # k unannotated: a constant of the step
    i = vyre.global_id(0)
    v[i] = v[i] * k + i


@vyre.kernel
def add_repeatedly(v: vyre.Array[i32], *, R: vyre.Constant[i32](low=1, high=8) = 1):
    i = vyre.global_id(0)
    for _ in range(R):
        v[i] += 1


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_launch_on_resident_buffers_writes_them_in_place(drv, backend):
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    y = np.random.default_rng(2).standard_normal(N).astype(np.float32)
    want = np.empty_like(x)
    drv.launch(saxpy, dim=N, args=(2.5, x, y, want), backend=backend)
    rx = resident(drv, x, backend)
    ry, rout = resident(drv, y, near=rx), resident(drv, np.zeros_like(x), near=rx)
    got = drv.launch(saxpy, dim=N, args=(2.5, rx, ry, rout))
    assert len(got) == 0 and held(rout, want).tobytes() == want.tobytes()
    # read and written in place, a new scalar each time: one compile for all of them
    v = np.arange(1000, dtype=np.int32)
    rv = resident(drv, v, near=rx)
    compiles = scale_in_place.compiles
    for k in (3, -2):
        drv.launch(scale_in_place, dim=len(v), args=(k, rv))
        v = v * k + np.arange(1000, dtype=np.int32)
    assert held(rv, v).tobytes() == v.tobytes()
    assert scale_in_place.compiles - compiles <= 1
    drv.launch(add_repeatedly, dim=len(v), args=(rv,),
               config=DispatchConfig(constants={"R": 3}, label="thrice", timeout=120))
    assert held(rv, v + 3).tobytes() == (v + 3).tobytes()
    # a shaped array: its extents in shapes=
    img = np.random.default_rng(3).random((40, 50), dtype=np.float32)
    smooth = np.full_like(img, -5.0)
    drv.launch(blur, dim=img.shape, args=(img, smooth), backend=backend)
    rimg, rsm = resident(drv, img, near=rx), resident(drv, np.full_like(img, -5.0), near=rx)
    drv.launch(blur, dim=img.shape, args=(rimg, rsm), shapes={"img": (40, 50),
                                                               "out": (40, 50)})
    assert held(rsm, smooth).tobytes() == smooth.tobytes()


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_resident_and_numpy_arguments_mix(drv, backend):
    """Numpy arrays are inputs of the call; those the kernel writes are filled."""
    x = np.random.default_rng(4).standard_normal(N).astype(np.float32)
    y = np.random.default_rng(5).standard_normal(N).astype(np.float32)
    want = np.empty_like(x)
    drv.launch(saxpy, dim=N, args=(-1.5, x, y, want), backend=backend)
    rx = resident(drv, x, backend)
    out = np.zeros_like(x)
    got = drv.launch(saxpy, dim=N, args=(-1.5, rx, y, out))
    assert out.tobytes() == want.tobytes() and got[0].tobytes() == want.tobytes()
    rout = resident(drv, np.zeros_like(x), near=rx)
    drv.launch(saxpy, dim=N, args=(-1.5, x, y, rout))
    assert held(rout, want).tobytes() == want.tobytes()
    strided = np.zeros(2 * N, np.float32)[::2]   # not contiguous: filled through a copy
    pending = drv.launch_async(saxpy, dim=N, args=(-1.5, rx, y, strided))
    assert pending.result(timeout=120)[0].tobytes() == want.tobytes()
    assert strided.tobytes() == want.tobytes()


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_arrays_a_dispatch_returned_are_read_without_a_copy(drv, backend):
    x, = drv.dispatch(axpy_into(1.0), [np.ones(N, np.float32),
                                       np.arange(N, dtype=np.float32)], backend=backend)
    assert in_a_segment(x) and not x.flags.writeable
    plan = saxpy.plan(N, (0.5, x, x, np.empty_like(x)))
    assert np.shares_memory(plan.inputs[1], x) and np.shares_memory(plan.inputs[2], x)
    out, want = np.empty_like(x), np.empty_like(x)
    drv.launch(saxpy, dim=N, args=(0.5, x, x, out), backend=backend)
    drv.launch(saxpy, dim=N, args=(0.5, x.copy(), x.copy(), want), backend=backend)
    assert out.tobytes() == want.tobytes()
    rout = resident(drv, np.zeros_like(want), backend)
    drv.launch(saxpy, dim=N, args=(0.5, x, x, rout))     # with a resident buffer too
    assert held(rout, want).tobytes() == want.tobytes()
    for launch in (drv.launch, drv.launch_async):
        for args in ((0.5, x, x, x), (0.5, rout, x, x)):
            with pytest.raises(InvalidInputError) as info:
                launch(saxpy, dim=N, args=args, backend=backend if args[1] is x else None)
            assert "argument 'out' is a read-only array, and the kernel writes it" in \
                info.value.cause
            assert "out.copy()" in info.value.fix and "np.empty_like(out)" in info.value.fix


def in_a_segment(array: np.ndarray) -> bool:
    """Whether ``array``'s memory lies in a mapping of a data-plane segment (a memfd)."""
    address = array.__array_interface__["data"][0]
    with open("/proc/self/maps") as maps:
        for line in maps:
            low, high = (int(end, 16) for end in line.split()[0].split("-"))
            if low <= address < high:
                return "/memfd:vyre-data-" in line
    return False


@pytest.mark.processes
def test_a_resident_buffer_of_another_backend_or_a_restarted_worker_is_refused(drv):
    v = np.arange(100, dtype=np.int32)
    rv = resident(drv, v, "reference")
    drv.launch(scale_in_place, dim=100, args=(2, rv))
    with pytest.raises(InvalidSequenceError, match="but the resident buffers live in "
                                                   "'reference'"):
        drv.launch(scale_in_place, dim=100, args=(2, rv), backend="cpu")
    pid = next(w["pid"] for w in workers(drv, "reference") if w["index"] == rv.slot)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not rv.valid, 10.0, "the generation to end")
    for launch in (drv.launch, drv.launch_async):
        with pytest.raises(PipelineInvalidatedError, match="Allocate the buffer again"):
            launch(scale_in_place, dim=100, args=(2, rv))
    wait_for(lambda: workers(drv, "reference")[0]["state"] == "idle", 10.0, "a new worker")


# -- refused before any work (no worker needed) -------------------------------------------

class _Pool:
    backend = "reference"


POOL = _Pool()


def fake(byte_len: int, handle: int = 1, slot: int = 0) -> ResidentBuffer:
    """A ResidentBuffer as a launch plan sees it: refusals come before any call."""
    return ResidentBuffer(POOL, slot, 0, handle, byte_len)  # type: ignore[arg-type]


@vyre.kernel
def untyped(a, out: vyre.Array[f32]):
    out[vyre.global_id(0)] = a[vyre.global_id(0)]


@vyre.kernel
def shaped(img: vyre.Array[u32, 2]):
    img[vyre.global_id(0), vyre.global_id(1)] = u32(1)


REFUSALS = {
    "unannotated": (untyped, 4, lambda: (fake(16), fake(16, 2)), {},
                    "argument 'a' is a ResidentBuffer, and the kernel wants an array whose "
                    "dtype it does not say", "Annotate the parameter: a: vyre.Array[f32]"),
    "for a scalar": (saxpy, 4, lambda: (fake(4), fake(16), fake(16, 2), fake(16, 3)), {},
                     "argument 'a' is a ResidentBuffer, and the kernel wants a f32 number",
                     "Pass a number for 'a'."),
    "not whole elements": (saxpy, 4, lambda: (1.0, fake(10), fake(16, 2), fake(16, 3)), {},
                           "argument 'x' is a resident buffer of 10 bytes, not a whole, "
                           "non-zero number of f32 elements", "n * 4 bytes"),
    "no shape": (shaped, (2, 3), lambda: (fake(24),), {},
                 "a shaped array, and shapes= does not give its shape",
                 "shapes={'img': (rows, cols)}, their product 6"),
    "a wrong shape": (shaped, (2, 3), lambda: (fake(24),), {"img": (4, 2)},
                      "shapes gives (4, 2), not 2 extents whose product is 6",
                      "rows * cols == 6"),
    "a numpy array's shape": (saxpy, 4, lambda: (1.0, fake(16), np.ones(4, np.float32),
                                                 fake(16, 2)), {"y": (4,)},
                              "shapes= names 'y', which is not given a resident buffer",
                              "Leave 'y' out of shapes=."),
    "two workers": (saxpy, 4, lambda: (1.0, fake(16), fake(16, 2, slot=1), fake(16, 3)), {},
                    "resident buffers must share one worker",
                    "near=first_buffer"),
    "one buffer twice": (saxpy, 4, lambda: (1.0, fake(16), fake(16), fake(16, 3)), {},
                         "one ResidentBuffer is passed as both 'x' and 'y'",
                         "Pass a distinct buffer for each parameter"),
}


@pytest.mark.fast
@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_bad_resident_launch_is_refused_with_a_fix(case):
    kernel, dim, args, shapes, cause, fix = REFUSALS[case]
    with vyre.Driver() as drv:  # (starts no worker: refused while planning)
        for launch in (drv.launch, drv.launch_async):
            with pytest.raises(InvalidInputError) as info:
                launch(kernel, dim=dim, args=args(), shapes=shapes or None)
            assert cause in info.value.cause and fix in info.value.fix


@pytest.mark.fast
def test_a_resident_launch_refuses_a_grid_in_its_config_and_shapes_without_buffers():
    args = (1.0, fake(16), fake(16, 2), fake(16, 3))
    with vyre.Driver() as drv:
        for config in (DispatchConfig(grid_override=(1,)), DispatchConfig(tuned=True),
                       DispatchConfig(workgroup_override=(32,))):
            with pytest.raises(InvalidConfigError, match="resident buffers"):
                drv.launch(saxpy, dim=4, args=args, config=config)
        with pytest.raises(InvalidInputError, match="no argument is one"):
            drv.launch(saxpy, dim=4, args=(1.0, *[np.ones(4, np.float32)] * 3),
                       shapes={"x": (4,)})


@pytest.mark.fast
def test_a_read_only_array_the_kernel_writes_is_refused_before_any_work():
    out = np.zeros(4, np.float32)
    out.flags.writeable = False
    with pytest.raises(InvalidInputError, match="'out' is a read-only array") as info:
        saxpy.plan(4, (1.0, np.ones(4, np.float32), np.ones(4, np.float32), out))
    assert "out.copy()" in info.value.fix
