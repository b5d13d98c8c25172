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


#: The atomics by the IR op each one is.
ATOMICS = {atomic_add: "add", atomic_sub: "sub", atomic_min: "min", atomic_max: "max",
           atomic_and: "and", atomic_or: "or", atomic_xor: "xor",
           atomic_exchange: "exchange", atomic_compare_exchange: "compare_exchange"}
IDS = {global_id: "global", local_id: "local", workgroup_id: "workgroup"}
