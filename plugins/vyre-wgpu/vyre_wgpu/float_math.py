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

from vyre_core.ir.nodes import BinOp


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


_LN2 = math.log(2)


#: What the float helpers below build on: ``vyre_x`` is a value behind the opaque-zero
#: barrier (every operation's result passes through it, so the compiler keeps the order
#: and roundings as written), ``vyre_k`` a constant it cannot see, ``vyre_scalbn`` exact
#: scaling by 2^n (one rounding, subnormal results included), ``vyre_two_prod`` a product
#: as two floats.
def _kit(opaque_zero: str) -> str:
    return f"""\
fn vyre_x(v: f32) -> f32 {{ return bitcast<f32>(bitcast<u32>(v) ^ {opaque_zero}); }}
fn vyre_k(bits: u32) -> f32 {{ return bitcast<f32>(bits ^ {opaque_zero}); }}
fn vyre_pow2(n: i32) -> f32 {{ return bitcast<f32>(u32(n + 127) << 23u); }}
fn vyre_scalbn(y0: f32, n0: i32) -> f32 {{
    var y = y0;
    var n = n0;
    if (n > 127) {{ y = vyre_x(y * vyre_pow2(127)); n = n - 127; }}
    else if (n < -126) {{ y = vyre_x(y * vyre_pow2(-102)); n = n + 102; }}
    return vyre_x(y * vyre_pow2(n));
}}
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


#: e^(hi - lo) - 1 for |hi - lo| <= ln(2)/2, one rounding at the end (fdlibm's expf kernel:
#: a rational approximation): pow's piece (exp and tanh themselves are the math library's).
_EXP = """fn vyre_expm1_core(hi: f32, lo: f32) -> f32 {
    let r = vyre_x(hi - lo);
    let rr = vyre_x(r * r);
    let p = vyre_x(vyre_k(0x3e2aaaa8u) + vyre_x(rr * vyre_k(0xbb355215u)));
    let c = vyre_x(r - vyre_x(rr * p));
    let q = vyre_x(vyre_x(r * c) / vyre_x(vyre_k(0x40000000u) - c));
    return vyre_x(vyre_x(q - lo) + hi);
}"""

#: 2^(h + l) for |h + l| <= 200 and l small beside h: 2^k e^(r ln 2) with k the integer
#: nearest h + l, r = (h - k) + l kept as two floats, r ln 2 as two floats (Dekker), then
#: the exp kernel and exact scaling (pow's last step; exp2 itself is the math library's).
_EXP2 = f"""fn vyre_exp2_wide(h: f32, l: f32) -> f32 {{
    let kf = floor(vyre_x(vyre_x(h + l) + {_k(0.5)}));
    let rh = vyre_x(h - kf);
    let r1 = vyre_x(rh + l);
    let bv = vyre_x(r1 - rh);
    let r2 = vyre_x(vyre_x(rh - vyre_x(r1 - bv)) + vyre_x(l - bv));
    let t = vyre_two_prod(r1, {_k(_LN2)});
    let tl = vyre_x(vyre_x(t.y + vyre_x(r1 * {_pair(_LN2)[1]})) + vyre_x(r2 * {_k(_LN2)}));
    let y = vyre_x({_k(1.0)} + vyre_expm1_core(t.x, vyre_x(-tl)));
    return vyre_scalbn(y, i32(kf));
}}"""

def _top12(value: float) -> float:
    """``value`` as a float with its low 12 significand bits cleared."""
    return float(np.uint32(np.float32(value).view(np.uint32) & 0xFFFFF000).view(np.float32))


_C = 2 / _LN2
_C_HI = _top12(_C)


def _log2_table(hi: bool) -> str:
    """log2(1 + j/8) for j = 0 .. 7 as WGSL u32 bits: each one's top 12 bits, or the
    float nearest what they leave."""
    values = [math.log2(1 + j / 8) for j in range(8)]
    parts = [_top12(v) if hi else v - _top12(v) for v in values]
    return ", ".join(f"0x{int(np.float32(x).view(np.uint32)):08x}u" for x in parts)

#: log2(x) = hi + lo for finite x > 0, hi with 12 significant bits (so y * hi is exact for
#: a y of 12): x = 2^n m with m in [15/16, 15/8), b = 1 + j/8 the nearest eighth (exact,
#: so m - b is), log2(m) = log2(b) + (2 / ln 2) atanh(s) with s = (m - b) / (m + b),
#: |s| <= 1/32, kept as two floats; atanh(s) - s, at most s^3/3 ~ 2^-11 of s, from its
#: series to s^9 (the rest is below 2^-53 of s), so its float roundings cost ~2^-34.
_LOG2 = f"""fn vyre_log2_wide(x0: f32) -> vec2<f32> {{
    var ix = bitcast<u32>(x0);
    var n = 0;
    if (ix < 0x00800000u) {{
        n = -25;
        ix = bitcast<u32>(vyre_x(x0 * vyre_k(0x4c000000u)));
    }}
    n = n + i32(ix >> 23u) - 127;
    var j = ((ix & 0x007fffffu) + 0x80000u) >> 20u;  // round((m - 1) * 8)
    var m = bitcast<f32>((ix & 0x007fffffu) | 0x3f800000u);
    if (j == 8u) {{  // m near 2: m / 2 against 1 (log2(2) - 1 would cancel below x = 1)
        j = 0u;
        m = bitcast<f32>((ix & 0x007fffffu) | 0x3f000000u);
        n = n + 1;
    }}
    let b = vyre_x(vyre_x(f32(j) * {_k(0.125)}) + {_k(1.0)});
    let b_hi = vyre_k(array<u32, 8>({_log2_table(hi=True)})[j]);
    let b_lo = vyre_k(array<u32, 8>({_log2_table(hi=False)})[j]);
    let f = vyre_x(m - b);
    let v = vyre_x(m + b);
    let s = vyre_x(f / v);
    let sh = vyre_trunc12(s);
    let vh = vyre_trunc12(v);
    let vl = vyre_x(m - vyre_x(vh - b));
    let sl = vyre_x(vyre_x(vyre_x(f - vyre_x(sh * vh)) - vyre_x(sh * vl)) / v);
    let z = vyre_x(s * s);
{_series([1 / 9, 1 / 7, 1 / 5, 1 / 3], "z")}
    let w = vyre_x(sl + vyre_x(vyre_x(s * z) * p));
    let ah = vyre_trunc12(vyre_x(sh + w));
    let al = vyre_x(w - vyre_x(ah - sh));
    let hi = vyre_x(ah * {_k(_C_HI)});
    let lo = vyre_x(vyre_x(vyre_x(ah * {_k(_C - _C_HI)}) + vyre_x(al * {_k(_C)})) + b_lo);
    let nf = f32(n);
    let t1 = vyre_trunc12(vyre_x(vyre_x(vyre_x(hi + lo) + b_hi) + nf));
    return vec2<f32>(t1, vyre_x(lo - vyre_x(vyre_x(vyre_x(t1 - nf) - b_hi) - hi)));
}}"""

#: pow(x, y) with C's special cases; otherwise |x|^y = 2^(y log2 |x|), the exponent as two
#: floats (y split in 12-bit halves against log2's hi), signed for a negative x to an odd
#: integer power.
_POW = f"""// 0: y is not an integer, 1: an odd one, 2: an even one (every float from 2^24 is even)
fn vyre_integer_kind(y: f32) -> u32 {{
    let a = bitcast<u32>(y) & 0x7fffffffu;
    if (a >= 0x4b800000u) {{ return 2u; }}
    if (a < 0x3f800000u) {{ return select(0u, 2u, a == 0u); }}
    let e = (a >> 23u) - 127u;
    let m = (a & 0x7fffffu) | 0x800000u;
    if ((m & ((1u << (23u - e)) - 1u)) != 0u) {{ return 0u; }}
    return select(2u, 1u, ((m >> (23u - e)) & 1u) == 1u);
}}

fn vyre_pow_f32(x: f32, y: f32) -> f32 {{
    let ux = bitcast<u32>(x);
    let uy = bitcast<u32>(y);
    let ax = ux & 0x7fffffffu;
    let ay = uy & 0x7fffffffu;
    if (ay == 0u || ux == 0x3f800000u) {{ return {_k(1.0)}; }}  // (NaN included)
    if (ax > 0x7f800000u || ay > 0x7f800000u) {{ return vyre_k(0x7fc00000u); }}
    let y_neg = (uy >> 31u) == 1u;
    if (ay == 0x7f800000u) {{
        if (ax == 0x3f800000u) {{ return {_k(1.0)}; }}  // (-1) ** ±inf
        return vyre_k(select(0u, 0x7f800000u, (ax > 0x3f800000u) != y_neg));
    }}
    let kind = vyre_integer_kind(y);
    let sign = select(0u, ux & 0x80000000u, kind == 1u);
    if (ax == 0u || ax == 0x7f800000u) {{
        return vyre_k(select(0u, 0x7f800000u, (ax == 0x7f800000u) != y_neg) | sign);
    }}
    if ((ux >> 31u) == 1u && kind == 0u) {{ return vyre_k(0x7fc00000u); }}
    let l = vyre_log2_wide(bitcast<f32>(ax));
    let y1 = vyre_trunc12(y);
    let ph = vyre_x(y1 * l.x);
    let pl = vyre_x(vyre_x(vyre_x(y - y1) * l.x) + vyre_x(y * l.y));
    let z = vyre_x(ph + pl);
    var r = vyre_k(0u);
    if (z > {_k(200.0)}) {{
        r = vyre_k(0x7f800000u);
    }} else if (z >= {_k(-200.0)}) {{
        r = vyre_exp2_wide(ph, pl);
    }}
    return bitcast<f32>(bitcast<u32>(r) | sign);
}}"""



#: Each op the lowering builds here: (WGSL function, extra arguments, the pieces it needs).
OWN_F32: dict[BinOp, tuple[str, str, tuple[str, ...]]] = {
    BinOp.POW: ("vyre_pow_f32", "", ("exp", "exp2", "log2", "pow")),
}
_PIECES = {"exp": _EXP, "exp2": _EXP2, "log2": _LOG2, "pow": _POW}


def helpers(op: BinOp, opaque_zero: str) -> dict[str, str]:
    """The WGSL ``op``'s function needs, by helper name: the kit (built on ``opaque_zero``,
    a u32 word the compiler cannot see) and each piece."""
    return {"vyre_float_kit": _kit(opaque_zero),
            **{f"vyre_float_{piece}": _PIECES[piece] for piece in OWN_F32[op][2]}}
