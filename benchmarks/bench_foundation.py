"""Foundation figures: the reference interpreter against hand-written numpy, and the
cost of fingerprinting a 1,000-node program against hashing its bytes alone."""

from __future__ import annotations

import blake3

from vyre_benchmarks.harness import Result, compare, reps
from vyre_core import ir
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy

REQUIRES = ("reference",)
ELEMENTS = 16 * 1024 * 1024


def reference_saxpy() -> Result:
    from vyre_reference import run

    n = reps(ELEMENTS, ELEMENTS // 16)  # the size is in the figure's name
    prog = saxpy(n)
    x, y, a = saxpy_inputs(n)
    return compare(f"reference saxpy f32 x{n}", lambda: run(prog, [x, y, a]),
                   "numpy a*x+y", lambda: a[0] * x + y, repeat=5)


def thousand_node_program() -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    src = k.read("src", ir.u32)
    dst = k.output("dst", ir.u32, 1024)
    i = k.let("i", ir.global_id(0))
    for n in range(110):  # ~9 nodes per statement
        dst[i + n] = (src[i] ^ n) + (i * 3)
    return k.build(validate=False)


def fingerprint_cost() -> Result:
    prog = thousand_node_program()
    nodes = sum(1 for _ in ir.nodes.walk(prog.body))
    wire = prog.to_wire()

    def fresh_fingerprint() -> str:  # a new Program object, so no cached bytes
        return ir.Program(prog.buffers, prog.workgroup, prog.body).fingerprint()

    return compare(f"fingerprint of a {nodes}-node program", fresh_fingerprint,
                   "blake3 of its wire bytes", lambda: blake3.blake3(wire).hexdigest(),
                   repeat=7, number=200, unit="us")


BENCHMARKS = [reference_saxpy, fingerprint_cost]
