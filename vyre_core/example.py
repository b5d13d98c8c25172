"""``Example``: a runnable sample — a program, its inputs, and what it must produce.

An example module (``examples/*.py``, or any file ``vyre run`` is pointed at) exposes
``build() -> Example``. ``expected`` is worked out without vyre (plain numpy), so every
run of an example is also a check of the backend that ran it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vyre_core.compare import outputs_divergence
from vyre_core.config import DispatchConfig
from vyre_core.ir import Program


@dataclass(frozen=True)
class Example:
    program: Program
    inputs: Sequence[np.ndarray | bytes]     # one per input buffer, ABI order
    expected: Sequence[np.ndarray] | None = None  # one per output buffer; None: no oracle
    ulp: int = 0                              # float outputs may differ by this many ULPs
    config: DispatchConfig | None = None      # e.g. a grid for a 2-D launch

    def mismatch(self, outputs: Sequence[np.ndarray]) -> str | None:
        """None when ``outputs`` match ``expected`` (exact bytes, floats within ``ulp``);
        else which output differs and where first."""
        if self.expected is None:
            return None
        return outputs_divergence(self.program, self.expected, outputs, self.ulp)
