"""The conformance kit as a pytest plugin (entry point ``pytest11``), for backend authors:
``pytest --vyre-backend=ID`` adds the kit's tests (``vyre_core.conformance.kit``) to the
session, run against backend ID through its real worker process, and ends with a summary
of every verdict that is not a plain pass.

Without the option the plugin does nothing, so it is harmless in every other test suite.
"""

from __future__ import annotations

from collections import Counter

import pytest

from vyre_core.conformance import kit


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vyre", "vyre conformance kit")
    group.addoption("--vyre-backend", metavar="ID", dest="vyre_backend", default=None,
                    help="run the vyre conformance kit (contract checks, capability "
                         "honesty, the whole corpus) against backend ID")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("vyre_backend"):
        config.args.append(kit.__file__)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    results = config.stash.get(kit.RESULTS, [])
    if not results:
        return
    counts = Counter(r.verdict for r in results)
    terminalreporter.section(f"vyre conformance kit: backend {results[0].backend!r}")
    terminalreporter.line(", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    for r in results:
        if r.verdict != "pass":
            terminalreporter.line(f"  {r.verdict:9} {r.case}: {r.detail}")
