"""The shader's buffers: their declarations and bindings, the accessors of packed and
narrow ones, and workgroup memory zeroed at the start."""

from __future__ import annotations

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Access,
)
from vyre_wgpu import narrow_ints
from vyre_wgpu.wgsl import STORAGE, TYPE, BufferBinding


class Bindings:
    """The lowering's buffer declarations (a mixin of ``lowering._Lowering``)."""

    def buffer_decls(self) -> tuple[list[str], list[BufferBinding]]:
        decls, bindings = [], []
        for b in self.program.buffers:
            elem = STORAGE[b.dtype]
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
        ty, ref, n = TYPE[b.dtype], self.buf(b.name), self.length(b.name)
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
            zero = f"{STORAGE[b.dtype]}(0)"
            atomic = b.name in self.atomic or self.packed_writable(b)
            write = (f"atomicStore(&{self.buf(b.name)}[i], {zero})" if atomic
                     else f"{self.buf(b.name)}[i] = {zero}")
            count = narrow_ints.words(b.dtype, b.count) if b.dtype in narrow_ints.WIDTH \
                else b.count
            lines.append(f"    for (var i: u32 = vyre_lindex; i < {count}u; "
                         f"i = i + {invocations}u) {{ {write}; }}")
        return [*lines, "    workgroupBarrier();"] if lines else []
