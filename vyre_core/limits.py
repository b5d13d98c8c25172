"""A backend's launch limits: each rule and its wording in one place.

Routing asks before a launch, from what a program declares and, for a dispatch, from its
launch (grid and buffer sizes), to pick a backend that fits; a launch plan asks again in
the worker (to refuse a launch before it reaches the device). Both get the same causes
and fixes.
"""

from __future__ import annotations

from dataclasses import dataclass

from vyre_core.contract.types import Capabilities

_AXES = "xyz"


@dataclass(frozen=True)
class Exceeded:
    """One limit a launch goes over: ``cause`` names the value and the limit."""

    cause: str
    fix: str


def workgroup_exceeded(workgroup: tuple[int, int, int], memory_bytes: int,
                       uses_memory: bool, caps: Capabilities) -> list[Exceeded]:
    """Every workgroup limit of ``caps`` a workgroup shape and its shared memory exceed.
    ``uses_memory``: the program declares workgroup memory (a backend with none refuses
    it even when its size is only known at run time)."""
    found = [Exceeded(f"workgroup axis {axis} is {size}, the limit is {limit}",
                      f"Use a workgroup of at most {limit} along {axis}.")
             for axis, size, limit in zip(_AXES, workgroup, caps.max_workgroup_size,
                                          strict=True) if size > limit]
    invocations = workgroup[0] * workgroup[1] * workgroup[2]
    if invocations > caps.max_invocations_per_workgroup:
        found.append(Exceeded(f"workgroup {tuple(workgroup)} has {invocations} invocations, "
                              f"the limit is {caps.max_invocations_per_workgroup}",
                              "Use a smaller workgroup."))
    limit = caps.max_workgroup_memory_bytes
    if (uses_memory or memory_bytes) and limit == 0:
        found.append(Exceeded(f"workgroup memory is {memory_bytes} bytes, the limit is 0 (the "
                              "backend has no workgroup memory)",
                              "Run it on a backend with workgroup memory, or use none."))
    elif memory_bytes > limit:
        found.append(Exceeded(f"workgroup memory is {memory_bytes} bytes, the limit is "
                              f"{limit}", "Use less workgroup memory, or a backend with more."))
    return found


#: Global ids are u32: one axis of a launch covers at most this many invocations.
MAX_AXIS_INVOCATIONS = 2**32
#: ``max_workgroups_per_dimension`` of a backend with no per-axis grid limit (the cpu
#: backends): as many workgroups as a u32 axis can hold invocations (workgroups of one).
#: The hook returns an int; this one means "no limit".
NO_GRID_LIMIT = MAX_AXIS_INVOCATIONS


def index_exceeded(grid: tuple[int, int, int],
                   workgroup: tuple[int, int, int]) -> list[Exceeded]:
    """Every axis whose invocations (workgroups x workgroup size) do not fit a u32 global
    id: no backend can run such a launch."""
    return [Exceeded(f"grid axis {axis} covers {count} x {size} = {count * size} "
                     f"invocations, more than the {MAX_AXIS_INVOCATIONS} a u32 global id "
                     "can number",
                     f"Launch at most {MAX_AXIS_INVOCATIONS} invocations along {axis} "
                     "(dim, or grid x workgroup), and split the rest across several "
                     "dispatches or another axis.")
            for axis, count, size in zip(_AXES, grid, workgroup, strict=True)
            if count * size > MAX_AXIS_INVOCATIONS]


def grid_exceeded(grid: tuple[int, int, int], caps: Capabilities) -> list[Exceeded]:
    """Every grid limit of ``caps`` a grid goes over. A backend that folds a grid over
    its per-axis limit (wgpu) says how many workgroups it folds in all with the device
    fact ``max_grid_workgroups``: a grid past the per-axis limit must have no more."""
    found = []
    folds = caps.extra.get("max_grid_workgroups")
    total = grid[0] * grid[1] * grid[2]
    if isinstance(folds, int) and not isinstance(folds, bool):
        if max(grid) > caps.max_workgroups_per_dimension and total > folds:
            found.append(Exceeded(
                f"grid {tuple(grid)} has {total} workgroups, the most this backend runs "
                f"in one launch is {folds}",
                "Use larger workgroups (fewer of them), or split the work across several "
                "dispatches."))
    else:
        limit = caps.max_workgroups_per_dimension
        found += [Exceeded(f"grid axis {axis} has {count} workgroups, the limit is {limit}",
                           f"Use larger workgroups (at most {limit} along {axis}), or let "
                           "routing pick a backend without this limit (omit backend=).")
                  for axis, count in zip(_AXES, grid, strict=True) if count > limit]
    return found


def buffer_exceeded(name: str, nbytes: int, caps: Capabilities) -> Exceeded | None:
    """A storage buffer over the backend's size limit; 0 means none was reported."""
    limit = caps.max_storage_buffer_bytes
    if 0 < limit < nbytes:
        return Exceeded(f"buffer {name!r} is {nbytes} bytes, the limit is {limit}",
                        "Split the data across several dispatches.")
    return None
