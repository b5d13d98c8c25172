"""vyre's own modules and the imports between them, read by parsing (no import runs): what
the layer and size tests of issue 41 check."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Each package of the tree and its folder (the backend template is a file set that
#: ``vyre new-backend`` copies, not a module of vyre).
PACKAGES = {
    "vyre_core": ROOT / "vyre_core",
    "vyre_workers": ROOT / "workers",
    "vyre_reference": ROOT / "plugins/vyre-reference/vyre_reference",
    "vyre_cpu": ROOT / "plugins/vyre-cpu/vyre_cpu",
    "vyre_wgpu": ROOT / "plugins/vyre-wgpu/vyre_wgpu",
    "vyre_faults": ROOT / "plugins/vyre-faults/vyre_faults",
}


@dataclass(frozen=True)
class Import:
    """One import of a module of the tree: ``source`` imports ``target`` at ``line``;
    ``kind`` is "module" (runs when ``source`` is imported), "function" (inside a
    function) or "typing" (under ``if TYPE_CHECKING``, never runs)."""

    source: str
    target: str
    line: int
    kind: str


@cache
def modules() -> dict[str, Path]:
    """Every module of the tree by dotted name (a package by its ``__init__``)."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            if "backend-template" in path.parts:
                continue
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _known(name: str) -> str | None:
    """The module of the tree ``name`` is in (itself, or the package holding the name)."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


@cache
def imports() -> tuple[Import, ...]:
    """Every import between modules of the tree. ``from p import n`` imports the module
    ``p.n`` where there is one, else ``p``; ``from vyre_core import __version__`` is kept
    as the name ``vyre_core.__version__`` (the version is at the bottom, the facade at
    the top)."""
    found: list[Import] = []
    for name, path in modules().items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

        def visit(node: ast.AST, kind: str, name: str = name, package: list[str] = package
                  ) -> None:
            for child in ast.iter_child_nodes(node):
                inner = kind
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                    inner = "function" if kind == "module" else kind
                elif isinstance(child, ast.If) and _is_type_checking(child):
                    inner = "typing"
                if isinstance(child, ast.Import):
                    targets = [alias.name for alias in child.names]
                elif isinstance(child, ast.ImportFrom):
                    base = child.module or ""
                    if child.level:
                        up = package[:len(package) - child.level + 1]
                        base = ".".join([*up, base] if base else up)
                    targets = [f"{base}.{alias.name}" for alias in child.names]
                    targets = [t if t in modules() or t == "vyre_core.__version__" else base
                               for t in targets]
                else:
                    targets = []
                for target in targets:
                    known = target if target == "vyre_core.__version__" else _known(target)
                    if known and known != name:
                        found.append(Import(name, known, child.lineno, inner))
                visit(child, inner)

        visit(ast.parse(path.read_text(), str(path)), "module")
    return tuple(found)


def line_count(path: Path) -> int:
    """A module's length as ``wc -l`` counts it."""
    return path.read_bytes().count(b"\n")
