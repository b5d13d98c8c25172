"""``vyre backends``: what is installed, in precedence order, and whether it loads;
``--probe`` starts each backend's worker and shows what it found on its device."""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import Any

from vyre_core.cli.app import ERROR
from vyre_core.cli.output import print_error, print_json, print_table, progress, styled
from vyre_core.driver import Driver
from vyre_core.errors import PluginLoadError, VyreError
from vyre_core.registry import Registry
from vyre_core.routing import is_software_adapter


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("backends", help="list the installed backends in precedence order")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--probe", action="store_true",
                   help="start each backend's worker and add its probed capabilities")
    p.set_defaults(func=run)


def listing(registry: Registry, probe: bool, show_progress: bool = False) -> list[dict[str, Any]]:
    """One record per installed plugin (``name``: its entry point): loaded ones in
    precedence order, then broken, then disabled ones."""
    rows = [_row(r.entry_point.partition(" = ")[0], r.distribution, "loaded", id=r.id,
                 version=r.version, precedence=r.precedence, reference=r.is_reference,
                 entry_point=r.entry_point) for r in registry.backends()]
    rows += [_row(b.name, b.distribution, "broken", reason=b.error, traceback=b.traceback)
             for b in registry.broken]
    rows += [_row(d.name, d.distribution, "disabled", entry_point=d.entry_point,
                  reason="not selected by VYRE_LOAD_PLUGINS") for d in registry.disabled]
    if probe:
        loaded = [row for row in rows if row["status"] == "loaded"]
        with Driver(registry) as drv, progress("probing", len(loaded), show_progress) as bar:
            for row in loaded:
                row.update(_probed(drv, row["id"]))
                bar.advance(row["id"])
    return rows


def _row(name: str, distribution: str | None, status: str, **fields: Any) -> dict[str, Any]:
    row = {"name": name, "id": name, "version": None, "distribution": distribution,
           "distribution_version": _dist_version(distribution), "precedence": None,
           "reference": False, "status": status, "reason": None, "entry_point": None,
           "traceback": None}
    row.update(fields)
    return row


def _dist_version(distribution: str | None) -> str | None:
    try:
        return None if distribution is None else metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _probed(drv: Driver, backend: str) -> dict[str, Any]:
    try:
        caps = drv.probe(backend)
    except VyreError as exc:
        return {"status": "failed to start", "reason": exc.cause.splitlines()[0],
                "fix": exc.fix, "capabilities": None,
                "traceback": exc.details.get("stderr") or None}
    extra = caps.extra
    return {"capabilities": caps.to_dict(),
            "adapter": extra.get("device") or extra.get("description"),
            "adapter_type": extra.get("adapter_type"), "api": extra.get("backend_type"),
            "software_adapter": is_software_adapter(caps),
            "devices": [d.to_dict() for d in drv.devices(backend)],
            "nodes": _nodes(drv.status()["pools"][backend])}


def _nodes(pool: dict[str, Any]) -> list[dict[str, Any]] | None:
    """On a Ray cluster: each node, and how many of the backend's workers run there."""
    if "nodes" not in pool:
        return None
    placed = [w.get("node") for w in pool["workers"]]
    return [{**n, "workers": placed.count(n["node"])} for n in pool["nodes"]]


def describe_devices(devices: list[dict[str, Any]]) -> str:
    """A backend's devices, one line each: the ids ``PoolOptions(devices=...)`` takes."""
    lines = []
    for d in devices:
        memory = "" if d["memory_bytes"] is None else f", {d['memory_bytes'] / 2**30:.1f} GiB"
        lines.append(f"{d['id']}: {d['name']}{memory}"
                     + (" (software)" if d["software"] else ""))
    return "\n".join(lines) or "-"


def run(args: argparse.Namespace) -> int:
    registry = Registry.discover()
    rows = listing(registry, args.probe, show_progress=not args.json)
    try:
        registry.check_selection()
    except PluginLoadError as exc:  # (listed anyway: what is installed is the answer)
        refused: PluginLoadError | None = exc
    else:
        refused = None
    if args.json:
        print_json(rows)
    else:
        _print_rows(args, rows)
    if refused is not None:
        print_error(refused, as_json=False)  # (stdout holds the listing)
        return ERROR
    return 0


def _print_rows(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    columns = ["id", "version", "distribution", "precedence", "status"]
    if args.probe:
        columns += ["adapter", "devices"]
    table = []
    for row in rows:
        status = styled({"loaded": ("loaded", "green"), "disabled": ("disabled", "yellow")}.get(
            row["status"], (row["status"], "red")),
            f": {row['reason']}" if row["reason"] else "",
            " (reference oracle)" if row["reference"] else "")
        cells = [row["id"], row["version"] or "-", row["distribution"] or "-",
                 "-" if row["precedence"] is None else row["precedence"], status]
        if args.probe:
            adapter = row.get("adapter") or ("-" if row.get("capabilities") is None else "host")
            cells.append(styled(adapter, (" (software)", "yellow") if row.get("software_adapter")
                                else ""))
            cells.append(describe_devices(row.get("devices") or []))
        table.append(cells)
    print_table(columns, table, title="vyre backends (routing order: lowest precedence first)")
    nodes = [(row["id"], n) for row in rows for n in row.get("nodes") or []]
    if nodes:
        print_table(["backend", "node", "address", "alive", "CPU", "GPU", "workers"],
                    [[b, n["node"][:12], n["address"] or "-", "yes" if n["alive"] else
                      styled(("no", "red")), f"{n['resources'].get('CPU', 0):g}",
                      f"{n['resources'].get('GPU', 0):g}", n["workers"]] for b, n in nodes],
                    title="Ray cluster nodes (VYRE_CLUSTER)")
