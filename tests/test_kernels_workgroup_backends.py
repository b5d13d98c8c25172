"""``vyre.workgroup_sum`` and friends on real workers: the cpu and wgpu backends give
the bytes of the order (tests/test_kernels_workgroup.py's model, which the reference
gives there), for workgroups of several sizes, floats with NaN, -0 and infinities, and
integers at their extremes."""

from __future__ import annotations

import numpy as np
import pytest
from test_kernels_workgroup import OPS, kernels_for, model, sample

from vyre_core import Driver

pytestmark = [pytest.mark.processes]


@pytest.fixture(scope="module")
def drv():
    with Driver() as driver:
        yield driver


#: Every size on wgpu (a shader compile each, well under a second); on cpu (a numba
#: compile each, 3 to 9 s, more the larger the workgroup) no step count, one lane, an odd
#: count halved unevenly (5) and the largest workgroup (256): 48, another uneven count, is
#: the reference's and wgpu's (tests/test_kernels_workgroup.py runs every size there).
SIZES = [(size, "wgpu") for size in (1, 5, 48, 256)] + [(size, "cpu") for size in (1, 5, 256)]


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize(("size", "backend"), SIZES)
def test_every_backend_gives_the_orders_bytes(drv, backend, dtype, size):
    groups = 4
    x = sample(dtype, size, groups)
    outs = [np.zeros_like(x) for _ in OPS]
    drv.launch(kernels_for(size), dim=x.size, args=(x, *outs), backend=backend)
    with np.errstate(over="ignore", invalid="ignore"):
        for op, got in zip(OPS, outs, strict=True):
            want = model(op, x.reshape(groups, size)).reshape(-1)
            assert got.tobytes() == want.tobytes(), op
