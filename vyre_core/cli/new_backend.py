"""``vyre new-backend NAME``: a ready backend plugin package, from the template shipped
inside vyre (``vyre_core/backend-template``): the distribution with its entry point, the
plugin module around a stand-in device, its own tests and the conformance kit. As written
it installs and passes ``pytest --vyre-backend=NAME``; the author replaces the device.

The template is a working package named ``template``; writing it under another name is
the list of substitutions below (``rendered``, no I/O), so the rule lives in one place."""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import tempfile
from importlib import metadata, resources
from importlib.resources.abc import Traversable
from pathlib import Path

from vyre_core.cli.output import console, print_json, styled
from vyre_core.errors import InvalidConfigError, system_resource_error

#: A backend id the command writes: lower case, digits, single ``-`` or ``_`` inside.
NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
MAX_NAME = 32
#: Build and cache folders a checkout of the template may hold; never written out.
SKIPPED = {"__pycache__", "build", ".pytest_cache"}


def substitutions(name: str) -> list[tuple[re.Pattern[str], str]]:
    """How the template's own names become ``name``'s: distribution, package, entry
    point and backend id, and the commands its README and docstrings show."""
    module = name.replace("-", "_")
    return [(re.compile(pattern), replacement) for pattern, replacement in (
        (r"vyre-template-backend", f"vyre-{name}"),
        (r"vyre_template", f"vyre_{module}"),
        (r'"template"', f'"{name}"'),
        (r"(?m)^template = ", f"{name} = "),
        (r"--vyre-backend=template\b", f"--vyre-backend={name}"),
        (r"--backend template\b", f"--backend {name}"),
        (r"# template,", f"# {name},"),
    )]


def rendered(name: str, files: dict[str, str]) -> dict[str, str]:
    """The template's ``files`` (relative path -> text) written for backend ``name``."""
    rules = substitutions(name)

    def render(text: str) -> str:
        for pattern, replacement in rules:
            text = pattern.sub(replacement, text)
        return text

    return {render(path): render(text) for path, text in files.items()}


def check_name(name: str, installed: list[str]) -> None:
    """Refuse a name that cannot be a backend id, a Python package and a distribution at
    once, or that an installed backend already uses (the two would clash at discovery)."""
    if not NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise InvalidConfigError(
            f"{name!r} cannot name a backend: it becomes the backend id, the package "
            f"vyre_<name> and the distribution vyre-<name>",
            f"Use lower-case letters and digits, with single '-' or '_' inside, at most "
            f"{MAX_NAME} characters, starting with a letter (e.g. mygpu, my-gpu).")
    if name.startswith("vyre"):
        raise InvalidConfigError(f"{name!r} starts with 'vyre', which the command adds",
                                 f"Leave the prefix out: vyre new-backend "
                                 f"{name.removeprefix('vyre').strip('-_') or 'mygpu'}.")
    if name in installed:
        raise InvalidConfigError(
            f"a backend named {name!r} is installed already",
            "Choose another name: two backends with one id are refused at discovery.")


def clash(name: str) -> str | None:
    """What already installed the package or distribution ``name`` would become (vyre's
    own ``vyre_core``, another backend's), or None: installing it would overwrite that."""
    module = f"vyre_{name.replace('-', '_')}"
    if importlib.util.find_spec(module) is not None:
        return f"a package {module} is importable already"
    wanted = _normalized(f"vyre-{name}")
    taken = next((d.metadata["Name"] for d in metadata.distributions()
                  if _normalized(d.metadata["Name"] or "") == wanted), None)
    return None if taken is None else f"the distribution {taken} is installed already"


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()  # (PEP 503)


def template_files() -> dict[str, str]:
    """Every file of the shipped template, by its path relative to the template."""
    root = resources.files("vyre_core") / "backend-template"
    files: dict[str, str] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name in SKIPPED or child.name.endswith(".egg-info"):
                continue
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            else:
                files[f"{prefix}{child.name}"] = child.read_text(encoding="utf-8")

    walk(root, "")
    return files


def write_package(files: dict[str, str], target: Path) -> None:
    """Write ``files`` into ``target`` (a new folder, or an empty one: the folder itself is
    kept, the shell may stand in it), all or nothing: they are written into a staging
    folder inside it first and moved into place at the end; a failure removes what this
    call made."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InvalidConfigError(f"{target} exists and is not an empty folder",
                                 "Name a new folder with --dir, or remove that one.")
    if not target.parent.is_dir():
        raise InvalidConfigError(f"{target.parent} is not a folder",
                                 "Create the folder that is to hold the package first.")
    created = not target.exists()
    moved: list[Path] = []
    staging: Path | None = None
    try:
        if created:
            target.mkdir()
        staging = Path(tempfile.mkdtemp(prefix=".vyre-new-backend-", dir=target))
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        for entry in sorted(staging.iterdir()):
            moved.append(entry.rename(target / entry.name))
        staging.rmdir()
    except BaseException as exc:
        for path in moved:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if created and target.is_dir():
            target.rmdir()
        if isinstance(exc, OSError):
            raise system_resource_error(exc, f"writing the package into {target}") from exc
        raise


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("new-backend", help="write a ready backend plugin package")
    p.add_argument("name", metavar="NAME", help="the backend id (e.g. mygpu)")
    p.add_argument("--dir", type=Path, default=None, metavar="PATH",
                   help="the folder to write (default: ./vyre-NAME; new or empty)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vyre_core.registry import Registry

    registry = Registry.discover()
    check_name(args.name, registry.ids() + [p.name for p in registry.broken + registry.disabled])
    taken = clash(args.name)
    if taken is not None:
        raise InvalidConfigError(f"cannot name a backend {args.name!r}: {taken}",
                                 "Choose another name: installing this one would replace it.")
    target = (args.dir or Path(f"vyre-{args.name}")).resolve()
    files = rendered(args.name, template_files())
    write_package(files, target)
    if args.json:
        print_json({"backend": args.name, "path": str(target), "files": sorted(files)})
        return 0
    console.print(styled(("wrote", "bold green"), f" {target} ({len(files)} files) for "
                         f"backend {args.name!r}"))
    for relative in sorted(files):
        console.print(f"  {relative}")
    console.print("next:")
    for step in (f"cd {target}", "pip install -e .",
                 f"pytest --vyre-backend={args.name}    # its own tests and the kit: pass",
                 "then replace the part marked THE DEVICE in "
                 f"vyre_{args.name.replace('-', '_')}/backend.py"):
        console.print(f"  {step}")
    return 0
