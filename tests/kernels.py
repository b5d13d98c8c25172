"""Small programs several test modules share (each module keeps the ones only it needs)."""

from __future__ import annotations

from vyre_core import ir


def spin(iterations: int, salt: int = 0) -> ir.Program:
    """One invocation running a loop of ``iterations``: CPU-bound on the reference
    backend (about 1.7 us an iteration here), for keeping a worker busy a known while."""
    k = ir.Kernel(workgroup=(1,))
    out = k.output("out", ir.u32, 1)
    acc = k.let("acc", ir.lit(salt, ir.u32))
    with k.loop("j", 0, iterations) as j:
        k.assign(acc, acc + j)
    out[0] = acc
    return k.build()
