"""The vectors a cpu worker's kernels compute with: the widest the CPU has.

LLVM tunes its code for Intel's CPUs with AVX-512 (Skylake-SP onwards) to prefer 256-bit
vectors (``prefer-256-bit``: the first of them lowered their clock for 512-bit work), so
a lane loop ran 8 floats a step on a core that does 16. In 512-bit vectors lib.matmul's
kernel at 512^3 took 3.9-4.2 ms on one thread against 4.8-4.9 ms (BENCHMARKS.md, session
38). The bytes are the same at every width: a wider vector runs the same IEEE operation
on more lanes, and nothing is reassociated or contracted.

``VYRE_CPU_VECTOR_BITS=256`` keeps LLVM's preference (``512``, the default, lifts it
where the CPU has AVX-512); numba's own ``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES``,
when set, decide instead, and nothing changes where numba leaves AVX off. numba reads
the features once, when a process first compiles or loads a kernel, so ``widen`` runs
when this backend's compiler is imported, before that."""

from __future__ import annotations

import os
from collections.abc import Mapping

import numba
from llvmlite import binding

from vyre_core.errors import InvalidConfigError

ENV = "VYRE_CPU_VECTOR_BITS"
WIDTHS = ("256", "512")
#: numba's settings that choose the target themselves: vyre leaves them to it.
NUMBA_OWN = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")


def features(host: Mapping[str, bool], environ: Mapping[str, str], avx: bool = True
             ) -> str | None:
    """numba's CPU features for ``host`` (feature name: present) under ``environ``: the
    host's, with LLVM's preference for 256-bit vectors lifted, where it has AVX-512 and
    nothing asks otherwise (``avx``: numba's ``ENABLE_AVX``); None to leave numba's own
    choice. InvalidConfigError names a width other than 256 or 512."""
    raw = environ.get(ENV, "").strip()
    if raw and raw not in WIDTHS:
        raise InvalidConfigError(
            f"{ENV}={environ[ENV]!r} is not a vector width of the cpu backend",
            f"Set {ENV}=512 (the widest vectors the CPU has, the default) or {ENV}=256 "
            "(LLVM's preference on CPUs with AVX-512), or unset it.",
            variable=ENV, value=environ[ENV])
    if raw == "256" or any(environ.get(name) for name in NUMBA_OWN) or not avx or \
            not host.get("avx512f"):
        return None
    return ",".join([*_flat(host, "prefer-256-bit"), "-prefer-256-bit"])


def widen(environ: Mapping[str, str] = os.environ) -> None:
    """Give numba this process's features (``features`` of the host's), where they
    change anything."""
    chosen = features(_host(), environ, bool(numba.config.ENABLE_AVX))
    if chosen is not None:
        numba.config.CPU_FEATURES = chosen


def bits(environ: Mapping[str, str] = os.environ) -> int:
    """The widest vectors this process's kernels use (the worker's capabilities say it),
    from the features numba compiles for: those set (by ``widen``, or numba's
    ``NUMBA_CPU_FEATURES``; ``NUMBA_CPU_NAME=generic`` sets none), else the ones ``widen``
    will set, else the host's. 512 with AVX-512 and the 256-bit preference lifted, 256
    with AVX, else 128."""
    if not numba.config.ENABLE_AVX:
        return 128
    chosen = numba.config.CPU_FEATURES
    if chosen is None:
        host = _host()
        chosen = features(host, environ) or ",".join(_flat(host))
    parts = set(chosen.split(","))
    if "+avx512f" in parts and "-prefer-256-bit" in parts:
        return 512
    return 256 if parts & {"+avx", "+avx2"} else 128


def _flat(host: Mapping[str, bool], *leaving: str) -> list[str]:
    """``host``'s features as numba takes them (``+name`` or ``-name``), but ``leaving``."""
    return [f"{'+' if on else '-'}{name}" for name, on in host.items() if name not in leaving]


def _host() -> dict[str, bool]:
    """The host CPU's features by name (none where LLVM cannot tell)."""
    try:
        return dict(binding.get_host_cpu_features())
    except RuntimeError:
        return {}
