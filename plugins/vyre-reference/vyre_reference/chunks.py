"""How a launch too large for one lockstep is cut: into chunks of whole workgroups, each a
contiguous range of linear workgroup numbers, run one after another over the same buffers
(the interpreter's docstring says why that is a legal execution)."""

from __future__ import annotations

from collections.abc import Iterator

#: The most invocations run in lockstep at once (one chunk of a launch): a chunk's
#: per-lane arrays (ids, masks, variables) take a few bytes per lane each.
MAX_LANES = 1 << 26
#: The most workgroup memory one chunk holds (its workgroups' buffers side by side).
MAX_WORKGROUP_MEMORY_BYTES = 1 << 30

Triple = tuple[int, int, int]


def chunks(grid: Triple, per_chunk: int) -> Iterator[tuple[Triple, Triple]]:
    """The launch's workgroups as boxes (first workgroup, workgroups per axis) of at most
    ``per_chunk`` workgroups, in ascending linear workgroup order: the whole grid, else
    whole z-slabs, else whole rows of one slab, else runs of one row. Each box is a
    contiguous range of linear workgroup numbers and, but for the last of the launch, of
    a slab or of a row, holds at least half of ``per_chunk`` workgroups."""
    gx, gy, gz = grid
    if gx * gy * gz <= per_chunk:
        yield (0, 0, 0), grid
    elif gx * gy <= per_chunk:
        step = per_chunk // (gx * gy)
        for z in range(0, gz, step):
            yield (0, 0, z), (gx, gy, min(step, gz - z))
    elif gx <= per_chunk:
        step = per_chunk // gx
        for z in range(gz):
            for y in range(0, gy, step):
                yield (0, y, z), (gx, min(step, gy - y), 1)
    else:
        for z in range(gz):
            for y in range(gy):
                for x in range(0, gx, per_chunk):
                    yield (x, y, z), (min(per_chunk, gx - x), 1, 1)
