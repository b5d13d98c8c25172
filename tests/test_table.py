"""The IR's table: element ``index`` of a constant array, 0 past its end (docs/semantics.md,
"Tables"). Built by ``ir.table``, typed and refused by the validator (V038), carried by
the wire form with a fixed tag, uniform where its index is; and on every backend the
element's exact bits (-0, infinities, subnormals, a NaN with a payload stored as the
canonical NaN, every type the backend runs), an index past the end, u32's largest
included, reading 0, in tables up to the largest."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vyre_core import Driver, ir
from vyre_core.errors import NoCapableBackendError
from vyre_core.ir import DType, Let, Lit, Program, Table, wire
from vyre_core.ir.nodes import MAX_TABLE, Access, Barrier, Buffer, If, InvocationId
from vyre_reference import run

N = 256
#: (written out here, not taken from vyre: the test states the rule itself)
CANONICAL_NAN = {ir.f16: 0x7E00, ir.f32: 0x7FC00000, ir.f64: 0x7FF8000000000000}
#: Values of each type, edge cases first: the bits each table holds (a NaN with a payload
#: where the type has them: stored, it is the canonical NaN, docs/semantics.md).
VALUES = {
    ir.f32: np.concatenate([np.array([1.5, -0.0, np.inf, -np.inf, 2.0**-149, -(2.0**-126),
                                      3.4028235e38], np.float32),
                            np.array([0xFFC00123], np.uint32).view(np.float32)]),
    ir.f16: np.concatenate([np.array([1.5, -0.0, np.inf, 2.0**-24, -65504.0], np.float16),
                            np.array([0xFE01], np.uint16).view(np.float16)]),
    ir.f64: np.concatenate([np.array([1 / 3, -0.0, np.inf, 5e-324, -(2.0**-1022),
                                      1.7976931348623157e308, -(2.0**-1074) * 3],
                                     np.float64),
                            np.array([0xFFF0000000000123], np.uint64).view(np.float64)]),
    ir.u32: np.array([0, 1, 2**32 - 1, 2**31], np.uint32),
    ir.i32: np.array([-1, 2**31 - 1, -(2**31), 7], np.int32),
    ir.u16: np.array([0, 65535, 300], np.uint16),
    ir.i16: np.array([-1, 32767, -32768, 300], np.int16),
    ir.u8: np.array([255, 0, 128], np.uint8),
    ir.i8: np.array([-128, 127, -1], np.int8),
    ir.u64: np.array([2**64 - 1, 0, 2**63], np.uint64),
    ir.i64: np.array([-(2**63), -1, 2**63 - 1], np.int64),
}


def indices() -> np.ndarray:
    """Every place of the longest table, the first past each table's end, u32's largest."""
    return np.resize(np.array([*range(8), 8, 100, 2**31, 2**32 - 1], np.uint32), N)


def program_of(types: list[ir.DType]) -> Program:
    """``out_T[i] = table_T[x[i]]`` for each type, and the same through a let and a loop
    (the element of ``x[i] + j`` for j < 2, the last one kept)."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    i = k.let("i", ir.global_id())
    for t in types:
        out = k.output(f"out_{t.value}", t, N)
        looped = k.output(f"looped_{t.value}", t, N)
        out[i] = ir.table(VALUES[t], x[i], t)
        kept = k.let(f"kept_{t.value}", ir.table(VALUES[t], 0, t))
        with k.loop(f"j_{t.value}", 0, 2) as j:
            k.assign(kept, ir.table(VALUES[t], x[i] + j, t))
        looped[i] = kept
    return k.build()


def expected(t: ir.DType, at: np.ndarray) -> np.ndarray:
    """The elements at ``at``, 0 past the end, a NaN stored as the canonical one."""
    values = np.concatenate([VALUES[t], np.zeros(1, VALUES[t].dtype)])
    if t.is_float:
        bits = values.view(f"u{t.bits // 8}")
        values = np.where(np.isnan(values), np.array(CANONICAL_NAN[t], bits.dtype),
                          bits).view(values.dtype)
    return values[np.minimum(at, len(VALUES[t]))]


# -- the builder, the validator, the wire form ---------------------------------------------

@pytest.mark.fast
def test_the_builder_writes_a_table_of_bits_and_its_type():
    value = ir.table(np.array([1.5, -0.0], np.float32), 1)
    assert value.dtype is ir.f32
    assert value.node == Table(DType.F32, (0x3FC00000, 0x80000000), Lit(DType.U32, 1))
    assert ir.table([1, -1], 0, ir.i8).node.bits == (1, 0xFF)
    assert ir.table([0.1], 0, ir.f16).node.bits == (int(np.float16(0.1).view(np.uint16)),)


@pytest.mark.parametrize(("call", "error", "says"), [
    (lambda: ir.table([1.0, 2.0], 0), TypeError, "needs their type"),
    (lambda: ir.table([True], 0, ir.bool_), TypeError, "a table of bool"),
    (lambda: ir.table([], 0, ir.u32), ValueError, f"1 to {MAX_TABLE}"),
    (lambda: ir.table(np.zeros(MAX_TABLE + 1, np.uint8), 0), ValueError, "belongs in a buffer"),
    (lambda: ir.table([256], 0, ir.u8), ValueError, "does not fit in u8"),
    (lambda: ir.table([1.5], 0, ir.i32), TypeError, "must be an int"),
])
@pytest.mark.fast
def test_a_table_the_ir_cannot_hold_is_refused_with_a_fix(call, error, says):
    with pytest.raises(error, match=says) as info:
        call()
    assert "Fix:" in str(info.value)


@pytest.mark.fast
def test_the_validator_types_a_table_and_refuses_what_it_cannot_be():
    def findings(node):
        return [f.code for f in Program((), (1,), (Let("t", node),)).validate()]

    assert findings(Table(DType.U8, (255,) * MAX_TABLE, Lit(DType.U32, 0))) == []
    for bad in (Table(DType.BOOL, (1,), Lit(DType.U32, 0)),
                Table(DType.U8, (), Lit(DType.U32, 0)),
                Table(DType.U8, (256,), Lit(DType.U32, 0)),
                Table(DType.U32, (1,), Lit(DType.I32, 0))):
        assert findings(bad) == ["V038"]


@pytest.mark.fast
def test_a_table_needs_its_op_id_and_its_type():
    req = program_of([ir.f16, ir.i16]).requirements()
    assert "expr.table" in req.ops and "expr.table" in ir.NEWER_OPS
    assert "expr.table" not in ir.DEFAULT_OPS  # (a plugin from before it never sees one)
    assert "f16" in req.features and "dtype.i16" in req.ops


@pytest.mark.fast
def test_the_wire_form_keeps_every_table_and_its_tag_is_fixed():
    program = program_of(list(VALUES))
    assert Program.from_wire(program.to_wire()) == program
    assert wire.E_TABLE == 15  # (append only: a program's bytes never change meaning)
    one = Program((), (1,), (Let("t", Table(DType.U8, (7,), Lit(DType.U32, 0))),)).to_wire()
    assert one.endswith(bytes([0x94, 15, 6, 0x91, 7, 0x93, 1, 0, 0]))


@pytest.mark.fast
def test_a_table_at_a_uniform_index_is_uniform():
    """A barrier under an if on a table's element: allowed when the index is the same in
    every invocation of the workgroup (V016 otherwise)."""
    def barrier_under(index):
        cond = ir.Binary(ir.BinOp.EQ, Table(DType.U32, (1, 2), index), Lit(DType.U32, 1))
        buffers = (Buffer("o", 0, DType.U32, Access.OUTPUT, 1),)
        return [f.code for f in Program(buffers, (64,), (If(cond, (Barrier(),), ()),))
                .validate()]

    assert barrier_under(InvocationId(ir.IdKind.WORKGROUP, 0)) == []
    assert barrier_under(InvocationId(ir.IdKind.LOCAL, 0)) == ["V016"]


# -- what it reads ----------------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize("t", list(VALUES), ids=str)
def test_the_reference_reads_each_element_and_0_past_the_end(t):
    program = program_of([t])
    at = indices()
    out, looped = run(program, [at])
    assert out.tobytes() == expected(t, at).tobytes()
    assert looped.tobytes() == expected(t, at + np.uint32(1)).tobytes()


@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


def backends_for(t: ir.DType) -> list[str]:
    """wgpu has no 64-bit integers (routing sends those elsewhere); it runs f64 tables."""
    return ["cpu"] if t in (ir.u64, ir.i64) else ["cpu", "wgpu"]


@pytest.mark.parametrize("t", list(VALUES), ids=str)
def test_every_backend_reads_the_references_bytes(driver, t):
    program = program_of([t])
    at = indices()
    want = driver.dispatch(program, [at], backend="reference")
    for backend in backends_for(t):
        got = driver.dispatch(program, [at], backend=backend)
        for w, g in zip(want, got, strict=True):
            assert g.tobytes() == w.tobytes(), f"{t} on {backend}"


def test_a_table_of_64_bit_integers_routes_around_wgpu(driver):
    program = program_of([ir.u64])
    assert "dtype.u64" in program.requirements().ops
    with pytest.raises(NoCapableBackendError, match=r"dtype\.u64"):
        driver.dispatch(program, [indices()], backend="wgpu")


@settings(max_examples=6, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64))
def test_a_drawn_table_reads_the_same_bytes_everywhere(driver, drawn):
    """Tables of random bits read as f32 (NaNs with payloads among them), at random
    indices in and past the end."""
    values = np.array(drawn, np.uint32).view(np.float32)
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, N)
    out[ir.global_id()] = ir.bitcast(ir.table(values, x[ir.global_id()]), ir.u32)
    program = k.build()
    at = np.random.default_rng(len(drawn)).integers(0, len(drawn) + 4, N).astype(np.uint32)
    want = run(program, [at])[0]
    bits = np.array(drawn, np.uint32)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    canonical = np.concatenate([np.where(nan, np.uint32(0x7FC00000), bits),
                                np.zeros(1, np.uint32)])
    assert want.tobytes() == canonical[np.minimum(at, len(drawn))].tobytes()
    for backend in ("cpu", "wgpu"):
        assert driver.dispatch(program, [at],
                               backend=backend)[0].tobytes() == want.tobytes(), backend


def test_a_barrier_under_a_table_read_at_a_uniform_index_runs_everywhere(driver):
    """Each workgroup writes its invocations' ids to workgroup memory, and, where its
    table entry says so, reads a neighbour's after a barrier: the barrier is under a
    condition on a table read at the workgroup's id, the same in all its invocations."""
    k = ir.Kernel(workgroup=(64,))
    out = k.output("out", ir.u32, 256)
    shared = k.workgroup_buffer("shared", ir.u32, 64)
    lid = k.let("lid", ir.local_id())
    shared[lid] = ir.global_id()
    value = k.let("value", ir.global_id())
    with k.if_(ir.table([1, 0, 1, 1], ir.workgroup_id(), ir.u32) == 1):
        k.barrier()
        k.assign(value, shared[(lid + 1) % 64])
    out[ir.global_id()] = value
    program = k.build()
    assert program.validate() == []
    want = driver.dispatch(program, [], backend="reference")[0]
    gid = np.arange(256, dtype=np.uint32)
    neighbour = gid - gid % 64 + (gid % 64 + 1) % 64
    assert want.tobytes() == np.where(np.isin(gid // 64, [0, 2, 3]), neighbour,
                                      gid).astype(np.uint32).tobytes()
    for backend in ("cpu", "wgpu"):
        assert driver.dispatch(program, [], backend=backend)[0].tobytes() == want.tobytes(), backend


@pytest.mark.parametrize("t", [ir.f32, ir.f64, ir.u8], ids=str)
def test_a_table_of_the_largest_size_reads_the_same_bytes_everywhere(driver, t):
    """A table of MAX_TABLE elements (an f64 one fills WGSL's promised private memory),
    read at every index and past the end."""
    rng = np.random.default_rng(t.bits)
    bits = rng.integers(0, 2**t.bits, MAX_TABLE, dtype=np.uint64)
    values = bits.astype(f"u{t.bits // 8}").view(t.value_np)
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    out = k.output("out", t, MAX_TABLE + 64)
    out[ir.global_id()] = ir.table(values, x[ir.global_id()], t)
    program = k.build()
    at = np.arange(MAX_TABLE + 64, dtype=np.uint32)
    want = driver.dispatch(program, [at], backend="reference")[0]
    for backend in ("cpu", "wgpu"):
        assert driver.dispatch(program, [at],
                               backend=backend)[0].tobytes() == want.tobytes(), backend


def test_the_tables_buffer_counts_against_the_devices_storage_buffers(driver):
    """wgpu binds its tables as one more storage buffer: a kernel at the device's limit
    without a table runs there, the same kernel reading one is refused, naming the tables,
    and routing, left to choose, runs it elsewhere."""
    from vyre_core.errors import UnsupportedFeatureError

    if not all("llvmpipe" in d.name for d in driver.devices("wgpu")):
        pytest.skip("the limit below is lavapipe's (the CI adapter); this device's differs")
    limit = 32  # lavapipe's max-storage-buffers-per-shader-stage

    def kernel(with_table: bool) -> Program:
        k = ir.Kernel(workgroup=(1,))
        ins = [k.read(f"x{j}", ir.u32) for j in range(limit - 2)]
        out = k.output("out", ir.u32, 1)
        total = ins[0][0]
        for x in ins[1:]:
            total = total + x[0]
        out[0] = total + (ir.table(np.array([7], np.uint32), ins[0][0] - 1) if with_table
                          else 0)
        return k.build()

    ones = [np.ones(1, np.uint32)] * (limit - 2)
    assert driver.dispatch(kernel(False), ones, backend="wgpu")[0].tolist() == [limit - 2]
    with pytest.raises(UnsupportedFeatureError, match="tables its math reads") as raised:
        driver.dispatch(kernel(True), ones, backend="wgpu")
    assert f"binds {limit + 1} storage buffers (2 of them vyre's own" in str(raised.value)
    assert driver.dispatch(kernel(True), ones)[0].tolist() == [limit - 2 + 7]


@pytest.mark.fast
def test_the_wgsl_stores_a_table_read_twice_once_in_the_tables_buffer():
    """Tables are words of one read-only buffer (a per-invocation array would be copied
    into every lane): a table read twice is stored once, an f64 as two words a value,
    each followed by the 0 an index past its end reads."""
    from vyre_wgpu.lowering import lower

    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.f32, N)
    out[ir.global_id()] = ir.table(VALUES[ir.f32], x[0]) + ir.table(VALUES[ir.f32], x[1])
    lowered = lower(k.build())
    f32_bits = VALUES[ir.f32].view(np.uint32)
    assert lowered.tables == np.append(f32_bits, 0).astype(np.uint32).tobytes()
    assert "var<private>" not in lowered.wgsl
    assert lowered.wgsl.count("var<storage, read> vyre_tables") == 1
    assert lower(ir.Kernel(workgroup=(1,)).build()).tables == b""
