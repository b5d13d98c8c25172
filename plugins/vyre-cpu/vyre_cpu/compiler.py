"""Generated kernels compiled once with numba and kept on disk: the source is written to
the cache directory under the program's pipeline-cache key, and numba's own cache sits
beside it, so a second process (a restarted worker, the next run) loads the machine code
instead of compiling again. A kernel numba cannot compile is refused with its reason;
a cache directory that cannot be written (read-only, full) costs a compile per process,
never a failure."""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib.util
import logging
import math
import os
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import blake3
import numba
import numpy as np
from numba import types

from vyre_core.config import DispatchConfig
from vyre_core.errors import UnsupportedFeatureError
from vyre_core.ir import Access, Program
from vyre_core.ir.nodes import Barrier, Loop, While, walk
from vyre_core.mathlib.library import version as math_library_version
from vyre_core.pipeline import pipeline_cache_key
from vyre_cpu import __version__, mathlib, threads, vectors
from vyre_cpu.codegen import Kernel, generate
from vyre_cpu.math_helpers import source as math_helpers_source

ENV = "VYRE_CPU_CACHE_DIR"
if not {"NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY"} & set(os.environ):
    numba.config.THREADING_LAYER_PRIORITY = list(threads.LAYERS)  # (why: threads.py)
vectors.widen()  # (before this process compiles or loads a kernel: why in vectors.py)
_log = logging.getLogger("vyre.cpu")
_lock = threading.Lock()
#: Kernels this process holds, by program fingerprint (a cached property: a sequence's
#: thousands of steps look theirs up without hashing anything), least recently used first.
_loaded: collections.OrderedDict[str, Compiled] = collections.OrderedDict()
HELD = 256
#: Kernels found (in memory or numba's cache on disk), and compiled, by this process.
_counts = {"hits": 0, "misses": 0}


@dataclass(frozen=True)
class Layout:
    """How a dispatch binds a program's kernel, worked out once per program (the warm
    path of a launch only follows it): per storage buffer, in the kernel's order, its
    access, its position among the inputs and among the outputs (-1: not one), its
    storage dtype and declared count; the buffer of each output; the lanes of a
    workgroup; and whether the program loops or runs in lockstep (what a launch weighs,
    ``threads.parallel_worth``)."""

    buffers: tuple[tuple[Access, int, int, np.dtype, int | None], ...]
    outputs: tuple[int, ...]
    lanes: int
    loops: bool


def layout_of(program: Program) -> Layout:
    storage = [b for b in program.buffers if b.access is not Access.WORKGROUP]
    inputs = [b.name for b in program.inputs]
    outputs = [b.name for b in program.outputs]
    position = {b.name: i for i, b in enumerate(storage)}
    loops = len(storage) < len(program.buffers) or any(
        isinstance(n, Loop | While | Barrier) for n in walk(program.body))
    return Layout(tuple((b.access, inputs.index(b.name) if b.name in inputs else -1,
                         outputs.index(b.name) if b.name in outputs else -1,
                         np.dtype(b.dtype.storage_np), b.count) for b in storage),
                  tuple(position[name] for name in outputs), math.prod(program.workgroup),
                  loops)


class _Versions:
    """One function of a kernel's module, on the calling thread (``serial``) and over
    numba's threads (``parallel``; None where its workgroups must run in turn), each
    compiled (or loaded from the disk cache) when first needed; where numba cannot make
    one, the other runs instead (the same bytes), with a warning. ``made``: the one
    compiled already."""

    def __init__(self, serial: Any, parallel: Any, signature: tuple[Any, ...],
                 made: Any = None) -> None:
        self._serial, self._parallel, self._signature = serial, parallel, signature
        self._serial_ready = made is not None and made is serial
        self._parallel_ready = parallel is None or made is parallel

    @property
    def serial(self) -> Any:
        if not self._serial_ready:
            with _lock:
                if not self._serial_ready:
                    if self._parallel is None:  # (nothing to stand in: refused)
                        _compile_or_refuse(self._serial, self._signature)
                    elif not _compiled_or_warned(self._serial, self._signature, "serial"):
                        self._serial = self._parallel_locked()
                    self._serial_ready = True
        return self._serial

    def parallel(self) -> Any:
        if not self._parallel_ready:
            with _lock:
                return self._parallel_locked()
        return self._parallel

    def _parallel_locked(self) -> Any:
        if not self._parallel_ready:
            if not _compiled_or_warned(self._parallel, self._signature, "parallel"):
                self._parallel = None
            self._parallel_ready = True
        return self._parallel


class Compiled:
    """A kernel ready to run: ``kernel`` (``kernel(gx, gy, gz, stop, *buffers)``; ``stop``:
    see ``vyre_core.cancel.words``) runs its workgroups in turn on the calling thread;
    ``parallel()`` is the same kernel over numba's threads (None where the workgroups
    must run in turn). Each is compiled (or loaded from the disk cache) when a launch
    first needs it: most kernels of small launches never pay for the parallel one, and
    one whose first launch is large pays for the serial one only if a small launch
    comes (``compiled``'s ``grid``). A kernel with a proven version (``codegen``,
    ``lockstep_proven``), or written without checks for workgroups inside its buffers
    (``codegen``'s ``all_inside``), returns True where it left workgroups undone (an
    assumption failed, a buffer ends before its ids): ``fallback(threaded)`` runs those,
    the checked version, compiled the first time a launch needs it (most never do)."""

    def __init__(self, main: _Versions, seconds: float, cached: bool, layout: Layout,
                 fallback: _Versions | None = None) -> None:
        self._main = main
        self._fallback = fallback
        self.layout = layout
        # what compiling the version made at once took (by default the serial one), or
        # loading it from numba's cache on disk (then ``cached``: no compile)
        self.seconds = seconds
        self.cached = cached
        # the CPU time an invocation took, the last time a launch ran on one thread and
        # was timed (``threads.worth_measuring``): 0 until then; a launch is timed once
        # the serial kernel ``ran_serially`` (its first call costs numba's first call:
        # taken for the kernel's own, it sent a 3-trip loop's next launches to threads)
        self.seconds_each = 0.0
        self.ran_serially = False

    @property
    def kernel(self) -> Any:
        """The serial kernel, compiled (or loaded from the disk cache) now if not yet;
        the parallel one where numba could not make it (the same bytes, on threads)."""
        return self._main.serial

    def parallel(self) -> Any:
        """The parallel kernel, compiled (or loaded from the disk cache) now if not yet;
        None when there is none, or numba could not make it (the serial one runs)."""
        return self._main.parallel()

    def fallback(self, threaded: bool) -> Any:
        """The checked version of a kernel with a proven one, on numba's threads or
        (``threaded`` false, or no parallel version) the calling thread: it runs the
        workgroups the proven kernel left, where that said it left some."""
        if self._fallback is None:
            raise AssertionError("a kernel without a proven version left workgroups")
        return (self._fallback.parallel() if threaded else None) or self._fallback.serial


def _compile_or_refuse(dispatcher: Any, signature: tuple[Any, ...]) -> None:
    """Compile ``dispatcher`` (a fallback: ``Compiled.fallback``), or refuse its program
    with what numba said."""
    try:
        dispatcher.compile(signature)
    except Exception as exc:
        raise _refused(exc, f"a kernel's {dispatcher.__name__}") from None


def _refused(exc: Exception, what: str, **details: Any) -> UnsupportedFeatureError:
    """Python, numba's typing or LLVM refused a kernel: routing's cue to run its program
    elsewhere, with what they said."""
    first = str(exc).strip().splitlines()
    return UnsupportedFeatureError(
        f"the cpu backend could not compile {what}: "
        f"{type(exc).__name__}: {' '.join(first[:6])[:800]}",
        "Let routing run it on another backend (omit backend=); report it with the "
        "program (Program.to_wire) as a bug in vyre-cpu.", **details)


def _compiled_or_warned(dispatcher: Any, signature: tuple[Any, ...], version: str) -> bool:
    """Compile one version of a kernel whose other version numba already made (the same
    bytes: that one runs instead where this fails, with a warning)."""
    try:
        dispatcher.compile(signature)
        return True
    except Exception as exc:
        _warn_version(version, exc)
        return False


def _warn_version(version: str, exc: Exception) -> None:
    _log.warning("vyre-cpu: the %s kernel did not compile (%s: %s); its launches run on "
                 "the other one", version, type(exc).__name__, str(exc).strip()[:200])


def _compile_first(module: ModuleType, sig: tuple[Any, ...], parallel_first: bool
                   ) -> tuple[_Versions, Any]:
    """Compile the version of a kernel's module its first launch runs: (its kernel's
    versions, the dispatcher compiled). Raises what numba raised for the serial one. The
    fallback of a proven kernel is not compiled here (``Compiled.fallback``)."""
    serial = getattr(module, "kernel_serial", None)
    if serial is None:
        module.kernel.compile(sig)
        return _Versions(module.kernel, None, sig, module.kernel), module.kernel
    failed = None
    if parallel_first:
        try:
            module.kernel.compile(sig)
            return _Versions(serial, module.kernel, sig, module.kernel), module.kernel
        except Exception as exc:  # (the serial one may still compile: it runs instead)
            failed = exc
    serial.compile(sig)
    if failed is not None:
        _warn_version("parallel", failed)
    return _Versions(serial, None if failed else module.kernel, sig, serial), serial


def _fallback_of(module: ModuleType, sig: tuple[Any, ...]) -> _Versions | None:
    """The checked version of a proven kernel's module, nothing compiled (None: the
    module has no proven version)."""
    fallback = getattr(module, "fallback", None)
    if fallback is None:
        return None
    serial = getattr(module, "fallback_serial", None)
    return _Versions(fallback, None, sig) if serial is None else \
        _Versions(serial, fallback, sig)


def cache_dir() -> Path:
    """``VYRE_CPU_CACHE_DIR``, else the user's cache directory."""
    explicit = os.environ.get(ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vyre" / "cpu-kernels"


def compiled(program: Program, grid: tuple[int, int, int] | None = None,
             thread_count: int = 1) -> Compiled:
    """The kernel of ``program`` (as it runs: any workgroup override applied): from this
    process's memory (nothing generated: the warm path of every dispatch), numba's cache
    on disk (under the program's pipeline-cache key), or compiled now. ``grid`` and
    ``thread_count``: the first launch's, where known; only the version it runs
    (``threads.parallel_worth``) is compiled now, the other when a launch first needs it
    (a parallel version numba cannot make: the serial one is compiled now instead)."""
    fingerprint = program.fingerprint()
    with _lock:
        found = _loaded.get(fingerprint)
        if found is not None:
            _loaded.move_to_end(fingerprint)
            _counts["hits"] += 1
            return found
        kernel = generate(program)  # (refusals first: nothing is written for them)
        key = pipeline_cache_key(program, DispatchConfig(), "cpu", __version__)
        started = time.perf_counter()
        layout = layout_of(program)
        sig = signature(program)
        try:
            module = _module(kernel, key)
            main, made = _compile_first(module, sig, _parallel_first(layout, grid, thread_count))
        except Exception as exc:
            raise _refused(exc, f"program {fingerprint[:12]}", fingerprint=fingerprint) \
                from None
        stats = made.stats
        done = Compiled(main, time.perf_counter() - started,
                        bool(stats.cache_hits) and not stats.cache_misses, layout,
                        _fallback_of(module, sig))
        _loaded[fingerprint] = done
        _counts["hits" if done.cached else "misses"] += 1
        if len(_loaded) > HELD:
            _loaded.popitem(last=False)
        return done


def _parallel_first(layout: Layout, grid: tuple[int, int, int] | None,
                    thread_count: int) -> bool:
    """Whether a kernel's first launch (``grid`` on ``thread_count`` threads; None: not
    known) runs its parallel version."""
    return grid is not None and threads.parallel_worth(math.prod(grid), layout.lanes,
                                                       layout.loops, thread_count)


def on_hand(program: Program) -> bool:
    """Whether ``program``'s kernel is in this process's memory, or was compiled into
    the disk cache before (its source is there: a compile writes it first)."""
    if program.fingerprint() in _loaded:
        return True
    return _source_path(pipeline_cache_key(program, DispatchConfig(), "cpu",
                                           __version__)).exists()


def fork() -> int:
    """``os.fork``, at a moment no kernel is being compiled in this process (another
    thread's compile would leave numba's lock held in the child forever)."""
    with _lock, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (3.12: fork with threads;
        return os.fork()                                     # the child runs only this)


def cache_counts() -> tuple[int, int, int]:
    """(hits, misses, kernels held) of this process, for the pipeline-cache hook."""
    with _lock:
        return _counts["hits"], _counts["misses"], len(_loaded)


#: Each storage dtype's numba type (f16 as its 16-bit words)
_NUMBA_SCALAR = {np.dtype(np.uint32): types.uint32, np.dtype(np.int32): types.int32,
                 np.dtype(np.float32): types.float32, np.dtype(np.float64): types.float64,
                 np.dtype(np.float16): types.uint16, np.dtype(np.uint8): types.uint8,
                 np.dtype(np.uint16): types.uint16, np.dtype(np.int8): types.int8,
                 np.dtype(np.int16): types.int16, np.dtype(np.uint64): types.uint64,
                 np.dtype(np.int64): types.int64}


def signature(program: Program) -> tuple[Any, ...]:
    """The numba signature of ``program``'s kernel: the grid, the stop words (u64 x 4,
    ``vyre_core.cancel.words``), then one 1-D array per storage buffer (read-only for
    pure inputs; workgroup buffers are the kernel's own)."""
    arrays = [types.Array(_NUMBA_SCALAR[b.dtype.storage_np], 1, "C",
                          readonly=b.access in (Access.READ, Access.UNIFORM))
              for b in program.buffers if b.access is not Access.WORKGROUP]
    return (types.int64, types.int64, types.int64, types.Array(types.uint64, 1, "C"),
            *arrays)


@functools.cache
def generator_digest() -> str:
    """What the kernels are made of besides the program: the code that writes them
    (codegen, blocks, lockstep_proven, ranges) and the helpers compiled into them
    (runtime/), every module of this package, and numba's version. numba's cache checks
    only the kernel file's own stamp, so a change to any of them must change the
    kernel's name."""
    digest = blake3.blake3(numba.__version__.encode())
    package = Path(__file__).parent
    for module in sorted(package.rglob("*.py")):
        digest.update(module.relative_to(package).as_posix().encode() + b"\0" +
                      module.read_bytes())
    return digest.hexdigest()[:16]


def _source_path(key: str) -> Path:
    """Where the source of the kernel under ``key`` is kept, numba's cache beside it."""
    return cache_dir() / f"vyre_cpu_kernel_{key[:32]}_{generator_digest()}.py"


def _module(kernel: Kernel, key: str) -> ModuleType:
    """The kernel's module, from its source file in the cache directory (the math
    library's helpers loaded first where it calls them)."""
    if mathlib.MODULE in kernel.source:
        helpers_module()
    return load_module(kernel.source, _source_path(key).stem)


@functools.cache
def helpers_module() -> ModuleType:
    """The math library's helpers (``vyre_cpu.mathlib``), loaded as a kernel is, from a
    file named by the library's version and this package's code (as numba's cache
    needs), and registered under the name kernels import them by."""
    module = load_module(math_helpers_source(),
                         f"{mathlib.MODULE}_{math_library_version()[:16]}_"
                         f"{generator_digest()}")
    sys.modules[mathlib.MODULE] = module
    return module


def load_module(source: str, name: str) -> ModuleType:
    """The module of generated ``source``, from its file ``name`` in the cache directory
    (written once, atomically); in memory, without numba's cache, where the directory
    cannot be used."""
    path = cache_dir() / f"{name}.py"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != source:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".kernel-", suffix=".py")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(source)
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # (numba's cache finds the kernel's callees through it)
        spec.loader.exec_module(module)
        return module
    except OSError as exc:
        _log.warning("vyre-cpu: kernel cache %s unusable (%s); compiling in memory",
                     path.parent, exc)
    module = ModuleType(name)
    sys.modules.setdefault(name, module)  # (before: a kernel imports the helpers by name)
    exec(compile(source.replace("cache=True", "cache=False"), name, "exec"),
         module.__dict__)
    return module
