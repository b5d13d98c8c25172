"""The contract freeze: a description of every hook (arguments, first-result, required,
defaulted) compared with the committed snapshot ``contract.json``.

Removing a hook or changing its arguments or flags is a break of contract major 1 and is
reported; a new hook is accepted only when the defaults plugin implements it.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from vyre_core.contract import hookspec as hookspec_module
from vyre_core.contract.defaults import ConservativeDefaults
from vyre_core.contract.hookspec import PROJECT
from vyre_core.contract.manager import REQUIRED_HOOKS

SNAPSHOT = Path(__file__).with_name("contract.json")


def describe(spec: ModuleType | type = hookspec_module,
             defaults: type = ConservativeDefaults) -> dict[str, dict[str, Any]]:
    """Each hook of ``spec``: argument names, firstresult, required, has a default."""
    described = {}
    for name, fn in sorted(vars(spec).items()):
        opts = getattr(fn, f"{PROJECT}_spec", None)
        if opts is None or not name.startswith("vyre_"):
            continue
        described[name] = {
            "args": [p for p in inspect.signature(fn).parameters if p != "self"],
            "firstresult": bool(opts.get("firstresult")),
            "required": name in REQUIRED_HOOKS,
            "default": callable(getattr(defaults, name, None)),
        }
    return described


def load_snapshot(path: Path = SNAPSHOT) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text())["hooks"]


def write_snapshot(path: Path = SNAPSHOT) -> None:
    """Record the current contract (run only when intentionally adding hooks)."""
    path.write_text(json.dumps({"contract_major": hookspec_module.CONTRACT_MAJOR,
                                "hooks": describe()}, indent=2, sort_keys=True) + "\n")


def drift(live: dict[str, dict[str, Any]], snapshot: dict[str, dict[str, Any]]) -> list[str]:
    """Every way ``live`` breaks the frozen ``snapshot``; empty when it does not."""
    problems = []
    for name, frozen in snapshot.items():
        now = live.get(name)
        if now is None:
            problems.append(f"{name} was removed")
            continue
        for key in ("args", "firstresult", "required"):
            if now[key] != frozen[key]:
                problems.append(f"{name}: {key} changed from {frozen[key]} to {now[key]}")
        if frozen["default"] and not now["default"]:
            problems.append(f"{name} lost its default")
    for name, now in live.items():
        if name not in snapshot and (now["required"] or not now["default"]):
            problems.append(f"{name} is new but has no default in ConservativeDefaults")
    return problems


if __name__ == "__main__":
    write_snapshot()
    print(f"wrote {SNAPSHOT}")
