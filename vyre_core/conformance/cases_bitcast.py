"""Bitcasts: a value's bits read as another type of its width, worked out by hand from
docs/semantics.md ("Bitcasts"): -0, infinities, subnormals as they are, and a NaN's bits
the canonical NaN's whatever its payload, both ways."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import INF, NAN, arr, map_case

u8, i8, u16, i16, f16 = ir.u8, ir.i8, ir.u16, ir.i16, ir.f16
u32, i32, f32, u64, i64, f64 = ir.u32, ir.i32, ir.f32, ir.u64, ir.i64, ir.f64


def _of_bits(dtype: ir.DType, bits: list[int]) -> np.ndarray:
    """Floats given by their bits (NaN payloads, which no float literal spells)."""
    unsigned = {16: np.uint16, 32: np.uint32, 64: np.uint64}[dtype.bits]
    return np.array(bits, unsigned).view(dtype.storage_np)


def _as(dtype: ir.DType):
    return lambda v: ir.bitcast(v, dtype)


CASES = [
    map_case("bitcast_f32_u32_i32", [
        ("x", f32, _of_bits(f32, [0x3F800000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                                  0xFFC00001, 0x7F800001, 0x00000001, 0xC0200000])),
        ("y", u32, arr(u32, [0x3F800000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                             0xFFC00001, 0x7F800001, 0x00000001, 0xC0200000])),
    ], [
        ("to_u32", u32, lambda x, y: _as(u32)(x),
         [0x3F800000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FC00000,
          0x7FC00000, 1, 0xC0200000]),
        ("to_i32", i32, lambda x, y: _as(i32)(x),
         [1065353216, -2147483648, 2139095040, -8388608, 2143289344, 2143289344,
          2143289344, 1, -1071644672]),
        ("from_u32", f32, lambda x, y: _as(f32)(y),
         [1.0, -0.0, INF, -INF, NAN, NAN, NAN, 2.0**-149, -2.5]),
        ("nan_made_then_read", u32, lambda x, y: _as(u32)(x - x),  # (inf - inf, NaN - NaN)
         [0, 0, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0, 0]),
    ]),
    map_case("bitcast_f16_u16_i16", [
        ("x", f16, _of_bits(f16, [0x3C00, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01,
                                  0x0001, 0x83FF, 0xFBFF])),
        ("y", u16, arr(u16, [0x3C00, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 0x0001,
                             0x83FF, 0xFBFF])),
    ], [
        ("to_u16", u16, lambda x, y: _as(u16)(x),
         [0x3C00, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7E00, 0x7E00, 1, 0x83FF, 0xFBFF]),
        ("to_i16", i16, lambda x, y: _as(i16)(x),
         [15360, -32768, 31744, -1024, 32256, 32256, 32256, 1, -31745, -1025]),
        ("from_u16", f16, lambda x, y: _as(f16)(y),
         [1.0, -0.0, INF, -INF, NAN, NAN, NAN, 2.0**-24, -(1023 * 2.0**-24), -65504.0]),
    ]),
    map_case("bitcast_u8_i8", [
        ("x", u8, arr(u8, [0, 1, 127, 128, 129, 255])),
    ], [
        ("to_i8", i8, _as(i8), [0, 1, 127, -128, -127, -1]),
        ("round_trip", u8, lambda x: _as(u8)(_as(i8)(x)), [0, 1, 127, 128, 129, 255]),
    ]),
    map_case("bitcast_f64_u64_i64", [
        ("x", f64, _of_bits(f64, [0x3FF0000000000000, 0x8000000000000000,
                                  0x7FF0000000000000, 0xFFF8000000000001, 1])),
        ("y", u64, arr(u64, [0x3FF0000000000000, 0x8000000000000000, 0x7FF0000000000000,
                             0xFFF8000000000001, 1])),
    ], [
        ("to_u64", u64, lambda x, y: _as(u64)(x),
         [0x3FF0000000000000, 0x8000000000000000, 0x7FF0000000000000,
          0x7FF8000000000000, 1]),
        ("to_i64", i64, lambda x, y: _as(i64)(x),
         [0x3FF0000000000000, -(2**63), 0x7FF0000000000000, 0x7FF8000000000000, 1]),
        ("from_u64", f64, lambda x, y: _as(f64)(y), [1.0, -0.0, INF, NAN, 5e-324]),
    ]),
]
