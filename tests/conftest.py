"""Suite-wide guards: no test may leave a child process behind, nor the FPU flushing
subnormals."""

from __future__ import annotations

import gc

import psutil
import pytest


def pytest_unconfigure(config: pytest.Config) -> None:
    import shutil

    for made in (_KERNEL_CACHE, _PROBE_CACHE, _BASETEMP):
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.pluginmanager.has_plugin("dsession"):
        return  # the xdist controller: its children are the test workers, each checks its own
    gc.unfreeze()  # (what the last module froze: a dropped driver in it is closed now)
    gc.collect()
    leftovers = psutil.Process().children(recursive=True)
    if not leftovers:
        return
    names = ", ".join(f"{p.pid} ({_cmdline(p)})" for p in leftovers)
    for proc in leftovers:
        proc.kill()
    psutil.wait_procs(leftovers, timeout=5)
    session.config.get_terminal_writer().line(
        f"ERROR: child processes survived the test session and were killed: {names}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


# (names, not literals: Python folds a product of two constants when it compiles)
_SMALLEST_DOUBLE = 5e-324
_ONE = 1.0


def _flushing_subnormals() -> bool:
    return _SMALLEST_DOUBLE * _ONE == 0.0


@pytest.fixture(autouse=True, scope="module")
def _earlier_objects_frozen():
    """What earlier modules left alive is moved out of the garbage collector's sight
    (``gc.freeze``) once a full collection has run, at the start of each module: a test
    worker's heap grows with every module it ran, and each full collection walked all of
    it (test_lifetimes' 50 ``gc.collect()`` calls took 136 s in a suite's worker, 24 s
    alone). Objects made from here on are collected as always; the next module's start
    collects everything again, so nothing unreachable outlives one module."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    yield


@pytest.fixture(autouse=True)
def _subnormals_kept():
    """Subnormals are kept (docs/semantics.md) and the reference backend computes in the
    test's own process: a shared library built with -ffast-math sets the thread's MXCSR
    to flush them when it is loaded, and every later test there reads wrong numbers. The
    test during which that happened fails here, and the FPU is set back for the next."""
    yield
    if _flushing_subnormals():
        import ctypes
        import ctypes.util

        libm = ctypes.CDLL(ctypes.util.find_library("m"))
        libm.fesetenv(ctypes.c_void_p(-1))  # glibc's FE_DFL_ENV
        pytest.fail("the FPU flushes subnormals to zero after this test (a library loaded "
                    "during it was built with -ffast-math?); it was set back to default")


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())[:80]
    except psutil.Error:
        return "?"


_KERNEL_CACHE: str | None = None
_PROBE_CACHE: str | None = None
_BASETEMP: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    """The cpu backend's compiled kernels and routing's probe cache go to directories of
    the session's own (workers and child processes inherit them), never the user's caches.
    Under ``make test-fast`` (``-m "fast and not processes"``) nothing may start a process:
    the fast tier stays fast and honest, a test that starts one there fails instead of
    slowing it; hypothesis's profile there is "fast-tier", for costly property tests to
    draw fewer examples. Every move of a supervision state is checked against the rules'
    tables (``states.CHECKING``): a move no row allows fails where it happens."""
    global _KERNEL_CACHE, _PROBE_CACHE, _BASETEMP
    import os
    import tempfile

    from vyre_core.supervisor.rules import states

    states.CHECKING = True

    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        # Tests start workers with VYRE_RUNTIME_DIR under tmp_path, and a unix socket path
        # has at most 107 bytes: pytest's own base (/tmp/pytest-of-root/pytest-N, then
        # popen-gwN/ under xdist) leaves too few. The run's own short base instead (xdist
        # workers are handed theirs under it).
        _BASETEMP = config.option.basetemp = tempfile.mkdtemp(prefix="vt", dir="/tmp")

    if "VYRE_CPU_CACHE_DIR" not in os.environ:
        _KERNEL_CACHE = os.environ["VYRE_CPU_CACHE_DIR"] = tempfile.mkdtemp(
            prefix="vyre-test-kernels-")
    if "VYRE_PROBE_CACHE" not in os.environ:
        _PROBE_CACHE = os.environ["VYRE_PROBE_CACHE"] = tempfile.mkdtemp(
            prefix="vyre-test-probes-")
    if config.getoption("markexpr", "").startswith("fast"):
        import subprocess

        from hypothesis import settings

        # (property tests that cost much draw fewer examples here, all of them in the full
        # suite: they read the profile's name)
        settings.register_profile("fast-tier", settings.get_profile("default"))
        settings.load_profile("fast-tier")

        def refuse(*args, **kwargs):
            raise AssertionError("a test of the fast tier started a process; mark its "
                                 "module otherwise or make it pure")

        subprocess.Popen.__init__ = refuse  # type: ignore[method-assign]
        os.fork = refuse  # type: ignore[assignment]
        os.posix_spawn = refuse  # type: ignore[assignment]
