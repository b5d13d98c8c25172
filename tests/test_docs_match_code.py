"""The reference pages in docs/ are checked against the code, so they cannot drift."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from vyre_core.contract import hookspec
from vyre_core.contract.manager import HOOK_NAMES, REQUIRED_HOOKS
from vyre_core.errors import catalog

DOCS = Path(__file__).resolve().parent.parent / "docs"


def table_rows(page: str, prefix: str) -> list[list[str]]:
    text = (DOCS / page).read_text()
    return [[cell.strip() for cell in line.strip("|").split(" | ")]
            for line in text.splitlines() if line.startswith(prefix)]


def test_error_catalog_lists_every_class_with_its_code_and_docstring():
    rows = {code: (cls, when) for code, cls, when in table_rows("errors.md", "| E")}
    assert rows == {f"E{code}": (f"`{cls.__name__}`", inspect.getdoc(cls).splitlines()[0])
                    for code, cls in catalog().items()}


def test_contract_page_lists_every_hook_with_its_arguments_and_default():
    rows = {name.strip("`"): (args, default)
            for name, args, default in table_rows("contract.md", "| `vyre_")}
    expected = {}
    for name in HOOK_NAMES:
        fn = getattr(hookspec, name)
        doc = " ".join(inspect.getdoc(fn).split())
        default = ("**required**" if name in REQUIRED_HOOKS
                   else re.search(r"Default: (.*)$", doc).group(1))
        expected[name] = (", ".join(inspect.signature(fn).parameters) or "—", default)
    assert rows == expected


def test_readme_kernel_and_driver_snippets_run_as_written(capsys):
    """A new user pastes the README's first two Python blocks; they must work."""
    readme = (DOCS.parent / "README.md").read_text()
    kernel, routing = re.findall(r"```python\n(.*?)```", readme, re.S)[:2]
    namespace: dict = {}
    exec(compile(kernel + routing, "README.md", "exec"), namespace)
    assert namespace["out"][0].tobytes() == namespace["result"].tobytes()
    assert namespace["again"][0].tobytes() == namespace["result"].tobytes()
    assert "reference (rank 900): chosen" in capsys.readouterr().out
