"""Drivers dropped without ``close()``, as a notebook drops them: each is closed anyway (its
fork server and workers stopped, its run directory removed, no descriptor kept) by the
reaper thread, with a ResourceWarning naming the line that made it (``lifetime.py``)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
import weakref
from pathlib import Path

import psutil
import pytest
from waiting import PATIENCE, wait_for

import vyre_core
from vyre_examples.saxpy import inputs, program

pytestmark = [pytest.mark.processes, pytest.mark.slow]

#: Drivers made and dropped per test: a leak of one descriptor or process per drop shows
#: as 20 of them.
DROPS = 20
PROGRAM, INPUTS = program(1000), inputs(1000)
EXPECTED = (INPUTS[2][0] * INPUTS[0] + INPUTS[1]).tobytes()


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _run_dirs(runtime: Path) -> list[Path]:
    return [p for p in runtime.glob("vyre-*/*") if p.is_dir()]


@pytest.fixture
def runtime(tmp_path, monkeypatch) -> Path:
    """A run-directory base of the test's own, and this process's descriptors counted once
    a first driver has come and gone (what the first one leaves for good, it leaves once)."""
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp_path))
    with vyre_core.Driver() as drv:
        drv.dispatch(PROGRAM, INPUTS, backend="reference")
    return tmp_path


def _nothing_left(runtime: Path, fds: int) -> None:
    """Poll until no child process, run directory or extra descriptor is left (up to 20
    drivers closing in the reaper at once: on a loaded machine that takes more than one
    driver's patience, 13 s of the whole test quiet became over 120 s with a CPU-bound
    process on each core)."""
    wait_for(lambda: not psutil.Process().children(recursive=True) and not _run_dirs(runtime)
             and _fds() <= fds, 4 * PATIENCE, "every dropped driver's processes, run "
             "directory and descriptors to go")


def _made_here(caught: list[warnings.WarningMessage], line: int) -> None:
    drops = [w for w in caught if issubclass(w.category, ResourceWarning)
             and "vyre Driver" in str(w.message)]
    assert len(drops) == DROPS, [str(w.message) for w in caught]
    for w in drops:
        assert (w.filename, w.lineno) == (__file__, line)
        assert f"{__file__}:{line}" in str(w.message) and "Fix:" in str(w.message)


@pytest.mark.timeout(480)  # (20 drivers made and dropped: see _nothing_left)
def test_a_driver_made_in_a_function_and_dropped_is_closed(runtime) -> None:
    """A function that makes a driver, dispatches and returns, called 20 times, each drop
    collected by gc.collect(). Fails before the finalizer: 2 processes per call stayed."""
    fds = _fds()

    def cell() -> weakref.ref:
        drv = vyre_core.Driver()  # (made in a function)
        assert drv.dispatch(PROGRAM, INPUTS, backend="reference")[0].tobytes() == EXPECTED
        return weakref.ref(drv)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(DROPS):
            dropped = cell()
            gc.collect()
            assert dropped() is None, "a dropped driver is still referenced"
    _made_here(caught, _line_of("# (made in a function)"))
    _nothing_left(runtime, fds)


@pytest.mark.timeout(480)  # (20 drivers made and dropped: see _nothing_left)
def test_a_rerun_cell_rebinding_a_global_leaves_nothing(runtime) -> None:
    """A notebook cell ``drv = vyre.Driver()`` re-run 20 times, the garbage collector off:
    each driver goes when its last reference does (nothing keeps it in a cycle)."""
    global drv
    fds = _fds()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(DROPS):
                drv = vyre_core.Driver()  # (the cell)
                assert drv.dispatch(PROGRAM, INPUTS, backend="reference")[0].tobytes() \
                    == EXPECTED
            del drv
    finally:
        if was_enabled:
            gc.enable()
    _made_here(caught, _line_of("# (the cell)"))
    _nothing_left(runtime, fds)


def test_a_driver_dropped_while_its_pool_is_locked_does_not_deadlock(runtime,
                                                                   vyre_stalls) -> None:
    """The finalizer may run in a thread holding one of the driver's own locks (a garbage
    collection inside a locked section): it only hands the closing to the reaper, which
    waits for the lock like any caller of close()."""
    fds = _fds()
    drv = vyre_core.Driver()
    drv.dispatch(PROGRAM, INPUTS, backend="reference")
    pool = drv.pools.existing("reference")
    dropped = weakref.ref(drv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pool._lock:  # (the I/O thread's machine lock: close() needs it)
            start = time.monotonic()
            del drv
            assert dropped() is None
            assert time.monotonic() - start < 1.0 + vyre_stalls.since(start), vyre_stalls
            assert pool.running  # closed later, by the reaper, once the lock is free
        del pool
    assert [w.category for w in caught] == [ResourceWarning]
    _nothing_left(runtime, fds)


def test_handles_keep_their_driver_and_its_workers(runtime) -> None:
    """A pipeline or a resident buffer of a driver nobody else holds still works: it keeps
    the driver; the driver is closed (and warned about) once they are dropped too."""
    fds = _fds()
    dropped: list[weakref.ref] = []

    def handles() -> tuple:
        drv = vyre_core.Driver()
        dropped.append(weakref.ref(drv))
        return (drv.compile(PROGRAM, backend="reference"),
                drv.allocate_resident(64, backend="reference"))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipeline, buffer = handles()
        gc.collect()
        assert pipeline.dispatch(INPUTS)[0].tobytes() == EXPECTED
        buffer.upload(bytes(range(64)))
        assert buffer.download() == bytes(range(64))
        assert dropped[0]() is not None and caught == []
        del pipeline, buffer
        gc.collect()
        assert dropped[0]() is None
    assert [w.category for w in caught] == [ResourceWarning]
    _nothing_left(runtime, fds)


def test_a_closed_driver_is_dropped_silently(runtime) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        drv = vyre_core.Driver()
        drv.dispatch(PROGRAM, INPUTS, backend="reference")
        drv.close()
        del drv
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    wait_for(lambda: not [t for t in threading.enumerate() if t.name.startswith("vyre-pool")],
             what="the closed pool's thread to end")


SCRIPT = """
    import gc, vyre_core
    from vyre_examples.saxpy import inputs, program
    def cell():
        drv = vyre_core.Driver()
        drv.dispatch(program(1000), inputs(1000), backend="reference")
    cell()
    gc.collect()
"""


def test_python_w_always_shows_the_warning_at_the_line_that_made_the_driver(
        tmp_path) -> None:
    """As for asyncio's and subprocess's: shown under ``-W always``, ignored by default."""
    script = tmp_path / "cell.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = dict(os.environ, VYRE_RUNTIME_DIR=str(tmp_path))
    shown = subprocess.run([sys.executable, "-W", "always", str(script)], env=env,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert (f"{script}:5: ResourceWarning: a vyre Driver made at {script}:5 was "
            "garbage-collected without close()") in shown.stderr, shown.stderr[-2000:]
    assert "drv = vyre_core.Driver()" in shown.stderr  # (the line itself, as Python shows)
    quiet = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                           text=True, timeout=60)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr[-2000:]
    assert _run_dirs(tmp_path) == []


def _line_of(marker: str) -> int:
    """The line of this file that ends with ``marker``."""
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.endswith(marker))
