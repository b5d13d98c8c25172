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


def halve_while_big() -> ir.Program:
    """v[i] /= 2 where v[i] >= 1; flag[0] = 1 while any element is still >= 1 (the body
    of a loop that runs until ``flag`` stays zero)."""
    k = ir.Kernel(workgroup=(32,))
    v = k.read_write("v", ir.f32)
    flag = k.read_write("flag", ir.u32, 1)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < v.len), k.if_(v[i] >= 1.0):
        v[i] = v[i] * 0.5
        with k.if_(v[i] >= 1.0):
            flag[0] = ir.u32(1)
    return k.build()
