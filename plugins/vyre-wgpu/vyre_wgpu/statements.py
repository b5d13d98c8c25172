"""Statements as WGSL: blocks, branches, loops with the adapter's trip limit, and
atomics."""

from __future__ import annotations

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    ONE,
    Assign,
    Atomic,
    AtomicOp,
    Barrier,
    Block,
    Break,
    Continue,
    If,
    Let,
    Loop,
    Return,
    Stmt,
    Store,
    While,
    loop_jumps,
)
from vyre_wgpu.wgsl import ATOMIC_FN, STATUS_LOOP_CUT, TYPE


class Statements:
    """The lowering's statements (a mixin of ``lowering._Lowering``)."""

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
                return [f"{ind}{kind} {self.var(name)}: {TYPE[self.types[name]]} = "
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
        ty = TYPE[b.dtype]
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
        fn = ATOMIC_FN[e.op]
        name = f"vyre_{fn}_{e.buffer}"
        source = f"""fn {name}(i: u32, v: {ty}) -> {ty} {{
    if (i >= {n}) {{ return {ty}(0); }}
    return {fn}(&{ref}[i], v);
}}"""
        return self.helper_call(name, [self.expr(e.index), self.expr(e.value)], source)
