"""IR -> WGSL. Pure text generation: no wgpu import, no device.

WGSL differs from vyre's total semantics in places, so the generated code enforces them:
integer division and remainder by zero, out-of-bounds loads (0) and stores (dropped),
5-bit shift masks, saturating float-to-int casts with NaN -> 0, NaN-ignoring float
min/max, bool buffers as u32 words. Literals are hoisted into function-scope variables so
that WGSL's constant evaluation never sees (and refuses) ``x / 0`` or a 32-bit shift.
What WGSL cannot express is refused with UnsupportedFeatureError, never run wrongly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vyre_core.errors import UnsupportedFeatureError
from vyre_core.ir import Program
from vyre_core.ir.dtypes import DType
from vyre_core.ir.exprtypes import type_of
from vyre_core.ir.nodes import (
    ONE,
    SUBGROUP_LANE_OPS,
    Access,
    Assign,
    Atomic,
    AtomicOp,
    Barrier,
    Binary,
    BinOp,
    Bitcast,
    Block,
    Break,
    BufLen,
    Cast,
    Continue,
    Expr,
    Fma,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Return,
    Select,
    Stmt,
    Store,
    Subgroup,
    SubgroupOp,
    Table,
    Unary,
    UnOp,
    Var,
    While,
    loop_jumps,
    walk,
)
from vyre_wgpu import bitcasts, narrow_ints, tables

#: Params uniform layout (u32 words): [0] 1 when the grid is folded (submission.launch_grid),
#: else 0, [1] logical workgroups along x, [2] along y, [3] along z, [4] zero (see
#: OPAQUE_ZERO), [5 + i] element count of the i-th non-workgroup buffer in declaration
#: order. Padded to a multiple of 4 words.
PARAMS_HEADER_WORDS = 5

#: A u32 that is 0 at run time but unknown to the shader compiler. WGSL cannot mark float
#: arithmetic exact, and compilers rewrite it in ways that change IEEE bits: Mesa folds
#: ``x + 0.0`` to ``x`` (wrong for -0.0), ``0.0 - x`` to ``-x`` and ``x * 0.0`` to
#: ``0.0``, reassociates ``(a - b) + 1.0`` and factors ``a * c + b * c`` into
#: ``(a + b) * c``. So float literals are built from their bits xor'd with this word, and
#: every float arithmetic result passes through a xor with it (``_Lowering.exact``): no
#: rewrite can see a literal's value or match a pattern across two operations.
OPAQUE_ZERO = "vyre_params[1].x"


@dataclass(frozen=True)
class BufferBinding:
    name: str
    binding: int
    access: str          # "read" (read-only storage) or "read_write"
    element_bytes: int   # storage bytes per element


@dataclass(frozen=True)
class Lowered:
    wgsl: str
    buffers: tuple[BufferBinding, ...]  # every non-workgroup buffer, declaration order
    params_binding: int                 # binding of the params uniform buffer
    params_words: int                   # size of the params buffer in u32 words
    status_binding: int                 # one atomic u32, read_write: nonzero = discard the
                                        # outputs (STATUS_* bits say why)
    features: frozenset[str]            # wgpu features the shader needs: "shader-f16", "shader-f64"
    tables: bytes = b""                 # the tables buffer's words (tables.py), bound read-only
                                        # after the status word when there are any

    @property
    def tables_binding(self) -> int:
        return self.status_binding + 1


#: Bits of the status word: the adapter cut a loop short; the pipeline formed subgroups of
#: another size than the program declares.
STATUS_LOOP_CUT, STATUS_SUBGROUP_SIZE = 1, 2
_SUBGROUP_FN = {SubgroupOp.ADD: "subgroupAdd", SubgroupOp.MIN: "subgroupMin",
                SubgroupOp.MAX: "subgroupMax", SubgroupOp.AND: "subgroupAnd",
                SubgroupOp.OR: "subgroupOr", SubgroupOp.XOR: "subgroupXor",
                SubgroupOp.INCLUSIVE_ADD: "subgroupInclusiveAdd",
                SubgroupOp.EXCLUSIVE_ADD: "subgroupExclusiveAdd"}
_TYPE = {DType.U32: "u32", DType.I32: "i32", DType.F32: "f32", DType.BOOL: "bool",
         DType.F16: "f16", DType.F64: "f64",
         **{t: carrier.value for t, carrier in narrow_ints.CARRIER.items()}}
_STORAGE = {**_TYPE, DType.BOOL: "u32", **dict.fromkeys(narrow_ints.WIDTH, "u32")}
_ARITH = {BinOp.ADD: "+", BinOp.SUB: "-", BinOp.MUL: "*", BinOp.AND: "&", BinOp.OR: "|",
          BinOp.XOR: "^", BinOp.EQ: "==", BinOp.NE: "!=", BinOp.LT: "<", BinOp.LE: "<=",
          BinOp.GT: ">", BinOp.GE: ">=", BinOp.LOGICAL_AND: "&&", BinOp.LOGICAL_OR: "||"}
_FLOAT_FN = {UnOp.SQRT: "sqrt", UnOp.FLOOR: "floor", UnOp.CEIL: "ceil", UnOp.ROUND: "round",
             UnOp.TRUNC: "trunc"}  # (WGSL's round: ties to even; the rest are the math library's)

#: f64 round (ties to even) and trunc from floor and ceil, exact: ``x - floor(x)`` is
#: exact below 2**52, where every larger double is already an integer (inf, NaN too).
_ROUND_F64 = {
    UnOp.TRUNC: """\
fn {name}(x: f64) -> f64 {{ return select(floor(x), ceil(x), x < 0.0lf); }}""",
    UnOp.ROUND: """\
fn {name}(x: f64) -> f64 {{
    if (!(abs(x) < 4503599627370496.0lf)) {{ return x; }}
    let f = floor(x);
    let d = x - f;
    let odd = f - 2.0lf * floor(f * 0.5lf) == 1.0lf;
    let r = select(f, f + 1.0lf, d > 0.5lf || (d == 0.5lf && odd));
    return select(r, -r, r == 0.0lf && x < 0.0lf);  // (-0.5 rounds to -0)
}}""",
}

#: The high word of a u32 product, from 16-bit halves (WGSL has no 64-bit integers).
_MULHI_U32 = """\
fn vyre_mulhi_u32(a: u32, b: u32) -> u32 {
    let al = a & 0xffffu; let ah = a >> 16u; let bl = b & 0xffffu; let bh = b >> 16u;
    let lh = al * bh; let hl = ah * bl;
    let mid = ((al * bl) >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);  // < 3 * 2^16
    return ah * bh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
}"""

#: Signed: the unsigned high word less each negative operand's partner (each operand's
#: expression written once: a helper's parameters, not copies of the expression).
_MULHI_I32 = """\
fn vyre_mulhi_i32(a: i32, b: i32) -> i32 {
    let ua = bitcast<u32>(a); let ub = bitcast<u32>(b);
    return bitcast<i32>(vyre_mulhi_u32(ua, ub) - select(0u, ub, a < 0i) - select(0u, ua, b < 0i));
}"""

#: Saturating add and subtract; i32 wraps through u32 (then compares with the operands).
_SATURATING = {
    (BinOp.ADD_SAT, DType.U32): """\
fn {name}(a: u32, b: u32) -> u32 {{ return select(a + b, 0xffffffffu, a + b < a); }}""",
    (BinOp.SUB_SAT, DType.U32): """\
fn {name}(a: u32, b: u32) -> u32 {{ return select(a - b, 0u, b > a); }}""",
    (BinOp.ADD_SAT, DType.I32): """\
fn {name}(a: i32, b: i32) -> i32 {{
    let s = bitcast<i32>(bitcast<u32>(a) + bitcast<u32>(b));
    if (b > 0i && s < a) {{ return 2147483647i; }}
    if (b < 0i && s > a) {{ return bitcast<i32>(0x80000000u); }}
    return s;
}}""",
    (BinOp.SUB_SAT, DType.I32): """\
fn {name}(a: i32, b: i32) -> i32 {{
    let d = bitcast<i32>(bitcast<u32>(a) - bitcast<u32>(b));
    if (b < 0i && d < a) {{ return 2147483647i; }}
    if (b > 0i && d > a) {{ return bitcast<i32>(0x80000000u); }}
    return d;
}}""",
}
_ATOMIC_FN = {AtomicOp.ADD: "atomicAdd", AtomicOp.SUB: "atomicSub", AtomicOp.MIN: "atomicMin",
              AtomicOp.MAX: "atomicMax", AtomicOp.AND: "atomicAnd", AtomicOp.OR: "atomicOr",
              AtomicOp.XOR: "atomicXor", AtomicOp.EXCHANGE: "atomicExchange"}
_INT_LIMITS = {DType.U32: ("0u", "4294967295u", 0.0, 4294967296.0),
               DType.I32: ("bitcast<i32>(0x80000000u)", "2147483647i", -2147483648.0,
                           2147483648.0)}

def _unsupported(what: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(f"the wgpu backend cannot express {what} in WGSL",
                                   "Route the program to the reference backend.")


class _Lowering:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.buffers = {b.name: b for b in program.buffers}
        self.types: dict[str, DType] = {}  # variable name -> type, for the current scope
        self.atomic = {n.buffer for n in walk(program.body) if isinstance(n, Atomic)}
        self.assigned = {n.name for n in walk(program.body) if isinstance(n, Assign)}
        self.literals: dict[Lit, str] = {}
        self.helpers: dict[str, str] = {}
        self.tables = tables.Tables()
        self.dtypes = {b.dtype for b in program.buffers} | {
            n.dtype for n in walk(program.body) if isinstance(n, Lit | Cast | Bitcast | Table)}
        storage = [b for b in program.buffers if b.access is not Access.WORKGROUP]
        self.length_word = {b.name: PARAMS_HEADER_WORDS + i for i, b in enumerate(storage)}
        self.storage = storage
        self.loops = 0                 # loops written so far (``loop_id``)
        self.exits: list[int] = []     # the loops open around the statement being written

    # -- names -----------------------------------------------------------------------------

    @staticmethod
    def var(name: str) -> str:
        return f"v_{name}"

    def buf(self, name: str) -> str:
        kind = "w" if self.buffers[name].access is Access.WORKGROUP else "b"
        return f"{kind}_{name}"

    def length(self, name: str) -> str:
        b = self.buffers[name]
        if b.access is Access.WORKGROUP:
            return f"{b.count}u"
        word = self.length_word[name]
        return f"vyre_params[{word // 4}][{word % 4}]"

    # -- expressions ----------------------------------------------------------------------

    def literal(self, lit: Lit) -> str:
        name = self.literals.get(lit)
        if name is None:
            name = self.literals[lit] = f"vyre_c{len(self.literals)}"
        return name

    @staticmethod
    def literal_value(lit: Lit) -> str:
        t = lit.dtype
        if t is DType.BOOL:
            return "true" if lit.bits else "false"
        if t is DType.U32:
            return f"{lit.bits}u"
        if t is DType.I32:
            return f"bitcast<i32>({lit.bits}u)"
        if t in narrow_ints.WIDTH:  # (its carrier: i32 literals of i8/i16 sign-extended)
            return f"bitcast<i32>({lit.value & 0xFFFFFFFF}u)" if t.is_signed else f"{lit.bits}u"
        if t is DType.F32:
            return f"bitcast<f32>({lit.bits}u ^ {OPAQUE_ZERO})"
        if t is DType.F16:  # (f32 holds every f16 exactly)
            f32_bits = int(np.float32(lit.value).view(np.uint32))
            return f"f16(bitcast<f32>({f32_bits}u ^ {OPAQUE_ZERO}))"
        value = lit.value
        if not math.isfinite(value):  # inf and NaN: f32 holds them
            f32_bits = int(np.float32(value).view(np.uint32))
            return f"f64(bitcast<f32>({f32_bits}u ^ {OPAQUE_ZERO}))"
        # (no 64-bit bitcast in WGSL) the significand's two halves as u32s, each exact in
        # f64, scaled by ldexp: exact for every finite f64, subnormals and -0.0 included
        mantissa, exponent = math.frexp(abs(value))
        whole = int(math.ldexp(mantissa, 53))
        hi, lo = whole >> 32, whole & 0xFFFFFFFF
        # whole * 2^e in two exact steps, each factor normal: one ldexp to a subnormal
        # result gives 0 on some drivers
        first = (exponent - 53) // 2
        integer = f"(f64({hi}u ^ {OPAQUE_ZERO}) * 4294967296.0lf + f64({lo}u ^ {OPAQUE_ZERO}))"
        scaled = _Lowering.exact(t, f"({integer} * ldexp(1.0lf, {first}i))")
        magnitude = f"({scaled} * ldexp(1.0lf, {exponent - 53 - first}i))"
        return f"(-{magnitude})" if math.copysign(1.0, value) < 0 else magnitude

    def type_of(self, e: Expr) -> DType:
        """Type of an expression of a validated program."""
        return type_of(e, self.types.__getitem__, self.buffers)

    def expr(self, e: Expr) -> str:
        match e:
            case Lit():
                return self.literal(e)
            case Var(name):
                return self.var(name)
            case Load(buffer, index):
                return f"vyre_load_{buffer}({self.expr(index)})"
            case BufLen(buffer):
                return self.length(buffer)
            case InvocationId(kind, axis):
                vec = {IdKind.GLOBAL: "vyre_gid", IdKind.LOCAL: "vyre_lid",
                       IdKind.WORKGROUP: "vyre_wid"}[kind]
                return f"{vec}.{'xyz'[axis]}"
            case Binary(op, lhs, rhs):
                return self.binary(op, lhs, rhs)
            case Unary(op, operand):
                return self.unary(op, operand)
            case Select(cond, if_true, if_false):
                return f"select({self.expr(if_false)}, {self.expr(if_true)}, {self.expr(cond)})"
            case Cast(dtype, value):
                return self.cast(self.type_of(value), dtype, self.expr(value))
            case Bitcast(dtype, value):
                code, helpers = bitcasts.bitcast(self.type_of(value), dtype, self.expr(value))
                for name, source in helpers.items():
                    self.helpers.setdefault(name, source)
                return code
            case Table(dtype, bits, index):
                return self.table(dtype, bits, self.expr(index))
            case Fma(a, b, c):  # a * b + c, two roundings: fused is not on every device
                t = self.type_of(a)
                product = self.exact(t, f"({self.expr(a)} * {self.expr(b)})")
                return self.exact(t, f"({product} + {self.hidden(self.expr(c))})")
            case Atomic():
                raise AssertionError("atomics are lowered as let statements")
            case Subgroup():
                return self.subgroup(e)
        raise AssertionError(e)

    def table(self, dtype: DType, bits: tuple[int, ...], index: str) -> str:
        code, helpers = tables.element(self.tables.offset(dtype, bits), dtype, len(bits),
                                       index, OPAQUE_ZERO)
        for helper, source in helpers.items():
            self.helpers.setdefault(helper, source)
        return code

    def subgroup(self, e: Subgroup) -> str:
        """The device forms subgroups of exactly ``e.size`` consecutive local indices
        (probed; ``capabilities.refuse_unsupported`` refuses any other size), so WGSL's
        subgroup functions compute vyre's. A bool is balloted; a lane is taken mod the
        size (WGSL's broadcast wants a constant lane: a shuffle does for both)."""
        size = f"{e.size}u"
        if e.op is SubgroupOp.ELECT:  # (every invocation runs it: lane 0 is the first)
            return f"(vyre_lindex % {size} == 0u)"
        value = self.expr(e.value)
        if e.op is SubgroupOp.BALLOT:
            return f"subgroupBallot({value}).x"
        if e.op in SUBGROUP_LANE_OPS:
            return f"subgroupShuffle({value}, {self.expr(e.lane)} % {size})"
        return f"{_SUBGROUP_FN[e.op]}({value})"

    def binary(self, op: BinOp, lhs: Expr, rhs: Expr) -> str:
        return self.binary_of(op, self.type_of(lhs), self.expr(lhs), self.expr(rhs))

    def binary_of(self, op: BinOp, t: DType, a: str, b: str) -> str:
        """``op`` on WGSL values ``a`` and ``b`` of type ``t``."""
        if t in narrow_ints.WIDTH and op not in narrow_ints.COMPARED:
            carrier = narrow_ints.CARRIER[t]
            if op in narrow_ints.WRAPPED:
                return narrow_ints.narrow(t, self.binary_of(op, carrier, a, b))
            if op in narrow_ints.KEPT:
                return self.binary_of(op, carrier, a, b)
            value, helpers = narrow_ints.binary(op, t, a, b)
            for name, source in helpers.items():
                self.helpers.setdefault(name, source)
            return value
        if op is BinOp.XOR and t is DType.BOOL:
            return f"({a} != {b})"  # WGSL has no ^ on bool
        if op is BinOp.NE and t.is_float:
            return f"(!({a} == {b}))"  # != may lower to an ordered compare: false for NaN
        if op in _ARITH:
            if op in (BinOp.ADD, BinOp.SUB) and t.is_float:
                b = self.hidden(b)  # (or v - v, v + (-v) of one value folds to 0)
            value = f"({a} {_ARITH[op]} {b})"
            return self.exact(t, value) if op in (BinOp.ADD, BinOp.SUB, BinOp.MUL) else value
        ty = _TYPE[t]
        if op in (BinOp.DIV, BinOp.REM):
            if t.is_float:
                return self.exact(t, f"({a} / {b})") if op is BinOp.DIV else self.float_rem(
                    t, a, b)
            # WGSL: x / 0 == x and MIN / -1 == MIN; vyre: x / 0 == all ones, x % 0 == 0.
            ones = "4294967295u" if t is DType.U32 else "-1i"
            zero = "0u" if t is DType.U32 else "0i"
            if op is BinOp.DIV:
                return self.helper_call(f"vyre_div_{ty}", [a, b],
                                        f"""fn vyre_div_{ty}(a: {ty}, b: {ty}) -> {ty} {{
    if (b == {zero}) {{ return {ones}; }}
    return a / b;
}}""")
            # (a signed remainder from the truncating quotient: WGSL's i32 % becomes
            # SPIR-V's OpSRem, which NVIDIA's Vulkan driver computed as the unsigned
            # remainder of the bits for negative operands: 7 % -2 gave 7; gfx-rs/wgpu#8191)
            minus_one, rem = ("", "a % b") if t is DType.U32 else (" || b == -1i",
                                                                   "a - (a / b) * b")
            return self.helper_call(f"vyre_rem_{ty}", [a, b],
                                    f"""fn vyre_rem_{ty}(a: {ty}, b: {ty}) -> {ty} {{
    if (b == {zero}{minus_one}) {{ return {zero}; }}
    return {rem};
}}""")
        if op in (BinOp.MIN, BinOp.MAX):
            fn = "min" if op is BinOp.MIN else "max"
            if not t.is_float:
                return f"{fn}({a}, {b})"
            # IEEE minimumNumber/maximumNumber: a NaN loses to a number, and -0 < +0
            negative = "1u" if op is BinOp.MIN else "0u"
            return self.helper_call(f"vyre_f{fn}_{ty}", [a, b],
                                    f"""fn vyre_f{fn}_{ty}(a: {ty}, b: {ty}) -> {ty} {{
    if (!(a == a)) {{ return b; }}
    if (!(b == b)) {{ return a; }}
    if (a == b) {{ return select(b, a, (bitcast<u32>(f32(a)) >> 31u) == {negative}); }}
    return {fn}(a, b);
}}""")
        if op in (BinOp.SHL, BinOp.SHR):
            return f"({a} {'<<' if op is BinOp.SHL else '>>'} ({b} & 31u))"
        if op in (BinOp.ROTL, BinOp.ROTR):  # on the bits (i32 >> would spread the sign)
            n = f"({b} & 31u)" if op is BinOp.ROTL else f"((32u - ({b} & 31u)) & 31u)"
            return self.on_bits(t, self.helper_call("vyre_rotl", [self.bits(t, a), n], """\
fn vyre_rotl(a: u32, n: u32) -> u32 { return (a << n) | (a >> ((32u - n) & 31u)); }"""))
        if op is BinOp.MULHI:
            self.helpers.setdefault("vyre_mulhi_u32", _MULHI_U32)
            return self.helper_call(f"vyre_mulhi_{ty}", [a, b], _MULHI_I32) \
                if t is DType.I32 else f"vyre_mulhi_u32({a}, {b})"
        if op in (BinOp.POW, BinOp.ATAN2) and t is DType.F64:
            raise _unsupported(f"{op.value} on f64 (SPIR-V has no double transcendentals)")
        if op in (BinOp.ADD_SAT, BinOp.SUB_SAT):
            name = f"vyre_{op.value}_{ty}"
            return self.helper_call(name, [a, b], _SATURATING[op, t].format(name=name))
        raise AssertionError(f"{op.value} on {t.value} reached the lowering: the math "
                             "library's operations come written out (mathlib.inline)")

    @staticmethod
    def bits(t: DType, x: str) -> str:
        """An integer ``x`` as its u32 bits."""
        return f"bitcast<u32>({x})" if t is DType.I32 else x

    @staticmethod
    def on_bits(t: DType, x: str) -> str:
        """u32 bits ``x`` as an integer of type ``t``."""
        return f"bitcast<i32>({x})" if t is DType.I32 else x

    def float_rem(self, t: DType, a: str, b: str) -> str:
        """IEEE fmod, exact (as C's fmod): ``a - b * trunc(a / b)`` is not (its quotient
        rounds). f32 works on the integer significands, reducing 8 exponent steps per
        iteration (at most 32); f16 goes through f32, which is exact for it; f64 is
        refused (WGSL has no 64-bit integers to do it exactly with)."""
        if t is DType.F16:
            return f"f16({self.float_rem(DType.F32, f'f32({a})', f'f32({b})')})"
        if t is DType.F64:
            raise _unsupported("rem on f64 (exact fmod needs 64-bit integers, which WGSL "
                               "lacks; the rounded formula would differ from the reference)")
        return self.helper_call("vyre_fmod_f32", [a, b], """\
fn vyre_fmod_f32(a: f32, b: f32) -> f32 {
    if (!(a == a) || !(b == b)) { return a + b; }
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b) & 0x7fffffffu;
    let sign = ua & 0x80000000u;
    let ma = ua & 0x7fffffffu;
    if (ma >= 0x7f800000u || ub == 0u) { return (b - b) / (b - b); }  // inf % y, x % 0
    if (ma < ub) { return a; }  // |a| < |b| (b = inf included)
    let ea = max(ma >> 23u, 1u);
    let eb = max(ub >> 23u, 1u);
    let sa = select(ma & 0x7fffffu, (ma & 0x7fffffu) | 0x800000u, ma >= 0x800000u);
    let sb = select(ub & 0x7fffffu, (ub & 0x7fffffu) | 0x800000u, ub >= 0x800000u);
    var r = sa % sb;
    var d = ea - eb;  // |a| >= |b|: ea >= eb
    loop {
        if (d == 0u || r == 0u) { break; }
        let s = min(d, 8u);
        r = (r << s) % sb;  // r < 2^24: shifted by at most 8 it fits a u32
        d = d - s;
    }
    if (r == 0u) { return bitcast<f32>(sign); }  // a zero of a's sign
    return bitcast<f32>(bitcast<u32>(ldexp(f32(r), i32(eb) - 150)) | sign);
}""")

    def unary(self, op: UnOp, operand: Expr) -> str:
        t = self.type_of(operand)
        x = self.expr(operand)
        if t in narrow_ints.WIDTH:
            return narrow_ints.unary(op, t, x)
        match op:
            case UnOp.NEG:
                return f"(-{x})"
            case UnOp.BIT_NOT:
                return f"(~{x})"
            case UnOp.NOT:
                return f"(!{x})"
            case UnOp.ABS:
                return x if t is DType.U32 else f"abs({x})"
            case UnOp.POPCOUNT:
                return f"countOneBits({x})"
            case UnOp.CLZ:
                return f"countLeadingZeros({x})"
            case UnOp.CTZ:
                return f"countTrailingZeros({x})"
            case UnOp.BIT_REVERSE:
                return f"reverseBits({x})"
            case UnOp.ISNAN | UnOp.ISINF:  # on the bits: a compiler may assume x == x
                if op is UnOp.ISINF and t is DType.F64:  # (through f32 a huge one is inf)
                    raise _unsupported("isinf on f64 (WGSL has no 64-bit bitcast to test "
                                       "its bits with)")
                bits = f"(bitcast<u32>({x if t is DType.F32 else f'f32({x})'}) & 0x7fffffffu)"
                return f"({bits} {'>' if op is UnOp.ISNAN else '=='} 0x7f800000u)"
        if t is DType.F64 and op in (UnOp.ROUND, UnOp.TRUNC):  # (drivers' own double
            # round and trunc were seen rounding ties away and dropping -0: built on floor)
            name = f"vyre_{op.value}_f64"
            return self.helper_call(name, [x], _ROUND_F64[op].format(name=name))
        if t is DType.F64 and op not in (UnOp.SQRT, UnOp.FLOOR, UnOp.CEIL):
            raise _unsupported(f"{op.value} on f64 (SPIR-V has no double transcendentals)")
        if op not in _FLOAT_FN:
            raise AssertionError(f"{op.value} on {t.value} reached the lowering: the math "
                                 "library's operations come written out (mathlib.inline)")
        return self.exact(t, f"{_FLOAT_FN[op]}({x})")

    @staticmethod
    def exact(t: DType, x: str) -> str:
        """``x`` (of type ``t``) as it is, behind a barrier the shader compiler cannot see
        through (see OPAQUE_ZERO); integers need none (their arithmetic is exact)."""
        if t is DType.F32:
            return f"bitcast<f32>(bitcast<u32>({x}) ^ {OPAQUE_ZERO})"
        if t in (DType.F16, DType.F64):  # (no bitcast of these to u32)
            return _Lowering.hidden(x)
        return x

    @staticmethod
    def hidden(x: str) -> str:
        """A float ``x`` or ``-x``, the choice made by a word the compiler cannot see: it
        knows nothing of the value (a second xor with the same word would cancel the
        first, so operands of a result already behind one take this form)."""
        return f"select({x}, -({x}), {OPAQUE_ZERO} != 0u)"

    def cast(self, src: DType, dst: DType, x: str) -> str:
        if src is dst:
            return x
        if dst is DType.BOOL:
            return f"({x} != {'0u' if _TYPE[src] == 'u32' else '0i'})"
        if src is DType.BOOL:
            one, zero = {"u32": ("1u", "0u"), "i32": ("1i", "0i"),
                         "f32": ("1.0f", "0.0f"), "f16": ("1.0h", "0.0h"),
                         "f64": ("1.0lf", "0.0lf")}[_TYPE[dst]]
            return f"select({zero}, {one}, {x})"
        if src.is_int and dst.is_int:
            return narrow_ints.from_int(src, dst, x)
        if src in narrow_ints.WIDTH:  # (its carrier holds it exactly)
            return self.cast(narrow_ints.CARRIER[src], dst, x)
        if src.is_float and dst.is_int:
            ty, fty = _TYPE[dst], _TYPE[src]
            lo, hi, flo, fhi = _INT_LIMITS.get(dst) or (
                *(narrow_ints.literal(dst, v) for v in dst.int_range),
                *(float(v) for v in dst.int_range))
            wide = "f64" if src is DType.F64 else "f32"
            suffix = "lf" if wide == "f64" else "f"
            name = f"vyre_{fty}_to_{dst.value}"
            return self.helper_call(name, [x], f"""fn {name}(v: {fty}) -> {ty} {{
    let x = {wide}(v);
    if (!(x == x)) {{ return {ty}(0); }}
    if (x >= {fhi!r}{suffix}) {{ return {hi}; }}
    if (x <= {flo!r}{suffix}) {{ return {lo}; }}
    return {ty}(x);
}}""")
        if src is DType.F64 and dst is DType.F16:
            raise _unsupported("an f64 -> f16 cast (it would round twice, through f32)")
        return f"{_TYPE[dst]}({x})"  # int -> float, float -> float: round to nearest

    def helper_call(self, name: str, args: list[str], source: str) -> str:
        self.helpers.setdefault(name, source)
        return f"{name}({', '.join(args)})"

    # -- statements ---------------------------------------------------------------------------

    def block(self, stmts: tuple[Stmt, ...], indent: str) -> list[str]:
        saved = dict(self.types)
        lines = []
        for s in stmts:
            lines.extend(self.stmt(s, indent))
        self.types = saved
        return lines

    def stmt(self, s: Stmt, ind: str) -> list[str]:
        match s:
            case Let(name, Atomic() as atomic):
                self.types[name] = self.buffers[atomic.buffer].dtype
                return [f"{ind}let {self.var(name)} = {self.atomic_call(atomic)};"]
            case Let(name, value):
                self.types[name] = self.type_of(value)
                kind = "var" if name in self.assigned else "let"
                return [f"{ind}{kind} {self.var(name)}: {_TYPE[self.types[name]]} = "
                        f"{self.expr(value)};"]
            case Assign(name, value):
                return [f"{ind}{self.var(name)} = {self.expr(value)};"]
            case Store(buffer, index, value):
                return [f"{ind}vyre_store_{buffer}({self.expr(index)}, {self.expr(value)});"]
            case If(cond, then, orelse):
                lines = [f"{ind}if ({self.expr(cond)}) {{", *self.block(then, ind + "    ")]
                if orelse:
                    lines += [f"{ind}}} else {{", *self.block(orelse, ind + "    ")]
                return [*lines, f"{ind}}}"]
            case Loop(var, start, end, body, step):
                v, k = self.var(var), self.open_loop()
                head = [f"{ind}{{", f"{ind}    let vyre_end{k} = {self.expr(end)};"]
                if step == ONE:
                    head += [f"{ind}    var {v}: u32 = {self.expr(start)};"]
                    at_end, inner, counter = f"{v} >= vyre_end{k}", [], v
                else:  # (a trip count: a step past the end would wrap the u32 counter)
                    counter = f"vyre_pass{k}"
                    head += [f"{ind}    let vyre_first{k} = {self.expr(start)};",
                             f"{ind}    let vyre_trips{k} = select(0u, (vyre_end{k} - "
                             f"vyre_first{k} - 1u) / {self.expr(step)} + 1u, "
                             f"vyre_end{k} > vyre_first{k});",
                             f"{ind}    var {counter}: u32 = 0u;"]
                    at_end = f"{counter} >= vyre_trips{k}"
                    inner = [f"{ind}        let {v}: u32 = vyre_first{k} + {counter} * "
                             f"{self.expr(step)};"]
                self.types[var] = DType.U32
                lines = self.loop(k, at_end, [*inner, *self.block(body, ind + "        ")],
                                  f"{counter} = {counter} + 1u;", ind, head,
                                  Break in loop_jumps(body))
                del self.types[var]
                return lines
            case While(cond, body, max_trips):
                k = self.open_loop()
                head = [f"{ind}{{", f"{ind}    var vyre_pass{k}: u32 = 0u;"]
                at_end = f"vyre_pass{k} >= {max_trips}u || !({self.expr(cond)})"
                return self.loop(k, at_end, self.block(body, ind + "        "),  # (flagged:
                                 f"vyre_pass{k} = vyre_pass{k} + 1u;", ind, head,  # its cond
                                 True)  # may read memory another invocation changes after)
            case Break():
                return [f"{ind}vyre_left{self.exits[-1]} = true;", f"{ind}break;"]
            case Continue():
                return [f"{ind}continue;"]
            case Return():
                return [f"{ind}return;"]
            case Barrier():
                return [f"{ind}storageBarrier();", f"{ind}workgroupBarrier();"]
            case Block(body):
                return [f"{ind}{{", *self.block(body, ind + "    "), f"{ind}}}"]
        raise AssertionError(s)

    def open_loop(self) -> int:
        """The number of a loop about to be written (its names' suffix, unique in the
        shader); its body's breaks set its flag, until ``loop`` closes it."""
        self.loops += 1
        self.exits.append(self.loops)
        return self.loops

    def loop(self, k: int, at_end: str, body: list[str], step: str, ind: str,
             head: list[str], breaks: bool) -> list[str]:
        """A loop that leaves when ``at_end`` holds, or by a break (``breaks``: it has
        its own, which set its ``vyre_left`` flag). Left with neither (``at_end`` still
        false after it: the pass that would have found it true is the one an adapter's
        budget cuts), the adapter cut it short (lavapipe stops loops at 65,535
        iterations), so flag that and the host discards the result. (A flag in a loop
        without breaks cost lavapipe a third of mandelbrot's time; a while loop always
        has one: checking its condition again after it could read memory another
        invocation has written since, and cry wolf.)"""
        inner = ind + "        "
        left, leave, unless = (f"vyre_left{k}", f"vyre_left{k} = true; ", f"!vyre_left{k} && ") \
            if breaks else ("", "", "")
        lines = [*head, *([f"{ind}    var {left} = false;"] if breaks else []),
                 f"{ind}    loop {{", f"{inner}if ({at_end}) {{ {leave}break; }}", *body,
                 f"{inner}continuing {{ {step} }}", f"{ind}    }}",
                 f"{ind}    if ({unless}!({at_end})) {{ "
                 f"atomicOr(&vyre_status[0], {STATUS_LOOP_CUT}u); }}",
                 f"{ind}}}"]
        assert self.exits.pop() == k
        return lines

    def atomic_call(self, e: Atomic) -> str:
        b = self.buffers[e.buffer]
        ty = _TYPE[b.dtype]
        ref, n = self.buf(e.buffer), self.length(e.buffer)
        if e.op is AtomicOp.COMPARE_EXCHANGE:
            name = f"vyre_cmpxchg_{e.buffer}"
            source = f"""fn {name}(i: u32, cmp: {ty}, v: {ty}) -> {ty} {{
    var old = {ty}(0);
    if (i < {n}) {{
        loop {{
            let r = atomicCompareExchangeWeak(&{ref}[i], cmp, v);
            if (r.exchanged || r.old_value != cmp) {{ old = r.old_value; break; }}
        }}
    }}
    return old;
}}"""
            return self.helper_call(name, [self.expr(e.index), self.expr(e.comparand),
                                           self.expr(e.value)], source)
        fn = _ATOMIC_FN[e.op]
        name = f"vyre_{fn}_{e.buffer}"
        source = f"""fn {name}(i: u32, v: {ty}) -> {ty} {{
    if (i >= {n}) {{ return {ty}(0); }}
    return {fn}(&{ref}[i], v);
}}"""
        return self.helper_call(name, [self.expr(e.index), self.expr(e.value)], source)

    # -- buffers -------------------------------------------------------------------------------

    def buffer_decls(self) -> tuple[list[str], list[BufferBinding]]:
        decls, bindings = [], []
        for b in self.program.buffers:
            elem = _STORAGE[b.dtype]
            if b.name in self.atomic or self.packed_writable(b):
                elem = f"atomic<{elem}>"
            if b.access is Access.WORKGROUP:
                count = narrow_ints.words(b.dtype, b.count) if b.dtype in narrow_ints.WIDTH \
                    else b.count
                decls.append(f"var<workgroup> {self.buf(b.name)}: array<{elem}, {count}>;")
            else:
                writable = b.access in (Access.READ_WRITE, Access.OUTPUT)
                mode = "read_write" if writable or b.name in self.atomic else "read"
                decls.append(f"@group(0) @binding({b.binding}) var<storage, {mode}> "
                             f"{self.buf(b.name)}: array<{elem}>;")
                bindings.append(BufferBinding(b.name, b.binding, mode, b.dtype.storage_bytes))
            self.accessors(b)
        return decls, bindings

    @staticmethod
    def packed_writable(b) -> bool:
        """An 8- or 16-bit buffer that is written: its words are atomic (narrow_ints)."""
        return b.dtype in narrow_ints.WIDTH and b.access.writable

    def accessors(self, b) -> None:
        ty, ref, n = _TYPE[b.dtype], self.buf(b.name), self.length(b.name)
        if b.dtype in narrow_ints.WIDTH:
            self.helpers[f"vyre_load_{b.name}"] = f"fn vyre_load_{b.name}" + narrow_ints.load(
                b.dtype, ref, n, self.packed_writable(b))
            if self.packed_writable(b):
                self.helpers[f"vyre_store_{b.name}"] = f"fn vyre_store_{b.name}" + \
                    narrow_ints.store(b.dtype, ref, n)
            return
        zero = {DType.BOOL: "false"}.get(b.dtype, f"{ty}(0)")
        read = f"atomicLoad(&{ref}[i])" if b.name in self.atomic else f"{ref}[i]"
        if b.dtype is DType.BOOL:
            read = f"({read} != 0u)"
        self.helpers[f"vyre_load_{b.name}"] = f"""fn vyre_load_{b.name}(i: u32) -> {ty} {{
    if (i < {n}) {{ return {read}; }}
    return {zero};
}}"""
        if b.access in (Access.READ, Access.UNIFORM):
            return
        value = "select(0u, 1u, v)" if b.dtype is DType.BOOL else "v"
        if b.dtype.is_float:  # every NaN stored is the canonical quiet NaN (semantics.md);
            # tested on its bits (a compiler may assume v == v), through f32 for f16/f64
            canonical = f"{ty}(bitcast<f32>(0x7fc00000u))"
            bits = "bitcast<u32>(v)" if b.dtype is DType.F32 else "bitcast<u32>(f32(v))"
            value = f"select(v, {canonical}, ({bits} & 0x7fffffffu) > 0x7f800000u)"
        write = (f"atomicStore(&{ref}[i], {value})" if b.name in self.atomic
                 else f"{ref}[i] = {value}")
        self.helpers[f"vyre_store_{b.name}"] = f"""fn vyre_store_{b.name}(i: u32, v: {ty}) {{
    if (i < {n}) {{ {write}; }}
}}"""

    def zero_workgroup_memory(self, invocations: int) -> list[str]:
        """vyre promises zeroed workgroup memory; not every driver zeroes it for WGSL."""
        lines = []
        for b in self.program.buffers:
            if b.access is not Access.WORKGROUP:
                continue
            zero = f"{_STORAGE[b.dtype]}(0)"
            atomic = b.name in self.atomic or self.packed_writable(b)
            write = (f"atomicStore(&{self.buf(b.name)}[i], {zero})" if atomic
                     else f"{self.buf(b.name)}[i] = {zero}")
            count = narrow_ints.words(b.dtype, b.count) if b.dtype in narrow_ints.WIDTH \
                else b.count
            lines.append(f"    for (var i: u32 = vyre_lindex; i < {count}u; "
                         f"i = i + {invocations}u) {{ {write}; }}")
        return [*lines, "    workgroupBarrier();"] if lines else []

    def lower(self) -> Lowered:
        wide = sorted(t.value for t in self.dtypes & {DType.U64, DType.I64})
        if wide:
            raise _unsupported(f"{' and '.join(wide)} (WGSL has no 64-bit integers)")
        if any(b.dtype is DType.BOOL and b.name in self.atomic for b in self.program.buffers):
            raise _unsupported("atomics on bool buffers")
        decls, bindings = self.buffer_decls()
        params_binding = max((b.binding for b in self.storage), default=-1) + 1
        words = PARAMS_HEADER_WORDS + len(self.storage)
        words += -words % 4
        wx, wy, wz = self.program.workgroup
        body = self.block(self.program.body, "    ")
        literal_lines = [f"    var {name}: {_TYPE[lit.dtype]} = {self.literal_value(lit)};"
                         for lit, name in self.literals.items()]
        features = set()
        header = []
        if DType.F16 in self.dtypes:
            features.add("shader-f16")
            header.append("enable f16;")
        if DType.F64 in self.dtypes:
            features.add("shader-f64")
        sizes = {n.size for n in walk(self.program.body) if isinstance(n, Subgroup)}
        size_param, size_check = [], []
        if sizes:  # (the probe saw one size; a pipeline the driver gave another is flagged)
            features.add("subgroup")
            size_param = ["        @builtin(subgroup_size) vyre_subgroup_size: u32,"]
            size_check = [f"    if (vyre_subgroup_size != {max(sizes)}u) {{ "
                          f"atomicOr(&vyre_status[0], {STATUS_SUBGROUP_SIZE}u); }}"]
        source = "\n".join([
            *header,
            *decls,
            f"@group(0) @binding({params_binding}) var<uniform> vyre_params: "
            f"array<vec4<u32>, {words // 4}>;",
            f"@group(0) @binding({params_binding + 1}) var<storage, read_write> vyre_status: "
            "array<atomic<u32>, 1>;",
            *([tables.declaration(params_binding + 2)] if self.tables.data() else []),
            "",
            *self.helpers.values(),
            "",
            f"@compute @workgroup_size({wx}, {wy}, {wz})",
            "fn main(@builtin(local_invocation_id) vyre_lid: vec3<u32>,",
            "        @builtin(local_invocation_index) vyre_lindex: u32,",
            *size_param,
            "        @builtin(workgroup_id) vyre_wid_phys: vec3<u32>,",
            "        @builtin(num_workgroups) vyre_nwg: vec3<u32>) {",
            # a folded grid: the physical workgroup's linear number (x fastest) is the
            # logical one's, unflattened over the logical grid; the padding past it and
            # any workgroup past the logical grid return here, a whole workgroup at once
            "    let vyre_grid = vyre_params[0].yzw;",
            "    let vyre_lin = vyre_wid_phys.x + vyre_nwg.x * (vyre_wid_phys.y"
            " + vyre_nwg.y * vyre_wid_phys.z);",
            "    let vyre_wid = select(vyre_wid_phys, vec3<u32>(vyre_lin % vyre_grid.x,"
            " vyre_lin / vyre_grid.x % vyre_grid.y, vyre_lin / (vyre_grid.x * vyre_grid.y)),"
            " vyre_params[0].x != 0u);",
            "    if (any(vyre_wid >= vyre_grid)) { return; }",
            f"    let vyre_gid = vyre_wid * vec3<u32>({wx}u, {wy}u, {wz}u) + vyre_lid;",
            *size_check,
            *self.zero_workgroup_memory(wx * wy * wz),
            *literal_lines,
            *body,
            "}",
            "",
        ])
        return Lowered(source, tuple(bindings), params_binding, words, params_binding + 1,
                       frozenset(features), self.tables.data())


def lower(program: Program) -> Lowered:
    """WGSL for ``program``; raises UnsupportedFeatureError for what WGSL cannot express."""
    return _Lowering(program.check()).lower()


def params_data(lowered: Lowered, lengths: list[int], grid: tuple[int, int, int],
                folded: int) -> np.ndarray:
    """The params buffer content (uint32) for one launch of the logical ``grid``."""
    words = np.zeros(lowered.params_words, dtype=np.uint32)
    words[0] = folded
    words[1:4] = grid
    words[PARAMS_HEADER_WORDS:PARAMS_HEADER_WORDS + len(lengths)] = lengths
    return words
