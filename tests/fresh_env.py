"""The environment of a fresh vyre process in a test: this one's, without the VYRE_
settings a test may have set, except the session's kernel cache (conftest), so that no
test compiles into the user's own cache."""

from __future__ import annotations

import os

KEPT = ("VYRE_CPU_CACHE_DIR",)


def fresh_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VYRE_") or k in KEPT}
    env.update(extra)
    return env
