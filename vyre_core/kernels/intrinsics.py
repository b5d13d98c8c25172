"""The functions a kernel body calls (``vyre.global_id(0)``, ``vyre.atomic_add(a, i, v)``,
...). They exist so that a kernel's module can import and name them; the frontend
recognizes each by identity and lowers it. Called from Python, outside a kernel, they
refuse: they have a value only while the kernel runs."""

from __future__ import annotations

from typing import Any

from vyre_core.errors import KernelSyntaxError


def _outside(name: str) -> KernelSyntaxError:
    return KernelSyntaxError(
        f"vyre.{name}() was called from Python; it has a meaning only inside a kernel",
        "Call it in the body of a function decorated with @vyre.kernel or @vyre.func, "
        "and launch the kernel with Driver.launch.")


def global_id(axis: int = 0) -> Any:
    """This invocation's index along ``axis`` of the launch (i32)."""
    raise _outside("global_id")


def local_id(axis: int = 0) -> Any:
    """This invocation's index within its workgroup along ``axis`` (i32)."""
    raise _outside("local_id")


def workgroup_id(axis: int = 0) -> Any:
    """This invocation's workgroup's index along ``axis`` (i32)."""
    raise _outside("workgroup_id")


def bitcast(value: Any, dtype: Any) -> Any:
    """``value``'s bits read as ``dtype``, a type of the same width (``vyre.bitcast(x,
    vyre.u32)``: an f32's bits; a NaN's are the canonical NaN's). Taichi's
    ``ti.bit_cast`` and WGSL's ``bitcast`` are the same operation."""
    raise _outside("bitcast")


def shared(dtype: Any, count: int) -> Any:
    """``count`` elements of workgroup memory, shared by a workgroup, zero at its start."""
    raise _outside("shared")


def barrier() -> None:
    """Wait for every invocation of the workgroup (in uniform control flow only)."""
    raise _outside("barrier")


def atomic_add(array: Any, index: Any, value: Any) -> Any:
    """``array[index] += value`` atomically; returns the old value."""
    raise _outside("atomic_add")


def atomic_sub(array: Any, index: Any, value: Any) -> Any:
    """``array[index] -= value`` atomically; returns the old value."""
    raise _outside("atomic_sub")


def atomic_min(array: Any, index: Any, value: Any) -> Any:
    """``array[index] = min(array[index], value)`` atomically; returns the old value."""
    raise _outside("atomic_min")


def atomic_max(array: Any, index: Any, value: Any) -> Any:
    """``array[index] = max(array[index], value)`` atomically; returns the old value."""
    raise _outside("atomic_max")


def atomic_and(array: Any, index: Any, value: Any) -> Any:
    """``array[index] &= value`` atomically; returns the old value."""
    raise _outside("atomic_and")


def atomic_or(array: Any, index: Any, value: Any) -> Any:
    """``array[index] |= value`` atomically; returns the old value."""
    raise _outside("atomic_or")


def atomic_xor(array: Any, index: Any, value: Any) -> Any:
    """``array[index] ^= value`` atomically; returns the old value."""
    raise _outside("atomic_xor")


def atomic_exchange(array: Any, index: Any, value: Any) -> Any:
    """``array[index] = value`` atomically; returns the old value."""
    raise _outside("atomic_exchange")


def atomic_compare_exchange(array: Any, index: Any, expected: Any, value: Any) -> Any:
    """``array[index] = value`` where it holds ``expected``, atomically; returns the old
    value (the write happened when it equals ``expected``)."""
    raise _outside("atomic_compare_exchange")


def subgroup_add(value: Any) -> Any:
    """The sum of ``value`` over this invocation's subgroup (integers: exact in any order)."""
    raise _outside("subgroup_add")


def subgroup_min(value: Any) -> Any:
    """The least ``value`` over the subgroup."""
    raise _outside("subgroup_min")


def subgroup_max(value: Any) -> Any:
    """The greatest ``value`` over the subgroup."""
    raise _outside("subgroup_max")


def subgroup_and(value: Any) -> Any:
    """The bitwise and of ``value`` over the subgroup."""
    raise _outside("subgroup_and")


def subgroup_or(value: Any) -> Any:
    """The bitwise or of ``value`` over the subgroup."""
    raise _outside("subgroup_or")


def subgroup_xor(value: Any) -> Any:
    """The bitwise xor of ``value`` over the subgroup."""
    raise _outside("subgroup_xor")


def subgroup_inclusive_add(value: Any) -> Any:
    """The sum of ``value`` over the lanes up to and including this one."""
    raise _outside("subgroup_inclusive_add")


def subgroup_exclusive_add(value: Any) -> Any:
    """The sum of ``value`` over the lanes before this one (0 in the first)."""
    raise _outside("subgroup_exclusive_add")


def subgroup_broadcast(value: Any, lane: Any) -> Any:
    """``value`` in lane ``lane`` (u32, the same in every invocation)."""
    raise _outside("subgroup_broadcast")


def subgroup_shuffle(value: Any, lane: Any) -> Any:
    """``value`` in the lane each invocation names (u32)."""
    raise _outside("subgroup_shuffle")


def subgroup_ballot(condition: Any) -> Any:
    """The lanes whose ``condition`` holds, as the bits of a u32."""
    raise _outside("subgroup_ballot")


def subgroup_elect() -> Any:
    """True in the subgroup's first lane."""
    raise _outside("subgroup_elect")


def workgroup_sum(value: Any) -> Any:
    """The sum of ``value`` over the workgroup, in every invocation, in the order
    docs/kernels.md writes down (``s = vyre.workgroup_sum(v)``, where every invocation
    of the workgroup runs)."""
    raise _outside("workgroup_sum")


def workgroup_min(value: Any) -> Any:
    """The least ``value`` of the workgroup (as ``min``), in every invocation."""
    raise _outside("workgroup_min")


def workgroup_max(value: Any) -> Any:
    """The greatest ``value`` of the workgroup (as ``max``), in every invocation."""
    raise _outside("workgroup_max")


def workgroup_inclusive_sum(value: Any) -> Any:
    """The sum of ``value`` over the invocations up to and including this one (by local
    index)."""
    raise _outside("workgroup_inclusive_sum")


def workgroup_exclusive_sum(value: Any) -> Any:
    """The sum of ``value`` over the invocations before this one (0 in the first)."""
    raise _outside("workgroup_exclusive_sum")


#: The atomics by the IR op each one is.
ATOMICS = {atomic_add: "add", atomic_sub: "sub", atomic_min: "min", atomic_max: "max",
           atomic_and: "and", atomic_or: "or", atomic_xor: "xor",
           atomic_exchange: "exchange", atomic_compare_exchange: "compare_exchange"}
#: The subgroup operations by the IR op each one is.
SUBGROUPS = {subgroup_add: "add", subgroup_min: "min", subgroup_max: "max",
             subgroup_and: "and", subgroup_or: "or", subgroup_xor: "xor",
             subgroup_inclusive_add: "inclusive_add", subgroup_exclusive_add: "exclusive_add",
             subgroup_broadcast: "broadcast", subgroup_shuffle: "shuffle",
             subgroup_ballot: "ballot", subgroup_elect: "elect"}
#: The workgroup reductions and scans by their name in ``kernels/workgroup.py``.
WORKGROUP_OPS = {workgroup_sum: "sum", workgroup_min: "min", workgroup_max: "max",
                 workgroup_inclusive_sum: "inclusive_sum",
                 workgroup_exclusive_sum: "exclusive_sum"}
IDS = {global_id: "global", local_id: "local", workgroup_id: "workgroup"}
