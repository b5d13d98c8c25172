"""Kernels written as Python functions (docs/kernels.md): ``@vyre.kernel`` lowers a
function's source to an ordinary ``Program`` once per signature; ``Driver.launch`` runs
it and fills the arrays it writes in place."""

from vyre_core.kernels.annotations import Array, Constant
from vyre_core.kernels.intrinsics import (
    atomic_add,
    atomic_and,
    atomic_compare_exchange,
    atomic_exchange,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_sub,
    atomic_xor,
    barrier,
    bitcast,
    global_id,
    local_id,
    shared,
    subgroup_add,
    subgroup_and,
    subgroup_ballot,
    subgroup_broadcast,
    subgroup_elect,
    subgroup_exclusive_add,
    subgroup_inclusive_add,
    subgroup_max,
    subgroup_min,
    subgroup_or,
    subgroup_shuffle,
    subgroup_xor,
    workgroup_exclusive_sum,
    workgroup_id,
    workgroup_inclusive_sum,
    workgroup_max,
    workgroup_min,
    workgroup_sum,
)
from vyre_core.kernels.kernel import KernelFunction, func, kernel

__all__ = ["Array", "Constant", "KernelFunction", "atomic_add", "atomic_and",
           "atomic_compare_exchange", "atomic_exchange", "atomic_max", "atomic_min",
           "atomic_or", "atomic_sub", "atomic_xor", "barrier", "bitcast", "func", "global_id",
           "kernel", "local_id", "shared", "subgroup_add", "subgroup_and",
           "subgroup_ballot", "subgroup_broadcast", "subgroup_elect",
           "subgroup_exclusive_add", "subgroup_inclusive_add", "subgroup_max",
           "subgroup_min", "subgroup_or", "subgroup_shuffle", "subgroup_xor",
           "workgroup_exclusive_sum", "workgroup_id", "workgroup_inclusive_sum",
           "workgroup_max", "workgroup_min", "workgroup_sum"]
