"""``vyre backends``: what is installed, in routing order, and whether it loads;
``--probe`` starts each backend's worker and shows what it found on its device. Without
it, what earlier probes found (the probe cache) places a demoted software adapter; a
backend never probed is listed by its precedence."""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import Any

from vyre_core.cli.app import ERROR
from vyre_core.cli.output import console, print_error, print_json, print_table, progress, styled
from vyre_core.contract.types import Capabilities
from vyre_core.driver import Driver
from vyre_core.errors import PluginLoadError, VyreError
from vyre_core.probe_cache import ProbeCache
from vyre_core.registry import Registry
from vyre_core.routing import DEMOTED, demotable, is_software_adapter, routing_order


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("backends", help="list the installed backends in precedence order")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--probe", action="store_true",
                   help="start each backend's worker and add its probed capabilities")
    p.set_defaults(func=run)


def listing(registry: Registry, probe: bool, show_progress: bool = False) -> list[dict[str, Any]]:
    """One record per installed plugin (``name``: its entry point): loaded ones in routing
    order, then broken, then disabled ones. A loaded one's ``demoted`` is True for a
    software adapter routing moves below the reference, None when it was never probed
    and a probe could demote it; ``probed`` says where its facts come from (``worker``:
    ``--probe``, ``cache``: an earlier probe, None: never probed)."""
    regs = registry.backends()
    loaded = [_row(r.entry_point.partition(" = ")[0], r.distribution, "loaded", id=r.id,
                   version=r.version, precedence=r.precedence, reference=r.is_reference,
                   entry_point=r.entry_point, probed=None) for r in regs]
    probed: dict[str, Capabilities] = {}
    if probe:
        with Driver(registry) as drv, progress("probing", len(loaded), show_progress) as bar:
            for row in loaded:
                row.update(_probed(drv, row["id"]))
                if row["capabilities"] is not None:
                    row["probed"] = "worker"
                    probed[row["id"]] = Capabilities.from_dict(row["capabilities"])
                bar.advance(row["id"])
    else:
        cache = ProbeCache.from_env()
        for row, reg in zip(loaded, regs, strict=True):
            caps = cache.load(reg)
            if caps is not None:
                row.update(probed="cache", software_adapter=is_software_adapter(caps))
                probed[reg.id] = caps
    by_id = {row["id"]: row for row in loaded}
    rows = []
    for reg, _, moved, _ in routing_order([(r, probed.get(r.id, r.claims)) for r in regs]):
        row = by_id[reg.id]
        row["demoted"] = moved if reg.id in probed or not demotable(regs, reg.id) else None
        rows.append(row)
    rows += [_row(b.name, b.distribution, "broken", reason=b.error, traceback=b.traceback)
             for b in registry.broken]
    rows += [_row(d.name, d.distribution, "disabled", entry_point=d.entry_point,
                  reason="not selected by VYRE_LOAD_PLUGINS") for d in registry.disabled]
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
            " (reference oracle)" if row["reference"] else "",
            (f", {DEMOTED}", "yellow") if row.get("demoted") else "")
        cells = [row["id"], row["version"] or "-", row["distribution"] or "-",
                 "-" if row["precedence"] is None else row["precedence"], status]
        if args.probe:
            adapter = row.get("adapter") or ("-" if row.get("capabilities") is None else "host")
            cells.append(styled(adapter, (" (software)", "yellow") if row.get("software_adapter")
                                else ""))
            cells.append(describe_devices(row.get("devices") or []))
        table.append(cells)
    print_table(columns, table, title="vyre backends (routing order: lowest precedence first; "
                "a software adapter demoted below the reference)")
    unknown = [row["id"] for row in rows if row["status"] == "loaded" and row.get("demoted")
               is None and "demoted" in row]
    if unknown:
        console.print(f"never probed: {', '.join(unknown)}, listed by precedence (a software "
                      "adapter would be demoted below the reference); `vyre backends --probe` "
                      "probes them")
    nodes = [(row["id"], n) for row in rows for n in row.get("nodes") or []]
    if nodes:
        print_table(["backend", "node", "address", "alive", "CPU", "GPU", "workers"],
                    [[b, n["node"][:12], n["address"] or "-", "yes" if n["alive"] else
                      styled(("no", "red")), f"{n['resources'].get('CPU', 0):g}",
                      f"{n['resources'].get('GPU', 0):g}", n["workers"]] for b, n in nodes],
                    title="Ray cluster nodes (VYRE_CLUSTER)")
