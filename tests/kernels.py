"""Small programs several test modules share (each module keeps the ones only it needs)."""

from __future__ import annotations

import numpy as np

import vyre_core as vyre
from vyre_core import f32, ir
from vyre_core.abi import grid_for_dim
from vyre_reference import run


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


def launch(kernel, dim, args):
    """What Driver.launch does, on the reference in this process (returns ``args``)."""
    plan = kernel.plan(dim, args)
    outs = run(plan.program, plan.inputs, grid=grid_for_dim(dim, plan.program.workgroup))
    for target, out in zip(plan.out, outs, strict=True):
        np.copyto(target, out.reshape(target.shape))
    plan.fill()
    return args


# -- the kernels of issue 36, as its text writes them ------------------------------------

@vyre.kernel
def saxpy(a: f32, x: vyre.Array[f32], y: vyre.Array[f32], out: vyre.Array[f32]):
    i = vyre.global_id(0)
    if i < len(x):
        out[i] = a * x[i] + y[i]


@vyre.kernel
def blur(img: vyre.Array[f32, 2], out: vyre.Array[f32, 2]):
    r, c = vyre.global_id(0), vyre.global_id(1)
    if 0 < r < img.shape[0] - 1 and 0 < c < img.shape[1] - 1:
        acc = f32(0)
        for dr in range(-1, 2):
            for dc in range(-1, 2):
                acc += img[r + dr, c + dc]
        out[r, c] = acc / 9
