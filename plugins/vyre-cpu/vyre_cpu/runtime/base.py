"""What every room of the runtime shares: numba's options for its functions (kept in the
disk cache, no GIL) and the canonical NaNs' bits and values (numba reads module globals
as constants)."""

from __future__ import annotations

import numpy as np

from vyre_core.ir.dtypes import CANONICAL_NAN, DType

_FAST = {"cache": True, "nogil": True}
#: The canonical quiet NaNs' bits
_NAN_F16 = CANONICAL_NAN[DType.F16]
_NAN_F32 = CANONICAL_NAN[DType.F32]
_NAN_F64 = CANONICAL_NAN[DType.F64]
F32_NAN = np.float32(np.nan)
F64_NAN = np.float64(np.nan)
