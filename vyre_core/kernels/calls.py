"""The calls a kernel body may make, lowered: a dtype as a cast, the ids, the atomics,
the subgroup and workgroup operations, and the Python builtins and ``math`` functions the
IR has (``len``, ``min``, ``abs``, ``math.sqrt``, ...). Apart because each call is its own
small rule of arguments and types, and the list grows with the language; a
``@vyre.func`` call is inlined by ``lower.py``. A mixin of ``lower.Lowerer``.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from vyre_core.ir import typerules
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    SUBGROUP_LANE_OPS,
    Atomic,
    AtomicOp,
    BinOp,
    Cast,
    IdKind,
    InvocationId,
    Let,
    Subgroup,
    SubgroupOp,
    UnOp,
    Var,
)
from vyre_core.kernels import intrinsics, values, workgroup
from vyre_core.kernels.unit import _is_func, _Lowering
from vyre_core.kernels.values import Refusal, Value

#: ``math`` functions of one float the IR has, by function.
_MATH_UNARY = {math.sqrt: UnOp.SQRT, math.exp: UnOp.EXP, math.log: UnOp.LOG,
               math.sin: UnOp.SIN, math.cos: UnOp.COS, math.tan: UnOp.TAN,
               math.tanh: UnOp.TANH, math.log2: UnOp.LOG2}
if hasattr(math, "exp2"):
    _MATH_UNARY[math.exp2] = UnOp.EXP2
#: ``math`` functions Python gives an int for: the IR's rounding, then i32.
_MATH_TO_INT = {math.floor: UnOp.FLOOR, math.ceil: UnOp.CEIL, math.trunc: UnOp.TRUNC}
_MATH_BINARY = {math.pow: BinOp.POW, math.atan2: BinOp.ATAN2}
_MATH_TEST = {math.isnan: UnOp.ISNAN, math.isinf: UnOp.ISINF}


class Calls(_Lowering):
    """The calls a body makes (a mixin of ``lower.Lowerer``)."""

    # -- calls -------------------------------------------------------------------------

    def _no_keywords(self, call: ast.Call) -> None:
        if call.keywords:
            kw = call.keywords[0]
            raise Refusal(f"keyword argument {kw.arg}= is not supported here",
                          "Pass the arguments by position.", kw)

    def _no_args(self, call: ast.Call, n: int) -> None:
        self._no_keywords(call)
        if len(call.args) != n:
            raise Refusal(f"{ast.unparse(call.func)}() takes {n} argument(s), got "
                          f"{len(call.args)}", "Pass exactly those arguments.", call)

    def call(self, node: ast.Call) -> Value:
        fn = self._expr(node.func)
        if isinstance(fn, DType):
            self._no_args(node, 1)
            return values.cast(self.expr(node.args[0]), fn)
        if fn in intrinsics.IDS:
            self._no_keywords(node)
            axis = self.expr(node.args[0]) if node.args else Value(None, None, 0)
            if len(node.args) > 1 or not axis.weak or axis.const not in (0, 1, 2):
                raise Refusal("an id's axis is 0, 1 or 2, a constant",
                              "Write vyre.global_id(0).", node)
            return Value(Cast(DType.I32, InvocationId(IdKind(intrinsics.IDS[fn]), axis.const)),
                         DType.I32)
        if fn is intrinsics.bitcast:
            self._no_args(node, 2)
            dtype = self._expr(node.args[1])
            if not isinstance(dtype, DType):
                raise Refusal(f"vyre.bitcast() to {ast.unparse(node.args[1])}, not a type",
                              "Name a vyre type: vyre.bitcast(x, vyre.u32).", node.args[1])
            return values.bitcast(self.expr(node.args[0]), dtype)
        if fn in intrinsics.ATOMICS:
            atomic, dtype = self.atomic(node)
            name = self.unit.fresh("atomic")
            self.emit(Let(name, atomic), node)
            return Value(Var(name), dtype)
        if fn in intrinsics.SUBGROUPS:
            return self.subgroup(fn, node)
        if fn in intrinsics.WORKGROUP_OPS:
            raise Refusal(f"vyre.{fn.__name__}() inside an expression",
                          f"Assign it to a name of its own, on a line where every invocation "
                          f"of the workgroup runs: s = vyre.{fn.__name__}(v).", node)
        if fn in (intrinsics.barrier, intrinsics.shared):
            raise Refusal(f"vyre.{fn.__name__}() used as a value",
                          "vyre.barrier() is a statement of its own; assign vyre.shared(f32, "
                          "64) to a name at the kernel's top level.", node)
        if _is_func(fn):
            return self.inline(fn, node)
        return self.builtin(fn, node)

    def builtin(self, fn: Any, node: ast.Call) -> Value:
        self._no_keywords(node)
        args = node.args
        if fn is len:
            self._no_args(node, 1)
            return self.extent(self.array_of(args[0]), 0)
        if fn in (min, max):
            if len(args) < 2:
                raise Refusal(f"{fn.__name__}() of fewer than two values",
                              f"Write {fn.__name__}(a, b).", node)
            result = self.expr(args[0])
            for a in args[1:]:
                op = BinOp.MIN if fn is min else BinOp.MAX
                v = self.expr(a)
                result = values.Value(None, None, fn(result.const, v.const)) \
                    if result.weak and v.weak else \
                    values.binary_function(op, result, v, fn.__name__)
            return result
        if fn is abs:
            self._no_args(node, 1)
            v = self.expr(args[0])
            if v.weak:
                return Value(None, None, abs(v.const))
            return values.Value(values.function(UnOp.ABS, v, "abs").node, v.dtype) \
                if v.dtype.is_numeric else _refuse_type("abs", v, node)
        if fn in (float, int, bool):
            self._no_args(node, 1)
            v = self.expr(args[0])
            if fn is bool:
                return values.truth(v)
            return values.cast(v, DType.F32 if fn is float else DType.I32)
        if fn is round:
            self._no_args(node, 1)
            return values.cast(values.function(UnOp.ROUND, self.expr(args[0]), "round"),
                               DType.I32)
        if fn in _MATH_UNARY or fn in _MATH_TEST or fn in _MATH_TO_INT:
            self._no_args(node, 1)
            op = _MATH_UNARY.get(fn) or _MATH_TEST.get(fn) or _MATH_TO_INT[fn]
            v = values.function(op, self.expr(args[0]), f"math.{fn.__name__}")
            return values.cast(v, DType.I32) if fn in _MATH_TO_INT else v
        if fn in _MATH_BINARY:
            self._no_args(node, 2)
            a, b = (self.expr(x) for x in args)
            a = values.settle(a, DType.F32) if a.weak and b.weak else a
            return values.binary_function(_MATH_BINARY[fn], a, b, f"math.{fn.__name__}")
        if fn is range:
            raise Refusal("range() outside a for statement", "Loop: for i in range(n):.", node)
        if fn is print:
            raise Refusal("print() in a kernel", "Write the values to an output array and "
                          "print them after the launch.", node)
        what = getattr(fn, "__name__", type(fn).__name__)
        raise Refusal(f"{what}() cannot be called in a kernel",
                      "Call the functions docs/kernels.md lists, or a function marked "
                      "@vyre.func.", node)

    def atomic(self, node: ast.Call) -> tuple[Atomic, DType]:
        """An atomic on an array element, and the type of the old value it returns."""
        if self.in_select:
            raise Refusal("an atomic inside and/or/if-else: both sides of those are "
                          "evaluated, so the atomic would always run",
                          "Run the atomic in an if statement of its own.", node)
        fn = self._static(node.func)
        op = AtomicOp(intrinsics.ATOMICS[fn])
        n = 4 if op is AtomicOp.COMPARE_EXCHANGE else 3
        self._no_args(node, n)
        array = self.array_of(node.args[0])
        if array.dtype not in (DType.U32, DType.I32):
            raise Refusal(f"an atomic on {array.dtype.value} array {array.name!r}",
                          "Atomics work on u32 and i32 arrays.", node.args[0])
        index = self.index(array, node.args[1])
        operands = []
        for a in node.args[2:]:
            v = self.expr(a)
            v = values.settle(v, array.dtype) if v.weak else v
            if v.dtype is not array.dtype:
                raise Refusal(f"a {v.dtype.value} value for an atomic on {array.dtype.value} "
                              f"array {array.name!r}", f"Cast it: {array.dtype.value}(...).", a)
            operands.append(v.node)
        self.unit.written.add(array.name)
        if op is AtomicOp.COMPARE_EXCHANGE:
            expected, value = operands
            return Atomic(op, array.name, index, value, expected), array.dtype
        return Atomic(op, array.name, index, operands[0]), array.dtype

    def subgroup(self, fn: Any, node: ast.Call) -> Value:
        """A subgroup operation over the kernel's ``subgroup_size``, typed as the IR types
        it (typerules.subgroup_result); a number alone is an ``i32``, a lane a ``u32``."""
        size = self.unit.subgroup_size
        if size is None:
            raise Refusal(f"vyre.{fn.__name__}() in a kernel that declares no subgroup size",
                          "Declare one: @vyre.kernel(workgroup=(64,), subgroup_size=8) "
                          "(routing sends the program to a backend that forms subgroups "
                          "of that size).", node)
        self.unit.synchronizes = True
        op = SubgroupOp(intrinsics.SUBGROUPS[fn])
        self._no_args(node, 0 if op is SubgroupOp.ELECT else
                      2 if op in SUBGROUP_LANE_OPS else 1)
        value = lane = None
        if node.args:
            value = values.settle(self.expr(node.args[0]))
        if len(node.args) == 2:
            lane = self.expr(node.args[1])
            lane = values.settle(lane, DType.U32) if lane.weak else lane
            if lane.dtype is not DType.U32:
                raise Refusal(f"the lane of vyre.{fn.__name__}() is a {lane.dtype.value}",
                              "Give a u32 lane: u32(...).", node.args[1])
        dtype = typerules.subgroup_result(op, None if value is None else value.dtype,
                                          None if lane is None else lane.dtype)
        if dtype is None:
            raise Refusal(f"vyre.{fn.__name__}() of a {value.dtype.value}",
                          "Pass the types the subgroup table of docs/semantics.md lists "
                          "(i32/u32 to reduce and scan; u32, i32, f32 to move; a bool to "
                          "ballot), casting if need be: i32(v).", node.args[0])
        return Value(Subgroup(op, size, None if value is None else value.node,
                              None if lane is None else lane.node), dtype)

    def workgroup(self, node: ast.Call) -> Value:
        """``vyre.workgroup_<op>(v)``: its statements (``workgroup.expand``) over a
        workgroup buffer of the value's type, one per type for the whole kernel."""
        fn = self._static(node.func)
        self._no_args(node, 1)
        value = values.settle(self.expr(node.args[0]))
        if value.dtype is DType.BOOL:
            raise Refusal(f"vyre.{fn.__name__}() of a bool",
                          "Reduce numbers: i32(flag) counts the invocations where flag "
                          "holds.", node.args[0])
        self.unit.synchronizes = True
        scratch = self.unit.scratch.get(value.dtype)
        if scratch is None:
            scratch = self.unit.scratch[value.dtype] = self.unit.fresh(
                f"workgroup_{value.dtype.value}")
            self.unit.workgroup_buffers.append((scratch, value.dtype,
                                                math.prod(self.unit.workgroup)))
        stmts, result = workgroup.expand(intrinsics.WORKGROUP_OPS[fn], value.node,
                                         value.dtype, self.unit.workgroup, scratch,
                                         self.unit.fresh)
        for stmt in stmts:
            self.emit(stmt, node)
        return Value(Var(result), value.dtype)


def _refuse_type(what: str, v: Value, node: ast.AST) -> Value:
    raise Refusal(f"{what} of a {v.dtype.value}", "Use a number.", node)
