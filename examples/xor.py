"""xor: a repeating-key XOR over u32 words, ``out[i] = data[i] ^ key[i % len(key)]``.

It shows the integer side of the IR: exact u32 bit operations (every backend must give the
same bytes), a runtime-sized input whose length comes from the bound array (``len(key)``), and a
second input read at a computed index. XOR-ing twice with the same key gives the data back.

Run it: ``python examples/xor.py`` or ``vyre run xor`` (add ``--shadow`` to compare with
the reference backend as well as with numpy).
"""

from __future__ import annotations

import sys

import numpy as np

import vyre_core as vyre
from vyre_core import Example, u32


@vyre.kernel(workgroup=(256,))
def xor(data: vyre.Array[u32], key: vyre.Array[u32], out: vyre.Array[u32]):
    i = vyre.global_id(0)
    if i < len(data):
        out[i] = data[i] ^ key[i % len(key)]


def build(n: int = 1 << 18, key_words: int = 7, seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 2**32, n, dtype=np.uint32)
    key = rng.integers(0, 2**32, key_words, dtype=np.uint32)
    return Example.of_kernel(xor, n, (data, key, np.zeros_like(data)),
                             expected=[data ^ np.resize(key, n)])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
