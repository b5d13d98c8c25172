"""Specialization constants: a program run with its defaults and with chosen values
(edge values of each type included). Every backend sees the program with the constants
substituted, so these check the substitution reaches literals, loop bounds and branches."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import MIN, UMAX, case_of

N = 16


def _kernel() -> ir.Kernel:
    """out[i] = i * SCALE + SHIFT summed over STEPS, a float ramp times GAIN, and a
    branch on FLIP: every kind of constant, used as a literal, a loop bound and a
    condition."""
    k = ir.Kernel(workgroup=(8,))
    scale = k.constant("SCALE", ir.u32, 3)
    shift = k.constant("SHIFT", ir.i32, -5)
    steps = k.constant("STEPS", ir.u32, 2, low=0, high=8)
    gain = k.constant("GAIN", ir.f32, 0.5)
    flip = k.constant("FLIP", ir.bool_, False)
    ints = k.output("ints", ir.u32, N)
    signed = k.output("signed", ir.i32, N)
    floats = k.output("floats", ir.f32, N)
    i = k.let("i", ir.global_id())
    acc = k.let("acc", ir.u32(0))
    with k.loop("s", 0, steps):
        k.assign(acc, acc + i * scale)
    ints[i] = acc
    with k.if_(flip):
        signed[i] = i.cast(ir.i32) - shift
    with k.else_():
        signed[i] = i.cast(ir.i32) + shift
    floats[i] = i.cast(ir.f32) * gain
    return k


def _expected(scale: int, shift: int, steps: int, gain: float, flip: bool) -> list:
    i = np.arange(N, dtype=np.int64)
    ints = (i * scale * steps) % 2**32
    signed = (i - shift) if flip else (i + shift)
    signed = ((signed + 2**31) % 2**32 - 2**31).astype(np.int32)
    with np.errstate(invalid="ignore"):  # (0 * inf: NaN, as the IR defines it)
        return [ints, signed, i.astype(np.float32) * np.float32(gain)]


def constants_take_their_defaults():
    return case_of("constants_take_their_defaults", _kernel(), [],
                   _expected(3, -5, 2, 0.5, False))


def constants_take_chosen_values():
    chosen = {"SCALE": 7, "SHIFT": 9, "STEPS": 5, "GAIN": -0.0, "FLIP": True}
    return case_of("constants_take_chosen_values", _kernel(), [],
                   _expected(7, 9, 5, -0.0, True), constants=chosen)


def constants_take_edge_values():
    chosen = {"SCALE": UMAX, "SHIFT": MIN, "STEPS": 0, "GAIN": float("inf")}
    return case_of("constants_take_edge_values", _kernel(), [],
                   _expected(UMAX, MIN, 0, float("inf"), False), constants=chosen)


CASES = [constants_take_their_defaults(), constants_take_chosen_values(),
         constants_take_edge_values()]
