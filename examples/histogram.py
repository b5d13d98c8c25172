"""histogram: count byte values into 256 bins with ``atomic_add``.

Every invocation adds 1 to the bin of its element, so many invocations hit the same bin at
once: atomics make the final counts exact on every backend (the order they apply in is
unspecified, the totals are not). Values past the last bin would be out-of-bounds atomics,
which are dropped; this example masks them to a byte instead.

To count values, call ``lib.bincount(drv, x)`` or ``lib.histogram(drv, x, bins)``
(``from vyre_core import lib``, docs/lib.md): numpy's results for any number of bins,
weighted sums too, in an order written down. This example keeps the long way because it
teaches atomics: many invocations adding to one bin, exact in whatever order they apply.
(lib counts per chunk without atomics instead: the cpu backend runs a program with
atomics one workgroup at a time.)

Run it: ``python examples/histogram.py`` or ``vyre run histogram``.
"""

from __future__ import annotations

import sys

import numpy as np

import vyre_core as vyre
from vyre_core import Example, u32

BINS = 256


@vyre.kernel(workgroup=(256,))
def histogram(values: vyre.Array[u32], hist: vyre.Array[u32]):
    i = vyre.global_id(0)
    if i < len(values):
        vyre.atomic_add(hist, values[i] & (BINS - 1), 1)


def build(n: int = 1 << 16, seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    # a skewed distribution, so some bins are heavily contended and some stay empty
    values = (rng.normal(96.0, 24.0, n).astype(np.int64) % 512).astype(np.uint32)
    expected = np.bincount(values & (BINS - 1), minlength=BINS).astype(np.uint32)
    hist = np.zeros(BINS, np.uint32)
    return Example.of_kernel(histogram, n, (values, hist), expected=[expected])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
