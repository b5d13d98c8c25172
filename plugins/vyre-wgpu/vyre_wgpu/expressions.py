"""Expressions as WGSL: literals built from their bits, every float result kept from the
compiler's rewriting (``exact``), casts, bitcasts, tables, subgroups, and the helpers
the IR's integer and float operations need."""

from __future__ import annotations

import math

import numpy as np

from vyre_core.ir.dtypes import DType
from vyre_core.ir.exprtypes import type_of
from vyre_core.ir.nodes import (
    SUBGROUP_LANE_OPS,
    Atomic,
    Binary,
    BinOp,
    Bitcast,
    BufLen,
    Cast,
    Expr,
    Fma,
    IdKind,
    InvocationId,
    Lit,
    Load,
    Select,
    Subgroup,
    SubgroupOp,
    Table,
    Unary,
    UnOp,
    Var,
)
from vyre_wgpu import bitcasts, narrow_ints, tables
from vyre_wgpu.wgsl import (
    ARITH,
    FLOAT_FN,
    INT_LIMITS,
    MULHI_I32,
    MULHI_U32,
    OPAQUE_ZERO,
    ROUND_F64,
    SATURATING,
    SUBGROUP_FN,
    TYPE,
    unsupported,
)


class Expressions:
    """The lowering's expressions (a mixin of ``lowering._Lowering``)."""

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
        scaled = Expressions.exact(t, f"({integer} * ldexp(1.0lf, {first}i))")
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
        return f"{SUBGROUP_FN[e.op]}({value})"

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
        if op in ARITH:
            if op in (BinOp.ADD, BinOp.SUB) and t.is_float:
                b = self.hidden(b)  # (or v - v, v + (-v) of one value folds to 0)
            value = f"({a} {ARITH[op]} {b})"
            return self.exact(t, value) if op in (BinOp.ADD, BinOp.SUB, BinOp.MUL) else value
        ty = TYPE[t]
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
            self.helpers.setdefault("vyre_mulhi_u32", MULHI_U32)
            return self.helper_call(f"vyre_mulhi_{ty}", [a, b], MULHI_I32) \
                if t is DType.I32 else f"vyre_mulhi_u32({a}, {b})"
        if op in (BinOp.POW, BinOp.ATAN2) and t is DType.F64:
            raise unsupported(f"{op.value} on f64 (SPIR-V has no double transcendentals)")
        if op in (BinOp.ADD_SAT, BinOp.SUB_SAT):
            name = f"vyre_{op.value}_{ty}"
            return self.helper_call(name, [a, b], SATURATING[op, t].format(name=name))
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
            raise unsupported("rem on f64 (exact fmod needs 64-bit integers, which WGSL "
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
                    raise unsupported("isinf on f64 (WGSL has no 64-bit bitcast to test "
                                       "its bits with)")
                bits = f"(bitcast<u32>({x if t is DType.F32 else f'f32({x})'}) & 0x7fffffffu)"
                return f"({bits} {'>' if op is UnOp.ISNAN else '=='} 0x7f800000u)"
        if t is DType.F64 and op in (UnOp.ROUND, UnOp.TRUNC):  # (drivers' own double
            # round and trunc were seen rounding ties away and dropping -0: built on floor)
            name = f"vyre_{op.value}_f64"
            return self.helper_call(name, [x], ROUND_F64[op].format(name=name))
        if t is DType.F64 and op not in (UnOp.SQRT, UnOp.FLOOR, UnOp.CEIL):
            raise unsupported(f"{op.value} on f64 (SPIR-V has no double transcendentals)")
        if op not in FLOAT_FN:
            raise AssertionError(f"{op.value} on {t.value} reached the lowering: the math "
                                 "library's operations come written out (mathlib.inline)")
        return self.exact(t, f"{FLOAT_FN[op]}({x})")

    @staticmethod
    def exact(t: DType, x: str) -> str:
        """``x`` (of type ``t``) as it is, behind a barrier the shader compiler cannot see
        through (see OPAQUE_ZERO); integers need none (their arithmetic is exact)."""
        if t is DType.F32:
            return f"bitcast<f32>(bitcast<u32>({x}) ^ {OPAQUE_ZERO})"
        if t in (DType.F16, DType.F64):  # (no bitcast of these to u32)
            return Expressions.hidden(x)
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
            return f"({x} != {'0u' if TYPE[src] == 'u32' else '0i'})"
        if src is DType.BOOL:
            one, zero = {"u32": ("1u", "0u"), "i32": ("1i", "0i"),
                         "f32": ("1.0f", "0.0f"), "f16": ("1.0h", "0.0h"),
                         "f64": ("1.0lf", "0.0lf")}[TYPE[dst]]
            return f"select({zero}, {one}, {x})"
        if src.is_int and dst.is_int:
            return narrow_ints.from_int(src, dst, x)
        if src in narrow_ints.WIDTH:  # (its carrier holds it exactly)
            return self.cast(narrow_ints.CARRIER[src], dst, x)
        if src.is_float and dst.is_int:
            ty, fty = TYPE[dst], TYPE[src]
            lo, hi, flo, fhi = INT_LIMITS.get(dst) or (
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
            raise unsupported("an f64 -> f16 cast (it would round twice, through f32)")
        return f"{TYPE[dst]}({x})"  # int -> float, float -> float: round to nearest

    def helper_call(self, name: str, args: list[str], source: str) -> str:
        self.helpers.setdefault(name, source)
        return f"{name}({', '.join(args)})"
