"""The fault vocabulary: what a fault-injection backend (``vyre-faults``) can be told to do,
and how it is told. One room for the names, read by the tests that inject faults and by
the backend that obeys them, so a typo is refused on either side instead of a dispatch
that quietly computes and a fault test that passes without its fault.

Per dispatch, ``DispatchConfig.label`` carries ``fault:<kind>[:<arg>]`` (``fault()`` builds
it). At a worker's start, the environment variable ``VYRE_FAULTS`` carries a comma-separated
list (``startup_faults()`` builds it); workers read it when they start, so set it before
the pool starts (or restarts).
"""

from __future__ import annotations

import os
from typing import Any

from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidConfigError

LABEL_PREFIX = "fault:"
STARTUP_ENV = "VYRE_FAULTS"
PRECEDENCE_ENV = "VYRE_FAULTS_PRECEDENCE"

#: kind -> (its argument: "none", "required" or "optional"; what the worker does).
DISPATCH_FAULTS: dict[str, tuple[str, str]] = {
    "exit": ("none", "exits at once with status 17, mid-dispatch"),
    "segfault": ("none", "dies by SIGSEGV (reads address 0)"),
    "abort": ("none", "dies by SIGABRT"),
    "hang_python": ("none", "loops forever in Python (the heartbeat thread keeps beating)"),
    "hang_native": ("none", "blocks in C holding the GIL: no heartbeat, nothing else runs"),
    "sleep": ("required", "sleeps ARG seconds, then computes"),
    "leak": ("required", "keeps ARG MiB of memory it touched, then computes"),
    "device_lost": ("none", "reports its device lost (recovered in place unless no_recover)"),
    "unsupported": ("none", "refuses the program (UnsupportedFeatureError): routing moves on"),
    "unsupported_on": ("required", "refuses the program on device ARG only"),
    "malformed": ("none", "returns garbage instead of its outputs: the call fails with "
                  "`DispatchError` (the backend's bug, said so), never returns wrong bytes"),
    "crash_once": ("required", "exits unless the file ARG exists, creating it: the retry "
                               "succeeds"),
    "chatter": ("required", "writes ARG MiB to stderr, then computes"),
    "numpy_error": ("none", "raises an error whose details hold numpy scalars and an object"),
    "device": ("optional", "sleeps ARG seconds (default 0), then fills every (sized u32) "
                           "output with the id of the device its worker is pinned to "
                           "(2**32-1 when it is not pinned)"),
    "destroy_device": ("none", "faults-wgpu only: destroys the wgpu device, then dispatches "
                               "(a soft loss)"),
    "destroy_then_submit": ("none", "faults-wgpu only: submits work to a destroyed device: "
                                    "wgpu-native aborts the process (a hard loss)"),
}

#: item -> (its argument, what a starting worker does).
STARTUP_FAULTS: dict[str, tuple[str, str]] = {
    "crash_import": ("none", "the plugin raises ImportError when the worker imports it"),
    "crash_prepare": ("none", "vyre_prepare raises"),
    "exit_prepare": ("none", "vyre_prepare exits with status 5"),
    "hang_prepare": ("none", "vyre_prepare never returns: no hello"),
    "no_recover": ("none", "vyre_try_recover refuses: a lost device costs a restart"),
    "memory_limit": ("required", "caps the worker's address space at its size after start-up "
                                 "plus ARG MiB"),
    "devices": ("required", "the backend lists ARG devices (0 to ARG-1)"),
    "slow_devices": ("none", "listing its devices outside a worker never ends"),
    "no_f64_on": ("required", "a worker pinned to device ARG has no f64"),
    "no_f64": ("none", "no worker has f64"),
    "loop_trip_in_extra": ("required", "the record claims a loop trip limit of ARG "
                           "iterations in its extra, as vyre 0.1's docs told (deprecated)"),
}


def _checked(kind: str, arg: Any, vocabulary: dict[str, tuple[str, str]], where: str) -> str:
    if kind not in vocabulary:
        raise InvalidConfigError(f"unknown {where} fault {kind!r}",
                                 f"Name one of: {', '.join(sorted(vocabulary))}.")
    takes = vocabulary[kind][0]
    if (arg is None or arg == "") and takes == "required":
        raise InvalidConfigError(f"the {where} fault {kind!r} needs an argument "
                                 f"({vocabulary[kind][1]})", f"Pass it: {kind}:ARG.")
    if arg is not None and takes == "none":
        raise InvalidConfigError(f"the {where} fault {kind!r} takes no argument, got {arg!r}",
                                 f"Leave the argument out: {kind}.")
    text = kind if arg is None else f"{kind}:{arg}"
    if "," in text:
        raise InvalidConfigError(f"a {where} fault may not hold a comma: {text!r}",
                                 "Use a path or number without commas.")
    return text


def fault(kind: str, arg: Any = None, **config: Any) -> DispatchConfig:
    """A DispatchConfig whose dispatch runs fault ``kind`` (with ``arg``) in a
    fault-injection backend; other ``config`` fields pass through."""
    label = LABEL_PREFIX + _checked(kind, arg, DISPATCH_FAULTS, "dispatch")
    return DispatchConfig(label=label, **config)


def parse_label(label: str | None) -> tuple[str, str] | None:
    """``(kind, arg)`` of a fault label (``arg`` "" when absent), or None when ``label``
    asks for no fault. An unknown kind is refused: it would otherwise compute normally."""
    if not label or not label.startswith(LABEL_PREFIX):
        return None
    kind, arg = _split(label[len(LABEL_PREFIX):])
    _checked(kind, arg, DISPATCH_FAULTS, "dispatch")
    return kind, arg or ""


def startup_faults(*items: str) -> str:
    """The value of ``VYRE_FAULTS`` for ``items`` (``"devices:2"``, ``"no_recover"``...)."""
    return ",".join(_checked(*_split(item), STARTUP_FAULTS, "start-up") for item in items)


def _split(item: str) -> tuple[str, str | None]:
    """``"kind:arg"`` as ``(kind, arg)``; ``arg`` None without a colon."""
    kind, sep, arg = item.partition(":")
    return kind, arg if sep else None


def active_startup_faults(environ: dict[str, str] | None = None) -> frozenset[str]:
    """The items ``VYRE_FAULTS`` asks of a starting worker (``"devices:2"``...). An
    unknown item is refused, as in ``startup_faults``."""
    value = (os.environ if environ is None else environ).get(STARTUP_ENV, "")
    items = frozenset(filter(None, (part.strip() for part in value.split(","))))
    startup_faults(*items)
    return items
