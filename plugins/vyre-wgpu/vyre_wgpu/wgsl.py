"""What the rooms of the WGSL lowering share: the params and status layout, the
lowered shader's description, the WGSL names of the IR's types and operators, and the
helper functions' WGSL text."""

from __future__ import annotations

from dataclasses import dataclass

from vyre_core.errors import UnsupportedFeatureError
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    AtomicOp,
    BinOp,
    SubgroupOp,
    UnOp,
)
from vyre_wgpu import narrow_ints

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


SUBGROUP_FN = {SubgroupOp.ADD: "subgroupAdd", SubgroupOp.MIN: "subgroupMin",
                SubgroupOp.MAX: "subgroupMax", SubgroupOp.AND: "subgroupAnd",
                SubgroupOp.OR: "subgroupOr", SubgroupOp.XOR: "subgroupXor",
                SubgroupOp.INCLUSIVE_ADD: "subgroupInclusiveAdd",
                SubgroupOp.EXCLUSIVE_ADD: "subgroupExclusiveAdd"}


TYPE = {DType.U32: "u32", DType.I32: "i32", DType.F32: "f32", DType.BOOL: "bool",
         DType.F16: "f16", DType.F64: "f64",
         **{t: carrier.value for t, carrier in narrow_ints.CARRIER.items()}}


STORAGE = {**TYPE, DType.BOOL: "u32", **dict.fromkeys(narrow_ints.WIDTH, "u32")}


ARITH = {BinOp.ADD: "+", BinOp.SUB: "-", BinOp.MUL: "*", BinOp.AND: "&", BinOp.OR: "|",
          BinOp.XOR: "^", BinOp.EQ: "==", BinOp.NE: "!=", BinOp.LT: "<", BinOp.LE: "<=",
          BinOp.GT: ">", BinOp.GE: ">=", BinOp.LOGICAL_AND: "&&", BinOp.LOGICAL_OR: "||"}


FLOAT_FN = {UnOp.SQRT: "sqrt", UnOp.FLOOR: "floor", UnOp.CEIL: "ceil", UnOp.ROUND: "round",
             UnOp.TRUNC: "trunc"}  # (WGSL's round: ties to even; the rest are the math library's)


#: f64 round (ties to even) and trunc from floor and ceil, exact: ``x - floor(x)`` is
#: exact below 2**52, where every larger double is already an integer (inf, NaN too).
ROUND_F64 = {
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
MULHI_U32 = """\
fn vyre_mulhi_u32(a: u32, b: u32) -> u32 {
    let al = a & 0xffffu; let ah = a >> 16u; let bl = b & 0xffffu; let bh = b >> 16u;
    let lh = al * bh; let hl = ah * bl;
    let mid = ((al * bl) >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);  // < 3 * 2^16
    return ah * bh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
}"""


#: Signed: the unsigned high word less each negative operand's partner (each operand's
#: expression written once: a helper's parameters, not copies of the expression).
MULHI_I32 = """\
fn vyre_mulhi_i32(a: i32, b: i32) -> i32 {
    let ua = bitcast<u32>(a); let ub = bitcast<u32>(b);
    return bitcast<i32>(vyre_mulhi_u32(ua, ub) - select(0u, ub, a < 0i) - select(0u, ua, b < 0i));
}"""


#: Saturating add and subtract; i32 wraps through u32 (then compares with the operands).
SATURATING = {
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


ATOMIC_FN = {AtomicOp.ADD: "atomicAdd", AtomicOp.SUB: "atomicSub", AtomicOp.MIN: "atomicMin",
              AtomicOp.MAX: "atomicMax", AtomicOp.AND: "atomicAnd", AtomicOp.OR: "atomicOr",
              AtomicOp.XOR: "atomicXor", AtomicOp.EXCHANGE: "atomicExchange"}


INT_LIMITS = {DType.U32: ("0u", "4294967295u", 0.0, 4294967296.0),
               DType.I32: ("bitcast<i32>(0x80000000u)", "2147483647i", -2147483648.0,
                           2147483648.0)}


def unsupported(what: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(f"the wgpu backend cannot express {what} in WGSL",
                                   "Route the program to the reference backend.")
