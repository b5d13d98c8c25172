"""``vyre_wgpu.cffi_parsing``: cffi parsing a type with only the typedefs its text names
gives the same types as cffi's own parse (over wgpu's real header), where it is applied
(the worker's import of wgpu) and nowhere else."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
from cffi import FFI, cparser
from wgpu.backends.wgpu_native._ffi import get_wgpu_header

from vyre_wgpu.cffi_parsing import only_named_typedefs

HEADER = get_wgpu_header()


def ffi(patched: bool) -> FFI:
    made = FFI()
    if patched:  # on this instance only: the test process's cffi stays as it is
        made._parser._parse = types.MethodType(only_named_typedefs(cparser.Parser._parse),
                                               made._parser)
    made.cdef(HEADER)
    return made


def described(made: FFI, cdecl: str) -> tuple:
    """What a type is, field by field (types of two FFIs never compare equal)."""
    ctype = made.typeof(cdecl)
    item = ctype.item if ctype.kind == "pointer" else ctype
    fields = tuple((name, f.offset, f.type.cname, f.bitsize)
                   for name, f in (item.fields or ())) if item.kind == "struct" else ()
    try:
        layout = made.sizeof(item), made.alignof(item)
    except ValueError:  # an opaque handle's struct (WGPUBuffer): no size
        layout = None
    return ctype.kind, ctype.cname, layout, fields


def typedef_names(made: FFI, kind: str) -> list[str]:
    return sorted(key[len("typedef "):] for key, (model, _) in made._parser._declarations.items()
                  if key.startswith("typedef ") and type(model).__name__ == kind)


@pytest.mark.fast
def test_types_parsed_with_only_their_typedefs_are_cffis_own():
    plain, patched = ffi(False), ffi(True)
    structs = typedef_names(plain, "StructType")
    assert len(structs) > 100  # wgpu.h's structs (114 in wgpu-native 25)
    # every tenth struct, by pointer as wgpu-py names them, and the other kinds of text a
    # parse meets (a typedef'd pointer, an enum, a function pointer, an array, a cast)
    texts = [f"{name} *" for name in structs[::10]] + [
        "WGPUBuffer", "WGPUBufferUsage", "WGPUTextureFormat", "WGPUProc",
        "WGPUStringView[3]", "uint32_t *", "WGPUBufferMapCallbackInfo"]
    for text in texts:
        assert described(patched, text) == described(plain, text), text
    # and a name it has never seen is refused as cffi refuses it
    for made in (plain, patched):
        with pytest.raises(cparser.CDefError):
            made.typeof("WGPUNoSuchThing *")


@pytest.mark.fast
def test_a_parse_sees_only_the_typedefs_its_text_names_and_restores_the_rest():
    made = ffi(True)
    seen = []
    original = cparser.Parser._parse

    def spying(self, csource):
        seen.append(sorted(k for k in self._declarations if k.startswith("typedef ")))
        return original(self, csource)

    made._parser._parse = types.MethodType(only_named_typedefs(spying), made._parser)
    before = dict(made._parser._declarations)
    made.typeof("WGPUBufferDescriptor *")
    assert seen == [["typedef WGPUBufferDescriptor"]]
    assert made._parser._declarations == before


@pytest.mark.processes
def test_applied_where_wgpu_is_imported_and_not_before():
    code = ("from cffi import cparser\n"
            "import vyre_wgpu.backend, vyre_wgpu.adapter as a\n"
            "before = hasattr(cparser.Parser._parse, '__wrapped__')\n"
            "a.wgpu_module()\n"
            "print(before, hasattr(cparser.Parser._parse, '__wrapped__'))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["False", "True"]
