"""The memory this process may use: a budget, never a hope.

In a memory cgroup, memory taken past the limit is not refused: the kernel's OOM killer
kills a process of the group, most often the caller (its resident memory includes the
shared segments it maps). So the data plane asks, before it allocates a segment, what
the budget allows (``plan``, a pure rule over ``MemoryFacts``); the facts are read here
(``read_facts``: the cgroup's limit and working set, ``RLIMIT_AS``, ``MemAvailable``),
the one place that reads them. ``OomCounter`` tells the supervisor whether a worker's
SIGKILL was the OOM killer's (the cgroup's ``oom_kill`` counter).
"""

from __future__ import annotations

import enum
import os
import resource
from dataclasses import dataclass
from pathlib import Path

MiB = 1 << 20
#: Memory left unplanned for everything else (the workers' own memory, Python, the
#: kernel's page tables): at least this much, or an eighth of the limit when more.
RESERVE = 64 * MiB
#: Of the memory the budget allows, at most this share is kept in free segments for reuse.
CACHE_SHARE = 4


@dataclass(frozen=True)
class MemoryFacts:
    """What the budget knows, in bytes; None: no such limit. ``room``: the memory the
    tightest memory cgroup of this process (it or an ancestor) has left, its limit
    minus its working set (usage less inactive page cache, which the kernel reclaims);
    ``limit``: that group's limit; ``available``: the system's MemAvailable;
    ``address_space``: what RLIMIT_AS leaves this process to map."""

    room: int | None = None
    limit: int | None = None
    available: int | None = None
    address_space: int | None = None

    def headroom(self) -> int | None:
        """What may still be allocated without risking the OOM killer (the reserve kept
        out); None: unbounded."""
        known = [v for v in (self.room, self.available) if v is not None]
        if not known:
            return None
        reserve = max(RESERVE, (self.limit or 0) // 8)
        return min(known) - reserve


class Plan(enum.Enum):
    """What the data plane does with an array of some size, given the budget."""

    SHARE = "share"      # make a segment for it
    RELEASE = "release"  # close the cached free segments first, then make it
    SOCKET = "socket"    # ride the lane (an input this process already holds)
    REFUSE = "refuse"    # nothing fits: a clear error now, before anything is allocated


def plan(facts: MemoryFacts, need: int, cached: int, held: bool) -> Plan:
    """Whether a new ``need``-byte segment fits the budget, with ``cached`` bytes in free
    segments that could be closed. ``held``: the data already lives in this process (an
    input), so riding the lane costs it nothing more (the worker receives it); an output
    costs this process its size however it travels. A segment is also mapped here to be
    read (an output) or written (a small input), so it must fit the address space."""
    if facts.address_space is not None and need > facts.address_space and not held:
        return Plan.REFUSE
    headroom = facts.headroom()
    if headroom is None or need <= headroom:
        return Plan.SHARE
    if need <= headroom + cached:
        return Plan.RELEASE
    return Plan.SOCKET if held else Plan.REFUSE


def cache_bound(facts: MemoryFacts) -> int | None:
    """The most bytes free segments may hold under this budget (None: no bound beyond
    the data plane's own): a share of the memory the cgroup allows."""
    if facts.limit is None:
        return None
    return max(0, facts.limit - max(RESERVE, facts.limit // 8)) // CACHE_SHARE


def describe(facts: MemoryFacts) -> str:
    """The budget in words, for error messages."""
    parts = []
    if facts.limit is not None and facts.room is not None:
        parts.append(f"its memory cgroup allows {facts.limit // MiB} MiB and has "
                     f"{max(0, facts.room) // MiB} MiB left")
    if facts.available is not None:
        parts.append(f"the system has {facts.available // MiB} MiB available")
    if facts.address_space is not None:
        parts.append(f"RLIMIT_AS leaves {max(0, facts.address_space) // MiB} MiB of address "
                     "space")
    return "; ".join(parts) or "no memory limit is known"


# -- reading the facts (the only I/O of this module) ---------------------------------------

_UNLIMITED = 1 << 60  # a v1 "no limit" is 2**63 rounded down to a page


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except (OSError, ValueError):
        return None
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value >= _UNLIMITED else value


def _stat(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _memory_mount() -> tuple[Path, str, bool] | None:
    """Where the memory controller is mounted: (mount point, its root, whether v2); v1
    first (a hybrid machine's v2 hierarchy then has no memory controller)."""
    found = None
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields, _, tail = line.partition(" - ")
        parts, extra = fields.split(), tail.split()
        if len(parts) < 5 or len(extra) < 3:
            continue
        if extra[0] == "cgroup" and "memory" in extra[2].split(","):
            return Path(parts[4]), parts[3], False
        if extra[0] == "cgroup2" and found is None:
            found = (Path(parts[4]), parts[3], True)
    return found


def memory_cgroup(pid: int | str = "self") -> tuple[Path, bool] | None:
    """The directory of ``pid``'s memory cgroup, and whether it is v2; None when there
    is no memory controller (or it cannot be read)."""
    mount = _memory_mount()
    if mount is None:
        return None
    point, root, v2 = mount
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (v2 and controllers == "") or (not v2 and "memory" in controllers.split(",")):
            relative = os.path.relpath(path, root) if path.startswith(root) else path
            directory = (point / relative.lstrip("/")).resolve()
            if v2 and not (directory / "memory.current").exists() and directory != point:
                return None
            return directory, v2
    return None


def _cgroup_room(group: tuple[Path, bool]) -> tuple[int | None, int | None]:
    """(room, limit) of the tightest group from ``group`` up to its hierarchy's root."""
    directory, v2 = group
    names = (("memory.max", "memory.current", "inactive_file") if v2 else
             ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"))
    best: tuple[int | None, int | None] = (None, None)
    for level in (directory, *directory.parents):
        if not (level / names[1]).exists():
            break
        limit = _read_int(level / names[0])
        used = _read_int(level / names[1])
        if limit is not None and used is not None:
            room = limit - max(0, used - _stat(level / "memory.stat", names[2]))
            if best[0] is None or room < best[0]:
                best = (room, limit)
    return best


def _available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _address_space() -> int | None:
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm") as statm:
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None
    return soft - size


def read_facts(group: tuple[Path, bool] | None) -> MemoryFacts:
    """The budget's facts now, for this process in memory cgroup ``group``
    (``memory_cgroup()``, looked up once by the caller)."""
    room, limit = _cgroup_room(group) if group is not None else (None, None)
    return MemoryFacts(room, limit, _available(), _address_space())


class OomCounter:
    """The OOM kills counted in one process's memory cgroup (v1 ``memory.oom_control``,
    v2 ``memory.events``): ``new_kills()`` says whether any happened since it last
    looked. Looked up when the process starts: after its death its cgroup is unknown."""

    def __init__(self, pid: int) -> None:
        group = memory_cgroup(pid)
        self._path = None if group is None else group[0] / (
            "memory.events" if group[1] else "memory.oom_control")
        self._seen = self._count()

    def _count(self) -> int:
        return 0 if self._path is None else _stat(self._path, "oom_kill")

    def new_kills(self) -> bool:
        count = self._count()
        killed, self._seen = count > self._seen, count
        return killed
