"""The environment of a fresh vyre process in a test: this one's, without the VYRE_
settings a test may have set, except the session's kernel and probe caches (conftest), so
that no test compiles or probes into the user's own caches."""

from __future__ import annotations

import os

KEPT = ("VYRE_CPU_CACHE_DIR", "VYRE_PROBE_CACHE")


def fresh_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VYRE_") or k in KEPT}
    env.update(extra)
    return env
