"""What a wheel of vyre holds: every package of the source tree, so that an install that is
not editable (``pip install .``) imports everything an editable one does. (The routing and
sequence packages were once missing from the list, and only editable installs worked.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_of_the_tree_is_in_the_wheel():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    where = {name: ROOT / path for name, path in config["package-dir"].items()}
    found = set()
    for top in ("vyre_core", *where):
        base = where.get(top, ROOT / top)
        for init in base.rglob("__init__.py"):
            parts = init.parent.relative_to(base).parts
            # (a folder that is no identifier is another distribution: template-backend)
            if all(p.isidentifier() and p != "__pycache__" for p in parts):
                found.add(".".join((top, *parts)))
    assert found and found <= listed, f"missing from pyproject's packages: {found - listed}"
