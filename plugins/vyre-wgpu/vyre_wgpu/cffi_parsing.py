"""A worker's start without 2 s of C parsing.

wgpu-py names each C struct it fills by a string (``ffi.new("WGPUDeviceDescriptor *")``),
and cffi parses each new string once per process. Before every such parse cffi's
``Parser._parse`` writes out ``typedef int <name>;`` for every typedef it knows (wgpu.h
has about 450) and pycparser parses them all again: opening a device and running the
capability probes asks for 40-50 structs, 1.5-2 s of a wgpu worker's start (measured:
``Device()`` 1.7-2.4 s, 0.6 s with this).

Those typedef lines exist only so that pycparser reads a typedef name as a type; a name
the parsed text never mentions cannot change how it parses, so giving pycparser only the
typedefs the text names yields the same declarations and types. Applied in the worker,
where wgpu is imported (``adapter.wgpu_module``), never in the caller's process; a cffi
whose parser is not shaped as this expects is left as it is (slower, not wrong).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_TYPEDEF = "typedef "
_applied = False
_lock = threading.Lock()


def only_named_typedefs(parse: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    """``Parser._parse`` over the typedefs ``csource`` names, the others set aside for
    the call (cffi calls it under the FFI's lock, so no other parse sees them gone)."""

    def _parse(self: Any, csource: str) -> Any:
        known = self._declarations
        named = set(_IDENTIFIER.findall(csource))
        self._declarations = {key: value for key, value in known.items()
                              if not key.startswith(_TYPEDEF) or key[len(_TYPEDEF):] in named}
        try:
            return parse(self, csource)
        finally:
            self._declarations = known

    _parse.__wrapped__ = parse  # type: ignore[attr-defined]
    return _parse


def apply() -> bool:
    """Make cffi's parser read only the typedefs a text names (once per process); False
    when this cffi has no such parser method (then nothing is changed)."""
    global _applied
    with _lock:
        if _applied:
            return True
        try:
            from cffi import cparser
        except ImportError:
            return False
        parse = getattr(cparser.Parser, "_parse", None)
        if parse is None or not hasattr(cparser.Parser(), "_declarations"):
            return False
        cparser.Parser._parse = only_named_typedefs(parse)  # type: ignore[method-assign]
        _applied = True
        return True
