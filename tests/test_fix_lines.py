"""Every ``Fix:`` text names only options that exist (issue 18).

A Fix once told users to pass ``shadow=True``, an option that never existed. This module
collects every Fix text of the package statically (``ast``, nothing is raised), finds in
each what names something a user can set, and checks that thing against the code itself:

- ``attribute``: ``DispatchConfig.timeout``, ``RestartPolicy.cooldown``, ``Driver.compile``,
  ``drv.dispatch(``, ``vyre_core.SequenceBuilder``, ``ir.u32``. A field of a dataclass
  (``dataclasses.fields``), else a real method or attribute; called ones must be callable.
- ``keyword``: ``DispatchConfig(timeout=5.0)``, ``drv.allocate_resident(n, near=b)``,
  ``.step(..., grid=...)``: a parameter of ``inspect.signature`` of the named callable.
  A keyword outside a call (``Pass times=N``) is checked against the callable it is passed
  "to" (``Pass shadow=True to Driver.dispatch``), else against every parameter of the
  public surface and every config field.
- ``cli``: ``vyre SUB --flag`` (quoted in backticks, or followed by a flag) and a bare
  ``--flag``: the sub-commands and option strings of the ``vyre`` argparse parser itself.
- ``env``: ``VYRE_SOMETHING`` and ``$NAME``: read somewhere in the package through
  ``os.environ`` / ``getenv`` / an ``env`` mapping, with that literal (or a module constant).
- ``module-attr``: ``VYRE_CONTRACT = 1`` (a plugin module's attribute): read by a
  ``getattr``/``hasattr`` with that literal.
- ``field``: the rest of a list begun by a field, ``RestartPolicy.cooldown,
  max_restarts and recycle_after``: each snake_case item a field of that class.
- ``name``: any other bare snake_case name (``raise max_output_bytes``, ``fork_server``):
  a keyword or field of the public surface, a hook, an access mode or a function the
  package defines. Weak, but an invented name fails.
- ``hook``: ``vyre_prepare``: a hook of the contract (``HOOK_NAMES``).
- ``arguments``: ``.constant(name, array)``, ``Program.to_wire()``: a call written out in
  full (no ``...``) through a class, an instance or a leading dot passes as many
  positional arguments as the callable takes.
- ``path``: ``docs/operations.md``, ``vyre_core/contract/hookspec.py``: exists in the
  repository.
- ``make``: `` `make test-fast` `` (in backticks only; unquoted, "make" is English): a
  target of the Makefile.

Where Fix texts live: the ``fix`` argument of any VyreError subclass (second positional or
``fix=``), the ``fix`` parameter of any helper defined in the package (``_require``,
``_refuse``, ``limits.Exceeded``, doctor's ``Finding`` ...), ``fix=`` keywords and
``"fix":`` map entries anywhere, assignments to ``*fix*`` names (``default_fix``, ``_FIX``,
``_OS_FIXES``, a local ``fix = ...``), module constants passed by name, and the validator's
``CODES``. f-strings keep their literal parts; each ``{...}`` becomes a hole that names
nothing.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import vyre_core
from vyre_core import errors

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

ROOT = Path(__file__).resolve().parent.parent
HOLE = "{…}"  # what an f-string's formatted value becomes: it names nothing
#: Containers of Fix texts whose name says nothing of it: (file, module-level name).
KNOWN_HOLDERS = {("vyre_core/ir/codes.py", "CODES")}
#: Assignments to these names hold Fix texts (default_fix, _FIX, BACKEND_BUG_FIX, _OS_FIXES).
FIX_NAME = re.compile(r"(?i)(?:^|_)fix(?:es)?(?:$|_)")
#: CamelCase receivers of dotted names that are not vyre's (an unknown CamelCase name is
#: taken for a misspelt vyre class); lower-case receivers (np., e.g.) are never vyre's.
FOREIGN_CLASSES: set[str] = set()
PACKAGES = {"vyre_core", "vyre_workers", "vyre_wgpu", "vyre_reference", "vyre_benchmarks"}


# -- collecting the Fix texts ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class FixText:
    path: str   # relative to the repository root
    line: int
    text: str
    via: str    # how it was found: error, helper, keyword, assignment, holder, map

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def source_files() -> list[Path]:
    files = [p for top in ("vyre_core", "workers") for p in (ROOT / top).rglob("*.py")]
    files += [p for p in (ROOT / "plugins").glob("*/*/**/*.py") if ".egg-info" not in str(p)]
    return sorted(files)


def _render(node: ast.AST, known: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """The texts an expression can be, with their line: literal parts kept, a module
    constant in ``known`` (``{SELECT_ENV}``) its value, anything computed a hole; each
    branch of a conditional, each value of a map, each item of a list is one text."""
    known = known or {}
    line = getattr(node, "lineno", 0)

    def render(n: ast.AST) -> list[tuple[int, str]]:
        return _render(n, known)

    def part(v: ast.AST) -> str:
        if isinstance(v, ast.Constant):
            return str(v.value)
        if isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) \
                and v.conversion in (-1, ord("s")) and v.format_spec is None:
            return known.get(v.value.id, HOLE)
        return HOLE

    if isinstance(node, ast.Constant):
        return [(line, node.value)] if isinstance(node.value, str) else [(line, HOLE)]
    if isinstance(node, ast.JoinedStr):
        return [(line, "".join(part(v) for v in node.values))]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [(line, a + b) for _, a in render(node.left) for _, b in render(node.right)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):  # "..." % args
        return render(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "format":
        return render(node.func.value)
    if isinstance(node, ast.IfExp):
        return render(node.body) + render(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [t for v in node.values for t in render(v)]
    if isinstance(node, ast.Dict):
        return [t for v in node.values for t in render(v)]
    if isinstance(node, ast.Tuple | ast.List):
        return [t for v in node.elts for t in render(v)]
    return [(line, HOLE)]


def _positional(args: ast.arguments, drop_first: bool) -> list[str]:
    names = [a.arg for a in args.posonlyargs + args.args]
    return names[1:] if drop_first and names else names


def _takes_self(fn: ast.FunctionDef, methods: set[int]) -> bool:
    """A method (not a static one) gets its first argument bound: its fix slot moves up."""
    return id(fn) in methods and "staticmethod" not in {
        d.id for d in fn.decorator_list if isinstance(d, ast.Name)}


def _fix_slots(trees: dict[str, ast.Module]) -> tuple[dict[str, int], dict[str, set[str]]]:
    """Callable name -> the position of its ``fix`` argument: every VyreError subclass
    (imported or defined in the package), every function or method with a ``fix``
    parameter and every dataclass with a ``fix`` field. Also, per file, the names it
    defines that take no fix (``ir.validate.Finding`` is not ``cli.doctor.Finding``)."""
    def subclasses(cls: type) -> set[type]:
        return {cls}.union(*(subclasses(s) for s in cls.__subclasses__()))

    error_names = {cls.__name__ for cls in subclasses(errors.VyreError)}
    slots = dict.fromkeys(error_names, 1)
    defined: dict[str, dict[str, int | None]] = {}
    for path, tree in trees.items():
        here = defined.setdefault(path, {})
        methods = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
                   for f in c.body if isinstance(f, ast.FunctionDef)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", None)
                         for b in node.bases}
                fields = [s.target.id for s in node.body
                          if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
                inits = [_positional(f.args, True) for f in node.body
                         if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
                if bases & error_names:  # an error class the package defines itself
                    error_names.add(node.name)
                    here[node.name] = 1
                elif "fix" in fields:
                    here[node.name] = fields.index("fix")
                elif inits and "fix" in inits[0]:
                    here[node.name] = inits[0].index("fix")
                else:
                    here.setdefault(node.name, None)
            elif isinstance(node, ast.FunctionDef) and node.name != "__init__":
                names = _positional(node.args, _takes_self(node, methods))
                if "fix" in names:
                    here[node.name] = names.index("fix")
                else:
                    here.setdefault(node.name, None)
    for here in defined.values():
        slots.update({name: at for name, at in here.items() if at is not None})
    elsewhere = {path: {name for name, at in here.items() if at is None}
                 for path, here in defined.items()}
    return slots, elsewhere


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    return {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


@functools.cache
def parsed_sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(), str(p)) for p in source_files()}


@functools.cache
def known_constants() -> dict[str, str]:
    """Module-level str and int constants of the package whose name has one value
    everywhere: what ``{SELECT_ENV}`` in an f-string reads."""
    values: dict[str, set[str]] = {}
    for tree in parsed_sources().values():
        for name, value in _module_constants(tree).items():
            if isinstance(value, ast.Constant) and isinstance(value.value, str | int) \
                    and not isinstance(value.value, bool):
                values.setdefault(name, set()).add(str(value.value))
            else:
                values.setdefault(name, set()).add(HOLE)
    return {name: v for name, (v, *more) in values.items() if not more and v != HOLE}


@functools.cache
def collect_fix_texts() -> tuple[FixText, ...]:
    trees = parsed_sources()
    slots, no_fix_here = _fix_slots(trees)
    error_names = {n for n in slots if n.endswith("Error")}
    known = known_constants()
    found: dict[tuple[str, int, str], str] = {}
    holders_seen: set[tuple[str, str]] = set()

    def add(path: str, node: ast.AST, constants: dict[str, ast.expr], via: str) -> None:
        if isinstance(node, ast.Name) and node.id in constants:  # a module constant
            node = constants[node.id]
        for line, text in _render(node, known):
            if re.search(r"[A-Za-z]", text.replace(HOLE, "")):
                found.setdefault((path, line, text), via)

    for path, tree in trees.items():
        constants = _module_constants(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                for kw in node.keywords:
                    if kw.arg == "fix":
                        add(path, kw.value, constants, "keyword")
                if name in slots and name not in no_fix_here[path] \
                        and len(node.args) > slots[name]:
                    add(path, node.args[slots[name]], constants,
                        "error" if name in error_names else "helper")
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    name = t.id if isinstance(t, ast.Name) else getattr(t, "attr", None)
                    if name and FIX_NAME.search(name):
                        add(path, node.value, constants, "assignment")
                    if (path, name) in KNOWN_HOLDERS:
                        holders_seen.add((path, name))
                        add(path, node.value, constants, "holder")
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "fix":
                        add(path, value, constants, "map")
    assert holders_seen == KNOWN_HOLDERS, (
        f"Fix holders not found (renamed? update KNOWN_HOLDERS): "
        f"{sorted(KNOWN_HOLDERS - holders_seen)}")
    return tuple(FixText(p, line, text, via) for (p, line, text), via in found.items())


# -- what exists ------------------------------------------------------------------------------

@dataclasses.dataclass
class Reality:
    classes: dict[str, type]            # what a dotted name or a call may start with
    modules: dict[str, Any]             # vyre_core, vyre_core.ir, ...
    instances: dict[str, type]          # drv.dispatch(...) -> Driver
    bare_owners: tuple[type, ...]       # allocate_resident(...) -> Driver.allocate_resident
    forwarded: dict[type, type]         # Driver(**option_fields) -> PoolOptions fields
    every_keyword: set[str]             # a keyword with no callable named
    names: set[str]                     # a bare snake_case name: anything the code defines
    commands: dict[str, set[str]]       # vyre SUB -> its option strings
    top_options: set[str]               # vyre --debug
    env: set[str]                       # environment variables the package reads
    module_attrs: set[str]              # VYRE_CONTRACT: read from a plugin module
    hooks: set[str]
    make_targets: set[str]


def _dataclass_fields(cls: type) -> set[str] | None:
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    return None


def _signature_params(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []


def _cli() -> tuple[dict[str, set[str]], set[str]]:
    from vyre_core.cli.app import parser

    top = parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    commands = {name: {s for a in p._actions for s in a.option_strings}
                for name, p in sub.choices.items()}
    return commands, {s for a in top._actions for s in a.option_strings}


def _reads(trees: dict[str, ast.Module]) -> tuple[set[str], set[str]]:
    """Environment variables read (``os.environ[...]``, ``.get``, ``getenv``, ``in``, on
    ``os.environ`` or a mapping named ``env``) and module attributes read by
    ``getattr``/``hasattr``, each as a literal or a module constant."""
    constants: dict[str, set[str]] = {}
    for tree in trees.values():
        for name, value in _module_constants(tree).items():
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                constants.setdefault(name, set()).add(value.value)
            elif isinstance(value, ast.Tuple):
                constants.setdefault(name, set()).update(
                    e.value for e in value.elts if isinstance(e, ast.Constant)
                    and isinstance(e.value, str))

    def literals(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Name):
            return constants.get(node.id, set())
        return set()

    def environment(node: ast.AST) -> bool:
        text = ast.unparse(node)
        return text.endswith("environ") or bool(re.fullmatch(r"\w*env", text))

    env: set[str] = set()
    attrs: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                lookup = isinstance(func, ast.Attribute) and environment(func.value) \
                    and func.attr in ("get", "pop", "setdefault")
                if lookup or ast.unparse(func) in ("os.getenv", "getenv"):
                    env |= literals(node.args[0])
                elif ast.unparse(func) in ("getattr", "hasattr") and len(node.args) > 1:
                    attrs |= literals(node.args[1])
            elif isinstance(node, ast.Subscript) and environment(node.value):
                env |= literals(node.slice)
            elif isinstance(node, ast.Compare) and any(environment(c)
                                                       for c in node.comparators):
                env |= literals(node.left)
            elif isinstance(node, ast.DictComp):  # {n: os.environ[n] for n in ICD_ENV}
                for gen in node.generators:
                    if any(isinstance(s, ast.Subscript) and environment(s.value)
                           for s in ast.walk(node)):
                        env |= literals(gen.iter)
    return env, attrs


def _make_targets() -> set[str]:
    targets: set[str] = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"([A-Za-z0-9_.-][^\s:=$]*(?:[ \t]+[^\s:=$]+)*)\s*:(?![:=])", line)
        if match:
            targets.update(t for t in match.group(1).split() if not t.startswith("."))
    return targets


@functools.cache
def reality() -> Reality:
    from vyre_core.contract.manager import HOOK_NAMES
    from vyre_core.kernels.annotations import ConstantType
    from vyre_core.shadow import shadow

    public = {name: getattr(vyre_core, name) for name in vyre_core.__all__}
    classes = {n: o for n, o in public.items() if inspect.isclass(o)}
    classes.update({cls.__name__: cls for cls in errors.catalog().values()})
    forwarded = {vyre_core.Driver: vyre_core.PoolOptions}
    keywords: set[str] = set()
    # (ConstantType: what vyre.Constant[u32](low=, high=) makes)
    for owner in [o for o in public.values() if inspect.isclass(o)] + [shadow, ConstantType]:
        keywords |= {p.name for p in _signature_params(owner)}
        for name, member in inspect.getmembers(owner):
            if not name.startswith("_") and callable(member):
                keywords |= {p.name for p in _signature_params(member)}
        if inspect.isclass(owner):
            keywords |= _dataclass_fields(owner) or set()
    for cls, options in forwarded.items():
        keywords |= _dataclass_fields(options) or set()
        assert any(p.kind is p.VAR_KEYWORD for p in _signature_params(cls)), cls
    for fn in (getattr(vyre_core.lib, name) for name in vyre_core.lib.__all__):
        keywords |= {p.name for p in _signature_params(fn)}  # (lib.sum(drv, x, axis=0))
    keywords -= {"self", "args", "kwargs"}
    commands, top = _cli()
    env, attrs = _reads(parsed_sources())
    names = keywords | set(HOOK_NAMES) | {a.value for a in vyre_core.ir.Access}
    names |= {n.name for tree in parsed_sources().values() for n in ast.walk(tree)
              if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    return Reality(
        classes=classes,
        modules={"vyre_core": vyre_core, "vyre": vyre_core, "ir": vyre_core.ir,
                 "errors": errors, "lib": vyre_core.lib},
        instances={"drv": vyre_core.Driver, "driver": vyre_core.Driver},
        bare_owners=(vyre_core.Driver, vyre_core.SequenceBuilder, vyre_core.CompiledPipeline,
                     vyre_core.CompiledSequence),
        forwarded=forwarded, every_keyword=keywords, names=names, commands=commands,
        top_options=top, env=env, module_attrs=attrs, hooks=set(HOOK_NAMES),
        make_targets=_make_targets())


# -- finding and checking the options a Fix names ---------------------------------------------

@dataclasses.dataclass(frozen=True)
class Mention:
    kind: str           # attribute, keyword, arguments, field, name, cli, env, ... (above)
    name: str           # as the Fix writes it
    problem: str | None  # None when it exists


_DOTTED = re.compile(r"(?<![\w./$-])(\.?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(\()?")
_BARE_KEYWORD = re.compile(r"(?<![\w.=!<>$-])([a-z_][a-z0-9_]*)=(?!=)")
_VYRE_COMMAND = re.compile(r"(?<![\w./-])vyre\s+([a-z][\w-]*)")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")
_SNAKE = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
#: ", max_restarts and recycle_after" after a field: the list goes on (snake_case items only;
#: a plain word after "or" is prose: "DispatchConfig.timeout, or split the work").
_MORE_FIELDS = re.compile(rf"(?:,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+)({_SNAKE})\b(?![(=]|\.\w)")
_SNAKE_NAME = re.compile(rf"(?<![\w.'\"/$`{{-])({_SNAKE})\b(?![=(\w'\"/-]|\.\w)")
_REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:docs|vyre_core|workers|plugins|benchmarks|examples)/(?:[\w.-]*[\w/])?)")
_SENTENCE_END = re.compile(r"[.;](?:\s|$)|$")
_FOREIGN_COMMAND = re.compile(r"(?<![\w-])(?:pip|apt|apt-get|sudo|dpkg|ulimit|python3?|git|ray)\s")
_CLAUSE_END = re.compile(r"[.;,)`](?:\s|$)|[)`]|$")


def _arguments(text: str, open_paren: int) -> tuple[int, list[tuple[int, str]]]:
    """The end of the call opened at ``open_paren`` and its top-level arguments with their
    positions (an unclosed call runs to the end of the text)."""
    depth, quote, start, args = 0, "", open_paren + 1, []
    for i in range(open_paren, len(text)):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append((start, text[start:i]))
                return i, args
        elif ch == "," and depth == 1:
            args.append((start, text[start:i]))
            start = i + 1
    args.append((start, text[start:]))
    return len(text), args


def _keywords_of(owner: Any, real: Reality) -> set[str] | None:
    """The keywords ``owner`` accepts; None when it takes any (an undocumented **kwargs)."""
    params = _signature_params(owner)
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if any(p.kind is p.VAR_KEYWORD for p in params):
        if owner in real.forwarded:
            return names | (_dataclass_fields(real.forwarded[owner]) or set())
        return None
    return names


def _arity_problem(fn: Any, given: int, keywords: set[str]) -> str | None:
    """Whether ``given`` positional arguments (and ``keywords``) can call ``fn``."""
    params = _signature_params(fn)
    if params and params[0].name == "self":  # a method named through its class
        params = params[1:]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p.name for p in positional if p.default is p.empty and p.name not in keywords]
    most = float("inf") if any(p.kind is p.VAR_POSITIONAL for p in params) else len(positional)
    if len(required) <= given <= most:
        return None
    count = len(required) if most == len(required) else f"{len(required)} to {most}"
    return (f"takes {count} positional arguments "
            f"({', '.join(p.name for p in positional)}), not {given}")


def _attribute(cls: type, attr: str, called: bool, shown: str) -> str | None:
    fields = _dataclass_fields(cls)
    if fields is not None and attr in fields:
        return f"{shown} is a field, not a method" if called else None
    if not hasattr(cls, attr):
        what = "field or method" if fields is not None else "attribute"
        return f"{cls.__name__} has no {what} {attr!r}"
    member = getattr(cls, attr)
    if called and not callable(member):
        return f"{shown} is not callable"
    if fields is not None and not (callable(member) or isinstance(
            inspect.getattr_static(cls, attr, None), property)):
        return f"{cls.__name__}.{attr} is not one of its fields"
    return None


def _resolve(ref: str, called: bool, real: Reality) -> tuple[Any, str | None, bool]:
    """(the vyre object ``ref`` names or None, a problem, whether ``ref`` is vyre's)."""
    parts = ref.lstrip(".").split(".")
    if ref.startswith("."):  # .step(...): a method of some public class, any of them
        owners = [c for c in real.classes.values() if callable(getattr(c, parts[0], None))]
        if not owners:
            return None, f"no vyre class has a method {parts[0]!r}", True
        return [getattr(c, parts[0]) for c in owners], None, True
    head, rest = parts[0], parts[1:]
    if head in real.modules:
        obj = real.modules[head]
        for i, part in enumerate(rest):
            if inspect.isclass(obj):
                problem = _attribute(obj, part, called and i == len(rest) - 1, ref)
                return (None if problem else getattr(obj, part, None)), problem, True
            if not hasattr(obj, part):
                return None, f"{'.'.join(parts[:i + 1])} has no attribute {part!r}", True
            obj = getattr(obj, part)
        return obj, None, True
    cls = real.classes.get(head) or real.instances.get(head)
    if cls is None:
        if re.fullmatch(r"[A-Z][a-z]\w*", head) and head not in FOREIGN_CLASSES:
            return None, f"{head!r} is not a vyre class", True
        if not rest and called:  # allocate_resident(...): a method of the facade
            owner = next((o for o in real.bare_owners if hasattr(o, head)), None)
            return (getattr(owner, head) if owner else None), None, owner is not None
        return None, None, False  # np.empty(...), suite.function, e.g.: not vyre's
    if not rest:
        return cls, None, True
    problem = _attribute(cls, rest[0], called and len(rest) == 1, ref)
    return (None if problem else getattr(cls, rest[0], None)), problem, True


def _cli_mentions(text: str, real: Reality, command: str | None) -> list[Mention]:
    out: list[Mention] = []
    spans: list[tuple[int, int]] = []
    for match in _VYRE_COMMAND.finditer(text):
        sub = match.group(1)
        quoted = text[:match.start()].count("`") % 2 == 1
        end = _SENTENCE_END.search(text, match.end()).start()
        for stop in ("`", ")", "vyre "):
            at = text.find(stop, match.end())
            end = min(end, at) if at >= 0 else end
        flags = _FLAG.findall(text, match.end(), end)
        if not (quoted or flags or sub in real.commands):
            continue  # "vyre keeps retrying": English
        spans.append((match.start(), end))
        if sub not in real.commands:
            out.append(Mention("cli", f"vyre {sub}", f"vyre has no sub-command {sub!r}"))
            continue
        out.append(Mention("cli", f"vyre {sub}", None))
        allowed = real.commands[sub] | real.top_options
        out += [Mention("cli", f"vyre {sub} {flag}",
                        None if flag in allowed else f"`vyre {sub}` has no option {flag}")
                for flag in flags]
    for match in _FOREIGN_COMMAND.finditer(text):  # pip install --force-reinstall: not ours
        spans.append((match.start(), _CLAUSE_END.search(text, match.end()).start()))
    for match in _FLAG.finditer(text):
        if any(a <= match.start() < b for a, b in spans):
            continue
        flag = match.group(1)
        if command in real.commands:
            allowed = real.commands[command] | real.top_options
            problem = f"`vyre {command}` has no option {flag}"
        else:
            allowed = real.top_options.union(*real.commands.values())
            problem = f"no vyre command has an option {flag}"
        out.append(Mention("cli", flag, None if flag in allowed else problem))
    return out


def mentions(text: str, command: str | None = None) -> list[Mention]:
    """Every option ``text`` names, each with the problem when it does not exist.
    ``command``: the sub-command whose module holds the text (its bare flags are its own)."""
    real = reality()
    out: list[Mention] = []
    handled: set[int] = set()  # positions of keywords that belong to a call
    spans: list[tuple[int, int]] = []  # dotted names and calls: no bare name in them
    for match in _DOTTED.finditer(text):
        ref, called = match.group(1), bool(match.group(2))
        if ("." not in ref or ref.startswith(".")) and not called:
            continue  # a word, or a file suffix such as (.py)
        obj, problem, vyres = _resolve(ref, called, real)
        spans.append(match.span())
        head = real.classes.get(ref.split(".")[0])
        if vyres and not called and ref.count(".") == 1 and _dataclass_fields(head):
            at = match.end()
            while more := _MORE_FIELDS.match(text, at):
                field = more.group(1)
                out.append(Mention("field", f"{head.__name__}.{field}",
                                   None if field in _dataclass_fields(head)
                                   else f"{head.__name__} has no field {field!r}"))
                spans.append(more.span())
                at = more.end()
        if called:
            end, args = _arguments(text, match.end(2) - 1)
            spans.append((match.end(), end))
            keywords = [(at + len(a) - len(a.lstrip()), m.group(1)) for at, a in args
                        if (m := re.match(r"\s*([A-Za-z_]\w*)\s*=(?!=)", a))]
            handled |= {at for at, _ in keywords}
        if not vyres:
            continue
        if "." in ref or problem:
            out.append(Mention("attribute", ref, problem))
        if not called:
            continue
        if obj is None:
            if keywords and not problem:
                problem = f"{ref} is not a vyre callable"
            out += [Mention("keyword", f"{ref}({kw}=)", problem) for _, kw in keywords]
            continue
        candidates = obj if isinstance(obj, list) else [obj]
        for _, kw in keywords:
            ok = any((accepted := _keywords_of(c, real)) is None or kw in accepted
                     for c in candidates)
            out.append(Mention("keyword", f"{ref}({kw}=)",
                               None if ok else f"{ref} takes no keyword {kw!r}"))
        positional = [a.strip() for _, a in args if a.strip()
                      and not re.match(r"\s*[A-Za-z_]\w*\s*=(?!=)", a)]
        explicit = "." in ref or ref in real.classes  # not a bare allocate_resident(...)
        if explicit and not any("..." in a or "…" in a for _, a in args):
            problems = [_arity_problem(c, len(positional), {kw for _, kw in keywords})
                        for c in candidates]
            out.append(Mention("arguments", f"{ref}({', '.join(positional)})",
                               None if None in problems else f"{ref} {problems[0]}"))
    for match in _BARE_KEYWORD.finditer(text):
        if match.start() in handled:
            continue
        kw, rest = match.group(1), text[match.end():]
        clause = rest[:_SENTENCE_END.search(rest).start()]
        target = re.search(r"\bto\s+(\.?[A-Za-z_][\w.]*)(\()?", clause)
        obj = None
        if target:
            obj, problem, _ = _resolve(target.group(1), bool(target.group(2)), real)
        if obj is not None and callable(obj):
            accepted = _keywords_of(obj, real)
            ok = accepted is None or kw in accepted
            out.append(Mention("keyword", f"{kw}= (to {target.group(1)})",
                               None if ok else f"{target.group(1)} takes no keyword {kw!r}"))
        else:
            out.append(Mention("keyword", f"{kw}=", None if kw in real.every_keyword else
                               f"no vyre callable or config takes {kw!r}"))
    for match in _SNAKE_NAME.finditer(text):
        name = match.group(1)
        if not name.startswith("vyre_") and not any(a <= match.start() < b for a, b in spans):
            out.append(Mention("name", name, None if name in real.names
                               else f"vyre defines nothing named {name!r}"))
    out += _cli_mentions(text, real, command)
    for match in re.finditer(r"(?<![\w$])(VYRE_[A-Z0-9_]+)\b(\s+=\s)?|\$([A-Z_][A-Z0-9_]*)",
                             text):
        name = match.group(1) or match.group(3)
        if match.group(2):  # `VYRE_CONTRACT = 1`: a plugin module's attribute
            out.append(Mention("module-attr", name, None if name in real.module_attrs
                               else f"vyre never reads a module attribute {name}"))
        else:
            out.append(Mention("env", name, None if name in real.env
                               else f"vyre never reads the environment variable {name}"))
    for match in re.finditer(r"(?<![\w.])(vyre_[a-z0-9_]+)\b(?!\.\w|/)", text):
        name = match.group(1)
        if name not in PACKAGES:
            out.append(Mention("hook", name, None if name in real.hooks
                               else f"the contract has no hook {name}"))
    for match in _REPO_PATH.finditer(text):
        path = match.group(1)
        out.append(Mention("path", path, None if (ROOT / path).exists()
                           else f"the repository has no {path}"))
    for match in re.finditer(r"`make\s+([\w.-]+)", text):
        out.append(Mention("make", f"make {match.group(1)}",
                           None if match.group(1) in real.make_targets
                           else f"the Makefile has no target {match.group(1)!r}"))
    return out


def _command_of(path: str) -> str | None:
    match = re.fullmatch(r"vyre_core/cli/(\w+)\.py", path)
    return match.group(1) if match else None


def checked() -> Iterator[tuple[FixText, Mention]]:
    for fix in collect_fix_texts():
        for mention in mentions(fix.text, _command_of(fix.path)):
            yield fix, mention


# -- the tests --------------------------------------------------------------------------------

def test_every_fix_names_only_options_that_exist():
    bad = [f"{fix.where}: {m.kind} {m.name!r}: {m.problem}\n    Fix: {fix.text}"
           for fix, m in checked() if m.problem]
    assert not bad, ("Fix texts name options that do not exist:\n" + "\n".join(bad))


#: Floors, not exact counts (Fix texts come and go): a collector or a pattern that breaks
#: finds far fewer, and this fails instead of passing with nothing checked.
AT_LEAST = {"attribute": 25, "keyword": 15, "arguments": 6, "field": 1, "name": 8, "cli": 8,
            "env": 8, "module-attr": 1, "hook": 3, "path": 3}


#: The same for the ways a Fix text is found: error calls, helpers (``_require``,
#: ``_refuse``, ``Exceeded``, ``Finding``), ``*fix*`` assignments, the validator's CODES.
FOUND_AT_LEAST = {"error": 120, "helper": 40, "assignment": 20, "holder": 20}


def test_the_collector_finds_the_fix_texts_and_their_options():
    fixes = collect_fix_texts()
    assert len(fixes) >= 200, f"only {len(fixes)} Fix texts collected"
    ways = Counter(f.via for f in fixes)
    for via, floor in FOUND_AT_LEAST.items():
        assert ways[via] >= floor, f"only {ways[via]} Fix texts found by {via}: {ways}"
    files = {f.path for f in fixes}
    for path in ("vyre_core/errors.py", "vyre_core/config.py", "vyre_core/sequence/model.py",
                 "vyre_core/ir/codes.py", "vyre_core/cli/doctor.py", "workers/server.py",
                 "vyre_core/host_memory.py", "plugins/vyre-cpu/vyre_cpu/compiler.py"):
        assert path in files, f"no Fix text collected from {path}"
    texts = {f.text for f in fixes}
    assert {cls.default_fix for cls in errors.catalog().values()} <= texts
    kinds = Counter(m.kind for _, m in checked())
    for kind, floor in AT_LEAST.items():
        assert kinds[kind] >= floor, f"only {kinds[kind]} {kind} mentions found: {kinds}"


@pytest.mark.parametrize(("text", "kind", "name"), [
    ("Pass shadow=True to Driver.dispatch.", "keyword", "shadow"),
    ("Raise DispatchConfig.no_such_field.", "attribute", "DispatchConfig.no_such_field"),
    ("Pass DispatchConfig(shadow=True).", "keyword", "shadow"),
    ("Call drv.dispatch(program, inputs, shadow=True).", "keyword", "shadow"),
    ("Allocate with allocate_resident(n, close_to=b).", "keyword", "close_to"),
    ("Raise PoolOptions.spinning.", "attribute", "PoolOptions.spinning"),
    ("Pass shadowing=True.", "keyword", "shadowing"),
    ("Call DispatchConfig.timeout() again.", "attribute", "DispatchConfig.timeout"),
    ("Recompile with Driver.recompile.", "attribute", "Driver.recompile"),
    ("Use vyre_core.NoSuchThing.", "attribute", "vyre_core.NoSuchThing"),
    ("Check it with DispatchConf.timeout.", "attribute", "DispatchConf.timeout"),
    ("Check `vyre doktor`.", "cli", "vyre doktor"),
    ("Run `vyre run TARGET --shadows`.", "cli", "vyre run --shadows"),
    ("Run `vyre bench --suite fast`.", "cli", "vyre bench --suite"),
    ("Rerun with --no-such-flag.", "cli", "--no-such-flag"),
    ("Check it with pip install x, then --no-such-flag.", "cli", "--no-such-flag"),
    ("Set VYRE_NO_SUCH_SETTING=1.", "env", "VYRE_NO_SUCH_SETTING"),
    ("Point $NO_SUCH_DIR elsewhere.", "env", "NO_SUCH_DIR"),
    ("Add `VYRE_CONTRACTS = 1` to the plugin.", "module-attr", "VYRE_CONTRACTS"),
    ("Implement vyre_compile_fast.", "hook", "vyre_compile_fast"),
    ("Tune RestartPolicy.max_restarts, recycle_afters and cooldown.", "field",
     "RestartPolicy.recycle_afters"),
    ("Tune RestartPolicy.cooldown or max_restart.", "field", "RestartPolicy.max_restart"),
    ("Return fewer buffers, or raise max_output_byte.", "name", "max_output_byte"),
    ("Run `make test-quick`.", "make", "make test-quick"),
    ("Declare fixed data with .constant(name, array).", "arguments", ".constant"),
    ("Send Program.to_wire(program).", "arguments", "Program.to_wire"),
    ("See docs/no-such-page.md.", "path", "docs/no-such-page.md"),
])
def test_the_checker_rejects_a_made_up_option(text, kind, name):
    bad = [m for m in mentions(text) if m.problem]
    assert [m.kind for m in bad] == [kind], (text, bad)
    assert name in bad[0].name, bad


@pytest.mark.parametrize("text", [
    "Raise DispatchConfig.timeout, or split the work into smaller dispatches.",
    "Pass config=DispatchConfig(...) (e.g. DispatchConfig(timeout=5.0)), or leave it out.",
    "Allocate them in one worker: drv.allocate_resident(nbytes, near=first_buffer).",
    "Pass backend='reference' to Driver.dispatch.",
    "Driver(workers=2) or Transport(spin=0.0) or RestartPolicy.max_restarts.",
    "RestartPolicy.cooldown, max_restarts and window tune this; raise max_output_bytes.",
    "Declare it read_write, or loop with until_zero and max_iterations ('my_flag').",
    "Use .constant(name, dtype, values), Program.to_wire() or drv.dispatch(p, [x], dim=4).",
    "See docs/operations.md and vyre_core/contract/hookspec.py (benchmarks/ too).",
    "Give each step its grid (SequenceBuilder.step(..., grid=...)).",
    "Check it against the reference (`vyre run TARGET --backend wgpu --shadow`).",
    "Run `vyre backends --probe`, `make test-fast` or vyre doctor --clean; --debug shows more.",
    "Point VYRE_RUNTIME_DIR (else $XDG_RUNTIME_DIR) elsewhere, or set VYRE_SHARED_MEMORY=0.",
    "Add `VYRE_CONTRACT = 1`; implement vyre_prepare. Use np.empty(n, dtype=np.float32).",
    "vyre keeps retrying; make both operands the same type, e.g. ir.u32.",
    "Run `pip install --force-reinstall x` or sudo apt-get --fix-broken install; .step(...).",
])
def test_the_checker_accepts_real_options(text):
    found = mentions(text)
    assert found and not [m for m in found if m.problem], found
