"""u8, u16, i8 and i16 in WGSL, which has only 32-bit integers. Pure text, for lowering.py.

A value lives in a 32-bit carrier (``u32`` zero-extended, ``i32`` sign-extended) and is
narrowed again after each operation that can leave the type's range, so every result is
the type's own. A buffer is packed: its bytes are the elements, as the host has them,
read from ``u32`` words; a buffer that is written is an array of ``atomic<u32>`` and a
store replaces its element's bits in one compare-exchange, so invocations storing to
neighbouring elements of one word never lose each other's writes.
"""

from __future__ import annotations

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import BinOp, UnOp

WIDTH = {DType.U8: 8, DType.U16: 16, DType.I8: 8, DType.I16: 16}
CARRIER = {DType.U8: DType.U32, DType.U16: DType.U32, DType.I8: DType.I32,
           DType.I16: DType.I32}


def mask(t: DType) -> str:
    return f"{(1 << WIDTH[t]) - 1}u"


def per_word(t: DType) -> int:
    return 32 // WIDTH[t]


def narrow(t: DType, x: str) -> str:
    """A carrier ``x`` wrapped to ``t``: its low bits, zero- or sign-extended."""
    if t.is_signed:
        shift = f"{32 - WIDTH[t]}u"
        return f"(bitcast<i32>(bitcast<u32>({x}) << {shift}) >> {shift})"
    return f"({x} & {mask(t)})"


def bits(t: DType, x: str) -> str:
    """A carrier ``x``'s bit pattern in ``t``, as a u32 (high bits clear)."""
    return f"(bitcast<u32>({x}) & {mask(t)})" if t.is_signed else x


def literal(t: DType, value: int) -> str:
    return f"{value}i" if t.is_signed else f"{value}u"


#: Comparisons: the carriers' own.
COMPARED = {BinOp.EQ, BinOp.NE, BinOp.LT, BinOp.LE, BinOp.GT, BinOp.GE}
#: The ops whose 32-bit result on the carriers is narrowed to the type's.
WRAPPED = {BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV, BinOp.REM}
#: The ops whose 32-bit result on the carriers is already the type's.
KEPT = {BinOp.MIN, BinOp.MAX, BinOp.AND, BinOp.OR, BinOp.XOR}


def binary(op: BinOp, t: DType, a: str, b: str) -> tuple[str, dict[str, str]]:
    """``op`` on carriers ``a`` and ``b`` (``b`` a u32 amount for shifts and rotations),
    but for ``COMPARED``, ``WRAPPED`` and ``KEPT``: the WGSL, and the helpers it calls."""
    w = WIDTH[t]
    lo, hi = (literal(t, v) for v in t.int_range)
    if op is BinOp.SHL:
        return narrow(t, f"({a} << ({b} & {w - 1}u))"), {}
    if op is BinOp.SHR:  # (a sign-extended i32 shifts arithmetically)
        return f"({a} >> ({b} & {w - 1}u))", {}
    if op in (BinOp.ROTL, BinOp.ROTR):
        name = f"vyre_rotl_{w}"
        n = f"({b} & {w - 1}u)" if op is BinOp.ROTL else f"(({w}u - ({b} & {w - 1}u)) & {w - 1}u)"
        call = f"{name}({bits(t, a)}, {n})"
        value = narrow(t, f"bitcast<i32>({call})") if t.is_signed else call
        return value, {name: f"""fn {name}(x: u32, n: u32) -> u32 {{
    return ((x << n) | (x >> (({w}u - n) & {w - 1}u))) & {mask(t)};
}}"""}
    if op is BinOp.MULHI:  # (the carriers' product is exact: at most 32 bits)
        return f"(({a} * {b}) >> {w}u)", {}
    if op in (BinOp.ADD_SAT, BinOp.SUB_SAT):  # (exact in 32 bits, then clamped)
        if op is BinOp.SUB_SAT and not t.is_signed:
            return f"select({a} - {b}, 0u, {b} > {a})", {}
        sign = "+" if op is BinOp.ADD_SAT else "-"
        return f"clamp({a} {sign} {b}, {lo}, {hi})", {}
    raise AssertionError(op)


def unary(op: UnOp, t: DType, x: str) -> str:
    w = WIDTH[t]
    match op:
        case UnOp.NEG:
            return narrow(t, f"(-{x})")
        case UnOp.BIT_NOT:
            return narrow(t, f"(~{x})")
        case UnOp.ABS:
            return narrow(t, f"abs({x})") if t.is_signed else x
        case UnOp.POPCOUNT:
            return to_carrier(t, f"countOneBits({bits(t, x)})")
        case UnOp.CLZ:
            return to_carrier(t, f"(countLeadingZeros({bits(t, x)}) - {32 - w}u)")
        case UnOp.CTZ:
            return to_carrier(t, f"min(countTrailingZeros({bits(t, x)}), {w}u)")
        case UnOp.BIT_REVERSE:
            reversed_ = f"(reverseBits({bits(t, x)}) >> {32 - w}u)"
            return narrow(t, f"bitcast<i32>({reversed_})") if t.is_signed else reversed_
    raise AssertionError(op)


def to_carrier(t: DType, u: str) -> str:
    """A u32 count (within the type's range) as ``t``'s carrier."""
    return f"i32({u})" if t.is_signed else u


def from_int(src: DType, dst: DType, x: str) -> str:
    """An integer carrier or value ``x`` of ``src`` as ``dst`` (modulo 2^width: C's rule)."""
    as32 = CARRIER.get(dst, dst)
    value = x if CARRIER.get(src, src) is as32 else f"bitcast<{as32.value}>({x})"
    return narrow(dst, value) if dst in WIDTH else value


def load(t: DType, ref: str, n: str, atomic: bool) -> str:
    word = f"atomicLoad(&{ref}[i / {per_word(t)}u])" if atomic else f"{ref}[i / {per_word(t)}u]"
    element = f"(({word} >> ((i % {per_word(t)}u) * {WIDTH[t]}u)) & {mask(t)})"
    value = narrow(t, f"bitcast<i32>({element})") if t.is_signed else element
    return f"""(i: u32) -> {CARRIER[t].value} {{
    if (i < {n}) {{ return {value}; }}
    return {CARRIER[t].value}(0);
}}"""


def store(t: DType, ref: str, n: str) -> str:
    """One compare-exchange of the element's bits in its word, retried while it fails (a
    neighbour's store changed the word in between, or the weak exchange failed spuriously:
    lock-free, every failure but a spurious one follows another invocation's success)."""
    return f"""(i: u32, v: {CARRIER[t].value}) {{
    if (i >= {n}) {{ return; }}
    let shift = (i % {per_word(t)}u) * {WIDTH[t]}u;
    let field = {mask(t)} << shift;
    let value = ({bits(t, 'v')} << shift) & field;
    var old = atomicLoad(&{ref}[i / {per_word(t)}u]);
    loop {{
        let r = atomicCompareExchangeWeak(&{ref}[i / {per_word(t)}u], old, (old & ~field) | value);
        if (r.exchanged) {{ break; }}
        old = r.old_value;
    }}
}}"""


def words(t: DType, count: int) -> int:
    """The u32 words ``count`` elements take."""
    return -(-count // per_word(t))


def declared_bytes(t: DType, count: int) -> int:
    """What a workgroup array of ``count`` elements of ``t`` takes as WGSL declares it."""
    return 4 * words(t, count) if t in WIDTH else count * t.storage_bytes
