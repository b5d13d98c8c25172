"""When and where the cpu backend compiles (issue 39, item 4): a kernel's first launch
compiles only the version it runs (serial or parallel), the other when a launch first
needs it, with the same bytes; a version numba cannot make leaves the other running;
and a sequence's kernels not compiled yet are compiled side by side in forked children
that fill the disk cache, where the worker then finds them."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import vyre_cpu.backend
from vyre_cpu import ahead, compiler, threads

from vyre_core.config import DispatchConfig
from vyre_core.errors import UnsupportedFeatureError
from vyre_core.testing import PATIENCE
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy
from vyre_reference import run
from vyre_workers.backend_host import BackendHost


class _Dispatcher:
    """A stand-in for a numba dispatcher: records its compiles, or fails them."""

    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.signatures: list[tuple] = []

    def compile(self, sig: tuple) -> None:
        if self.fails:
            raise TypeError("numba said no")
        self.signatures.append(sig)


class _Module:
    def __init__(self, kernel: _Dispatcher, kernel_serial: _Dispatcher | None) -> None:
        self.kernel = kernel
        if kernel_serial is not None:
            self.kernel_serial = kernel_serial


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty disk cache and nothing in memory, as a new worker on a new machine."""
    monkeypatch.setenv(compiler.ENV, str(tmp_path))
    monkeypatch.setattr(compiler, "_loaded", compiler.collections.OrderedDict())
    return tmp_path


@pytest.mark.fast
def test_the_first_version_compiled_is_the_one_the_first_launch_runs():
    sig = ("sig",)
    parallel, serial = _Dispatcher(), _Dispatcher()
    versions, made = compiler._compile_first(_Module(parallel, serial), sig, True)
    assert made is parallel and (parallel.signatures, serial.signatures) == ([sig], [])
    assert versions.parallel() is parallel and versions.serial is serial
    assert serial.signatures == [sig]  # (compiled when first asked for)
    parallel, serial = _Dispatcher(), _Dispatcher()
    versions, made = compiler._compile_first(_Module(parallel, serial), sig, False)
    assert made is serial and (parallel.signatures, serial.signatures) == ([], [sig])
    only = _Dispatcher()  # (workgroups in turn: no twin, whatever the launch)
    versions, made = compiler._compile_first(_Module(only, None), sig, True)
    assert made is only and versions.parallel() is None and versions.serial is only


@pytest.mark.fast
def test_a_parallel_version_numba_cannot_make_leaves_the_serial_one(caplog):
    parallel, serial = _Dispatcher(fails=True), _Dispatcher()
    with caplog.at_level(logging.WARNING, "vyre.cpu"):
        versions, made = compiler._compile_first(_Module(parallel, serial), ("s",), True)
    assert made is serial and versions.parallel() is None and versions.serial is serial
    assert "the parallel kernel did not compile" in caplog.text
    with pytest.raises(TypeError, match="numba said no"):  # (refused: no other to run)
        compiler._compile_first(_Module(_Dispatcher(fails=True), _Dispatcher(fails=True)),
                                ("s",), True)


@pytest.mark.fast
def test_the_other_version_is_compiled_at_its_first_need_and_stands_in_where_it_fails(
        caplog):
    layout = compiler.Layout((), (), 64, False)
    parallel, serial = _Dispatcher(), _Dispatcher()
    done = compiler.Compiled(compiler._Versions(serial, parallel, ("s",), parallel), 0.1,
                             False, layout)
    assert serial.signatures == []
    assert done.kernel is serial and serial.signatures == [("s",)]
    assert done.kernel is serial and serial.signatures == [("s",)]  # (once)
    parallel, serial = _Dispatcher(), _Dispatcher(fails=True)
    done = compiler.Compiled(compiler._Versions(serial, parallel, ("s",), parallel), 0.1,
                             False, layout)
    with caplog.at_level(logging.WARNING, "vyre.cpu"):
        assert done.kernel is parallel  # (the same bytes, on threads)
    assert "the serial kernel did not compile" in caplog.text


@pytest.mark.fast
def test_a_fallback_is_compiled_at_its_first_need_and_refused_if_numba_cannot(caplog):
    """Fails on main before this commit (a proven kernel's fallback was compiled with it,
    in its one function)."""
    layout = compiler.Layout((), (), 64, False)
    main = compiler._Versions(_Dispatcher(), None, ("s",))
    parallel, serial = _Dispatcher(), _Dispatcher()
    done = compiler.Compiled(main, 0.1, False, layout,
                             compiler._Versions(serial, parallel, ("s",)))
    assert (parallel.signatures, serial.signatures) == ([], [])
    assert done.fallback(False) is serial and parallel.signatures == []
    assert done.fallback(True) is parallel and parallel.signatures == [("s",)]
    parallel, serial = _Dispatcher(fails=True), _Dispatcher()
    done = compiler.Compiled(main, 0.1, False, layout,
                             compiler._Versions(serial, parallel, ("s",)))
    with caplog.at_level(logging.WARNING, "vyre.cpu"):
        assert done.fallback(True) is serial  # (the same bytes, on this thread)
    only = _Dispatcher(fails=True)
    only.__name__ = "fallback"
    done = compiler.Compiled(main, 0.1, False, layout, compiler._Versions(only, None, ("s",)))
    with pytest.raises(UnsupportedFeatureError, match="could not compile a kernel's fallback"):
        done.fallback(False)


def test_a_large_first_launch_compiles_the_parallel_kernel_alone_and_a_small_one_the_serial(
        fresh, monkeypatch):
    """Fails on main before this commit (every first compile made the serial kernel, and a
    large launch the parallel one beside it)."""
    monkeypatch.setattr(threads, "PARALLEL_WORK", 1024)
    monkeypatch.setattr(vyre_cpu.backend, "_threads", lambda: 2)
    program, data = saxpy(1 << 14, 64, bias=0.75), saxpy_inputs(1 << 14, 3)
    big = DispatchConfig(grid_override=(256, 1, 1))
    pipeline = vyre_cpu.backend.Pipeline(program, big)
    assert pipeline.compiled._main._serial.signatures == []  # (the serial kernel: not yet)
    assert pipeline.compiled.parallel().signatures != []
    got, = pipeline.dispatch(data, big)
    assert got.tobytes() == run(program, data)[0].tobytes()
    assert pipeline.compiled._main._serial.signatures == []
    small = DispatchConfig(grid_override=(1, 1, 1))
    got, = vyre_cpu.backend.Pipeline(program, small).dispatch(data, small)
    assert pipeline.compiled._main._serial.signatures != []
    assert got.tobytes() == run(program, data, grid=(1, 1, 1))[0].tobytes()


def test_a_proven_kernels_fallback_is_compiled_only_when_a_launch_needs_it(fresh):
    """The tiled matmul (checked per workgroup): where the tiles cover the matrices, a
    launch compiles and runs the proven kernel alone; at a ragged edge, the checked
    version is compiled then and runs the workgroups the proven one left; the bytes are
    the reference's either way. Fails on main before this commit (both versions were one
    function, compiled together). tests/test_cpu_proven.py: a check per dispatch."""
    import importlib

    build = importlib.import_module("vyre_examples.matmul").build
    host = BackendHost(vyre_cpu.backend)
    for shape, needed in (((64, 48, 32), False), ((50, 32, 48), True)):
        example = build(*shape)
        plan = host.plan(example.program, example.inputs, example.config)
        config = DispatchConfig(grid_override=plan.grid)
        pipeline = vyre_cpu.backend.Pipeline(plan.program, config)
        got, = pipeline.dispatch(plan.inputs, config)
        assert got.tobytes() == run(plan.program, plan.inputs, grid=plan.grid)[0].tobytes()
        assert bool(pipeline.compiled._fallback._serial.signatures) is needed, shape


@pytest.mark.fast
def test_a_sequences_kernels_are_shared_out_once_each_and_only_where_it_pays():
    a, b, c = saxpy(64, bias=1.0), saxpy(64, bias=2.0), saxpy(64, bias=3.0)
    grid = (1, 1, 1)
    steps = [(a, grid), (b, (2, 1, 1)), (a, (3, 1, 1)), (c, grid)]
    todo = ahead.pending(steps, lambda p: False)
    assert todo == [(a, grid), (b, (2, 1, 1)), (c, grid)]  # (each once, its first grid)
    assert ahead.pending(steps, lambda p: p is not c) == [(c, grid)]
    assert ahead.shares(todo, 2) == [[(a, grid), (c, grid)], [(b, (2, 1, 1))]]
    assert ahead.shares(todo, 8) == [[(a, grid)], [(b, (2, 1, 1))], [(c, grid)]]
    assert ahead.shares(todo[:1], 2) == []  # (one kernel: no fork)
    assert ahead.shares(todo, 1) == []      # (one process)


def test_a_child_still_at_work_when_the_wait_ends_is_stopped():
    """The worker waits for its children until the deadline it sets (twice its own share,
    at least WAIT_FLOOR), then stops the rest: a hung child costs that wait, no more."""
    assert ahead.patience(0.1) == ahead.WAIT_FLOOR
    assert ahead.patience(4.0) == 8.0
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    began = time.monotonic()
    ahead._reap([child.pid], began + 0.3)
    assert time.monotonic() - began < PATIENCE
    with pytest.raises(ChildProcessError):  # (stopped and reaped: nothing left to wait for)
        os.waitpid(child.pid, os.WNOHANG)
    child.returncode = -9  # (reaped above: Popen must not wait for it again)


@pytest.mark.fast
def test_children_compile_only_on_cores_the_load_leaves_idle():
    assert ahead.side_by_side(2, 0.0) == 2
    assert ahead.side_by_side(2, 1.0) == 2  # (this process's own compile)
    assert ahead.side_by_side(2, 1.5) == 1  # (no core idle: no child)
    assert ahead.side_by_side(2, 3.9) == 1
    assert ahead.side_by_side(8, 5.2) == 3
    assert ahead.side_by_side(1, 0.0) == 1


def test_kernels_compiled_ahead_in_children_are_loaded_from_the_disk_cache(fresh,
                                                                           monkeypatch):
    """Fails on main before this commit (no vyre_cpu.ahead)."""
    monkeypatch.delitem(ahead.sys.modules, "ray", raising=False)  # (not a Ray actor)
    programs = [saxpy(256, bias=b) for b in (0.375, 0.625, 0.875)]
    grid = (1, 1, 1)
    assert ahead.compile_ahead([(p, grid) for p in programs], 2, load=0.0) == 1
    assert all(compiler.on_hand(p) for p in programs)
    held = set(compiler._loaded)
    assert held == {programs[0].fingerprint(), programs[2].fingerprint()}  # (its share)
    child = compiler.compiled(programs[1], grid)
    assert child.cached  # (left on disk by the child)
    data = saxpy_inputs(256, 5)
    got, = vyre_cpu.backend.Pipeline(programs[1], DispatchConfig()).dispatch(
        data, DispatchConfig(grid_override=grid))
    assert got.tobytes() == run(programs[1], data)[0].tobytes()
    assert ahead.compile_ahead([(p, grid) for p in programs], 2, load=0.0) == 0  # (on hand)
    assert ahead.compile_ahead([(saxpy(256, bias=b), grid) for b in (0.25, 0.5)], 2,
                               load=1.5) == 0  # (no core idle)


def test_a_sequence_run_cold_gives_the_reference_bytes_and_is_looked_at_once(
        fresh, monkeypatch):
    from vyre_examples import jacobi

    example = jacobi.build()
    monkeypatch.setattr(ahead, "_seen", set())
    looked = []
    real = ahead.compile_ahead
    monkeypatch.setattr(ahead, "compile_ahead",
                        lambda launches, n: looked.append(n) or real(launches, n))
    host = BackendHost(vyre_cpu.backend)
    host.prepare()
    try:
        assert example.mismatch(example.run_in(host)) is None
        assert all(compiler.on_hand(p) for p, _ in example.program.programs())
        assert example.mismatch(example.run_in(host)) is None
        assert len(looked) == 1  # (its second run: nothing to look at)
    finally:
        host.shutdown()


@pytest.mark.fast
@pytest.mark.parametrize("module", ["blocks.py", "lockstep_proven.py", "ranges.py",
                                    "codegen.py", "expressions.py", "writing.py",
                                    "runtime/floats.py", "runtime/__init__.py"])
def test_a_change_to_any_module_that_writes_kernels_changes_their_cache_name(
        tmp_path, monkeypatch, module):
    """Fails on main before this commit for blocks.py, lockstep_proven.py and ranges.py
    (only codegen.py and runtime.py were hashed: a kernel written by an older blocks.py
    was loaded from the disk cache)."""
    package = Path(compiler.__file__).parent
    for source in package.rglob("*.py"):
        (tmp_path / source.relative_to(package)).parent.mkdir(exist_ok=True)
        (tmp_path / source.relative_to(package)).write_bytes(source.read_bytes())
    monkeypatch.setattr(compiler, "__file__", str(tmp_path / "compiler.py"))
    compiler.generator_digest.cache_clear()
    before = compiler.generator_digest()
    with open(tmp_path / module, "a") as f:
        f.write("\n# changed\n")
    compiler.generator_digest.cache_clear()
    try:
        assert compiler.generator_digest() != before
    finally:
        monkeypatch.undo()
        compiler.generator_digest.cache_clear()
