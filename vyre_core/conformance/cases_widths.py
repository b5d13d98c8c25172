"""u8, u16, i8, i16, u64 and i64 beside u32 and i32: every integer op over every pair of
edge values (a value with itself, shift amounts 0..2 widths), and casts between every
integer width, f32, f64, f16 and bool, with floats past the range cast back. Expected: a
model of docs/semantics.md in Python integers (exact at every width, no numpy)."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import Case, map_case

#: Every integer type, narrow to wide
INT_TYPES = [ir.u8, ir.u16, ir.i8, ir.i16, ir.u32, ir.i32, ir.u64, ir.i64]
#: The types a backend may lack (WGSL has no 64-bit integers)
WIDE = (ir.u64, ir.i64)


def wrap(v: int, t: ir.DType) -> int:
    w = t.bits
    v &= (1 << w) - 1
    return v - (1 << w) if t.is_signed and v >> (w - 1) else v


def bits(v: int, t: ir.DType) -> int:
    return v & ((1 << t.bits) - 1)


def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def clamp(v: int, t: ir.DType) -> int:
    lo, hi = t.int_range
    return min(max(v, lo), hi)


#: name -> (IR expression of a, b and a u32 amount s, the model in Python integers)
BINARY = {
    "add": (lambda a, b, s: a + b, lambda a, b, s, t: wrap(a + b, t)),
    "sub": (lambda a, b, s: a - b, lambda a, b, s, t: wrap(a - b, t)),
    "mul": (lambda a, b, s: a * b, lambda a, b, s, t: wrap(a * b, t)),
    "div": (lambda a, b, s: a / b,
            lambda a, b, s, t: wrap(-1, t) if b == 0 else wrap(trunc_div(a, b), t)),
    "rem": (lambda a, b, s: a % b,
            lambda a, b, s, t: 0 if b == 0 else wrap(a - b * trunc_div(a, b), t)),
    "min": (lambda a, b, s: ir.min(a, b), lambda a, b, s, t: min(a, b)),
    "max": (lambda a, b, s: ir.max(a, b), lambda a, b, s, t: max(a, b)),
    "and": (lambda a, b, s: a & b, lambda a, b, s, t: wrap(bits(a, t) & bits(b, t), t)),
    "or": (lambda a, b, s: a | b, lambda a, b, s, t: wrap(bits(a, t) | bits(b, t), t)),
    "xor": (lambda a, b, s: a ^ b, lambda a, b, s, t: wrap(bits(a, t) ^ bits(b, t), t)),
    "shl": (lambda a, b, s: a << s, lambda a, b, s, t: wrap(a << (s % t.bits), t)),
    "shr": (lambda a, b, s: a >> s, lambda a, b, s, t: a >> (s % t.bits)),
    "rotl": (lambda a, b, s: ir.rotl(a, s), lambda a, b, s, t: rotate(a, s, t)),
    "rotr": (lambda a, b, s: ir.rotr(a, s), lambda a, b, s, t: rotate(a, -s, t)),
    "mulhi": (lambda a, b, s: ir.mulhi(a, b), lambda a, b, s, t: wrap((a * b) >> t.bits, t)),
    "add_sat": (lambda a, b, s: ir.add_sat(a, b), lambda a, b, s, t: clamp(a + b, t)),
    "sub_sat": (lambda a, b, s: ir.sub_sat(a, b), lambda a, b, s, t: clamp(a - b, t)),
    "lt": (lambda a, b, s: a < b, lambda a, b, s, t: int(a < b)),
    "eq": (lambda a, b, s: a == b, lambda a, b, s, t: int(a == b)),
}
UNARY = {
    "bit_not": (lambda a: ~a, lambda a, t: wrap(~a, t)),
    "abs": (abs, lambda a, t: wrap(abs(a), t)),
    "popcount": (ir.popcount, lambda a, t: bin(bits(a, t)).count("1")),
    "clz": (ir.clz, lambda a, t: t.bits - bits(a, t).bit_length()),
    "ctz": (ir.ctz, lambda a, t: t.bits if a == 0 else (bits(a, t) & -bits(a, t)).bit_length() - 1),
    "bit_reverse": (ir.bit_reverse,
                    lambda a, t: wrap(int(f"{bits(a, t):0{t.bits}b}"[::-1], 2), t)),
}


def rotate(a: int, s: int, t: ir.DType) -> int:
    n, w = s % t.bits, t.bits
    u = bits(a, t)
    return wrap((u << n) | (u >> (w - n)) if n else u, t)


def int_to_float(v: int, np_type) -> float:
    """Round to nearest even, exactly (a Python float of a 64-bit int rounds twice)."""
    precision = {np.float16: 11, np.float32: 24, np.float64: 53}[np_type]
    m = abs(v)
    if m.bit_length() > precision:
        shift = m.bit_length() - precision
        q, r = divmod(m, 1 << shift)
        if r > 1 << (shift - 1) or (r == 1 << (shift - 1) and q & 1):
            q += 1
        m = q << shift
    with np.errstate(over="ignore"):
        return np_type(-float(m) if v < 0 else float(m))


def edges(t: ir.DType) -> list[int]:
    lo, hi = t.int_range
    return sorted(v for v in {lo, lo + 1, -1, 0, 1, 2, 3, hi - 1, hi, hi // 2, hi // 2 + 1, 7, 8,
                              15, 16, 31, 32, 63, 64, 127, 128, 255, 256} if lo <= v <= hi)


def outputs(t: ir.DType, a: list[int], b: list[int], s: list[int], types: tuple) -> list:
    """map_case outputs for ``t``'s values ``a``, ``b`` and u32 amounts ``s``: every op,
    ``t`` cast to each of ``types``, floats and bool, and floats (past the range too) back."""
    rows = [(name, ir.bool_ if name in ("lt", "eq") else t, fn,
             [model(x, y, z, t) for x, y, z in zip(a, b, s, strict=True)])
            for name, (fn, model) in BINARY.items()]
    rows += [(name, t, lambda x, y, z, fn=fn: fn(x), [model(x, t) for x in a])
             for name, (fn, model) in UNARY.items()]
    if t.is_signed:
        rows.append(("neg", t, lambda x, y, z: -x, [wrap(-x, t) for x in a]))
    rows += [(f"to_{d.value}", d, lambda x, y, z, d=d: ir.cast(x, d), [wrap(x, d) for x in a])
             for d in types]
    rows += [(f"to_{d.value}", d, lambda x, y, z, d=d: ir.cast(x, d),
              [int_to_float(x, d.storage_np.type) for x in a]) for d in (ir.f32, ir.f64, ir.f16)]
    rows.append(("to_bool", ir.bool_, lambda x, y, z: ir.cast(x, ir.bool_), [x != 0 for x in a]))
    lo, hi = t.int_range
    for d in (ir.f32, ir.f64):
        np_type = d.storage_np.type
        with np.errstate(over="ignore"):
            scaled = [float(np_type(int_to_float(x, np_type)) * np_type(1.5)) for x in a]
        rows.append((f"from_{d.value}", t, lambda x, y, z, d=d: ir.cast(ir.cast(x, d) * 1.5, t),
                     [lo if v <= lo else hi if v >= hi else int(v) for v in scaled]))
    return rows


def split_case(name: str, t: ir.DType, a: list[int], b: list[int], s: list[int],
               types: tuple, per: int = 24) -> list[Case]:
    """``outputs`` as cases of at most ``per`` outputs each (a device binds so many)."""
    rows = outputs(t, a, b, s, types)
    inputs = [("a", t, np.array(a, t.value_np)), ("b", t, np.array(b, t.value_np)),
              ("s", ir.u32, np.array(s, np.uint32))]
    return [map_case(f"{name}_{i}", inputs, rows[start:start + per])
            for i, start in enumerate(range(0, len(rows), per))]


def _edge_pairs(t: ir.DType) -> tuple[list[int], list[int], list[int]]:
    e = edges(t)
    a = [x for x in e for _ in e]
    b = [y for _ in e for y in e]
    s = [i % (2 * t.bits + 3) for i in range(len(a))]
    return a, b, s


#: (the 32-bit types have their own hand-worked tables in cases_integer)
CASES: list[Case] = [
    case for t in INT_TYPES if t not in (ir.u32, ir.i32)
    for case in split_case(f"{t.value}_edges", t, *_edge_pairs(t),
                           tuple(d for d in INT_TYPES if t in WIDE or d not in WIDE))
]
