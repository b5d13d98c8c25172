"""Subgroup operations: every op of the taxonomy over subgroups of 8 (lavapipe's size)
with edge values (sums that wrap, the extremes of i32, NaN, -0 and infinities moved
bit for bit), subgroups of 4 in a 2-D workgroup, and of 32. Expected values are worked
out per subgroup in plain numpy: subgroup ``s`` of a workgroup is its local indices
``s*size .. s*size+size-1``."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import MAX, MIN, UMAX, case_of

u32, i32, f32 = ir.u32, ir.i32, ir.f32
N = 128
REDUCE = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
          "or": np.bitwise_or, "xor": np.bitwise_xor}


def _per_subgroup(values: np.ndarray, size: int, fn) -> np.ndarray:
    """``fn`` applied to each subgroup's values (rows of ``size``), result per lane."""
    return np.concatenate([fn(row) for row in values.reshape(-1, size)])


def _integer_ops(name: str, dtype: ir.DType, xs: np.ndarray, size: int = 8):
    k = ir.Kernel(workgroup=(64,), subgroup_size=size)
    x = k.read("x", dtype, count=N)
    i = k.let("i", ir.global_id(0))
    v = k.let("v", x[i])
    ops = [*REDUCE, "inclusive_add", "exclusive_add"]
    for op in ops:
        k.output(op, dtype, count=N)[i] = k.subgroup(op, v)
    words = xs.view(np.uint32).astype(np.uint64)
    wrap = lambda a: (a % 2**32).astype(np.uint32).view(xs.dtype)  # noqa: E731
    expected = [_per_subgroup(words, size, lambda r: np.full(size, r.sum())) if op == "add"
                else _per_subgroup(xs, size, lambda r, f=REDUCE[op]: np.full(size, f.reduce(r)))
                for op in REDUCE]
    expected = [wrap(expected[0]), *expected[1:]]
    expected.append(wrap(_per_subgroup(words, size, np.cumsum)))
    expected.append(wrap(_per_subgroup(words, size, lambda r: np.cumsum(r) - r)))
    return case_of(name, k, [xs], expected)


def subgroup_reductions_and_scans_i32():
    rng = np.random.default_rng(16)
    xs = rng.integers(MIN, MAX, N, endpoint=True).astype(np.int32)
    xs[:8] = [MAX, MAX, 1, MIN, MIN, -1, 0, 7]  # (a sum that wraps both ways)
    return _integer_ops("subgroup_reductions_and_scans_i32", i32, xs)


def subgroup_reductions_and_scans_u32():
    rng = np.random.default_rng(17)
    xs = rng.integers(0, UMAX, N, endpoint=True).astype(np.uint32)
    xs[:8] = [UMAX] * 8
    return _integer_ops("subgroup_reductions_and_scans_u32", u32, xs)


def subgroup_broadcast_and_shuffle_move_bits():
    """f32 values moved exactly: -0, infinities, subnormals (NaN is stored canonical)."""
    size = 8
    k = ir.Kernel(workgroup=(64,), subgroup_size=size)
    x = k.read("x", f32, count=N)
    i = k.let("i", ir.global_id(0))
    v = k.let("v", x[i])
    k.output("broadcast", f32, count=N)[i] = k.subgroup("broadcast", v, 5)
    k.output("shuffle", f32, count=N)[i] = k.subgroup("shuffle", v, i * 3 + 2)
    k.output("wide_lane", f32, count=N)[i] = k.subgroup("shuffle", v, ir.u32(UMAX))
    rng = np.random.default_rng(18)
    xs = rng.standard_normal(N).astype(np.float32)
    xs[:8] = [-0.0, np.inf, -np.inf, np.nan, 1e-45, -3.5, 0.0, 2.0]
    rows = xs.reshape(-1, size)
    lanes = (np.arange(N, dtype=np.uint64) * 3 + 2) % size
    shuffled = rows[np.arange(N) // size, lanes]
    return case_of("subgroup_broadcast_and_shuffle_move_bits", k, [xs], [
        np.repeat(rows[:, 5], size), shuffled, np.repeat(rows[:, UMAX % size], size)])


def subgroup_ballot_and_elect():
    size = 8
    k = ir.Kernel(workgroup=(64,), subgroup_size=size)
    x = k.read("x", i32, count=N)
    i = k.let("i", ir.global_id(0))
    k.output("ballot", u32, count=N)[i] = k.subgroup("ballot", x[i] > 0)
    k.output("elected", u32, count=N)[i] = ir.select(k.subgroup("elect"), ir.u32(1),
                                                      ir.u32(0))
    xs = np.random.default_rng(19).integers(-3, 3, N).astype(np.int32)
    xs[:8] = [1, 1, 1, 1, 1, 1, 1, 1]
    bits = (xs > 0).astype(np.uint32).reshape(-1, size) << np.arange(size, dtype=np.uint32)
    return case_of("subgroup_ballot_and_elect", k, [xs], [
        np.repeat(np.bitwise_or.reduce(bits, axis=1), size),
        (np.arange(N) % size == 0).astype(np.uint32)])


def subgroups_of_4_in_a_2d_workgroup():
    """A 4x4 workgroup's local index is x + 4y: its subgroups of 4 are its rows."""
    k = ir.Kernel(workgroup=(4, 4), subgroup_size=4)
    out = k.output("out", u32, shape=(8, 8))
    gx, gy = ir.global_id(0), ir.global_id(1)
    out[gy * 8 + gx] = k.subgroup("add", gx * 10 + gy)
    gy_, gx_ = np.divmod(np.arange(64), 8)
    return case_of("subgroups_of_4_in_a_2d_workgroup", k, [], [_row_sums(gx_, gy_)])


def _row_sums(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """Each lane's subgroup: the 4 lanes of its row within its workgroup."""
    first = gx // 4 * 4
    return sum((first + j) * 10 + gy for j in range(4)).astype(np.uint32)


def subgroups_of_32():
    size = 32
    k = ir.Kernel(workgroup=(64,), subgroup_size=size)
    x = k.read("x", u32, count=N)
    i = k.let("i", ir.global_id(0))
    k.output("inclusive", u32, count=N)[i] = k.subgroup("inclusive_add", x[i])
    k.output("ballot", u32, count=N)[i] = k.subgroup("ballot", x[i] % 2 == 1)
    xs = np.arange(N, dtype=np.uint32) * 3
    rows = xs.reshape(-1, size)
    odd = (rows % 2 == 1).astype(np.uint32) << np.arange(size, dtype=np.uint32)
    return case_of("subgroups_of_32", k, [xs], [
        np.cumsum(rows, axis=1).astype(np.uint32).reshape(-1),
        np.repeat(np.bitwise_or.reduce(odd, axis=1), size)])


def subgroups_in_uniform_control_flow():
    """Where every invocation runs them: in an if on the workgroup id, in a loop of
    literal bounds (a value handed one lane on per pass), one inside another's operand,
    and as a loop bound (the same in a subgroup, not in the workgroup)."""
    size = 8
    k = ir.Kernel(workgroup=(32,), subgroup_size=size)
    x = k.read("x", u32, count=64)
    out = k.output("out", u32, count=64)
    passes = k.output("passes", u32, count=64)
    i = k.let("i", ir.global_id(0))
    v = k.let("v", x[i])
    with k.if_(ir.workgroup_id(0) == 1):
        k.assign(v, k.subgroup("max", k.subgroup("exclusive_add", v)))
    acc = k.let("acc", v)
    with k.loop("r", 0, 3):
        k.assign(acc, k.subgroup("shuffle", acc, ir.local_id(0) + 1) + 1)
    out[i] = acc
    n = k.let("n", ir.u32(0))
    with k.loop("j", 0, k.subgroup("min", v % 5)):
        k.assign(n, n + 1)
    passes[i] = n
    xs = (np.arange(64, dtype=np.uint32) * 7 + 3) % 23
    rows = xs.reshape(-1, size).astype(np.int64)
    v = rows.copy()
    v[4:] = np.max(np.cumsum(rows[4:], axis=1) - rows[4:], axis=1, keepdims=True)
    acc = v.copy()
    for _ in range(3):
        acc = np.roll(acc, -1, axis=1) + 1
    trips = np.repeat(np.min(v % 5, axis=1), size)
    return case_of("subgroups_in_uniform_control_flow", k, [xs], [acc.reshape(-1), trips])


CASES = [
    subgroups_in_uniform_control_flow(),
    subgroup_reductions_and_scans_i32(), subgroup_reductions_and_scans_u32(),
    subgroup_broadcast_and_shuffle_move_bits(), subgroup_ballot_and_elect(),
    subgroups_of_4_in_a_2d_workgroup(), subgroups_of_32(),
]
