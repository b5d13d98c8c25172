"""Files in the user's cache directory, shared by vyre's caches (tuning, probes): where the
directory is, and writing a file whole (a temporary file renamed over it), so a reader
never sees half of one and two writers leave one of their two."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path


def user_cache_dir(name: str, env: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/vyre/<name>``, else ``~/.cache/vyre/<name>`` (not created here)."""
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vyre" / name


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole, or not at all (OSError: nothing changed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.stem}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
