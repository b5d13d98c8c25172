"""compare: float distances in ULPs over the whole line, the sign of zero and NaN."""

from __future__ import annotations

import numpy as np
import pytest

from vyre_core.compare import first_divergence, ulp_distance
from vyre_core.ir.dtypes import DType

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)


@pytest.mark.parametrize("np_type, dtype", [(np.float16, DType.F16), (np.float32, DType.F32),
                                            (np.float64, DType.F64)])
def test_ulp_distance_counts_every_float_between_once(np_type, dtype):
    tiny = np.finfo(np_type).smallest_subnormal
    a = np.array([0.0, -0.0, tiny, -tiny, -tiny, 1.0, -1.0, np.nan, np.nan, np.inf], np_type)
    b = np.array([-0.0, 0.0, 0.0, -0.0, tiny, 1.0, 1.0, np.nan, 1.0, np.inf], np_type)
    got = ulp_distance(a, b).tolist()
    one = np.array([1.0], np_type)
    apart = int(ulp_distance(-one, one)[0])          # -1 .. -0, then +0 .. +1
    assert apart == 2 * int(one.view({2: np.int16, 4: np.int32, 8: np.int64}[one.itemsize])[0]) + 1
    assert got[:7] == [1, 1, 1, 1, 3, 0, apart]
    assert got[7] == 0 and got[8] == np.iinfo(np.int64).max and got[9] == 0
    assert first_divergence(a[7:8], b[7:8], dtype, 0) is None       # NaN matches NaN only
    assert first_divergence(a[8:9], b[8:9], dtype, 10**9) is not None


def test_a_subnormal_flushed_to_zero_is_a_divergence():
    """Subnormals are kept on every backend (docs/semantics.md): flushing one is as far off
    as its ULPs say, of either sign."""
    f = np.float32
    sub = f(-1e-40)
    for zero in (f(-0.0), f(0.0)):
        wrong = first_divergence(np.array([sub]), np.array([zero]), DType.F32, 4)
        assert wrong is not None and not wrong.sign_of_zero and wrong.ulp >= 71362
    zero = first_divergence(np.array([f(-0.0)]), np.array([f(0.0)]), DType.F32, 4)
    assert zero is not None and zero.sign_of_zero and zero.ulp == 1
