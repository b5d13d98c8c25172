"""A worker keeps the memory a call frees for the next call (``vyre_workers.__main__``'s
``keep_freed_memory``): with glibc's own thresholds a 512 x 512 ``lib.matmul`` gave its
megabytes back to the kernel after each call and faulted them in again on the next, 480
page faults a call in the worker."""

from __future__ import annotations

import numpy as np
import pytest

from vyre_core import Driver, lib

SIDE = 512  # (f32: 1 MiB a matrix, past glibc's default mmap threshold of 128 KiB)
CALLS = 10


def _minor_faults(pid: int) -> int:
    """Minor page faults of ``pid`` so far (/proc/PID/stat's tenth field)."""
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[7])


@pytest.mark.processes
def test_a_worker_maps_the_memory_of_a_repeated_call_once_not_on_every_call():
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-8, 8, (SIDE, SIDE)).astype(np.float32) for _ in range(2))
    with Driver() as drv:
        for _ in range(3):  # (compiled, and its memory taken, before counting)
            got = lib.matmul(drv, a, b, backend="cpu")
        assert got.tobytes() == (a @ b).tobytes()  # (small integers: every order exact)
        pid, = (w["pid"] for w in drv.status()["pools"]["cpu"]["workers"])
        before = _minor_faults(pid)
        for _ in range(CALLS):
            lib.matmul(drv, a, b, backend="cpu")
        per_call = (_minor_faults(pid) - before) / CALLS
    # (mapping one of its 1 MiB arrays afresh takes 256 faults)
    assert per_call < 64, f"{per_call} page faults a call in the worker"
