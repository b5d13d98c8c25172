"""The f32 math the WGSL lowering carries itself: the adapters' own functions are hundreds
of ULPs out, or worse (lavapipe's exp and log by millions, sin and cos wrong for large
arguments), so each transcendental op is built here from exact operations, every one
kept as written behind the opaque-zero barrier. f16 goes through them; f64 is refused by
the lowering (SPIR-V has no double transcendentals). Pure text: the error each reaches is
measured by ``vyre conform --exhaustive`` and stated in docs/semantics.md.
"""

from __future__ import annotations

import math

import numpy as np

from vyre_core.ir.nodes import BinOp, UnOp


def _k(value: float) -> str:
    """The f32 nearest ``value``, as a constant the compiler cannot see."""
    return f"vyre_k(0x{int(np.float32(value).view(np.uint32)):08x}u)"


def _pair(value: float) -> tuple[str, str]:
    """``value`` as a float and the float nearest what it leaves."""
    hi = float(np.float32(value))
    return _k(hi), _k(value - hi)


def _series(terms: list[float], var: str, p: str = "p") -> str:
    """Horner's rule over ``terms`` (highest power first) in ``var``, into ``p``."""
    lines = [f"    var {p} = {_k(terms[0])};"]
    lines += [f"    {p} = vyre_x(vyre_x({p} * {var}) + {_k(t)});" for t in terms[1:]]
    return "\n".join(lines)


#: What the float helpers below build on: ``vyre_x`` is a value behind the opaque-zero
#: barrier (every operation's result passes through it, so the compiler keeps the order
#: and roundings as written), ``vyre_k`` a constant it cannot see, ``vyre_pow2`` 2^n for a
#: normal result, ``vyre_two_prod`` a product as two floats.
def _kit(opaque_zero: str) -> str:
    return f"""\
fn vyre_x(v: f32) -> f32 {{ return bitcast<f32>(bitcast<u32>(v) ^ {opaque_zero}); }}
fn vyre_k(bits: u32) -> f32 {{ return bitcast<f32>(bits ^ {opaque_zero}); }}
fn vyre_pow2(n: i32) -> f32 {{ return bitcast<f32>(u32(n + 127) << 23u); }}
fn vyre_trunc12(v: f32) -> f32 {{ return bitcast<f32>(bitcast<u32>(v) & 0xfffff000u); }}
// a * b = p + e exactly (Dekker's product over 12-bit halves: it holds where fma is not fused)
fn vyre_two_prod(a: f32, b: f32) -> vec2<f32> {{
    let p = vyre_x(a * b);
    let ah = vyre_trunc12(a);
    let al = vyre_x(a - ah);
    let bh = vyre_trunc12(b);
    let bl = vyre_x(b - bh);
    var e = vyre_x(vyre_x(ah * bh) - p);
    e = vyre_x(e + vyre_x(ah * bl));
    e = vyre_x(e + vyre_x(al * bh));
    return vec2<f32>(p, vyre_x(e + vyre_x(al * bl)));
}}"""


#: atan(t) for t >= 0 (inf included): t reduced at 7/16, 11/16, 19/16 and 39/16 to
#: |u| <= 7/16 around atan of 0, 1/2, 1, 3/2 and inf (each a float and its remainder);
#: atan(u) from its series to u^23 (the rest is below 2^-33 of u), returned as that
#: angle and the rest. atan2 divides, then places the angle in its quadrant (pi less the
#: angle as pi's two parts less the angle's: one rounding where it is pi/2).
_ATAN = f"""fn vyre_atan_parts(t: f32) -> vec2<f32> {{
    let a = bitcast<u32>(t);
    if (a < 0x39800000u) {{ return vec2<f32>(vyre_k(0u), t); }}
    var u = t;
    var hi = vyre_k(0u);
    var lo = vyre_k(0u);
    if (a >= 0x3ee00000u) {{
        let t2 = vyre_x(t * {_k(2.0)});
        if (a < 0x3f300000u) {{
            hi = {_pair(math.atan(0.5))[0]};
            lo = {_pair(math.atan(0.5))[1]};
            u = vyre_x(vyre_x(t2 - {_k(1.0)}) / vyre_x({_k(2.0)} + t));
        }} else if (a < 0x3f980000u) {{
            hi = {_pair(math.pi / 4)[0]};
            lo = {_pair(math.pi / 4)[1]};
            u = vyre_x(vyre_x(t - {_k(1.0)}) / vyre_x(t + {_k(1.0)}));
        }} else if (a < 0x401c0000u) {{
            hi = {_pair(math.atan(1.5))[0]};
            lo = {_pair(math.atan(1.5))[1]};
            u = vyre_x(vyre_x(t2 - {_k(3.0)}) / vyre_x({_k(2.0)} + vyre_x(t * {_k(3.0)})));
        }} else {{
            hi = {_pair(math.pi / 2)[0]};
            lo = {_pair(math.pi / 2)[1]};
            u = vyre_x({_k(-1.0)} / t);
        }}
    }}
    let z = vyre_x(u * u);
{_series([(-1) ** i / (2 * i + 1) for i in range(11, 0, -1)], "z")}
    let at = vyre_x(u + vyre_x(vyre_x(u * z) * p));
    return vec2<f32>(hi, vyre_x(lo + at));
}}

fn vyre_atan2_f32(y: f32, x: f32) -> f32 {{
    let ux = bitcast<u32>(x);
    let uy = bitcast<u32>(y);
    let ax = ux & 0x7fffffffu;
    let ay = uy & 0x7fffffffu;
    if (ax > 0x7f800000u || ay > 0x7f800000u) {{ return vyre_k(0x7fc00000u); }}
    let x_neg = (ux >> 31u) == 1u;
    let pi = {_pair(math.pi)[0]};
    var r = select(vyre_k(0u), pi, x_neg);  // y = ±0, or x = ±inf with y finite
    if (ay != 0u && ax == 0u) {{
        r = {_k(math.pi / 2)};
    }} else if (ay == 0x7f800000u) {{
        let corner = select({_k(math.pi / 4)}, {_k(3 * math.pi / 4)}, x_neg);
        r = select({_k(math.pi / 2)}, corner, ax == 0x7f800000u);
    }} else if (ay != 0u && ax != 0x7f800000u) {{
        let a = vyre_atan_parts(vyre_x(bitcast<f32>(ay) / bitcast<f32>(ax)));
        let far = vyre_x(vyre_x(pi - a.x) + vyre_x({_pair(math.pi)[1]} - a.y));
        r = select(vyre_x(a.x + a.y), far, x_neg);
    }}
    return bitcast<f32>(bitcast<u32>(r) | (uy & 0x80000000u));
}}"""

#: tan for f32 over the whole domain, within 2 ULP: x = q (pi/2) + r with |r| <= pi/4, r
#: from the bits of 2/pi (Payne-Hanek, 96 bits of 2/pi against the 24-bit significand, in
#: u32 limbs) kept as r + lo, then Taylor polynomials for sin r and cos r (their truncation
#: error is below 2^-28) with lo's first-order term, and their quotient (sin and cos
#: themselves are the math library's).
_TRIG = """struct VyreReduced { r: f32, lo: f32, q: u32 }

fn vyre_mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>(a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u),
                     (p00 & 0xffffu) | (mid << 16u));
}

fn vyre_window(t: array<u32, 8>, i: u32, s: u32) -> u32 {
    if (s == 0u) { return t[i]; }
    return (t[i] << s) | (t[i + 1u] >> (32u - s));
}

fn vyre_reduce_pio2(x: f32) -> VyreReduced {
    let ux = bitcast<u32>(x);
    let m = (ux & 0x7fffffu) | 0x800000u;
    let e = i32((ux >> 23u) & 0xffu) - 150;
    let two_over_pi = array<u32, 8>(0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u,
                                    0xdb629599u, 0x3c439041u, 0xfe5163abu);
    let p = u32(e + 30);
    let i = p >> 5u;
    let s = p & 31u;
    let w0 = vyre_window(two_over_pi, i, s);
    let w1 = vyre_window(two_over_pi, i + 1u, s);
    let w2 = vyre_window(two_over_pi, i + 2u, s);
    let m2 = vyre_mul_wide(m, w2);
    let m1 = vyre_mul_wide(m, w1);
    let m0 = vyre_mul_wide(m, w0);
    // m * window = limbs r2 r1 r0 (and a fourth, a multiple of 4 once scaled: dropped);
    // x * 2/pi = that * 2^-94: the quadrant is r2's top two bits, the fraction the rest
    let r0 = m2.y;
    let r1 = m2.x + m1.y;
    let r2 = m1.x + m0.y + select(0u, 1u, r1 < m2.x);
    var q = r2 >> 30u;
    var fh = (r2 << 2u) | (r1 >> 30u);
    var fl = (r1 << 2u) | (r0 >> 30u);
    let neg_frac = (fh >> 31u) == 1u;  // fraction >= 1/2: the next quadrant, r < 0
    if (neg_frac) {
        q = q + 1u;
        fl = ~fl + 1u;
        fh = ~fh + select(0u, 1u, fl == 0u);
    }
    var lz = countLeadingZeros(fh);
    if (fh == 0u) {
        fh = fl;
        fl = 0u;
        lz = 32u + countLeadingZeros(fh);
    }
    let sh = lz & 31u;
    var top = fh;
    var low = fl;
    if (sh != 0u) {
        top = (fh << sh) | (fl >> (32u - sh));
        low = fl << sh;
    }
    let scale = vyre_pow2(-24 - i32(lz));
    let a = vyre_x(f32(top >> 8u) * scale);
    let a_hi = vyre_x(f32((top >> 8u) & 0xfff000u) * scale);  // 12 bits each: exact
    let a_lo = vyre_x(f32((top >> 8u) & 0xfffu) * scale);
    let b = vyre_x(f32(((top & 0xffu) << 16u) | (low >> 16u)) * vyre_pow2(-48 - i32(lz)));
    let p1 = vyre_k(0x3fc90fdbu);
    let p2 = vyre_k(0xb33bbd2eu);
    // r + lo = (a + b) (p1 + p2): a * p1 = ph + pl exactly (Dekker's product over the
    // 12-bit halves of a and of p1, so it holds where fma is not fused), summed exactly
    let t = vyre_x(vyre_x(a * p2) + vyre_x(b * p1));
    let ph = vyre_x(a * p1);
    let p1h = vyre_k(0x3fc90000u);
    let p1l = vyre_k(0x39fdb000u);
    let e1 = vyre_x(vyre_x(a_hi * p1h) - ph);
    let e2 = vyre_x(e1 + vyre_x(a_hi * p1l));
    let e3 = vyre_x(e2 + vyre_x(a_lo * p1h));
    let pl = vyre_x(e3 + vyre_x(a_lo * p1l));
    var r = vyre_x(ph + t);
    var lo = vyre_x(vyre_x(vyre_x(ph - r) + t) + pl);
    if (neg_frac != ((ux >> 31u) == 1u)) {
        r = vyre_x(-r);
        lo = vyre_x(-lo);
    }
    if ((ux >> 31u) == 1u) { q = 0u - q; }
    return VyreReduced(r, lo, q & 3u);
}

// sin(r + lo) = r + (r s P(s) + lo (1 - s / 2)): the small term, added to r last (each
// multiply and add rounded apart, never fma: a device may fuse it or not, and the bytes
// would differ by device)
fn vyre_sin_tail(r: f32, lo: f32, s: f32) -> f32 {
    var p = vyre_k(0x3638ef1du);
    p = vyre_x(vyre_x(p * s) + vyre_k(0xb9500d01u));
    p = vyre_x(vyre_x(p * s) + vyre_k(0x3c088889u));
    p = vyre_x(vyre_x(p * s) + vyre_k(0xbe2aaaabu));
    let c = vyre_x(vyre_x(vyre_k(0xbf000000u) * s) + vyre_k(0x3f800000u));
    return vyre_x(vyre_x(vyre_x(r * s) * p) + vyre_x(lo * c));
}

// cos(r + lo) = 1 + (s Q(s) - lo r): the small term, added to 1 last
fn vyre_cos_tail(r: f32, lo: f32, s: f32) -> f32 {
    var p = vyre_k(0xb493f27eu);
    p = vyre_x(vyre_x(p * s) + vyre_k(0x37d00d01u));
    p = vyre_x(vyre_x(p * s) + vyre_k(0xbab60b61u));
    p = vyre_x(vyre_x(p * s) + vyre_k(0x3d2aaaabu));
    p = vyre_x(vyre_x(p * s) + vyre_k(0xbf000000u));
    return vyre_x(vyre_x(p * s) + vyre_x(-vyre_x(lo * r)));
}

// tan = sin / cos over the same reduction (-cos / sin in odd quadrants), the quotient q
// of the rounded values corrected once by what q leaves of the unrounded ones
// ((r + sx) - q (1 + cy), or (1 + cy) - q (r + sx)); x itself below 2^-12
fn vyre_tan_f32(x: f32) -> f32 {
    let ax = bitcast<u32>(x) & 0x7fffffffu;
    if (ax > 0x7f800000u || ax < 0x39800000u) { return x; }
    if (ax == 0x7f800000u) { return vyre_k(0x7fc00000u); }
    var red = VyreReduced(x, vyre_k(0u), 0u);
    if (ax > 0x3f490fdbu) { red = vyre_reduce_pio2(x); }
    let r = red.r;
    let s = vyre_x(r * r);
    let sx = vyre_sin_tail(r, red.lo, s);
    let cy = vyre_cos_tail(r, red.lo, s);
    let sn = vyre_x(r + sx);
    let cs = vyre_x(vyre_k(0x3f800000u) + cy);
    if ((red.q & 1u) == 0u) {
        let q = vyre_x(sn / cs);
        let left = vyre_x(vyre_x(r - q) + vyre_x(sx - vyre_x(q * cy)));
        return vyre_x(q + vyre_x(left / cs));
    }
    let q = vyre_x(cs / sn);
    let qr = vyre_two_prod(q, r);
    let one_less = vyre_x(vyre_x(vyre_k(0x3f800000u) - qr.x) - qr.y);
    let left = vyre_x(one_less + vyre_x(cy - vyre_x(q * sx)));
    return vyre_x(-vyre_x(q + vyre_x(left / sn)));
}"""


#: Each op the lowering builds here: (WGSL function, extra arguments, the pieces it needs).
OWN_F32: dict[UnOp | BinOp, tuple[str, str, tuple[str, ...]]] = {
    UnOp.TAN: ("vyre_tan_f32", "", ("trig",)),
    BinOp.ATAN2: ("vyre_atan2_f32", "", ("atan",)),
}
_PIECES = {"trig": _TRIG, "atan": _ATAN}


def helpers(op: UnOp | BinOp, opaque_zero: str) -> dict[str, str]:
    """The WGSL ``op``'s function needs, by helper name: the kit (built on ``opaque_zero``,
    a u32 word the compiler cannot see) and each piece."""
    return {"vyre_float_kit": _kit(opaque_zero),
            **{f"vyre_float_{piece}": _PIECES[piece] for piece in OWN_F32[op][2]}}
