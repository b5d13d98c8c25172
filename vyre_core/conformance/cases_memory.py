"""Memory and ABI: out-of-bounds loads and stores, uniform buffers, zero-padded inputs,
read_write buffers, output order, bytes inputs, runtime-sized buffers."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import arr, case_of

u32, i32, f32, b_ = ir.u32, ir.i32, ir.f32, ir.bool_


def oob_load_reads_zero():
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", u32)
    y = k.read("y", f32)
    z = k.read("z", i32, count=2)
    b = k.read("b", b_)
    u = k.uniform("u", u32, count=2)
    outs = [k.output(f"out_{n}", t, count=8) for n, t in
            (("x", u32), ("y", f32), ("z", i32), ("b", b_), ("u", u32), ("far", u32))]
    i = k.let("i", ir.global_id(0))
    for out, src in zip(outs[:5], (x, y, z, b, u), strict=True):
        out[i] = src[i]
    outs[5][i] = x[i + 0x80000000] + x[ir.u32(0xFFFFFFFF)] + 1
    return case_of("oob_load_reads_zero", k, [
        arr(u32, [11, 12, 13, 14]), arr(f32, [1.5, -2.5, 3.25]), arr(i32, [-7, 8]),
        arr(u32, [1, 5]), arr(u32, [21, 22]),
    ], [
        [11, 12, 13, 14, 0, 0, 0, 0], [1.5, -2.5, 3.25, 0, 0, 0, 0, 0], [-7, 8, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0, 0], [21, 22, 0, 0, 0, 0, 0, 0], [1] * 8,
    ])


def oob_store_dropped():
    k = ir.Kernel(workgroup=(64,))
    out = k.output("out", u32, count=4)
    odd = k.output("odd", i32, count=4)
    i = k.let("i", ir.global_id(0))
    out[i] = i + 1                      # 64 invocations, only 4 elements
    out[ir.u32(0xFFFFFFFF)] = 999
    odd[i * 2 + 1] = ir.i32(-7)         # indices 1 and 3 land; 5, 7, ... are dropped
    return case_of("oob_store_dropped", k, [], [[1, 2, 3, 4], [0, -7, 0, -7]])


def oob_store_dropped_read_write():
    k = ir.Kernel(workgroup=(64,))
    rw = k.read_write("rw", u32)
    flags = k.read_write("flags", b_, count=3)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < rw.len):
        rw[i + 2] = i + 100             # i = 2, 3 write past the end
        flags[i + 1] = ir.lit(True)     # i = 2, 3 write past the end
    return case_of("oob_store_dropped_read_write", k,
                   [arr(u32, [10, 20, 30, 40]), arr(u32, [0, 0, 0])],
                   [[10, 20, 100, 101], [0, 1, 1]])


def uniform_buffer_broadcast():
    k = ir.Kernel(workgroup=(64,))
    params = k.uniform("params", f32, count=4)
    x = k.read("x", f32)
    out = k.output("out", f32, count=5)
    padded = k.output("padded", f32, count=5)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = params[0] * x[i] + params[1]
        padded[i] = x[i] * params[2] + params[3]    # params[2:] are zero padding
    xs = arr(f32, [1.0, -2.0, 0.5, 8.0, -0.25])
    return case_of("uniform_buffer_broadcast", k, [arr(f32, [2.5, -1.0]), xs],
                   [xs * np.float32(2.5) - np.float32(1.0), np.zeros(5)])


def abi_input_zero_padded():
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", u32, count=8)
    out = k.output("out", u32, count=8)
    length = k.output("length", u32, count=1)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] + 1
    with k.if_(i == 0):
        length[0] = x.len
    return case_of("abi_input_zero_padded", k, [arr(u32, [3, 1, 4, 1, 5])],
                   [[4, 2, 5, 2, 6, 1, 1, 1], [8]])


def abi_read_write_is_input_and_output():
    k = ir.Kernel(workgroup=(64,))
    rw = k.read_write("rw", i32)
    before = k.output("before", i32, count=5)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < rw.len):
        v = k.let("v", rw[i])
        rw[i] = v * 3 - 1
        before[i] = v
    data = arr(i32, [1, -2, 3, -4, 5])
    return case_of("abi_read_write_is_input_and_output", k, [data],
                   [[2, -7, 8, -13, 14], data])


def abi_outputs_in_declaration_order():
    # Bindings deliberately disagree with declaration order: the ABI follows declarations.
    k = ir.Kernel(workgroup=(64,))
    out_z = k.buffer("out_z", u32, "output", count=3, binding=4)
    x = k.buffer("x", u32, "read", binding=2)
    out_a = k.buffer("out_a", f32, "output", count=3, binding=0)
    rw = k.buffer("rw", u32, "read_write", count=3, binding=3)
    out_m = k.buffer("out_m", i32, "output", count=3, binding=1)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out_z[i] = x[i] * 2
        out_a[i] = x[i].cast(f32) + 0.5
        rw[i] = rw[i] + x[i]
        out_m[i] = -x[i].cast(i32)
    return case_of("abi_outputs_in_declaration_order", k,
                   [arr(u32, [1, 2, 3]), arr(u32, [10, 20, 30])],
                   [[2, 4, 6], [1.5, 2.5, 3.5], [11, 22, 33], [-1, -2, -3]])


def abi_bytes_input():
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", u32)
    y = k.read("y", f32, count=4)
    sq = k.output("sq", u32, count=6)
    twice = k.output("twice", f32, count=4)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        sq[i] = x[i] * x[i]
    with k.if_(i < y.len):
        twice[i] = y[i] * 2.0
    return case_of("abi_bytes_input", k,
                   [np.arange(6, dtype=np.uint32).tobytes(),
                    np.array([1.25, -3.0], dtype=np.float32).tobytes()],
                   [[0, 1, 4, 9, 16, 25], [2.5, -6.0, 0.0, 0.0]])


def runtime_sized_buffer_len():
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", f32)
    y = k.read("y", u32)
    out = k.output("out", u32, count=3)
    total = k.output("total", f32, count=1)
    with k.if_(ir.global_id(0) == 0):
        out[0] = x.len
        out[1] = y.len
        acc = k.let("acc", ir.u32(0))
        with k.loop("j", 0, y.len) as j:
            k.assign(acc, acc + y[j])
        out[2] = acc
        fsum = k.let("fsum", ir.f32(0.0))
        with k.loop("m", 0, x.len) as m:
            k.assign(fsum, fsum + x[m])
        total[0] = fsum
    xs = arr(f32, [0.5, 1.25, -2.0, 4.0, 0.125, 8.0, -0.5])
    ys = arr(u32, [3, 1, 4, 1, 5])
    return case_of("runtime_sized_buffer_len", k, [xs, ys],
                   [[7, 5, 14], [11.375]])


CASES = [
    oob_load_reads_zero(), oob_store_dropped(), oob_store_dropped_read_write(),
    uniform_buffer_broadcast(), abi_input_zero_padded(), abi_read_write_is_input_and_output(),
    abi_outputs_in_declaration_order(), abi_bytes_input(), runtime_sized_buffer_len(),
]
