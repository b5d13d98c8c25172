"""IR -> WGSL. Pure text generation: no wgpu import, no device.

WGSL differs from vyre's total semantics in places, so the generated code enforces them:
integer division and remainder by zero, out-of-bounds loads (0) and stores (dropped),
5-bit shift masks, saturating float-to-int casts with NaN -> 0, NaN-ignoring float
min/max, bool buffers as u32 words. Literals are hoisted into function-scope variables so
that WGSL's constant evaluation never sees (and refuses) ``x / 0`` or a 32-bit shift.
What WGSL cannot express is refused with UnsupportedFeatureError, never run wrongly.

The lowering is written in rooms: ``expressions.py``, ``statements.py`` and
``bindings.py`` (mixins of ``_Lowering``), over ``wgsl.py`` (what they share).
"""

from __future__ import annotations

import numpy as np

from vyre_core.ir import Program
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Access,
    Assign,
    Atomic,
    Bitcast,
    Cast,
    Lit,
    Subgroup,
    Table,
    walk,
)
from vyre_wgpu import tables
from vyre_wgpu.bindings import Bindings
from vyre_wgpu.expressions import Expressions
from vyre_wgpu.statements import Statements
from vyre_wgpu.wgsl import PARAMS_HEADER_WORDS, STATUS_SUBGROUP_SIZE, TYPE, Lowered, unsupported


class _Lowering(Expressions, Statements, Bindings):
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

    def lower(self) -> Lowered:
        wide = sorted(t.value for t in self.dtypes & {DType.U64, DType.I64})
        if wide:
            raise unsupported(f"{' and '.join(wide)} (WGSL has no 64-bit integers)")
        if any(b.dtype is DType.BOOL and b.name in self.atomic for b in self.program.buffers):
            raise unsupported("atomics on bool buffers")
        decls, bindings = self.buffer_decls()
        params_binding = max((b.binding for b in self.storage), default=-1) + 1
        words = PARAMS_HEADER_WORDS + len(self.storage)
        words += -words % 4
        wx, wy, wz = self.program.workgroup
        body = self.block(self.program.body, "    ")
        literal_lines = [f"    var {name}: {TYPE[lit.dtype]} = {self.literal_value(lit)};"
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
