"""The builder versions of the bundled examples, which are written as kernels: each
example's program as it was built with ``vyre_core.ir`` before (docs/ir.md), kept as the
twin its kernel must match byte for byte (test_builder_twins.py). saxpy's twin is
``vyre_examples.saxpy.program``, the IR-level fixture the other tests use. Below them, the
twins of the issue's saxpy and blur (test_kernels_launch.py) and of the other kernels
docs/kernels.md defines (test_kernels_guide.py)."""

from __future__ import annotations

from vyre_core import SequenceBuilder, ir
from vyre_examples.chain import A
from vyre_examples.f64_kernel import DEGREE
from vyre_examples.fault_tolerance import INC, MUL, N
from vyre_examples.histogram import BINS
from vyre_examples.jacobi import MAX_ITERATIONS, SWEEPS
from vyre_examples.mandelbrot import WORKGROUP as MANDELBROT_WORKGROUP
from vyre_examples.matmul import TILE
from vyre_examples.matmul_int8 import SUBGROUP
from vyre_examples.matmul_int8 import WORKGROUP as MATMUL_INT8_WORKGROUP
from vyre_examples.reduce import WORKGROUP as REDUCE_WORKGROUP
from vyre_examples.reduce import passes
from vyre_examples.reduction import WORKGROUP
from vyre_examples.scan import levels
from vyre_examples.sort import WORKGROUP as SORT_WORKGROUP
from vyre_examples.sort import stages


def xor_program(n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    data = k.read("data", ir.u32)
    key = k.read("key", ir.u32)
    out = k.output("out", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < data.len):
        out[i] = data[i] ^ key[i % key.len]
    return k.build()


def histogram_program(bins: int = BINS) -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    values = k.read("values", ir.u32)
    hist = k.output("hist", ir.u32, count=bins)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < values.len):
        hist.atomic_add(values[i] & (bins - 1), 1)
    return k.build()


def f64_kernel_program(n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f64)
    coeffs = k.uniform("coeffs", ir.f64, count=DEGREE + 1)
    out = k.output("out", ir.f64, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        xi = k.let("xi", x[i])
        acc = k.let("acc", coeffs[0])
        with k.loop("d", 1, DEGREE + 1) as d:
            k.assign(acc, acc * xi + coeffs[d])
        out[i] = acc
    return k.build()


def reduction_program(groups: int) -> ir.Program:
    k = ir.Kernel(workgroup=(WORKGROUP,))
    x = k.read("x", ir.u32)
    sums = k.output("sums", ir.u32, count=groups)
    shared = k.workgroup_buffer("shared", ir.u32, count=WORKGROUP)
    lid = k.let("lid", ir.local_id(0))
    shared[lid] = x[ir.global_id(0)]          # past the input: reads 0
    k.barrier()
    with k.loop("step", 1, WORKGROUP.bit_length()) as step:
        stride = k.let("stride", ir.u32(WORKGROUP) >> step)
        with k.if_(lid < stride):
            shared[lid] = shared[lid] + shared[lid + stride]
        k.barrier()
    with k.if_(lid == 0):
        sums[ir.workgroup_id(0)] = shared[0]
    return k.build()


def mandelbrot_program(width: int, height: int, max_iter: int) -> ir.Program:
    k = ir.Kernel(workgroup=MANDELBROT_WORKGROUP)
    view = k.uniform("view", ir.f32, count=3)          # x0, y0, step
    counts = k.output("counts", ir.u32, count=width * height)
    px = k.let("px", ir.global_id(0))
    py = k.let("py", ir.global_id(1))
    with k.if_((px >= width) | (py >= height)):
        k.ret()
    pixel = k.let("pixel", py * width + px)
    cx = k.let("cx", view[0] + px.cast(ir.f32) * view[2])
    cy = k.let("cy", view[1] + py.cast(ir.f32) * view[2])
    zx = k.let("zx", ir.f32(0.0))
    zy = k.let("zy", ir.f32(0.0))
    with k.loop("it", 0, max_iter) as it:
        zx2 = k.let("zx2", zx * zx)
        zy2 = k.let("zy2", zy * zy)
        with k.if_(zx2 + zy2 > 4.0):
            counts[pixel] = it
            k.ret()
        k.assign(zy, zx * zy * 2.0 + cy)
        k.assign(zx, zx2 - zy2 + cx)
    counts[pixel] = max_iter
    return k.build()


def fault_tolerance_program(n: int = N) -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    seeds = k.read("seeds", ir.u32)
    rounds = k.uniform("rounds", ir.u32)
    out = k.output("out", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < seeds.len):
        s = k.let("s", seeds[i])
        with k.loop("r", 0, rounds[0]):
            k.assign(s, s * MUL + INC)
        out[i] = s
    return k.build()


def chain_elementwise(expr, *, out_access: str = "output", n: int) -> ir.Program:
    """``out[i] = expr(a[i], b[i])`` over f32 for i < n."""
    k = ir.Kernel(workgroup=(256,))
    a = k.read("a", ir.f32, n)
    b = k.read("b", ir.f32, n)
    out = k.output("out", ir.f32, count=n) if out_access == "output" else \
        k.read_write("out", ir.f32, n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < n):
        out[i] = expr(a[i], b[i])
    return k.build()


def chain_sequence(n: int):
    s = SequenceBuilder()
    s.resident("x", ir.f32, n)
    s.resident("y", ir.f32, n)
    s.transient("t", ir.f32, n)
    s.transient("z", ir.f32, n)
    s.step(chain_elementwise(lambda x, y: x * A + y, n=n), {"a": "x", "b": "y", "out": "t"})
    s.step(chain_elementwise(lambda t, _: t * t, n=n), {"a": "t", "b": "t", "out": "y"})
    s.step(chain_elementwise(lambda y, x: y - x, n=n), {"a": "y", "b": "x", "out": "z"})
    return s.build(returns=["y", "z"])


def reduce_partial_sums(m: int, chunks: int) -> ir.Program:
    """out[i] = x[i] + x[i + m] + ... + x[i + (chunks - 1) m], left to right."""
    k = ir.Kernel(workgroup=(min(m, REDUCE_WORKGROUP),))
    x = k.read("x", ir.f32)
    out = k.output("out", ir.f32, count=m)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < m):
        acc = k.let("acc", ir.f32(0.0))
        with k.loop("j", 0, chunks) as j:
            k.assign(acc, acc + x[i + j * m])
        out[i] = acc
    return k.build()


def reduce_sequence(n: int):
    b = SequenceBuilder()
    b.input("x", ir.f32, n)
    source = "x"
    for level, (m, chunks) in enumerate(passes(n)):
        target = b.transient(f"level{level}", ir.f32, m)
        b.step(reduce_partial_sums(m, chunks), {"x": source, "out": target})
        source = target
    return b.build(returns=[source])


def scan_chunk_scan(n: int, chunk: int) -> ir.Program:
    """y = x scanned within each chunk of ``chunk`` elements; totals[c] = chunk c's sum."""
    lanes = n // chunk
    k = ir.Kernel(workgroup=(min(lanes, 64),))
    x = k.read("x", ir.u32, n)
    y = k.output("y", ir.u32, count=n)
    totals = k.output("totals", ir.u32, count=lanes)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < lanes):
        acc = k.let("acc", ir.u32(0))
        with k.loop("j", 0, chunk) as j:
            at = k.let("at", i * chunk + j)
            k.assign(acc, acc + x[at])
            y[at] = acc
        totals[i] = acc
    return k.build()


def scan_add_offsets(n: int, chunk: int) -> ir.Program:
    """y[i] += scanned[i / chunk - 1] for every chunk but the first."""
    k = ir.Kernel(workgroup=(min(n, 256),))
    y = k.read_write("y", ir.u32, n)
    scanned = k.read("scanned", ir.u32, n // chunk)
    i = k.let("i", ir.global_id(0))
    c = k.let("c", i / chunk)  # (u32 division)
    with k.if_(ir.logical_and(i < n, c > 0)):
        y[i] = y[i] + scanned[c - 1]
    return k.build()


def scan_sequence(n: int):
    b = SequenceBuilder()
    b.input("x", ir.u32, n)
    shape = levels(n)
    for level, (size, chunk) in enumerate(shape):
        b.transient(f"scan{level}", ir.u32, size)
        b.transient(f"totals{level}", ir.u32, size // chunk)
        program = scan_chunk_scan(size, chunk)  # one invocation per chunk
        b.step(program, {"x": "x" if level == 0 else f"totals{level - 1}",
                         "y": f"scan{level}", "totals": f"totals{level}"},
               grid=-(-(size // chunk) // program.workgroup[0]))
    for level in range(len(shape) - 2, -1, -1):
        size, chunk = shape[level]
        b.step(scan_add_offsets(size, chunk), {"y": f"scan{level}", "scanned": f"scan{level + 1}"})
    return b.build(returns=["scan0"])


def sort_compare_and_swap() -> ir.Program:
    """One bitonic pass over ``keys``: invocation t owns the pair (i, i + j)."""
    k = ir.Kernel(workgroup=(SORT_WORKGROUP,))
    keys = k.read_write("keys", ir.u32)
    stage = k.uniform("stage", ir.u32, 2)  # (k, j)
    t = k.let("t", ir.global_id(0))
    j = k.let("j", stage[1])
    i = k.let("i", (t / j) * (j * 2) + t % j)
    with k.if_(i + j < keys.len):
        a = k.let("a", keys[i])
        b = k.let("b", keys[i + j])
        ascending = k.let("ascending", (i & stage[0]) == 0)
        low = k.let("low", ir.min(a, b))
        high = k.let("high", ir.max(a, b))
        keys[i] = ir.select(ascending, low, high)
        keys[i + j] = ir.select(ascending, high, low)
    return k.build()


def sort_sequence(n: int):
    b = SequenceBuilder()
    b.input("unsorted", ir.u32, n)
    b.transient("keys", ir.u32, n)
    b.step(sort_copy(n), {"src": "unsorted", "dst": "keys"})
    program = sort_compare_and_swap()
    grid = max(1, n // 2 // SORT_WORKGROUP)
    for size, j in stages(n):
        stage = b.constant(f"stage_{size}_{j}", ir.u32, [size, j])
        b.step(program, {"stage": stage}, grid=grid)
    return b.build(returns=["keys"])


def sort_copy(n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(SORT_WORKGROUP,))
    src = k.read("src", ir.u32, n)
    dst = k.output("dst", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < n):
        dst[i] = src[i]
    return k.build()


def jacobi_sweep(side: int, flagged: bool) -> ir.Program:
    """dst = one Jacobi sweep of src; with ``flagged``, flag[0] = 1 where a cell changed."""
    n = side * side
    k = ir.Kernel(workgroup=(16, 16))
    src = k.read("src", ir.u32, n)
    dst = k.output("dst", ir.u32, count=n)
    flag = k.read_write("flag", ir.u32, 1) if flagged else None
    x = k.let("x", ir.global_id(0))
    y = k.let("y", ir.global_id(1))
    with k.if_(ir.logical_and(x < side, y < side)):
        at = k.let("at", y * side + x)
        edge = ir.logical_or(ir.logical_or(x == 0, y == 0),
                             ir.logical_or(x == side - 1, y == side - 1))
        new = k.let("new", src[at])
        with k.if_(ir.logical_not(edge)):
            k.assign(new, (src[at - side] + src[at + side] + src[at - 1] + src[at + 1]) >> 2)
        dst[at] = new
        if flag is not None:
            with k.if_(new != src[at]):
                flag[0] = ir.u32(1)
    return k.build()


def jacobi_sequence(side: int):
    b = SequenceBuilder()
    b.input("start", ir.u32, side * side)
    b.transient("u", ir.u32, side * side)
    b.transient("v", ir.u32, side * side)
    b.transient("changed", ir.u32, 1)
    grid = (-(-side // 16), -(-side // 16))
    b.step(jacobi_sweep(side, False), {"src": "start", "dst": "u"}, grid=grid)
    with b.loop(until_zero="changed", max_iterations=MAX_ITERATIONS):
        for s in range(SWEEPS):
            last = s == SWEEPS - 1
            src, dst = ("u", "v") if s % 2 == 0 else ("v", "u")
            bind = {"src": src, "dst": dst, **({"flag": "changed"} if last else {})}
            b.step(jacobi_sweep(side, last), bind, grid=grid)
    return b.build(returns=["u"])


def matmul_program(m: int, k_dim: int, n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(TILE, TILE))
    depth = k.constant("KTILE", ir.u32, TILE, low=1, high=TILE)
    a = k.read("a", ir.f32, count=m * k_dim)
    b = k.read("b", ir.f32, count=k_dim * n)
    c = k.output("c", ir.f32, shape=(m, n))
    a_tile = k.workgroup_buffer("a_tile", ir.f32, count=TILE * TILE)
    b_tile = k.workgroup_buffer("b_tile", ir.f32, count=TILE * TILE)
    col = k.let("col", ir.global_id(0))
    row = k.let("row", ir.global_id(1))
    lx = k.let("lx", ir.local_id(0))
    ly = k.let("ly", ir.local_id(1))
    acc = k.let("acc", ir.f32(0.0))
    with k.loop("t", 0, (ir.u32(k_dim) + depth - 1) / depth) as t:
        a_col = k.let("a_col", t * depth + lx)
        b_row = k.let("b_row", t * depth + ly)
        a_tile[ly * TILE + lx] = ir.select((row < m) & (a_col < k_dim) & (lx < depth),
                                           a[row * k_dim + a_col], ir.f32(0.0))
        b_tile[ly * TILE + lx] = ir.select((b_row < k_dim) & (col < n) & (ly < depth),
                                           b[b_row * n + col], ir.f32(0.0))
        k.barrier()
        with k.loop("j", 0, depth) as j:
            k.assign(acc, acc + a_tile[ly * TILE + j] * b_tile[j * TILE + lx])
        k.barrier()                      # the next slice overwrites the tiles
    with k.if_((row < m) & (col < n)):
        c[row * n + col] = acc
    return k.build()


def matmul_int8_program(m: int, k_dim: int, n: int, subgroup: int = SUBGROUP) -> ir.Program:
    k = ir.Kernel(workgroup=(MATMUL_INT8_WORKGROUP,), subgroup_size=subgroup)
    a = k.read("a", ir.i8, count=m * k_dim)
    b = k.read("b", ir.i8, count=k_dim * n)
    c = k.output("c", ir.i32, count=m * n)
    gid = k.let("gid", ir.global_id(0))
    cell = k.let("cell", gid / subgroup)       # the element of C this subgroup computes
    row = k.let("row", cell / n)
    col = k.let("col", cell % n)
    acc = k.let("acc", ir.i32(0))
    with k.loop("kk", gid % subgroup, k_dim, step=subgroup) as kk:  # (past C: loads read 0)
        k.assign(acc, acc + a[row * k_dim + kk].cast(ir.i32) * b[kk * n + col].cast(ir.i32))
    total = k.let("total", k.subgroup("add", acc))
    first = k.let("first", k.subgroup("elect"))
    with k.if_(first & (cell < m * n)):
        c[cell] = total
    return k.build()


def twin_inputs(program: ir.Program, inputs, twin: ir.Program) -> list:
    """The twin's inputs from the kernel program's: matched by buffer name, each as the
    twin's dtype stores it (a one-element uniform of the kernel's dtype as the twin's)."""
    by_name = {b.name: a for b, a in zip(program.inputs, inputs, strict=True)}
    return [by_name[b.name].astype(b.dtype.storage_np) for b in twin.inputs]


# -- the kernels of issue 36 and of docs/kernels.md, built with the builder ---------------

def exact_guard(k: ir.Kernel, launch: ir.Val, first: int, axes: int) -> None:
    """The lowering's guard of an exact kernel: the invocations past ``dim`` (the launch
    buffer's elements from ``first``) return at once."""
    past = ir.global_id(0) >= launch[first]
    for axis in range(1, axes):
        past = ir.logical_or(past, ir.global_id(axis) >= launch[first + axis])
    with k.if_(past):
        k.ret()


def saxpy_twin() -> ir.Program:
    """saxpy as the builder writes it, under the kernel typing rules (ids are i32)."""
    k = ir.Kernel(workgroup=(64,))
    a = k.uniform("a", ir.f32)
    x = k.read("x", ir.f32)
    y = k.read("y", ir.f32)
    out = k.read_write("out", ir.f32)
    exact_guard(k, k.uniform("launch", ir.u32, count=1), 0, 1)
    i = k.let("i", ir.global_id(0).cast(ir.i32))
    with k.if_(i < x.len.cast(ir.i32)):
        out[i.cast(ir.u32)] = a[0] * x[i.cast(ir.u32)] + y[i.cast(ir.u32)]
    return k.build()


def within(i: ir.Val, j: ir.Val, cols: ir.Val) -> ir.Val:
    """Element (i, j) of a shaped array, out of bounds when j is outside its axis."""
    i, j = i.cast(ir.u32), j.cast(ir.u32)
    return ir.select(j < cols, i * cols + j, ir.u32(2**32 - 1))


def blur_twin() -> ir.Program:
    """blur as the builder writes it: the extents of img and out, then the launch's dim,
    in one u32 uniform."""
    k = ir.Kernel(workgroup=(8, 8))
    img = k.read("img", ir.f32)
    out = k.read_write("out", ir.f32)
    shapes = k.uniform("launch", ir.u32, count=6)
    exact_guard(k, shapes, 4, 2)
    r = k.let("r", ir.global_id(0).cast(ir.i32))
    c = k.let("c", ir.global_id(1).cast(ir.i32))
    rows, cols = shapes[0].cast(ir.i32), shapes[1].cast(ir.i32)
    inside = ir.logical_and(ir.logical_and(ir.i32(0) < r, r < rows - 1),
                            ir.logical_and(ir.i32(0) < c, c < cols - 1))
    with k.if_(inside):
        acc = k.let("acc", ir.f32(0))
        with k.loop("dr_trip", 0, 3) as t:
            dr = k.let("dr", ir.i32(-1) + t.cast(ir.i32))
            with k.loop("dc_trip", 0, 3) as u:
                dc = k.let("dc", ir.i32(-1) + u.cast(ir.i32))
                acc += img[within(r + dr, c + dc, shapes[1])]
        out[within(r, c, shapes[3])] = acc / 9
    return k.build()


def floor_div(a: ir.Val, b: ir.Val) -> ir.Val:
    """Python's ``a // b`` on i32 from the IR's truncating div: one less where the
    remainder is not zero and its sign differs from the divisor's."""
    r = a % b
    return a / b - ir.select(ir.logical_and(r != 0, (r < 0) != (b < 0)), ir.i32(1), ir.i32(0))


def floor_mod(a: ir.Val, b: ir.Val) -> ir.Val:
    """Python's ``a % b`` on i32: the remainder takes the divisor's sign."""
    r = a % b
    return ir.select(ir.logical_and(r != 0, (r < 0) != (b < 0)), r + b, r)


def guide_histogram_program() -> ir.Program:
    """docs/kernels.md's histogram: a shared tile of each workgroup's four values, a bin
    count per value (clamped), and per workgroup the tile's values mod 7 summed from the
    last lane down."""
    k = ir.Kernel(workgroup=(4,))
    data = k.read("data", ir.i32)
    bins = k.read_write("bins", ir.u32)
    sums = k.read_write("sums", ir.i32)
    tile = k.workgroup_buffer("tile", ir.i32, count=4)
    i = k.let("i", ir.global_id(0))
    lid = k.let("lid", ir.local_id(0))
    tile[lid] = data[i]                                   # past the input: reads 0
    k.barrier()
    with k.if_(i < data.len):
        last = bins.len.cast(ir.i32) - 1
        slot = ir.min(ir.max(floor_div(data[i], ir.i32(10)), ir.i32(0)), last)
        bins.atomic_add(slot.cast(ir.u32), 1)
    with k.if_(lid == 0):
        total = k.let("total", ir.i32(0))
        with k.loop("t", 0, 4) as t:
            k.assign(total, total + floor_mod(tile[ir.u32(3) - t], ir.i32(7)))
        sums[ir.workgroup_id(0)] = total
    return k.build()


def guide_normalise_program() -> ir.Program:
    """docs/kernels.md's normalise: each value over its workgroup's sum, and the count of
    the invocations before it inside x, the workgroup reduction and scan written out in
    the order docs/kernels.md states (halves for the sum, Hillis and Steele for the scan,
    barriers between the steps and after the last read)."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f32)
    out = k.read_write("out", ir.f32)
    offsets = k.read_write("offsets", ir.i32)
    sums = k.workgroup_buffer("sums", ir.f32, count=64)
    counts = k.workgroup_buffer("counts", ir.i32, count=64)
    i = k.let("i", ir.global_id(0))
    lid = k.let("lid", ir.local_id(0))
    inside = k.let("inside", i < x.len)
    v = k.let("v", ir.select(inside, x[i], ir.f32(0)))
    sums[lid] = v
    k.barrier()
    live = 64
    while live > 1:
        half = (live + 1) // 2
        with k.if_(lid < live - half):
            sums[lid] = sums[lid] + sums[lid + half]
        k.barrier()
        live = half
    total = k.let("total", sums[0])
    k.barrier()
    counts[lid] = inside.cast(ir.i32)
    k.barrier()
    step = 1
    while step < 64:
        t = k.let(f"t{step}", counts[lid])
        with k.if_(lid >= step):
            k.assign(t, counts[lid - step] + t)
        k.barrier()
        counts[lid] = t
        k.barrier()
        step *= 2
    before = k.let("before", ir.i32(0))
    with k.if_(lid > 0):
        k.assign(before, counts[lid - 1])
    k.barrier()
    with k.if_(inside):
        out[i] = v / total
        offsets[i] = before
    return k.build()


def guide_count_program() -> ir.Program:
    """docs/kernels.md's count: a bin per value, one invocation per element."""
    k = ir.Kernel(workgroup=(64,))
    data = k.read("data", ir.i32)
    bins = k.read_write("bins", ir.u32)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < data.len):
        bins.atomic_add(data[i].cast(ir.u32), 1)
    return k.build()


def guide_scaled_program(dtype: ir.DType) -> ir.Program:
    """docs/kernels.md's unannotated scaled, for ``dtype`` scalars and arrays."""
    k = ir.Kernel(workgroup=(64,))
    a = k.uniform("a", dtype)
    x = k.read("x", dtype)
    out = k.read_write("out", dtype)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] * a[0]
    return k.build()


def guide_bump_program() -> ir.Program:
    """docs/kernels.md's bump, its ``k`` a sequence loop's number (a u32)."""
    k = ir.Kernel(workgroup=(64,))
    step = k.uniform("k", ir.u32)
    v = k.read_write("v", ir.i32)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < v.len):
        v[i] = v[i] + step[0].cast(ir.i32) * (i.cast(ir.i32) + 1)
    return k.build()


def guide_sequence():
    """docs/kernels.md's sequence: saxpy into t, bump three times, blur into smooth."""
    b = SequenceBuilder()
    b.input("x", ir.f32, 8)
    b.input("y", ir.f32, 8)
    b.transient("t", ir.f32, 8)
    b.step(saxpy_twin(), {"a": b.constant("a", ir.f32, [2.5]), "out": "t",
                          "launch": b.constant("dim8", ir.u32, [8])}, dim=8)
    b.input("v", ir.i32, 4)
    with b.loop(times=3) as k:
        b.step(guide_bump_program(), {"k": k}, dim=4)
    b.input("img", ir.f32, 30)
    b.transient("smooth", ir.f32, 30)
    b.step(blur_twin(), {"out": "smooth",
                         "launch": b.constant("shapes", ir.u32, [5, 6, 5, 6, 5, 6])},
           dim=(5, 6))
    return b.build(returns=["t", "v", "smooth"])
