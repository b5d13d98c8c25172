"""The conformance kit as a pytest plugin (entry point ``pytest11``), for backend authors:
``pytest --vyre-backend=ID`` adds the kit's tests (``vyre_core.conformance.kit``) to the
session, run against backend ID through its real worker process, and ends with a summary
of every verdict that is not a plain pass.

Without the option the plugin does nothing and imports nothing of the kit (no corpus is
built), so it is harmless and free in every other test suite.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    pass

#: The kit's test module, added to the session's arguments when the option is given.
KIT = Path(__file__).with_name("kit.py")
#: Where the kit keeps each case's verdict for the summary.
RESULTS = pytest.StashKey["list[CaseResult]"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vyre", "vyre conformance kit")
    group.addoption("--vyre-backend", metavar="ID", dest="vyre_backend", default=None,
                    help="run the vyre conformance kit (contract checks, capability "
                         "honesty, the whole corpus) against backend ID")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("vyre_backend"):
        config.args.append(str(KIT))


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
