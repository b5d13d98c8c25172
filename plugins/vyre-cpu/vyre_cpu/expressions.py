"""Expressions as kernel code: each operation a call into ``runtime/`` (or numba's own
arithmetic where it is the IR's), values computed once per dispatch at the kernel's entry,
loads inside their buffers unchecked, math library calls, literals, casts and bitcasts."""

from __future__ import annotations

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Access,
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
    Table,
    Unary,
    UnOp,
    Var,
    children,
)
from vyre_core.ir.typerules import binop_result, unop_result
from vyre_core.mathlib.library import OPERATIONS, functions
from vyre_cpu import mathlib
from vyre_cpu.ranges import INTS
from vyre_cpu.writing import (
    ATOMIC_CODE,
    COMPARE,
    FLOAT_FN,
    HOIST_EVERY,
    NATIVE_64,
    NP,
    SMALL,
    SUFFIX,
    UNARY_INT,
    id_name,
)


class Expressions:
    """The writer's expressions (a mixin of ``codegen._Writer``)."""

    def expr(self, e: Expr) -> tuple[str, DType]:
        """``e`` as source; every HOIST_EVERY levels a subexpression goes into a variable
        of its own first (Python's parser stops at 200 nested parentheses, and the IR
        allows expressions that deep; expressions are pure, so evaluating early is
        the same)."""
        self.nesting += 1
        try:
            code, dtype = self._expr(e)
        finally:
            self.nesting -= 1
        if self.nesting and self.nesting % HOIST_EVERY == 0:
            name = self.fresh("t")
            self.emit(self.at, f"{name} = {code}")
            return name, dtype
        return code, dtype

    def _expr(self, e: Expr) -> tuple[str, DType]:
        match e:
            case Lit(dtype, bits):
                return self.literal(dtype, bits), dtype
            case Var(name):
                py, dtype = self.var(name)
                return self.lane(py), dtype
            case Load() if not self.at_entry and self.invariant(e):
                return self.entry_value(e)
            case Load() if not self.at_entry and self.before_stretch is not None and \
                    self.lane_free(e):
                return self.stretch_value(e)
            case Load(buffer, index):
                buf = self.buffers[buffer]
                idx, _ = self.expr(index)
                if buf.dtype in (DType.BOOL, DType.F16):
                    return f"load_{buf.dtype.value}({self.arg[buffer]}, {idx})", buf.dtype
                if self.unchecked(buffer, index):
                    return f"load_in({self.arg[buffer]}, {idx})", buf.dtype
                return f"load({self.arg[buffer]}, {idx}, {NP[buf.dtype]}(0))", buf.dtype
            case BufLen(buffer):
                return f"np.uint32({self.arg[buffer]}.shape[0])", DType.U32
            case InvocationId(kind, axis):
                if self.lockstep:
                    return self.lane_id(kind, axis), DType.U32
                self.ids.add((kind, axis))
                return id_name(kind, axis), DType.U32
            case Binary(op, lhs, rhs) if f"binop.{op.value}" in OPERATIONS and \
                    (f"binop.{op.value}", self.typeof(lhs)) in functions():
                return self.library_call(f"binop.{op.value}", [lhs, rhs])
            case Unary(op, operand) if f"unop.{op.value}" in OPERATIONS and \
                    (f"unop.{op.value}", self.typeof(operand)) in functions():
                return self.library_call(f"unop.{op.value}", [operand])
            case Binary(op, lhs, rhs):
                a, ta = self.expr(lhs)
                if op in (BinOp.DIV, BinOp.REM) and ta is DType.U32 and \
                        not isinstance(rhs, Lit) and not self.at_entry and self.invariant(rhs):
                    d, inv = self.divisor(rhs)
                    return f"{op.value}_u32_by({a}, {d}, {inv})", DType.U32
                b, tb = self.expr(rhs)
                if op in (BinOp.ADD, BinOp.SUB, BinOp.MUL) and self.ranges and \
                        ta in INTS and self.ranges.of(e) is not None:  # (does not wrap)
                    self.gains += 1
                    return f"(np.int64({a}) {NATIVE_64[op]} np.int64({b}))", ta
                return self.binary(op, a, b, ta), binop_result(op, ta, tb)
            case Unary(op, operand):
                a, t = self.expr(operand)
                return self.unary(op, a, t), unop_result(op, t)
            case Select(cond, if_true, if_false) if self.ranges and \
                    self.typeof(e) in INTS and self.ranges.of(e) is not None:
                self.gains += 1  # (the branch its condition takes in every lane)
                return self.expr(if_true if self.ranges.branch(cond) else if_false)
            case Select(cond, if_true, if_false):
                c, _ = self.expr(cond)
                a, t = self.expr(if_true)
                b, _ = self.expr(if_false)
                return f"({a} if {c} else {b})", t
            case Cast(dtype, value):
                a, t = self.expr(value)
                if self.ranges and dtype in INTS and t in INTS and \
                        self.ranges.of(e) is not None:  # (the value is in both types)
                    return f"np.int64({a})", dtype
                return self.cast(a, t, dtype), dtype
            case Bitcast(dtype, value):
                a, t = self.expr(value)
                return self.bitcast(a, t, dtype), dtype
            case Table(dtype, bits, index):
                i, _ = self.expr(index)
                return f"load({self.table(dtype, bits)}, {i}, {NP[dtype]}(0))", dtype
            case Fma(a, b, c):
                x, t = self.expr(a)
                y, _ = self.expr(b)
                z, _ = self.expr(c)
                s = SUFFIX[t]
                return f"add_{s}(mul_{s}({x}, {y}), {z})", t
            case Atomic(op, buffer, index, value, comparand):
                buf = self.buffers[buffer]
                idx, _ = self.expr(index)
                val, _ = self.expr(value)
                cmp = self.expr(comparand)[0] if comparand is not None else \
                    f"{NP[buf.dtype]}(0)"
                return (f"atomic_{SUFFIX[buf.dtype]}({self.arg[buffer]}, {idx}, "
                        f"{ATOMIC_CODE[op]}, {val}, {cmp})"), buf.dtype
        raise AssertionError(f"unhandled node {e!r}")  # (validated)

    def unchecked(self, buffer: str, index: Expr) -> bool:
        """Whether an access needs no bounds check: proven inside (``Ranges``), or at the
        global x id in the version for workgroups inside their buffers (``at_gid``)."""
        if self.ranges:
            inside = self.ranges.inside(index, buffer)
            self.gains += inside and not self.is_gid(index)
            return inside
        return self.at_gid(buffer, index)

    def is_gid(self, index: Expr) -> bool:
        """Whether ``index`` is the global x id (or a variable that holds it)."""
        match index:
            case InvocationId(IdKind.GLOBAL, 0):
                return True
            case Var(name):
                return self.var(name)[0] in self.gid_vars
        return False

    def at_gid(self, buffer: str, index: Expr) -> bool:
        """(Plain.) Whether an access of ``buffer`` at ``index`` needs no bounds check:
        ``index`` is the global x id, and this is the version for workgroups whose ids
        all lie inside the buffers read or written at it (``direct``, which this
        collects). bool and f16 buffers keep their checked helpers."""
        if self.lockstep or self.buffers[buffer].dtype in (DType.BOOL, DType.F16) or \
                not self.is_gid(index):
            return False
        self.direct.add(buffer)
        return self.in_bounds

    def invariant(self, e: Expr) -> bool:
        """Whether ``e`` has one value in the whole dispatch: literals, lengths of storage
        buffers, and loads of buffers the program never writes at such indices, combined
        (a workgroup buffer is each workgroup's own array: not there before they start)."""
        match e:
            case Lit():
                return True
            case BufLen(buffer):
                return self.buffers[buffer].access is not Access.WORKGROUP
            case Load(buffer, index):
                return self.read_only(buffer) and self.invariant(index)
            case Binary() | Unary() | Cast() | Bitcast() | Table() | Select() | Fma():
                return all(map(self.invariant, children(e)))
        return False

    def read_only(self, buffer: str) -> bool:
        """A storage buffer the program never writes: its content is the same all through
        the dispatch."""
        return self.buffers[buffer].access is not Access.WORKGROUP and \
            buffer not in self.written

    def entry_value(self, e: Expr) -> tuple[str, DType]:
        """An invariant value (``a[0]`` in saxpy), computed once before the workgroups
        start. LLVM cannot move a load out of the lane loop itself: for all it knows the
        output aliases the buffer, so it reads it again after every store (saxpy at
        1 Mi: 0.21 ms, read once 0.14 ms). No buffer the program reads is bound to one it
        writes."""
        if e in self.entry_values:
            return self.entry_values[e]
        self.at_entry = True
        try:
            code, dtype = self.expr_into(self.entry, 1, e)
        finally:
            self.at_entry = False
        name = self.fresh("c")
        self.entry_values[e] = (name, dtype)
        self.entry.append(f"    {name} = {code}")
        return name, dtype

    def lane_free(self, e: Expr) -> bool:
        """(Lockstep.) Whether a load's value is the same for every lane and computable
        before the stretch's lane loop: a buffer the program never writes, at an index
        of literals, lengths, workgroup ids and uniform loop variables (the scalars)."""
        match e:
            case Lit() | BufLen():
                return True
            case InvocationId(kind, axis):
                if self.along is not None:  # (a block's lanes differ along its axis only)
                    return axis != self.along
                return kind is IdKind.WORKGROUP
            case Var(name):
                return self.var(name)[0] in self.scalars
            case Load(buffer, index):
                return self.read_only(buffer) and self.lane_free(index)
            case Binary() | Unary() | Cast() | Bitcast() | Table() | Select() | Fma():
                return all(map(self.lane_free, children(e)))
        return False

    def stretch_value(self, e: Load) -> tuple[str, DType]:
        """(Lockstep.) A lane-free load, read once before the stretch's lane loop (the
        coefficient of a Horner step: LLVM reads it again for every lane, for all it
        knows the lane arrays alias it; read once, f64_kernel took half the time)."""
        before = self.before_stretch
        if e not in self.stretch_names:
            self.before_stretch = None  # (its index is written inline, not hoisted again)
            try:
                code, _ = self.expr_into(before, 0, e)
            finally:
                self.before_stretch = before
            self.stretch_names[e] = name = self.fresh("s")
            before.append(f"{name} = {code}")
        return self.stretch_names[e], self.buffers[e.buffer].dtype

    def expr_into(self, lines: list[str], depth: int, e: Expr) -> tuple[str, DType]:
        """``e``'s code for a line written at ``depth`` in ``lines`` rather than here:
        the variables a deep expression is split into go there too."""
        saved = self.lines, self.at, self.nesting
        self.lines, self.at, self.nesting = lines, depth, 0
        try:
            return self.expr(e)
        finally:
            self.lines, self.at, self.nesting = saved

    def divisor(self, e: Expr) -> tuple[str, str]:
        """An invariant u32 divisor and its reciprocal, both computed once before the
        workgroups start (``div_u32_by``: the xor example's ``i % len(key)`` went from
        0.18 to 0.07 ms)."""
        d, _ = self.entry_value(e)
        if ("reciprocal", e) not in self.entry_values:
            self.entry_values[("reciprocal", e)] = f"{d}_inv", DType.F64
            self.entry.append(f"    {d}_inv = reciprocal_u32({d})")
        return d, f"{d}_inv"

    def lane_id(self, kind: IdKind, axis: int) -> str:
        """(Lockstep.) An invocation id of lane ``l``: lanes go x fastest, then y, z."""
        if self.along is not None:
            return self.block_id(kind, axis)
        wx, wy, _ = self.program.workgroup
        size = self.program.workgroup[axis]
        local = ("(l % {wx})", "((l // {wx}) % {wy})", "(l // ({wx} * {wy}))")[axis].format(
            wx=wx, wy=wy)
        group = f"w{'xyz'[axis]}"
        value = {IdKind.GLOBAL: f"{group} * {size} + {local}", IdKind.LOCAL: local,
                 IdKind.WORKGROUP: group}[kind]
        return f"np.uint32({value})"

    def literal(self, dtype: DType, bits: int) -> str:
        if dtype is DType.BOOL:
            return "True" if bits else "False"
        name = f"K{len(self.consts)}"
        if dtype.is_int:
            value = f"{NP[dtype]}({dtype.from_bits(bits)})"
        elif dtype is DType.F16:  # (its f32 carrier: exact)
            value = f"np.uint16({bits}).view(np.float16).astype(np.float32)"
        else:  # floats by bit pattern: -0.0, infinities and NaN exact
            width = "np.uint32" if dtype is DType.F32 else "np.uint64"
            value = f"{width}({bits}).view({NP[dtype]})"
        self.consts.append(f"{name} = {value}")
        return name

    def library_call(self, op: str, operands: list[Expr]) -> tuple[str, DType]:
        """A call of the math library's helper for ``op`` (``vyre_cpu.mathlib``), its
        import among the module's constants."""
        args = [self.expr(x)[0] for x in operands]
        code, dtype, imported = mathlib.call((op, self.typeof(operands[0])), args)
        if imported not in self.consts:
            self.consts.append(imported)
        return code, dtype

    def table(self, dtype: DType, bits: tuple[int, ...]) -> str:
        """A module constant holding a table's values (read as a buffer is: 0 past the
        end), by bit pattern; f16 in its f32 carrier (exact)."""
        name = f"K{len(self.consts)}"
        width = {8: "np.uint8", 16: "np.uint16", 32: "np.uint32", 64: "np.uint64"}[dtype.bits]
        of = "np.float16).astype(np.float32" if dtype is DType.F16 else NP[dtype]
        self.consts.append(f"{name} = np.array({list(bits)}, {width}).view({of})")
        return name

    def binary(self, op: BinOp, a: str, b: str, t: DType) -> str:
        if op in COMPARE:
            return f"({a} {COMPARE[op]} {b})"
        if t is DType.BOOL:
            return {BinOp.AND: f"({a} and {b})", BinOp.LOGICAL_AND: f"({a} and {b})",
                    BinOp.OR: f"({a} or {b})", BinOp.LOGICAL_OR: f"({a} or {b})",
                    BinOp.XOR: f"({a} != {b})"}[op]
        if op in (BinOp.AND, BinOp.OR, BinOp.XOR):
            sym = {BinOp.AND: "&", BinOp.OR: "|", BinOp.XOR: "^"}[op]
            return f"{NP[t]}({a} {sym} {b})"
        if op in (BinOp.MIN, BinOp.MAX) and t.is_int:
            return f"{'min' if op is BinOp.MIN else 'max'}({a}, {b})"
        if t in SMALL:
            wrapped = {BinOp.ADD: f"np.int64({a}) + np.int64({b})",
                       BinOp.SUB: f"np.int64({a}) - np.int64({b})",
                       BinOp.MUL: f"np.int64({a}) * np.int64({b})"}.get(op)
            return f"{NP[t]}({wrapped or f'small_{op.value}({a}, {b}, {t.bits}, {t.is_signed})'})"
        if t in (DType.U64, DType.I64) and op in NATIVE_64:
            return f"{NP[t]}({a} {NATIVE_64[op]} {b})"
        if t is DType.I64 and op in (BinOp.ROTL, BinOp.ROTR):
            return f"np.int64({op.value}_u64(np.uint64({a}), {b}))"
        if t is DType.I64 and op in (BinOp.DIV, BinOp.REM, BinOp.SHL, BinOp.SHR, BinOp.MULHI,
                                     BinOp.ADD_SAT, BinOp.SUB_SAT):
            return f"{op.value}_i64({a}, {b})"
        return f"{op.value}_{SUFFIX[t]}({a}, {b})"

    def unary(self, op: UnOp, a: str, t: DType) -> str:
        if op is UnOp.NOT:
            return f"(not {a})"
        if op is UnOp.ABS and t.is_int and not t.is_signed:
            return a
        if t in SMALL:
            value = {UnOp.NEG: f"-np.int64({a})", UnOp.BIT_NOT: f"~np.int64({a})",
                     UnOp.ABS: f"abs(np.int64({a}))"}.get(op) or \
                f"small_{op.value}({a}, {t.bits}, {t.is_signed})"
            return f"{NP[t]}({value})"
        if t in (DType.U64, DType.I64) and op is UnOp.BIT_NOT:
            return f"{NP[t]}(~{a})"
        if t is DType.I64 and op in (UnOp.POPCOUNT, UnOp.CLZ, UnOp.CTZ, UnOp.BIT_REVERSE):
            return f"np.int64({op.value}_u64(np.uint64({a})))"
        if t.is_int:
            return f"{UNARY_INT[op]}_{SUFFIX[t]}({a})"
        if op in (UnOp.ISNAN, UnOp.ISINF):  # (a bool; f64 holds every f16/f32 exactly)
            return f"{op.value}_f64(np.float64({a}))"
        if op is UnOp.NEG:
            return f"(-{a})"
        if op is UnOp.ABS:
            return f"abs({a})"
        fn = f"{FLOAT_FN[op]}_f64"
        if t is DType.F64:
            return f"{fn}({a})"
        rounded = "to_f16" if t is DType.F16 else "np.float32"
        return f"{rounded}({fn}(np.float64({a})))"

    def cast(self, a: str, src: DType, dst: DType) -> str:
        if src is dst:
            return a
        if dst is DType.BOOL:
            return f"({a} != 0)"
        if src is DType.BOOL:
            return f"({NP[dst]}(1) if {a} else {NP[dst]}(0))"
        if src.is_float and dst.is_int:
            if dst in SMALL:
                lo, hi = dst.int_range
                return f"{NP[dst]}(float_to_int({a}, {lo}, {hi}))"
            return f"float_to_{SUFFIX[dst]}({a})"
        if src.is_int and dst.is_int:  # (numba's integer casts keep the low bits, extending
            # by the source's sign: modulo 2^width)
            if {src, dst} == {DType.U32, DType.I32}:
                return f"{SUFFIX[src]}_to_{SUFFIX[dst]}({a})"
            return f"{NP[dst]}({a})"
        if dst is DType.F16:  # (from f64, where every source value is exact: one rounding)
            return f"to_f16(np.float64({a}))"
        return f"{NP[dst]}({a})"  # int -> float, float -> float: rounded to nearest

    def bitcast(self, a: str, src: DType, dst: DType) -> str:
        """``a``'s bits as ``dst`` (same width). The operand is made its own type first:
        an integer the ranges prove in range is written as an i64 (``expr``)."""
        if src is dst:
            return a
        if src.is_int and dst.is_int:  # (the cast keeps the low bits: the same bits)
            return self.cast(f"{NP[src]}({a})", src, dst)
        if src is DType.F16:  # (its bits from the f32 that holds it; NaN canonical)
            return f"{NP[dst]}(f16_bits({a}))"
        if src.is_float:
            return f"bits_{SUFFIX[src]}({NP[src]}({a}), {NP[dst]})"
        if dst is DType.F16:
            return f"f16_value({NP[DType.U16]}({NP[src]}({a})))"
        return f"reinterpret({NP[src]}({a}), {NP[dst]})"
