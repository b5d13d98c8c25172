"""The conformance kit as a pytest plugin (entry point ``pytest11``), for backend authors:
``pytest --vyre-backend=ID`` adds the kit's tests (``vyre_core.conformance.kit``) to the
session, run against backend ID through its real worker process, and ends with a summary
of every verdict that is not a plain pass. Their node ids are stable (``::test_corpus[add_u32]``:
the kit lies outside the author's folder) and ``-k`` selects them; for node ids a path
selects too, import the kit into a test module (see ``kit``).

Without the option the plugin does nothing and imports nothing of the kit (no corpus is
built), so it is harmless and free in every other test suite.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from vyre_core.errors import did_you_mean

if TYPE_CHECKING:
    from vyre_core.registry import Registry

#: The kit's test module, added to the session's arguments when the option is given.
KIT = Path(__file__).with_name("kit.py")
#: Where the kit keeps each case's verdict for the summary.
RESULTS = pytest.StashKey["list[CaseResult]"]()
#: The registry the backend was checked in, which the kit's driver then uses.
REGISTRY = pytest.StashKey["Registry"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vyre", "vyre conformance kit")
    group.addoption("--vyre-backend", metavar="ID", dest="vyre_backend", default=None,
                    help="run the vyre conformance kit (contract checks, capability "
                         "honesty, the whole corpus) against backend ID")


def pytest_configure(config: pytest.Config) -> None:
    backend = config.getoption("vyre_backend")
    if backend:
        from vyre_core.registry import Registry

        registry = config.stash[REGISTRY] = Registry.discover()
        problem = kit_refusal(registry, backend)
        if problem is not None:  # (one error, not one per kit test)
            raise pytest.UsageError(problem)
        config.args.append(str(KIT))


def kit_refusal(registry: Registry, backend: str) -> str | None:
    """Why the kit cannot run against ``backend`` (None: it can), with a Fix line."""
    if backend in registry.ids():
        return None
    broken = next((b for b in registry.broken if b.name == backend), None)
    if broken is not None:
        return (f"--vyre-backend {backend!r}: the plugin is installed but failed to load: "
                f"{broken.error}\nFix: see `vyre doctor` for its traceback, mend the plugin "
                "and reinstall it.")
    if any(d.name == backend for d in registry.disabled):
        return (f"--vyre-backend {backend!r}: the plugin is left out by VYRE_LOAD_PLUGINS\n"
                f"Fix: add {backend!r} to VYRE_LOAD_PLUGINS, or unset it.")
    installed = registry.ids()
    return (f"--vyre-backend {backend!r}: no such backend is installed"
            f"{did_you_mean(backend, installed)} (installed: {', '.join(installed) or 'none'})"
            "\nFix: pip install the backend's distribution (pip install -e . in its "
            "folder), or name an installed backend.")


@pytest.hookimpl(trylast=True)  # (after -k and -m: dedupe what they kept)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A kit test that a module of the session imports (for node ids of its own) runs
    there, and is dropped from the copy of the kit the option added: each runs once."""
    if not config.getoption("vyre_backend"):
        return
    modules = {id(m): m for item in items if item.path != KIT
               and (m := getattr(item, "module", None)) is not None}
    imported = {value for module in modules.values() for value in vars(module).values()
                if getattr(value, "__module__", None) == "vyre_core.conformance.kit"}
    dropped = [item for item in items if item.path == KIT
               and getattr(item, "function", None) in imported]
    if dropped:
        items[:] = [item for item in items if item not in dropped]
        config.hook.pytest_deselected(items=dropped)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    results = config.stash.get(RESULTS, [])
    if not results:
        return
    counts = Counter(r.verdict for r in results)
    terminalreporter.section(f"vyre conformance kit: backend {results[0].backend!r}")
    terminalreporter.line(", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    for r in results:
        if r.verdict != "pass":
            terminalreporter.line(f"  {r.verdict:9} {r.case}: {r.detail}")
