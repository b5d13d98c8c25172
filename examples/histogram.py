"""histogram: count byte values into 256 bins with ``atomic_add``.

Every invocation adds 1 to the bin of its element, so many invocations hit the same bin at
once: atomics make the final counts exact on every backend (the order they apply in is
unspecified, the totals are not). Values past the last bin would be out-of-bounds atomics,
which are dropped; this example masks them to a byte instead.

Run it: ``python examples/histogram.py`` or ``vyre run histogram``.
"""

from __future__ import annotations

import sys

import numpy as np

from vyre_core import DispatchConfig, Example, ir

BINS = 256


def program(bins: int = BINS) -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    values = k.read("values", ir.u32)
    hist = k.output("hist", ir.u32, count=bins)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < values.len):
        hist.atomic_add(values[i] & (bins - 1), 1)
    return k.build()


def build(n: int = 1 << 16, seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    # a skewed distribution, so some bins are heavily contended and some stay empty
    values = (rng.normal(96.0, 24.0, n).astype(np.int64) % 512).astype(np.uint32)
    expected = np.bincount(values & (BINS - 1), minlength=BINS).astype(np.uint32)
    # the output alone would infer a single workgroup: cover every value
    config = DispatchConfig(grid_override=(-(-n // 256),))
    return Example(program(), [values], expected=[expected], config=config)


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
