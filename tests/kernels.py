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


def axpy_into(a: float) -> ir.Program:
    """y[i] = y[i] + a * x[i] over f32 (x read-only, y read_write)."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f32)
    y = k.read_write("y", ir.f32)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        y[i] = y[i] + x[i] * a
    return k.build()
