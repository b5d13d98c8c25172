"""A backend's launch limits: each rule and its wording in one place.

Routing asks before a launch, from what a program declares (to pick a backend that
fits); a launch plan asks again with the grid and buffer sizes known at run time (to
refuse a launch before it reaches the device). Both get the same causes and fixes.
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


def grid_exceeded(grid: tuple[int, int, int], caps: Capabilities) -> list[Exceeded]:
    """Every grid axis over the backend's workgroup count. A backend may take more
    workgroups along x for a 1-D grid (it splits the launch) and says so with the device
    fact ``max_grid_x``."""
    per_axis = [caps.max_workgroups_per_dimension] * 3
    if grid[1] == grid[2] == 1:
        per_axis[0] = max(per_axis[0], int(caps.extra.get("max_grid_x", 0)))
    return [Exceeded(f"grid axis {axis} has {count} workgroups, the limit is {limit}",
                     "Spread the workgroups over more grid axes, or use larger workgroups.")
            for axis, count, limit in zip(_AXES, grid, per_axis, strict=True)
            if count > limit]


def buffer_exceeded(name: str, nbytes: int, caps: Capabilities) -> Exceeded | None:
    """A storage buffer over the backend's size limit; 0 means none was reported."""
    limit = caps.max_storage_buffer_bytes
    if 0 < limit < nbytes:
        return Exceeded(f"buffer {name!r} is {nbytes} bytes, the limit is {limit}",
                        "Split the data across several dispatches.")
    return None
