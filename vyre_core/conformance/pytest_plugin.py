"""The conformance kit as a pytest plugin (entry point ``pytest11``), for backend authors:
``pytest --vyre-backend=ID`` adds the kit's tests (``vyre_core.conformance.kit``) to the
session, run against backend ID through its real worker process.

Without the option the plugin does nothing, so it is harmless in every other test suite.
"""

from __future__ import annotations

import pytest

from vyre_core.conformance import kit

OPTION = "--vyre-backend"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vyre", "vyre conformance kit")
    group.addoption(OPTION, metavar="ID", dest="vyre_backend", default=None,
                    help="run the vyre conformance kit (contract checks, capability "
                         "honesty, the whole corpus) against backend ID")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("vyre_backend"):
        config.args.append(kit.__file__)
