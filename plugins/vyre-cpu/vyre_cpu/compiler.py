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
from vyre_core.pipeline import pipeline_cache_key
from vyre_cpu import __version__, threads
from vyre_cpu.codegen import Kernel, generate

ENV = "VYRE_CPU_CACHE_DIR"
if not {"NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY"} & set(os.environ):
    numba.config.THREADING_LAYER_PRIORITY = list(threads.LAYERS)  # (why: threads.py)
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


class Compiled:
    """A kernel ready to run: ``kernel`` (``kernel(gx, gy, gz, stop, *buffers)``; ``stop``:
    see ``vyre_core.cancel.words``) runs its workgroups in turn on the calling thread;
    ``parallel()`` is the same kernel over numba's threads (None where the workgroups
    must run in turn). Each is compiled (or loaded from the disk cache) when a launch
    first needs it: most kernels of small launches never pay for the parallel one, and
    one whose first launch is large pays for the serial one only if a small launch
    comes (``compiled``'s ``grid``)."""

    def __init__(self, kernel: Any, seconds: float, cached: bool, layout: Layout,
                 parallel: Any = None, signature: tuple[Any, ...] = (),
                 first: Any = None) -> None:
        self._kernel = kernel
        self.layout = layout
        # what compiling ``first`` (the version made at once; by default the serial one)
        # took, or loading it from numba's cache on disk (then ``cached``: no compile)
        self.seconds = seconds
        self.cached = cached
        self._parallel = parallel
        self._signature = signature
        self._parallel_ready = parallel is None or first is parallel
        self._serial_ready = parallel is None or first is not parallel

    @property
    def kernel(self) -> Any:
        """The serial kernel, compiled (or loaded from the disk cache) now if not yet;
        the parallel one where numba could not make it (the same bytes, on threads)."""
        if not self._serial_ready:
            with _lock:
                if not self._serial_ready:
                    if not _compiled_or_warned(self._kernel, self._signature, "serial"):
                        self._kernel = self._parallel
                    self._serial_ready = True
        return self._kernel

    def parallel(self) -> Any:
        """The parallel kernel, compiled (or loaded from the disk cache) now if not yet;
        None when there is none, or numba could not make it (the serial one runs)."""
        if not self._parallel_ready:
            with _lock:
                if not self._parallel_ready:
                    if not _compiled_or_warned(self._parallel, self._signature, "parallel"):
                        self._parallel = None
                    self._parallel_ready = True
        return self._parallel


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
                   ) -> tuple[Any, Any, Any]:
    """Compile the version of a kernel's module its first launch runs: (the serial
    kernel, or the only one; the parallel one, None where there is none or numba could
    not make it; the one compiled). Raises what numba raised for the serial one."""
    serial = getattr(module, "kernel_serial", None)
    if serial is None:
        module.kernel.compile(sig)
        return module.kernel, None, module.kernel
    failed = None
    if parallel_first:
        try:
            module.kernel.compile(sig)
            return serial, module.kernel, module.kernel
        except Exception as exc:  # (the serial one may still compile: it runs instead)
            failed = exc
    serial.compile(sig)
    if failed is not None:
        _warn_version("parallel", failed)
    return serial, None if failed else module.kernel, serial


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
        try:
            serial, parallel, made = _compile_first(
                _module(kernel, key), signature(program),
                _parallel_first(layout, grid, thread_count))
        except Exception as exc:  # Python, numba's typing or LLVM refused it: say so
            first = str(exc).strip().splitlines()
            raise UnsupportedFeatureError(
                f"the cpu backend could not compile program {program.fingerprint()[:12]}: "
                f"{type(exc).__name__}: {' '.join(first[:6])[:800]}",
                "Let routing run it on another backend (omit backend=); report it with the "
                "program (Program.to_wire) as a bug in vyre-cpu.",
                fingerprint=program.fingerprint()) from None
        stats = made.stats
        done = Compiled(serial, time.perf_counter() - started,
                        bool(stats.cache_hits) and not stats.cache_misses,
                        layout, parallel, signature(program), made)
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
def _generator_digest() -> str:
    """What the kernels are made of besides the program: the code that writes them and the
    helpers compiled into them, and numba's version. numba's cache checks only the kernel
    file's own stamp, so a changed helper must change the kernel's name."""
    digest = blake3.blake3(numba.__version__.encode())
    for module in ("codegen.py", "runtime.py"):
        digest.update((Path(__file__).parent / module).read_bytes())
    return digest.hexdigest()[:16]


def _source_path(key: str) -> Path:
    """Where the source of the kernel under ``key`` is kept, numba's cache beside it."""
    return cache_dir() / f"vyre_cpu_kernel_{key[:32]}_{_generator_digest()}.py"


def _module(kernel: Kernel, key: str) -> ModuleType:
    """The kernel's module, from its source file in the cache directory (written once,
    atomically); in memory, without numba's cache, where the directory cannot be used."""
    path = _source_path(key)
    name = path.stem
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != kernel.source:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".kernel-", suffix=".py")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(kernel.source)
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
    exec(compile(kernel.source.replace("cache=True", "cache=False"), name, "exec"),
         module.__dict__)
    sys.modules.setdefault(name, module)
    return module
