"""What the builder's Python spelling builds (docs/ir.md, "The builder" and "Assignment
and scope"): augmented assignment of ``let`` variables in loops, nested loops and both
branches of an if; ``x ** n`` multiplied out; ``//`` on unsigned integers; and
``buf[i, j]`` / ``buf[i, j, k]`` on shaped buffers in numpy's row-major order. Expected
values are worked out in plain numpy (float sums one rounded f32 step at a time)."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import arr, case_of

u32, i32, f32 = ir.u32, ir.i32, ir.f32
N = 8


def _f32_steps(start: float, xs, op) -> np.float32:
    """``acc = op(acc, x)`` for each x, each step rounded to f32."""
    acc = np.float32(start)
    for x in xs:
        acc = np.float32(op(acc, np.float32(x)))
    return acc


def augmented_assignment_in_a_loop():
    """Every augmented operator on u32, i32 and f32 variables, each assigned every pass
    of one loop over a row of inputs (the trap was an empty loop)."""
    rows = 6
    k = ir.Kernel(workgroup=(N,))
    a, b, x = k.read("a", u32), k.read("b", i32), k.read("x", f32)
    outs = {name: k.output(name, t, count=N) for name, t in
            (("add", u32), ("sub", i32), ("mul", u32), ("div", u32), ("rem", u32),
             ("band", u32), ("bor", u32), ("bxor", u32), ("shl", u32), ("shr", u32),
             ("fdiv", u32), ("fadd", f32), ("fsub", f32), ("fmul", f32))}
    i = k.let("i", ir.global_id(0))
    v = {name: k.let(name + "_v", init) for name, init in
         (("add", ir.u32(0)), ("sub", ir.i32(100)), ("mul", ir.u32(1)),
          ("div", ir.u32(0xFFFFFFFF)), ("rem", ir.u32(1000)), ("band", ir.u32(0xFFFFFFFF)),
          ("bor", ir.u32(0)), ("bxor", ir.u32(0x5A5A5A5A)), ("shl", ir.u32(1)),
          ("shr", ir.u32(0x80000000)), ("fdiv", ir.u32(10**9)), ("fadd", ir.f32(0.5)),
          ("fsub", ir.f32(1.0)), ("fmul", ir.f32(1.0)))}
    with k.loop("j", 0, rows) as j:
        e = k.let("e", a[i * rows + j])
        s = k.let("s", b[i * rows + j])
        f = k.let("f", x[i * rows + j])
        v["add"] += e
        v["sub"] -= s
        v["mul"] *= e | 1
        v["div"] /= (e % 3) + 1
        v["rem"] %= e + 7
        v["band"] &= e | 0xF0
        v["bor"] |= e << (j % 4)
        v["bxor"] ^= e * 2654435761
        v["shl"] <<= (e % 3)
        v["shr"] >>= (e % 2)
        v["fdiv"] //= (e % 4) + 1
        v["fadd"] += f
        v["fsub"] -= f * 0.25
        v["fmul"] *= f
    for name, out in outs.items():
        out[i] = v[name]

    rng = np.random.default_rng(35)
    av = rng.integers(0, 1000, N * rows).astype(np.uint32)
    bv = rng.integers(-500, 500, N * rows).astype(np.int32)
    xv = (rng.integers(-8, 9, N * rows) / 4).astype(np.float32)
    M = 2**32
    expected: dict[str, list] = {name: [] for name in outs}
    for n in range(N):
        es = [int(e) for e in av[n * rows:(n + 1) * rows]]
        ss = [int(s) for s in bv[n * rows:(n + 1) * rows]]
        fs = xv[n * rows:(n + 1) * rows]
        add, sub, mul, div, rem = 0, 100, 1, M - 1, 1000
        band, bor, bxor, shl, shr, fdiv = M - 1, 0, 0x5A5A5A5A, 1, 0x80000000, 10**9
        for j, (e, s) in enumerate(zip(es, ss, strict=True)):
            add = (add + e) % M
            sub -= s
            mul = (mul * (e | 1)) % M
            div //= (e % 3) + 1
            rem %= e + 7
            band &= e | 0xF0
            bor |= (e << (j % 4)) % M
            bxor ^= (e * 2654435761) % M
            shl = (shl << (e % 3)) % M
            shr >>= e % 2
            fdiv //= (e % 4) + 1
        for name, value in (("add", add), ("sub", sub), ("mul", mul), ("div", div),
                            ("rem", rem), ("band", band), ("bor", bor), ("bxor", bxor),
                            ("shl", shl), ("shr", shr), ("fdiv", fdiv)):
            expected[name].append(value)
        expected["fadd"].append(_f32_steps(0.5, fs, np.add))
        expected["fsub"].append(_f32_steps(1.0, fs * np.float32(0.25), np.subtract))
        expected["fmul"].append(_f32_steps(1.0, fs, np.multiply))
    return case_of("augmented_assignment_in_a_loop", k,
                   [arr(u32, av), arr(i32, bv), arr(f32, xv)],
                   [expected[name] for name in outs])


def augmented_assignment_in_branches():
    """``+=`` in an if and ``-=``/``*=`` in its else, inside a loop, and an if inside the
    else: each branch assigns only where it runs."""
    k = ir.Kernel(workgroup=(N,))
    x = k.read("x", i32)
    out = k.output("out", i32, count=N)
    evens = k.output("evens", u32, count=N)
    i = k.let("i", ir.global_id(0))
    acc = k.let("acc", ir.i32(0))
    count = k.let("count", ir.u32(0))
    with k.loop("j", 0, 5) as j:
        v = k.let("v", x[i * 5 + j])
        with k.if_((v % 2) == 0):
            acc += v
            count += 1
        with k.else_():
            acc -= 1
            with k.if_(v > 0):
                acc *= 2
    out[i] = acc
    evens[i] = count
    xs = np.random.default_rng(7).integers(-20, 20, N * 5).astype(np.int32)
    accs, counts = [], []
    for n in range(N):
        acc, count = 0, 0
        for v in (int(t) for t in xs[n * 5:(n + 1) * 5]):
            if v % 2 == 0:  # (C-style: the sign of v never makes an even number odd)
                acc += v
                count += 1
            else:
                acc -= 1
                if v > 0:
                    acc *= 2
        accs.append(acc)
        counts.append(count)
    return case_of("augmented_assignment_in_branches", k, [arr(i32, xs)], [accs, counts])


def nested_loops_accumulate():
    """A triangle of passes (j below i + 1, l below j + 1) adding into one variable, and a
    product kept by the outer loop only."""
    k = ir.Kernel(workgroup=(N,))
    out = k.output("out", u32, count=N)
    prod = k.output("prod", u32, count=N)
    i = k.let("i", ir.global_id(0))
    total = k.let("total", ir.u32(0))
    p = k.let("p", ir.u32(1))
    with k.loop("j", 0, i + 1) as j:
        p *= j + 3
        with k.loop("l", 0, j + 1) as l_:
            total += j * 10 + l_
    out[i] = total
    prod[i] = p
    totals = [sum(j * 10 + m for j in range(n + 1) for m in range(j + 1)) for n in range(N)]
    prods = [int(np.prod([j + 3 for j in range(n + 1)], dtype=object)) % 2**32
             for n in range(N)]
    return case_of("nested_loops_accumulate", k, [], [totals, prods])


def powers_multiply_out():
    """``x ** n`` for n = 0..5 on f32 (each product rounded, left to right), u32 (wrapping)
    and i32."""
    k = ir.Kernel(workgroup=(N,))
    x, u, s = k.read("x", f32), k.read("u", u32), k.read("s", i32)
    outs = [(k.output(f"{t.value}{n}", t, count=N), src, n)
            for t, src in ((f32, x), (u32, u), (i32, s)) for n in range(6)]
    i = k.let("i", ir.global_id(0))
    for out, src, n in outs:
        out[i] = src[i] ** n
    rng = np.random.default_rng(2)
    xv = rng.uniform(-3, 3, N).astype(np.float32)
    uv = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    sv = rng.integers(-300, 300, N).astype(np.int32)
    expected = []
    for values, dtype in ((xv, np.float32), (uv, np.uint32), (sv, np.int32)):
        for n in range(6):
            with np.errstate(over="ignore"):
                acc = np.ones(N, dtype) if n == 0 else values.copy()
                for _ in range(n - 1):
                    acc = (acc * values).astype(dtype)
            expected.append(acc)
    return case_of("powers_multiply_out", k, [arr(f32, xv), arr(u32, uv), arr(i32, sv)],
                   expected)


def floor_division_of_unsigned_integers():
    """``a // b`` and ``n // a`` on u32 and u8: Python's floor division, which on unsigned
    integers is the IR's ``/``."""
    k = ir.Kernel(workgroup=(N,))
    a, b, c = k.read("a", u32), k.read("b", u32), k.read("c", ir.u8)
    q, r, q8 = (k.output("q", u32, count=N), k.output("r", u32, count=N),
                k.output("q8", ir.u8, count=N))
    i = k.let("i", ir.global_id(0))
    q[i] = a[i] // b[i]
    r[i] = 4_000_000_000 // b[i]
    q8[i] = c[i] // 7
    rng = np.random.default_rng(3)
    av = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    bv = rng.integers(1, 1000, N).astype(np.uint32)
    cv = rng.integers(0, 256, N).astype(np.uint8)
    return case_of("floor_division_of_unsigned_integers", k,
                   [arr(u32, av), arr(u32, bv), arr(ir.u8, cv)],
                   [av // bv, np.uint32(4_000_000_000) // bv, cv // np.uint8(7)])


def shaped_index_2d():
    """A transpose through ``m[row, col]`` on a (3, 5) input into a (5, 3) output, the
    grid inferred from the output's shape (global_id(0) over its columns)."""
    k = ir.Kernel(workgroup=(4, 4))
    m = k.read("m", f32, shape=(3, 5))
    t = k.output("t", f32, shape=(5, 3))
    col, row = ir.global_id(0), ir.global_id(1)
    with k.if_((row < 5) & (col < 3)):
        t[row, col] = m[col, row]
    mv = np.arange(15, dtype=np.float32).reshape(3, 5) * 1.5
    return case_of("shaped_index_2d", k, [arr(f32, mv)], [mv.T.copy()])


def shaped_index_3d():
    """``a[p, q, r]`` on a (2, 3, 4) input: each invocation sums its (q, r) column over p
    into ``s[q, r]`` and writes ``a`` reversed along every axis into ``rev``."""
    k = ir.Kernel(workgroup=(4, 3))
    a = k.read("a", u32, shape=(2, 3, 4))
    s = k.output("s", u32, shape=(3, 4))
    rev = k.output("rev", u32, shape=(2, 3, 4))
    r, q = ir.global_id(0), ir.global_id(1)
    with k.if_((q < 3) & (r < 4)):
        acc = k.let("acc", ir.u32(0))
        with k.loop("p", 0, 2) as p:
            acc += a[p, q, r]
            rev[p, q, r] = a[1 - p, 2 - q, 3 - r]
        s[q, r] = acc
    av = (np.arange(24, dtype=np.uint32) * 7 + 3).reshape(2, 3, 4)
    return case_of("shaped_index_3d", k, [arr(u32, av)],
                   [av.sum(axis=0).astype(np.uint32), av[::-1, ::-1, ::-1].copy()],
                   grid=(1, 1))


CASES = [
    augmented_assignment_in_a_loop(), augmented_assignment_in_branches(),
    nested_loops_accumulate(), powers_multiply_out(), floor_division_of_unsigned_integers(),
    shaped_index_2d(), shaped_index_3d(),
]
