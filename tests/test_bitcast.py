"""The IR's bitcast: a value's bits read as another type of its width (docs/semantics.md,
"Bitcasts"). Typed and refused by the validator (V037), carried by the wire form, written
by the builder and the kernel frontend, and on every backend the bytes of numpy's
``.view`` with the NaN rule applied: a NaN read as bits, and a NaN stored, is the
canonical NaN, whatever its payload. Inputs: random bit patterns (hypothesis) beside
-0, subnormals, infinities and NaNs with payloads of both signs, every pair of types of
one width, in plain, lockstep and loop kernels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import launch

import vyre_core as vyre
from vyre_core import Driver, ir
from vyre_core.errors import KernelSyntaxError, NoCapableBackendError, UnsupportedFeatureError
from vyre_core.ir import Bitcast, DType, Let, Lit, Program, Var, wire
from vyre_core.ir.fold import substitute
from vyre_core.ir.nodes import Binary, BinOp, Block, If, SpecRef, Store, walk
from vyre_reference import run as reference_run

GROUPS = {8: (ir.u8, ir.i8), 16: (ir.f16, ir.u16, ir.i16), 32: (ir.f32, ir.u32, ir.i32),
          64: (ir.f64, ir.u64, ir.i64)}
UNSIGNED = {8: ir.u8, 16: ir.u16, 32: ir.u32, 64: ir.u64}
FLOAT = {16: ir.f16, 32: ir.f32, 64: ir.f64}
#: (written out here, not taken from vyre: the test states the rule itself)
CANONICAL_NAN = {16: 0x7E00, 32: 0x7FC00000, 64: 0x7FF8000000000000}
EXPONENT_BITS = {16: 5, 32: 8, 64: 11}
NUMERIC = [t for group in GROUPS.values() for t in group]
N = 256  # elements each dispatch (drawn patterns repeated up to it)


# -- the rule, on bit patterns -------------------------------------------------------------

def is_nan_pattern(bits: np.ndarray, width: int) -> np.ndarray:
    if width not in FLOAT:
        return np.zeros(bits.shape, bool)
    return bits.view(FLOAT[width].value_np) != bits.view(FLOAT[width].value_np)


def expected_bits(bits: np.ndarray, src: ir.DType, dst: ir.DType) -> np.ndarray:
    """What ``dst`` buffer holds after ``out[i] = x[i].bitcast(dst)`` for ``x`` of
    ``bits``: the same bits, but a NaN's are canonical where a float reads them as bits
    (src) or stores them (dst)."""
    out = bits.copy()
    if src.is_float or dst.is_float:
        out[is_nan_pattern(bits, src.bits)] = CANONICAL_NAN[src.bits]
    return out


def special_bits(width: int) -> list[int]:
    """0, -0, the smallest and largest subnormal, the smallest normal, the largest
    finite, ±inf, quiet and signalling NaNs with payloads of both signs, all ones."""
    if width == 8:
        return [0, 1, 0x7F, 0x80, 0x81, 0xFF]
    e = EXPONENT_BITS[width]
    m = width - 1 - e
    sign, inf, quiet = 1 << (width - 1), ((1 << e) - 1) << m, 1 << (m - 1)
    return [0, sign, 1, sign | 1, (1 << m) - 1, 1 << m, inf - 1, sign | (inf - 1), inf,
            sign | inf, inf | quiet, sign | inf | quiet, inf | 1, sign | inf | 1,
            inf | quiet | 0x155, (1 << width) - 1]


def patterns(width: int, drawn: list[int]) -> np.ndarray:
    """The special patterns, then ``drawn``, repeated to N elements."""
    values = special_bits(width) + drawn
    return np.resize(np.array(values, dtype=UNSIGNED[width].value_np), N)


# -- typing, the validator, the wire form ----------------------------------------------------

pair_ids = [f"{a.value}-{b.value}" for a in DType for b in DType]


@pytest.mark.fast
@pytest.mark.parametrize(("src", "dst"), [(a, b) for a in DType for b in DType], ids=pair_ids)
def test_a_bitcast_is_valid_between_numeric_types_of_one_width_and_only_there(src, dst):
    program = Program((), (1,), (Let("b", Bitcast(dst, Lit(src, 0))),))
    valid = src.bits == dst.bits and DType.BOOL not in (src, dst)
    assert [f.code for f in program.validate()] == ([] if valid else ["V037"])
    if not valid:
        (finding,) = program.validate()
        assert f"bitcast from {src.value}" in finding.cause and dst.value in finding.cause


@pytest.mark.fast
def test_the_builder_writes_a_bitcast_node_of_the_target_type():
    k = ir.Kernel()
    x = k.read("x", ir.f32)
    a, b = ir.bitcast(x[0], ir.u32), x[0].bitcast(ir.i32)
    assert a.node == Bitcast(DType.U32, x[0].node) and a.dtype is ir.u32
    assert b.node == Bitcast(DType.I32, x[0].node) and b.dtype is ir.i32
    assert ir.bitcast(1.5, ir.u32).node == Bitcast(DType.U32, Lit.of(DType.F32, 1.5))


@pytest.mark.fast
def test_a_bitcast_needs_its_op_id_and_its_types():
    k = ir.Kernel()
    x, out = k.read("x", ir.u16), k.output("out", ir.f16, 1)
    out[0] = x[0].bitcast(ir.f16)
    req = k.build().requirements()
    assert "expr.bitcast" in req.ops and "expr.bitcast" in ir.NEWER_OPS
    assert "expr.bitcast" not in ir.DEFAULT_OPS  # (a plugin from before it never sees one)
    assert "f16" in req.features and "dtype.u16" in req.ops


@pytest.mark.fast
def test_the_wire_form_keeps_every_bitcast_and_its_tag_is_fixed():
    body = tuple(Let(f"b_{a.value}_{b.value}", Bitcast(b, Lit(a, special_bits(a.bits)[-1])))
                 for a in NUMERIC for b in GROUPS[a.bits])
    program = Program((), (1,), body)
    assert Program.from_wire(program.to_wire()) == program
    assert wire.E_BITCAST == 14  # (append only: a program's bytes never change meaning)
    one = Program((), (1,), (Let("b", Bitcast(DType.U32, Lit(DType.F32, 0))),)).to_wire()
    assert one.endswith(bytes([0x93, 14, 0, 0x93, 1, 2, 0]))  # [E_BITCAST, u32, [E_LIT, f32, 0]]


@pytest.mark.fast
def test_a_condition_on_a_constants_bits_is_decided_by_them():
    """``bitcast(F, u32) == canonical`` holds for every NaN F (its payload never shows);
    a bitcast of another width, or to a float, is left for the validator and the run."""
    taken, other = (Store("a", Lit(DType.U32, 0), Lit(DType.U32, v)) for v in (1, 2))

    def fold(cond, value):
        return substitute(If(cond, (taken,), (other,)), {"F": value})

    nan_bits = Binary(BinOp.EQ, Bitcast(DType.U32, SpecRef("F")), Lit(DType.U32, 0x7FC00000))
    for payload in (0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF):
        assert fold(nan_bits, Lit(DType.F32, payload)) == Block((taken,))
    assert fold(nan_bits, Lit(DType.F32, 0x7F800000)) == Block((other,))  # (inf)
    negative = Binary(BinOp.LT, Bitcast(DType.I32, SpecRef("F")), Lit(DType.I32, 0))
    assert fold(negative, Lit.of(DType.F32, -0.0)) == Block((taken,))
    for kept in (Binary(BinOp.EQ, Bitcast(DType.U16, SpecRef("F")), Lit(DType.U16, 0)),
                 Binary(BinOp.EQ, Bitcast(DType.F32, SpecRef("F")), Lit(DType.F32, 0))):
        assert isinstance(fold(kept, Lit(DType.F32, 0)), If)


# -- the kernel frontend ---------------------------------------------------------------------

@vyre.kernel
def bits_of(x: vyre.Array[vyre.f32], out: vyre.Array[vyre.u32]):
    i = vyre.global_id(0)
    out[i] = vyre.bitcast(x[i], vyre.u32) ^ vyre.bitcast(1.0, vyre.u32)


@vyre.kernel
def to_u16(x: vyre.Array[vyre.f32], out: vyre.Array[vyre.u16]):
    out[0] = vyre.bitcast(x[0], vyre.u16)


@vyre.kernel
def to_a_number(x: vyre.Array[vyre.f32], out: vyre.Array[vyre.u32]):
    out[0] = vyre.bitcast(x[0], 3)


@pytest.mark.fast
def test_vyre_bitcast_in_a_kernel_is_the_ir_bitcast():
    x = np.array([1.0, -0.0, np.nan, 1e-45], np.float32)
    x[2] = np.uint32(0xFFC00001).view(np.float32)
    out = np.zeros(4, np.uint32)
    program = bits_of.program(dim=4, args=(x, out))
    assert sum(isinstance(n, Bitcast) for n in walk(program.body)) == 2
    launch(bits_of, 4, (x, out))
    assert out.tolist() == [0, 0x80000000 ^ 0x3F800000, 0x7FC00000 ^ 0x3F800000,
                            1 ^ 0x3F800000]


@pytest.mark.fast
@pytest.mark.parametrize(("kernel", "out", "says"), [
    (to_u16, np.zeros(1, np.uint16), "32 bits are not 16"),
    (to_a_number, np.zeros(1, np.uint32), "not a type")])
def test_a_bitcast_the_ir_lacks_is_refused_at_its_line(kernel, out, says):
    with pytest.raises(KernelSyntaxError) as info:
        kernel.program(dim=1, args=(np.zeros(1, np.float32), out))
    assert says in info.value.cause
    assert info.value.details["line"] == kernel.fn.__code__.co_firstlineno + 2


@pytest.mark.fast
def test_vyre_bitcast_outside_a_kernel_refuses():
    with pytest.raises(KernelSyntaxError, match="meaning only inside a kernel"):
        vyre.bitcast(1.0, vyre.u32)


# -- every backend: numpy's bytes with the NaN rule ------------------------------------------

def width_program(src: ir.DType, shared: bool = False) -> Program:
    """``as_<t>[i] = x[i].bitcast(t)`` for every ``t`` of ``src``'s width; with a float of
    that width, ``through`` (the float of x's bits times 1.0, read as bits: a payload made
    by a bitcast never reaches an integer) and, for a float ``src``, ``made`` (``x - x``:
    the NaN arithmetic makes, of inf and NaN, read as bits). ``shared`` passes x through
    workgroup memory and a barrier (cpu's lockstep kernels)."""
    width = src.bits
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", src)
    outs = {t: k.output(f"as_{t.value}", t, N) for t in GROUPS[width]}
    i = k.let("i", ir.global_id())
    value = x[i]
    if shared:
        tile = k.workgroup_buffer("tile", src, 64)
        tile[ir.local_id()] = x[i]
        k.barrier()
        value = tile[ir.local_id()]
    v = k.let("v", value)
    for t, out in outs.items():
        out[i] = v.bitcast(t)
    if width in FLOAT:
        through = k.output("through", UNSIGNED[width], N)
        through[i] = (v.bitcast(FLOAT[width]) * 1.0).bitcast(UNSIGNED[width])
        if src.is_float:
            made = k.output("made", UNSIGNED[width], N)
            made[i] = (v - v).bitcast(UNSIGNED[width])
    return k.build()


def width_expected(src: ir.DType, bits: np.ndarray) -> dict[str, np.ndarray]:
    width = src.bits
    want = {f"as_{t.value}": expected_bits(bits, src, t) for t in GROUPS[width]}
    if width in FLOAT:
        f = FLOAT[width]
        want["through"] = expected_bits(bits, f, f)
        if src.is_float:
            with np.errstate(invalid="ignore"):
                values = bits.view(f.value_np)
                made = (values - values).view(bits.dtype)
            want["made"] = expected_bits(made, f, f)
    return want


def backends_for(src: ir.DType) -> list[str]:
    return ["reference", "cpu"] if src.bits == 64 else ["reference", "cpu", "wgpu"]


def check(driver: Driver, program: Program, src: ir.DType, bits: np.ndarray) -> None:
    want = width_expected(src, bits)
    names = [b.name for b in program.outputs]
    for backend in backends_for(src):
        got = driver.dispatch(program, [bits.view(src.value_np)], backend=backend)
        for name, have in zip(names, got, strict=True):
            have_bits = have.view(want[name].dtype)
            bad = np.flatnonzero(have_bits != want[name])
            assert bad.size == 0, (
                f"{backend} {src.value} {name}: x bits {int(bits[bad[0]]):#x} gave "
                f"{int(have_bits[bad[0]]):#x}, want {int(want[name][bad[0]]):#x} "
                f"({bad.size} differ)")


@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


@pytest.mark.fast
@pytest.mark.parametrize("src", NUMERIC, ids=str)
def test_the_reference_gives_numpys_view_with_the_nan_rule(src):
    """(In process: the rule itself, over the special patterns.)"""
    bits = patterns(src.bits, [])
    program = width_program(src)
    got = reference_run(program, [bits.view(src.value_np)])
    want = width_expected(src, bits)
    for b, have in zip(program.outputs, got, strict=True):
        assert have.view(want[b.name].dtype).tobytes() == want[b.name].tobytes(), b.name


@pytest.mark.parametrize("src", NUMERIC, ids=str)
def test_every_backend_gives_numpys_view_with_the_nan_rule(driver, src):
    program = width_program(src)

    @settings(max_examples=8, deadline=None, derandomize=True, database=None)
    @given(st.lists(st.integers(0, 2**src.bits - 1), min_size=1, max_size=N))
    def each(drawn):
        check(driver, program, src, patterns(src.bits, drawn))

    each()


@pytest.mark.parametrize("src", [ir.f32, ir.u32, ir.f16, ir.i16], ids=str)
def test_a_lockstep_kernel_gives_the_same_bytes(driver, src):
    rng = np.random.default_rng(src.bits)
    drawn = rng.integers(0, 2**src.bits, N, dtype=np.uint64).tolist()
    check(driver, width_program(src, shared=True), src, patterns(src.bits, drawn))


def loop_program() -> Program:
    """A loop every lane runs alike (the cpu backend runs it at workgroup level): the
    xor of the bits of x[i + j] for j < 8, each read as an f32 and back."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, N)
    i = k.let("i", ir.global_id())
    acc = k.let("acc", ir.u32(0))
    with k.loop("j", 0, 8) as j:
        acc ^= x[i + j].bitcast(ir.f32).bitcast(ir.u32)
    out[i] = acc
    return k.build()


def test_a_bitcast_in_a_loop_gives_the_same_bytes(driver):
    bits = patterns(32, np.random.default_rng(3).integers(0, 2**32, N).tolist())
    seen = expected_bits(bits, ir.f32, ir.u32)
    padded = np.append(seen, np.zeros(8, np.uint32))
    want = np.bitwise_xor.reduce(np.stack([padded[j:j + N] for j in range(8)]), axis=0)
    for backend in ("reference", "cpu", "wgpu"):
        (got,) = driver.dispatch(loop_program(), [bits], backend=backend)
        assert got.tobytes() == want.tobytes(), backend


@pytest.mark.fast
def test_the_wgsl_lowering_refuses_64_bit_bits_and_writes_16_bit_ones_with_integers():
    """(Pure text: vyre_wgpu.lowering imports no wgpu.)"""
    from vyre_wgpu.lowering import lower

    with pytest.raises(UnsupportedFeatureError, match="i64 and u64"):
        lower(width_program(ir.f64))
    wgsl = lower(width_program(ir.u16)).wgsl  # (u16 -> f16 -> u16 and i16)
    assert "fn vyre_f16_bits(x: f16) -> u32" in wgsl and "fn vyre_f16_of_bits" in wgsl
    assert "bitcast<u16>" not in wgsl and "vec2<f16>" not in wgsl


def test_a_64_bit_bitcast_routes_around_wgpu(driver):
    program = width_program(ir.f64)
    assert "dtype.u64" in program.requirements().ops
    with pytest.raises(NoCapableBackendError, match=r"dtype\.u64"):
        driver.dispatch(program, [np.zeros(1, np.float64)], backend="wgpu")


def test_a_lowered_f16_bitcast_is_exact_for_every_f16(driver):
    """All 65,536 patterns, both ways, on every backend (wgpu computes the bits with
    integer operations: no bitcast of an f16 in WGSL)."""
    bits = np.arange(2**16, dtype=np.uint16)
    k = ir.Kernel(workgroup=(64,))
    x, h = k.read("x", ir.f16), k.read("h", ir.u16)
    as_bits, as_half = k.output("as_bits", ir.i16, 2**16), k.output("as_half", ir.f16, 2**16)
    i = k.let("i", ir.global_id())
    as_bits[i] = x[i].bitcast(ir.i16)
    as_half[i] = h[i].bitcast(ir.f16)
    program = k.build()
    want = expected_bits(bits, ir.f16, ir.i16)
    for backend in ("reference", "cpu", "wgpu"):
        got_bits, got_half = driver.dispatch(program, [bits.view(np.float16), bits],
                                             backend=backend)
        assert got_bits.view(np.uint16).tobytes() == want.tobytes(), backend
        assert got_half.view(np.uint16).tobytes() == want.tobytes(), backend


@pytest.mark.fast
def test_a_bitcast_of_a_let_variable_reads_its_current_value():
    """(Builder scope: a bitcast is an expression like any other.)"""
    k = ir.Kernel()
    out = k.output("out", ir.u32, 1)
    v = k.let("v", ir.f32(1.0))
    out[0] = v.bitcast(ir.u32)
    program = k.build()
    assert program.body[1].value == Bitcast(DType.U32, Var("v"))
    assert reference_run(program, [])[0].tolist() == [0x3F800000]
