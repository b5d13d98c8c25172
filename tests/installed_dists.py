"""Throwaway installed distributions for tests: a ``*.dist-info`` written by hand into a
temporary site folder, so a subprocess with that folder on PYTHONPATH discovers plugins
that this venv never sees."""

from __future__ import annotations

import shutil
from pathlib import Path

from vyre_core.registry import ENTRY_POINT_GROUP

PLUGINS = Path(__file__).parent / "plugins"


def write_dist(site: Path, distribution: str, entry_points: dict[str, str],
               modules: tuple[str, ...]) -> Path:
    """A hand-written installed distribution: ``*.dist-info`` with METADATA and
    entry_points.txt, plus the plugin modules copied from tests/plugins/."""
    site.mkdir(parents=True, exist_ok=True)
    info = site / f"{distribution.replace('-', '_')}-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n" + "".join(f"{n} = {v}\n" for n, v in entry_points.items()))
    for module in modules:
        shutil.copy(PLUGINS / f"{module}.py", site / f"{module}.py")
    return site
