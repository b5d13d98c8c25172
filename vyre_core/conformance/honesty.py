"""Capability honesty probes: one small program per capability a backend may claim,
sized from what the backend reported, with outputs worked out in numpy.

A claimed capability must produce exactly these outputs; an unclaimed one must be
refused (``runner.run_case`` decides which applies from the backend's own report).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from vyre_core import ir
from vyre_core.contract.types import Capabilities

from .base import Case, arr, case_of

#: Workgroup memory exercised at most (the reference reports 1 MiB; a probe at the
#: reported limit stays cheap on real devices, whose limits are far lower).
MAX_PROBED_WORKGROUP_BYTES = 64 * 1024


def float_arithmetic(dtype: ir.DType) -> Case:
    """sum = a + b and product = a * b, each rounded once in ``dtype``: values chosen so
    the result differs from computing in any other float type."""
    if dtype is ir.f16:
        # 2048 + 1 ties to 2048; 60000 + 10000 and 300 * 300 overflow to inf: only in f16
        # (no subnormals: a backend may flush them, docs/semantics.md)
        a = [1.0, 2048.0, 60000.0, 300.0, -0.5, 0.1, 65504.0, -3.0]
        b = [2.0 ** -10, 1.0, 10000.0, 300.0, 0.25, 0.2, -65504.0, 0.375]
    else:
        # only in f64: 1e300 + 1e300 and 1e200 * 1e100 are finite, 1 + 2**-40 is not 1,
        # 2**-500 squared is a normal number
        a = [1.0, 1e300, 0.1, 1e200, -0.5, 2.0 ** -500, 3.0, 1.0 / 3.0]
        b = [2.0 ** -40, 1e300, 0.2, 1e100, 0.25, 2.0 ** -500, 1.0 / 3.0, 3.0]
    x, y = arr(dtype, a), arr(dtype, b)
    k = ir.Kernel(workgroup=(8,))
    xa, xb = k.read("a", dtype), k.read("b", dtype)
    total = k.output("sum", dtype, count=len(a))
    product = k.output("product", dtype, count=len(a))
    i = k.let("i", ir.global_id(0))
    total[i] = xa[i] + xb[i]
    product[i] = xa[i] * xb[i]
    with np.errstate(over="ignore"):  # numpy rounds in the type, as the kernel must
        return case_of(f"honesty_{dtype.value}_arithmetic", k, [x, y], [x + y, x * y])


def atomic_histogram(caps: Capabilities) -> Case:
    """1024 contended atomic adds into 16 bins, from up to 16 workgroups of 64."""
    groups = min(16, caps.max_workgroups_per_dimension)
    invocations = 64 * groups
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    hist = k.output("hist", ir.u32, count=16)
    i = k.let("i", ir.global_id(0))
    with k.loop("j", 0, -(-1024 // invocations)) as j:
        at = k.let("at", i + j * invocations)
        with k.if_(at < x.len):
            hist.atomic_add(x[at], 1)
    values = (np.arange(1024) * 2654435761 >> 7) % 16
    return case_of("honesty_atomics", k, [arr(ir.u32, values)],
                   [np.bincount(values, minlength=16)], grid=(groups,))


def workgroup_memory(caps: Capabilities, workgroup: int = 64) -> Case:
    """A workgroup buffer as large as reported (at most MAX_PROBED_WORKGROUP_BYTES; 256
    words when none is reported): every slot written, a barrier, every slot read back
    reversed — only correct if the memory is shared and the barrier holds."""
    groups = _groups(caps)
    limit = min(caps.max_workgroup_memory_bytes, MAX_PROBED_WORKGROUP_BYTES)
    words = limit // 4 // workgroup * workgroup or 256
    share = words // workgroup
    k = ir.Kernel(workgroup=(workgroup,))
    seed = k.read("seed", ir.u32)
    shared = k.workgroup_buffer("shared", ir.u32, count=words)
    out = k.output("out", ir.u32, count=words * groups)
    lid, wid = k.let("lid", ir.local_id(0)), k.let("wid", ir.workgroup_id(0))
    with k.loop("j", 0, share) as j:
        slot = k.let("slot", lid * share + j)
        shared[slot] = slot * 2654435761 + seed[wid]
    k.barrier()
    with k.loop("m", 0, share) as m:
        slot = k.let("rslot", lid * share + m)
        out[wid * words + slot] = shared[(words - 1) - slot]
    seeds = np.array([12345, 777][:groups], np.uint32)
    slots = np.arange(words, dtype=np.uint64)
    written = [((slots * 2654435761 + s) % 2**32)[::-1] for s in seeds.tolist()]
    return case_of("honesty_workgroup_memory_and_barrier", k, [seeds],
                   [np.concatenate(written)], grid=(groups,))


def largest_workgroup(caps: Capabilities) -> Case:
    """A 1-D workgroup of the largest reported size along x: every invocation writes its
    own id, in two workgroups (one when only one is reported)."""
    size = max(1, min(caps.max_workgroup_size[0], caps.max_invocations_per_workgroup))
    return _ids_case("honesty_largest_workgroup", size, _groups(caps))


def oversized_workgroup(caps: Capabilities) -> Case:
    """One invocation more per workgroup than reported: must be refused, never run."""
    size = caps.max_invocations_per_workgroup + 1
    return _ids_case("honesty_oversized_workgroup", size, _groups(caps))


def _groups(caps: Capabilities) -> int:
    """Two workgroups, to see they are kept apart, unless the backend reports one."""
    return min(2, caps.max_workgroups_per_dimension)


def _ids_case(name: str, size: int, groups: int) -> Case:
    k = ir.Kernel(workgroup=(size,))
    out = k.output("out", ir.u32, count=groups * size)
    out[ir.global_id(0)] = ir.workgroup_id(0) * 100000 + ir.local_id(0) + 1
    want = np.concatenate([np.arange(size) + 1 + 100000 * g for g in range(groups)])
    return case_of(name, k, [], [want], grid=(groups,))


#: Every probe, built from the backend's report; its case is named ``honesty_<key>``.
PROBES: dict[str, Callable[[Capabilities], Case]] = {
    "f16_arithmetic": lambda caps: float_arithmetic(ir.f16),
    "f64_arithmetic": lambda caps: float_arithmetic(ir.f64),
    "atomics": atomic_histogram,
    "workgroup_memory_and_barrier": workgroup_memory,
    "largest_workgroup": largest_workgroup,
    "oversized_workgroup": oversized_workgroup,
}


def probes(caps: Capabilities) -> list[Case]:
    """Every honesty probe for a backend that reported ``caps``."""
    return [build(caps) for build in PROBES.values()]
