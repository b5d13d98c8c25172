"""xor: a repeating-key XOR over u32 words, ``out[i] = data[i] ^ key[i % len(key)]``.

It shows the integer side of the IR: exact u32 bit operations (every backend must give the
same bytes), a runtime-sized input whose length comes from the bound array (``.len``), and a
second input read at a computed index. XOR-ing twice with the same key gives the data back.

Run it: ``python examples/xor.py`` or ``vyre run xor`` (add ``--shadow`` to compare with
the reference backend as well as with numpy).
"""

from __future__ import annotations

import sys

import numpy as np

from vyre_core import Example, ir


def program(n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    data = k.read("data", ir.u32)
    key = k.read("key", ir.u32)
    out = k.output("out", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < data.len):
        out[i] = data[i] ^ key[i % key.len]
    return k.build()


def build(n: int = 1 << 18, key_words: int = 7, seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 2**32, n, dtype=np.uint32)
    key = rng.integers(0, 2**32, key_words, dtype=np.uint32)
    return Example(program(n), [data, key], expected=[data ^ np.resize(key, n)])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
