"""Bitcasts in WGSL: a value's bits read as another type of its width. Pure text, for
lowering.py.

f32 <-> u32/i32 are WGSL's own ``bitcast``; a NaN read as bits gives the canonical NaN's
(tested on the bits: a compiler may assume ``x == x``). f16 <-> u16/i16: WGSL has no
16-bit integers and no bitcast of a lone f16, so the f16's bits are computed from the
f32 that holds it exactly, and back, with integer operations only: exact for every
pattern, subnormals included where the device keeps f16 subnormals. u8 <-> i8 and
u16 <-> i16 are the wrapping cast between their 32-bit carriers (``narrow_ints``).
64-bit types never reach here: WGSL has no 64-bit integers, and the lowering refuses
``u64``/``i64`` (so an f64's bits) before it writes anything.
"""

from __future__ import annotations

from vyre_core.ir.dtypes import CANONICAL_NAN, DType
from vyre_wgpu import narrow_ints

_F32_BITS = f"""\
fn vyre_f32_bits(x: f32) -> u32 {{
    let b = bitcast<u32>(x);
    return select(b, {CANONICAL_NAN[DType.F32]:#x}u, (b & 0x7fffffffu) > 0x7f800000u);
}}"""

#: An f16's 16 bits from its f32 (exact): the exponent rebiased (127 - 15 = 112), a
#: subnormal's significand shifted down to the 2^-24 quantum.
_F16_BITS = f"""\
fn vyre_f16_bits(x: f16) -> u32 {{
    let b = bitcast<u32>(f32(x));
    let sign = (b >> 16u) & 0x8000u;
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) {{ return {CANONICAL_NAN[DType.F16]:#x}u; }}
    if (a == 0x7f800000u) {{ return sign | 0x7c00u; }}
    if (a >= 0x38800000u) {{ return sign | ((a - 0x38000000u) >> 13u); }}
    if (a == 0u) {{ return sign; }}
    return sign | (((a & 0x7fffffu) | 0x800000u) >> (126u - (a >> 23u)));
}}"""

#: The f16 of 16 bits ``h``, through the f32 of the same value (exact): a subnormal's
#: significand normalised by its leading one.
_F16_OF_BITS = """\
fn vyre_f16_of_bits(h: u32) -> f16 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 31u) { return f16(bitcast<f32>(sign | 0x7f800000u | (m << 13u))); }
    if (e != 0u) { return f16(bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u))); }
    if (m == 0u) { return f16(bitcast<f32>(sign)); }
    let top = 31u - countLeadingZeros(m);
    return f16(bitcast<f32>(sign | ((top + 103u) << 23u) | ((m << (23u - top)) & 0x7fffffu)));
}"""


def bitcast(src: DType, dst: DType, x: str) -> tuple[str, dict[str, str]]:
    """The WGSL of ``x`` (a value of ``src``, in its carrier) read as ``dst``, of the same
    width, and the helpers it calls."""
    if src is dst:
        return x, {}
    if src.is_int and dst.is_int:  # (same width: the wrapping cast keeps the bits)
        return narrow_ints.from_int(src, dst, x), {}
    if src is DType.F32:
        value = "vyre_f32_bits(" + x + ")"
        return (value if dst is DType.U32 else f"bitcast<i32>({value})"), \
            {"vyre_f32_bits": _F32_BITS}
    if dst is DType.F32:
        return f"bitcast<f32>({x})", {}
    if src is DType.F16:
        value = f"vyre_f16_bits({x})"
        return (narrow_ints.narrow(dst, f"bitcast<i32>({value})") if dst.is_signed
                else value), {"vyre_f16_bits": _F16_BITS}
    if dst is DType.F16:
        return f"vyre_f16_of_bits({narrow_ints.bits(src, x)})", \
            {"vyre_f16_of_bits": _F16_OF_BITS}
    raise AssertionError((src, dst))  # (64-bit: refused before lowering)
