"""Resident buffers on wgpu (issue 13, part 1): device memory that stays on the device
between dispatches, through BackendHost(vyre_wgpu.backend) in this process and once
through a real worker. Results are compared as exact bytes with the reference
interpreter running the same steps."""

from __future__ import annotations

import numpy as np
import pytest
from kernels import axpy_into

import vyre_core
import vyre_wgpu.backend as backend
from vyre_core import ir
from vyre_core.errors import InvalidInputError, UnsupportedFeatureError
from vyre_reference import run as reference_run

N = 1000


def square(n: int) -> ir.Program:
    """out[i] = v[i] * v[i], into a fixed-size output."""
    k = ir.Kernel(workgroup=(64,))
    v = k.read("v", ir.f32)
    out = k.output("out", ir.f32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < v.len):
        out[i] = v[i] * v[i]
    return k.build()


def upload(host, array: np.ndarray) -> int:
    handle = host.allocate_resident(array.nbytes)
    host.upload_resident(handle, array.tobytes())
    return handle


def test_a_chain_over_resident_buffers_matches_the_reference_exactly(host) -> None:
    rng = np.random.default_rng(1)
    x = rng.random(N, dtype=np.float32)
    y = rng.random(N, dtype=np.float32)
    hx, hy, hout = upload(host, x), upload(host, y), host.allocate_resident(N * 4)
    expected_y = y
    for a in (0.5, -2.0, 3.25, 0.5):  # a repeated program reuses its bind group
        host.dispatch_resident(axpy_into(a), [hx, hy])
        (expected_y,) = reference_run(axpy_into(a), [x, expected_y])
    host.dispatch_resident(square(N), [hy, hout])
    (expected_out,) = reference_run(square(N), [expected_y])
    assert host.download_resident(hy) == expected_y.tobytes()
    assert host.download_resident(hout) == expected_out.tobytes()
    assert host.download_resident(hx) == x.tobytes()  # read-only: untouched
    assert backend.resident().cached_bindings == 4  # three axpy programs and the square
    for handle in (hx, hy, hout):
        host.free_resident(handle)
    assert backend.resident().cached_bindings == 0  # freed with their buffers


def test_a_fresh_buffer_reads_as_zeros_and_an_empty_one_as_nothing(host) -> None:
    handle = host.allocate_resident(10)
    empty = host.allocate_resident(0)
    try:
        assert host.download_resident(handle) == bytes(10)
        assert host.download_resident(empty) == b""
        host.upload_resident(handle, bytes(range(10)))
        assert host.download_resident(handle) == bytes(range(10))  # not a whole word
    finally:
        host.free_resident(handle)
        host.free_resident(empty)


def test_every_misuse_is_refused_with_a_fix_before_any_work(host) -> None:
    hx, hy = upload(host, np.ones(N, np.float32)), upload(host, np.ones(N, np.float32))
    odd = host.allocate_resident(N * 4 + 2)
    short = host.allocate_resident(4 * (N - 1))
    try:
        cases = [
            (lambda: host.upload_resident(hx, b"\0" * 8), InvalidInputError, "exactly"),
            (lambda: backend.vyre_dispatch_resident(
                program=axpy_into(1.0), handles=[hx], config=vyre_core.DispatchConfig()),
             InvalidInputError, "1 resident handles for 2"),
            (lambda: backend.vyre_dispatch_resident(
                program=axpy_into(1.0), handles=[hx, hx], config=vyre_core.DispatchConfig()),
             InvalidInputError, "twice"),
            (lambda: backend.vyre_dispatch_resident(
                program=axpy_into(1.0), handles=[odd, hy], config=vyre_core.DispatchConfig()),
             InvalidInputError, "whole number"),
            (lambda: host.dispatch_resident(square(N), [hx, short]), InvalidInputError,
             f"exactly {N}"),
            (lambda: host.allocate_resident(1 << 62), UnsupportedFeatureError, "at most"),
            (lambda: backend.vyre_download_resident(handle=987654), InvalidInputError,
             "not allocated"),
        ]
        for call, error, words in cases:
            with pytest.raises(error, match=words) as info:
                call()
            assert "Fix:" in str(info.value)
        assert host.download_resident(hy) == np.ones(N, np.float32).tobytes()  # no work ran
    finally:
        for handle in (hx, hy, odd, short):
            host.free_resident(handle)
    with pytest.raises(InvalidInputError, match="freed"):
        backend.vyre_download_resident(handle=hx)


def test_buffers_of_a_lost_device_are_refused_after_recovery(host) -> None:
    handle = upload(host, np.arange(N, dtype=np.float32))
    dev = backend.device()
    dev.lose()
    assert host.device_lost()
    host.try_recover()
    with pytest.raises(InvalidInputError, match="lost with a device"):
        backend.vyre_download_resident(handle=handle)
    fresh = upload(host, np.arange(N, dtype=np.float32))  # the recovered device serves
    assert host.download_resident(fresh) == np.arange(N, dtype=np.float32).tobytes()
    host.free_resident(fresh)


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_resident_dispatches_through_a_worker_match_the_reference() -> None:
    x = np.arange(N, dtype=np.float32)
    y = np.ones(N, dtype=np.float32)
    found = {}
    with vyre_core.Driver() as drv:
        for name in ("reference", "wgpu"):
            bx = drv.allocate_resident(x.nbytes, backend=name)
            by = drv.allocate_resident(y.nbytes, backend=name)
            bx.upload(x)
            by.upload(y)
            for a in (2.0, 2.0, -0.5):
                drv.dispatch_resident(axpy_into(a), [bx, by])
            found[name] = by.download()
    assert found["wgpu"] == found["reference"] == (y + 3.5 * x).astype(np.float32).tobytes()
