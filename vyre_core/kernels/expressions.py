"""A kernel body's expressions as IR expressions: names (a local, a parameter, a value
captured from outside), operators, comparisons, array elements and their flat index.
Apart from the statements and the calls because an expression has no effects of its own:
what it reads, and in what order, is decided here alone; a mixin of ``lower.Lowerer``.
"""

from __future__ import annotations

import ast
from typing import Any

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Binary,
    BinOp,
    BufLen,
    Cast,
    Expr,
    Lit,
    Load,
    Select,
    Var,
)
from vyre_core.kernels import values
from vyre_core.kernels.scope import is_number
from vyre_core.kernels.unit import _BINOPS, ArrayRef, _Lowering
from vyre_core.kernels.values import Refusal, Value

_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
           ast.GtE: ">="}
_UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not"}


#: A flat index past every array (a buffer holds at most 2**32 - 1 elements): where an
#: element index outside its axis points, so its load reads 0 and its store is dropped.
OUTSIDE = 2**32 - 1


class Expressions(_Lowering):
    """A body's expressions (a mixin of ``lower.Lowerer``)."""

    # -- expressions -------------------------------------------------------------------

    def expr(self, node: ast.AST) -> Value:
        try:
            found = self._expr(node)
        except Refusal as r:
            r.node = r.node or node
            raise
        return self.as_value(found, node)

    def as_value(self, found: Any, node: ast.AST) -> Value:
        """What ``_expr`` found at ``node`` as a value (an array or a function is not)."""
        if isinstance(found, Value):
            if found.weak and found.const is None:
                raise Refusal(f"{ast.unparse(node)} has no value: the function returns none",
                              "Return a value as the function's last statement: return v.",
                              node)
            return found
        if isinstance(found, ArrayRef):
            raise Refusal(f"array {found.name!r} used as a value",
                          f"Index it: {found.name}[i], or take len({found.name}).", node)
        return values.number(found) if is_number(found) else _not_a_value(found, node)

    def _expr(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool | int | float):
                return Value(None, None, node.value)
            raise Refusal(f"{type(node.value).__name__} constant {node.value!r} in a kernel",
                          "Kernels compute numbers only.", node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.Attribute):
            base = self._expr(node.value)
            if isinstance(base, ArrayRef) and node.attr == "shape":
                return ("shape", base)
            if isinstance(base, Value | ArrayRef | tuple):
                raise Refusal(f"attribute .{node.attr} of a kernel value",
                              "Arrays have .shape; values have no attributes.", node)
            if not hasattr(base, node.attr):
                raise Refusal(f"{ast.unparse(node)} does not exist", "Correct the name.", node)
            found = getattr(base, node.attr)
            path = self._outer_path(node)
            if path is not None and is_number(found):   # (cfg.N: rebound later, noted)
                self.unit.capture(self.scope, path, found)
            return found
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.BinOp):
            left = self.expr(node.left)
            start = len(self.blocks[-1])
            right = self.expr(node.right)
            return values.binop(_BINOPS[type(node.op)], self.read_before(left, start), right,
                                (ast.unparse(node.left), ast.unparse(node.right)))
        if isinstance(node, ast.UnaryOp):
            return values.unary(_UNARY[type(node.op)], self.expr(node.operand))
        if isinstance(node, ast.BoolOp):
            symbol = "and" if isinstance(node.op, ast.And) else "or"
            self.in_select += 1
            try:
                result = self.expr(node.values[0])
                for operand in node.values[1:]:
                    result = values.logical(symbol, result, self.expr(operand))
            finally:
                self.in_select -= 1
            return result
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.IfExp):
            self.in_select += 1
            try:
                return values.select(self.expr(node.test), self.expr(node.body),
                                     self.expr(node.orelse))
            finally:
                self.in_select -= 1
        if isinstance(node, ast.Call):
            return self.call(node)
        raise Refusal(f"{type(node).__name__} is not supported in a kernel",
                      "See the expressions docs/kernels.md lists.", node)

    def name(self, node: ast.Name) -> Any:
        if node.id in self.locals:
            return Value(Var(self.rename[node.id]), self.types[node.id])
        if node.id in self.env:
            return self.env[node.id]
        return self.outer(node.id, node)

    def outer(self, name: str, node: ast.AST) -> Any:
        """What ``name`` names outside the function (noted: a launch after it is rebound
        compiles the kernel again)."""
        found = self.scope(name, node)
        self.unit.capture(self.scope, (name,), found)
        return found

    def _outer_path(self, node: ast.AST) -> tuple[str, ...] | None:
        """``a.b.c`` as ("a", "b", "c") when ``a`` is a name from outside the function."""
        if isinstance(node, ast.Attribute):
            base = self._outer_path(node.value)
            return None if base is None else (*base, node.attr)
        if isinstance(node, ast.Name) and node.id not in self.locals and \
                node.id not in self.env:
            return (node.id,)
        return None

    def _static(self, node: ast.AST) -> Any:
        """The Python object a name or attribute chain names (a function, a dtype)."""
        if isinstance(node, ast.Name) and node.id not in self.locals and node.id not in self.env:
            return self.outer(node.id, node)
        if isinstance(node, ast.Attribute):
            base = self._static(node.value)
            return getattr(base, node.attr, None)
        return None

    def compare(self, node: ast.Compare) -> Value:
        """``a < b < c`` is ``a < b and b < c`` with ``b`` evaluated once (expressions
        have no effects, so its node serves both)."""
        left = self.expr(node.left)
        result = None
        sources = [node.left, *node.comparators]
        for i, (op, right_node) in enumerate(zip(node.ops, node.comparators, strict=True)):
            if type(op) not in _CMPOPS:
                raise Refusal(f"{type(op).__name__} (in, is) in a kernel",
                              "Compare values with == != < <= > >=.", node)
            start = len(self.blocks[-1])
            right = self.expr(right_node)
            left = self.read_before(left, start)
            if result is not None:
                result = self.read_before(result, start)
            test = values.compare(_CMPOPS[type(op)], left, right,
                                  (ast.unparse(sources[i]), ast.unparse(right_node)))
            result = test if result is None else values.logical("and", result, test)
            left = right
        return result

    def subscript(self, node: ast.Subscript) -> Any:
        base = self._expr(node.value)
        if isinstance(base, tuple) and base[0] == "shape":
            axis = self.expr(node.slice)
            if not axis.weak or not isinstance(axis.const, int) or not \
                    0 <= axis.const < base[1].ndim:
                raise Refusal(f"{base[1].name}.shape takes a constant axis from 0 to "
                              f"{base[1].ndim - 1}", f"Write {base[1].name}.shape[0].", node)
            return self.extent(base[1], axis.const)
        if isinstance(base, list | tuple | dict | set):
            _not_a_value(base, node.value)
        if not isinstance(base, ArrayRef):
            raise Refusal(f"{ast.unparse(node.value)}[...] indexes something that is not an "
                          "array", "Index array parameters and shared arrays only.", node)
        return Value(Load(base.name, self.index(base, node.slice)), base.dtype)

    def array_of(self, node: ast.AST) -> ArrayRef:
        base = self._expr(node)
        if not isinstance(base, ArrayRef):
            raise Refusal(f"{ast.unparse(node)} is not an array", "Index array parameters "
                          "(vyre.Array[...]) or shared arrays.", node)
        return base

    def extent(self, array: ArrayRef, axis: int) -> Value:
        """``a.shape[axis]`` as an i32: a shared array's count, a flat array's length, a
        shaped one's extent from the hidden launch buffer."""
        if array.count is not None:
            return Value(Lit.of(DType.I32, array.count), DType.I32)
        if array.shapes is None:
            return Value(Cast(DType.I32, BufLen(array.name)), DType.I32)
        return Value(Cast(DType.I32, self._extent_u32(array, axis)), DType.I32)

    def _extent_u32(self, array: ArrayRef, axis: int) -> Expr:
        return Load(self.unit.launch_buffer, Lit.of(DType.U32, array.shapes + axis))

    def _one_index(self, node: ast.AST) -> Expr:
        v = self.expr(node)
        if v.weak:
            if not isinstance(v.const, int) or isinstance(v.const, bool) or v.const < 0:
                raise Refusal(f"index {v.const!r}: an index is a non-negative int (arrays "
                              "are not indexed from the end)",
                              "Use an index from 0 to len(a) - 1.", node)
            return Lit.of(DType.U32, v.const)
        if v.dtype is DType.U32:
            return v.node
        if v.dtype is DType.I32:
            return Cast(DType.U32, v.node)
        raise Refusal(f"a {v.dtype.value} index", f"Index with an int: "
                      f"{ast.unparse(node)} as i32({ast.unparse(node)}) or a u32.", node)

    def index(self, array: ArrayRef, node: ast.AST) -> Expr:
        """The flat element index (u32): ``a[i]``, or ``a[i, j]`` in numpy's row-major
        order, ``u32(i) * shape[1] + u32(j)``; an index outside its axis (below 0 or past
        the extent) makes the element out of bounds, not another row's (the first axis
        through the flat index, each later one by a compare that selects ``OUTSIDE``)."""
        axes = node.elts if isinstance(node, ast.Tuple) else [node]
        if len(axes) != array.ndim:
            raise Refusal(f"{len(axes)} index(es) for {array.name!r}, which has "
                          f"{array.ndim} axes", f"Give one index per axis: "
                          f"{array.name}[{', '.join('ijk'[:array.ndim])}].", node)
        flat = self._one_index(axes[0])
        inside: Expr | None = None
        for axis, i in enumerate(axes[1:], start=1):
            extent, j = self._extent_u32(array, axis), self._one_index(i)
            flat = Binary(BinOp.ADD, Binary(BinOp.MUL, flat, extent), j)
            fits = Binary(BinOp.LT, j, extent)
            inside = fits if inside is None else Binary(BinOp.LOGICAL_AND, inside, fits)
        return flat if inside is None else Select(inside, flat, Lit.of(DType.U32, OUTSIDE))


def _not_a_value(found: Any, node: ast.AST) -> Value:
    what = type(found).__name__
    if isinstance(found, list | dict | set | tuple):
        raise Refusal(f"{ast.unparse(node)} is a {what} from outside the kernel: a kernel "
                      "captures numbers only",
                      "Pass it as an array parameter (np.asarray(...)) or make it a number.",
                      node)
    raise Refusal(f"{ast.unparse(node)} is a {what}, not a kernel value",
                  "Kernels use numbers, arrays, dtypes and the vyre functions.", node)
