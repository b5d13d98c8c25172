"""The layers of docs/architecture.md ("The layers"), checked on every module by parsing
it (no import runs): no module imports a room of a higher layer; vyre_core and the worker
never import a backend, and vyre_core never the worker package; a plugin imports only the
plugin-facing surface; no circle runs between rooms, nor through the imports that run at
a module's import inside one room.

The imports allowed across the rules are listed in ``CROSSINGS``, each with why. The
list may only shrink: an entry that no longer matches an import fails too, so removing an
import means removing its entry.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from source_tree import ROOT, Import, imports, modules

pytestmark = pytest.mark.fast

#: Each layer's rooms, bottom to top (a room is a module or a package of vyre_core,
#: ``vyre_workers``, or a plugin). A room may import its own layer and those below.
LAYERS: dict[int, tuple[str, ...]] = {
    0: ("errors", "deprecations", "deadline", "framing", "spinning", "cancel", "cachefiles",
        "memory", "dataplane", "lifetime", "__version__"),
    1: ("ir",),
    2: ("config", "compare", "shared_arrays", "abi", "boundary", "mathlib"),
    3: ("kernels",),
    4: ("sequence",),
    5: ("contract", "host_memory", "limits", "launch", "pipeline", "registry"),
    6: ("vyre_workers",),
    7: ("supervisor",),
    8: ("cluster", "observability", "observability.tracing"),
    9: ("pools", "probe_cache"),
    10: ("routing",),
    11: ("tuning", "shadow_sampler", "saved"),
    12: ("driver",),
    13: ("lib", "shadow", "example", "conformance", "testing", "observability.prometheus",
         "cli", "vyre_core"),
}

#: The backends: each one room, above the plugin-facing surface (layers 0 to 5) and
#: imported by nothing of vyre_core or the worker (a backend is loaded by its entry point).
PLUGINS = ("vyre_reference", "vyre_cpu", "vyre_wgpu", "vyre_faults")

#: Imports across the rules that stay, each with why.
CROSSINGS = {
    ("vyre_core.cluster.connect", "vyre_workers.ray_actor"):
        "Ray must be handed the worker's actor class",
    ("vyre_core.cluster.ray_pool", "vyre_workers.ray_actor"):
        "Ray must be handed the worker's actor class",
    ("vyre_faults.backend", "vyre_core.testing.faults"):
        "the fault backends speak the fault kit's vocabulary",
    ("vyre_faults.wgpu", "vyre_core.testing.faults"):
        "the fault backends speak the fault kit's vocabulary",
    ("vyre_faults.backend", "vyre_reference"): "a fault backend wraps the reference backend",
    ("vyre_faults.backend", "vyre_reference.backend"):
        "a fault backend wraps the reference backend",
    ("vyre_faults.wgpu", "vyre_wgpu.backend"): "a fault backend wraps the wgpu backend",
}

#: Circles through imports inside functions of one room, each with why it stays or the
#: step that removes it (only ever remove entries).
ROOM_CIRCLES = {
    frozenset({"vyre_core.ir.program", "vyre_core.ir.validate", "vyre_core.ir.requirements",
               "vyre_core.ir.specialize", "vyre_core.ir.indexing"}):
        "stays: Program's public methods import their modules inside the method",
    frozenset({"vyre_cpu.codegen", "vyre_cpu.lockstep_proven"}):
        "step 19: the cpu split moves the writer both use into vyre_cpu/writer.py",
}


def room(module: str) -> str:
    """The room a module is in: the longest room name that holds it."""
    names = [n for rooms in LAYERS.values() for n in rooms] + list(PLUGINS)
    qualified = {n if n.startswith("vyre_") else f"vyre_core.{n}": n for n in names}
    best = max((q for q in qualified if module == q or module.startswith(q + ".")),
               key=len, default=None)
    assert best is not None, f"{module} is in no room: add it to LAYERS"
    return best


def layer(module: str) -> float:
    """The layer of a module's room; a plugin's is between 5 and 6."""
    name = room(module)
    if name in PLUGINS:
        return 5.5
    short = name if name in ("vyre_workers", "vyre_core") else name.removeprefix("vyre_core.")
    return next(n for n, rooms in LAYERS.items() if short in rooms)


def broken_rule(imp: Import) -> str | None:
    """Which rule an import breaks, in words; None when it keeps them all."""
    source, target = room(imp.source), room(imp.target)
    if source == target:
        return None
    if target in PLUGINS:
        return "imports a backend (a backend is loaded by its entry point)"
    if source.startswith("vyre_core") and target == "vyre_workers":
        return "vyre_core imports the worker package"
    if source in PLUGINS and target not in PLUGINS and layer(imp.target) > 5:
        return f"a plugin imports layer {layer(imp.target)} (plugins import 0 to 5)"
    if layer(imp.target) > layer(imp.source):
        return f"layer {layer(imp.source)} imports layer {layer(imp.target)}"
    return None


def _broken() -> dict[tuple[str, str], list[Import]]:
    found: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for imp in imports():
        if broken_rule(imp):
            found[imp.source, imp.target].append(imp)
    return found


def test_every_module_is_in_a_room():
    for module in modules():
        room(module)


def test_no_module_imports_across_the_layers_but_the_listed_ones():
    found = _broken()
    unlisted = [f"{_where(imps[0])}: {pair[0]} -> {pair[1]}: {broken_rule(imps[0])}"
                for pair, imps in sorted(found.items())
                if pair not in CROSSINGS]
    assert not unlisted, ("imports across the layers of docs/architecture.md:\n" +
                          "\n".join(unlisted))


def test_the_lists_of_exceptions_only_shrink():
    """An entry whose import is gone must go from the list (so it cannot come back)."""
    found = _broken()
    stale = sorted(set(CROSSINGS) - set(found))
    assert not stale, f"these imports are gone: remove their entries: {stale}"


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected parts of more than one node (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        part.add(member)
                        if member == node:
                            break
                    if len(part) > 1:
                        found.append(frozenset(part))
    return found


def test_no_circle_between_rooms():
    """Any import counts (inside functions and for typing too): a circle between rooms
    means neither can be understood, or moved, alone. The listed crossings are set
    aside."""
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in imports():
        if (imp.source, imp.target) not in CROSSINGS:
            source, target = room(imp.source), room(imp.target)
            if source != target:
                graph[source].add(target)
    assert _cycles(graph) == []


def test_no_circle_of_running_imports_inside_a_room():
    """Imports that run when a module is imported (not inside a function, not for
    typing) never go round in a circle: the order of a first import would decide what
    exists. Circles through function-level imports are listed, each with why."""
    running: dict[str, set[str]] = defaultdict(set)
    every: dict[str, set[str]] = defaultdict(set)
    for imp in imports():
        if room(imp.source) == room(imp.target):
            every[imp.source].add(imp.target)
            if imp.kind == "module":
                running[imp.source].add(imp.target)
    assert _cycles(running) == []
    assert set(_cycles(every)) == set(ROOM_CIRCLES), (
        "the circles through imports in functions are not the listed ones: new "
        f"{set(_cycles(every)) - set(ROOM_CIRCLES)}, gone (remove their entries) "
        f"{set(ROOM_CIRCLES) - set(_cycles(every))}")


def test_the_architecture_page_states_the_same_layers():
    """docs/architecture.md's table "The layers" is this module's LAYERS, row by row."""
    page = (ROOT / "docs/architecture.md").read_text()
    section = page.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\|\s*(\d+)\s*\|(.*?)\|", line)
        if match:
            rows[int(match[1])] = tuple(re.findall(r"`([^`]+)`", match[2]))
    assert rows == {n: tuple(_written(r) for r in rooms) for n, rooms in LAYERS.items()}


def _written(name: str) -> str:
    """A room as the page writes it: a package with a slash, a module with ``.py``."""
    if name in ("vyre_workers", "vyre_core", "__version__"):
        return {"vyre_workers": "workers/", "vyre_core": "vyre_core/__init__.py",
                "__version__": "vyre_core.__version__"}[name]
    path = ROOT / "vyre_core" / Path(*name.split("."))
    return f"{path.relative_to(ROOT / 'vyre_core')}/" if path.is_dir() else \
        f"{path.relative_to(ROOT / 'vyre_core')}.py"


def _where(imp: Import) -> str:
    return f"{modules()[imp.source].relative_to(ROOT)}:{imp.line}"
