"""What ``vyre run`` and ``vyre route`` accept as TARGET: an example module (a path to a
``.py`` file exposing ``build() -> Example``, or the name of a bundled example), a kernel
of a module (``file.py:kernel``, launched over ``--dim``), or a saved program (wire
bytes, ``.vyir``) with an ``.npz`` of inputs named like its input buffers
(and, from a shadow's replay bundle, a ``.json`` with its config)."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from vyre_core import saved
from vyre_core.cli.kernel_target import kernel_example, kernel_of, parse_dim, split_spec
from vyre_core.errors import InvalidInputError
from vyre_core.example import Example
from vyre_core.ir import Program

#: The package the repository's ``examples/`` folder is installed as.
BUNDLED = "vyre_examples"

_FIX = ("Pass the path of an example module (.py) exposing build(), a kernel of a module "
        "(file.py:saxpy --dim N), a saved program (.vyir) with its inputs (--inputs "
        "FILE.npz), or a bundled example name (`vyre demo` lists them).")


@dataclass(frozen=True)
class Target:
    name: str
    example: Example


def bundled_examples() -> list[str]:
    """Names of the bundled examples that expose ``build()``, sorted."""
    try:
        package = importlib.import_module(BUNDLED)
    except ImportError:
        return []
    names = [m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")]
    return sorted(n for n in names if callable(getattr(_bundled(n), "build", None)))


def _bundled(name: str) -> ModuleType:
    return importlib.import_module(f"{BUNDLED}.{name}")


def load_target(spec: str, inputs: str | None = None, with_inputs: bool = True,
                dim: str | None = None) -> Target:
    """The example ``spec`` names; every way it can be wrong is an ``InvalidInputError``
    (a malformed program is ``InvalidProgramError``) with a Fix. ``with_inputs=False``
    reads a saved program without its inputs (routing needs none). ``file.py:kernel``
    is a kernel launched over ``dim`` (``--dim``'s text)."""
    kernel = split_spec(spec)
    if kernel is not None:
        launch = parse_dim(dim, spec)
        found = kernel_of(_load_module(kernel[0]), kernel[1], spec)
        return Target(f"{kernel[0].stem}:{kernel[1]}",
                      kernel_example(found, launch, spec, inputs))
    if dim is not None:
        raise InvalidInputError(f"--dim is given, and target {spec!r} is not a kernel",
                                "Leave out --dim (an example sets its own launch), or name a "
                                "kernel: path/to/file.py:saxpy.")
    path = Path(spec)
    if path.suffix == ".py" or (not path.exists() and "/" not in spec and not path.suffix):
        module = _load_module(path) if path.suffix == ".py" else _load_bundled(spec)
        return Target(path.stem, _example_of(module, spec))
    if not path.is_file():
        raise InvalidInputError(f"target {spec!r}: no such file", _FIX)
    program = Program.from_wire(path.read_bytes()).check()
    if not with_inputs:
        return Target(path.stem, Example(program, []))
    npz = Path(inputs) if inputs else path.with_suffix(".npz")
    return Target(path.stem, Example(program, saved.load_inputs(program, npz),
                                     config=saved.load_config(path.with_suffix(".json"))))


def _load_module(path: Path) -> ModuleType:
    if not path.is_file():
        raise InvalidInputError(f"target {str(path)!r}: no such file", _FIX)
    spec = importlib.util.spec_from_file_location(f"vyre_target_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_bundled(name: str) -> ModuleType:
    if name not in bundled_examples():
        known = ", ".join(bundled_examples()) or "none installed"
        raise InvalidInputError(f"target {name!r} is not a file or a bundled example "
                                f"(bundled: {known})", _FIX)
    return _bundled(name)


def _example_of(module: ModuleType, spec: str) -> Example:
    build = getattr(module, "build", None)
    if not callable(build):
        raise InvalidInputError(f"{spec!r} has no build() function", _FIX)
    example = build()
    if not isinstance(example, Example):
        raise InvalidInputError(f"{spec!r}: build() returned a {type(example).__name__}, "
                                "not a vyre_core.Example", _FIX)
    return example


def save_target(target: Target, program_path: Path) -> list[Path]:
    """Write the program's wire bytes to ``program_path``, its inputs next to it
    (``.npz``) and its config (``.json``) when it has one; returns the files written.
    Saved targets are programs: a sequence is refused."""
    program = target.example.program
    if not isinstance(program, Program):
        raise InvalidInputError(f"{target.name!r} is a sequence; --save writes one program",
                                "Run it without --save (its module is how it is shared).")
    npz = program_path.with_suffix(".npz")
    try:
        program_path.write_bytes(program.to_wire())
        saved.save_inputs(npz, program, [np.asarray(a) if not isinstance(a, bytes | bytearray)
                                         else np.frombuffer(a, b.dtype.storage_np)
                                         for b, a in zip(program.inputs, target.example.inputs,
                                                         strict=True)])
        written = [program_path, npz]
        if target.example.config is not None:  # (its grid, its constants: what it ran with)
            written.append(program_path.with_suffix(".json"))
            saved.save_config(written[-1], target.example.config)
    except OSError as exc:
        raise InvalidInputError(f"cannot save to {str(program_path)!r}: {exc.strerror}",
                                "Pass --save a path in an existing, writable folder.") from None
    return written
