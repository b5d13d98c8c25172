"""``vyre doctor``: is this installation able to run programs, and if not, what to do.

It lists Python, vyre, every installed plugin (loaded, broken with its error, disabled),
the Vulkan loader and driver manifests, the adapter each loaded backend found (probed in
the backend's own worker: this process never imports a device library nor opens a
device) and run directories left behind by dead drivers. Every problem comes with its
Fix; exit 1 when there is one. ``--clean`` removes the stale run directories.
"""

from __future__ import annotations

import argparse
import ctypes.util
import json
import os
import platform
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vyre_core import __version__, deprecations
from vyre_core.cli.backends import describe_devices, listing
from vyre_core.cli.output import console, err_console, ok, print_json, print_table, styled
from vyre_core.errors import SystemResourceError
from vyre_core.registry import SELECT_ENV, Registry
from vyre_core.supervisor import rundir

#: Where the Vulkan loader looks for driver (ICD) manifests when no variable overrides it.
ICD_DIRS = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d")
#: Variables that replace the search: the current name first, then the older one.
ICD_ENV = ("VK_DRIVER_FILES", "VK_ICD_FILENAMES")
VULKAN_FIX = "sudo apt install libvulkan1 mesa-vulkan-drivers"
#: Backends that reach their device through Vulkan (wgpu does on Linux).
VULKAN_BACKENDS = ("wgpu",)


@dataclass(frozen=True)
class Finding:
    """One row of the verdict: a problem (has a fix, fails the check) or a note."""

    what: str
    detail: str
    fix: str | None = None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check plugins, Vulkan, adapters and run directories")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--clean", action="store_true",
                   help="remove the run directories (and sockets) left by dead drivers")
    p.set_defaults(func=run)


# -- plugins ------------------------------------------------------------------------------


def plugin_findings(rows: list[dict[str, Any]], not_installed: list[str]) -> list[Finding]:
    out = []
    for row in rows:
        if row["status"] == "broken":
            dist = row["distribution"]
            fix = (f"pip install --force-reinstall {dist} or uninstall it (pip uninstall {dist})"
                   if dist else f"reinstall the distribution of entry point "
                   f"{row['name']!r} or uninstall it")
            out.append(Finding(f"plugin {row['name']!r} is broken", row["reason"], fix))
        elif row["status"] == "disabled":
            out.append(Finding(f"plugin {row['name']!r} is disabled",
                               "left out by VYRE_LOAD_PLUGINS"))
    if not_installed:
        out.append(Finding(f"{SELECT_ENV} names plugins that are not installed",
                           ", ".join(not_installed), f"correct {SELECT_ENV} (installed: "
                           + ", ".join(row["name"] for row in rows) + ")"))
    for row in rows:
        for entry in row.get("deprecated", ()):
            out.append(Finding(f"plugin {row['name']!r} uses a deprecated hook",
                               f"{entry['name']} (deprecated since vyre {entry['since']}, "
                               f"removed in {entry['removed_in']}): {entry['fix']}"))
    if not any(row["status"] == "loaded" for row in rows):
        out.append(Finding("no backend is loaded", "nothing can run a program",
                           "pip install vyre-reference (the oracle runs every program), "
                           "or unset VYRE_LOAD_PLUGINS"))
    return out


# -- Vulkan -------------------------------------------------------------------------------


def vulkan() -> dict[str, Any]:
    """The loader library and the driver manifests the loader would read. Only looks at
    files: loading the library is left to the backends' workers."""
    overrides = {name: os.environ[name] for name in ICD_ENV if os.environ.get(name)}
    if overrides:
        source = next(iter(overrides))
        candidates = [Path(p) for p in overrides[source].split(os.pathsep) if p]
    else:
        source = "search path"
        candidates = [Path(d) for d in ICD_DIRS]
    manifests, missing = [], []
    for path in candidates:
        if path.is_dir():
            manifests += [_manifest(m) for m in sorted(path.glob("*.json"))]
        elif path.is_file():
            manifests.append(_manifest(path))
        elif overrides:
            missing.append(str(path))
    return {"loader": ctypes.util.find_library("vulkan"), "icd_source": source,
            "icd_env": overrides, "icds": manifests, "icd_missing": missing}


def _manifest(path: Path) -> dict[str, Any]:
    try:
        library = json.loads(path.read_text()).get("ICD", {}).get("library_path")
        error = None
    except (OSError, ValueError, AttributeError) as exc:
        library, error = None, f"unreadable: {exc}"
    return {"path": str(path), "library": library, "error": error}


def vulkan_findings(facts: dict[str, Any], wanted: bool) -> list[Finding]:
    """Missing Vulkan pieces are problems when a Vulkan backend is installed, else notes."""
    out = []
    fix = VULKAN_FIX if wanted else None
    if facts["loader"] is None:
        out.append(Finding("no Vulkan loader", "libvulkan was not found by the dynamic "
                           "linker", fix))
    for path in facts["icd_missing"]:
        out.append(Finding(f"{facts['icd_source']} names a missing file", path,
                           f"correct or unset {facts['icd_source']}"))
    if not facts["icds"]:
        out.append(Finding("no Vulkan driver (ICD) manifest",
                           f"none in {facts['icd_source']}"
                           + ("" if facts["icd_env"] else f" ({', '.join(ICD_DIRS)})"), fix))
    for icd in facts["icds"]:
        library = icd["library"]
        if library and os.path.isabs(library) and not os.path.exists(library):
            icd = {**icd, "error": f"its library {library} does not exist"}
        if icd["error"]:
            out.append(Finding("broken Vulkan driver manifest", f"{icd['path']}: {icd['error']}",
                               f"reinstall the package that owns it (dpkg -S {icd['path']}), "
                               "or remove it"))
    return out


# -- adapters -----------------------------------------------------------------------------


@contextmanager
def _private_runtime_dir() -> Iterator[None]:
    """Run the probing driver in a throwaway runtime dir: a new driver removes stale run
    directories, and the doctor only reports them unless asked to ``--clean``."""
    root = os.environ.get("VYRE_RUNTIME_DIR") or tempfile.gettempdir()
    previous = os.environ.get("VYRE_RUNTIME_DIR")
    with tempfile.TemporaryDirectory(prefix="vd-", dir=root) as private:
        os.environ["VYRE_RUNTIME_DIR"] = private
        try:
            yield
        finally:
            if previous is None:
                del os.environ["VYRE_RUNTIME_DIR"]
            else:
                os.environ["VYRE_RUNTIME_DIR"] = previous


def adapters(registry: Registry, show_progress: bool) -> list[dict[str, Any]]:
    """What each loaded backend's worker found on its device, probed as
    ``vyre backends --probe`` does."""
    with _private_runtime_dir():
        rows = listing(registry, probe=True, show_progress=show_progress)
    return [{"backend": r["id"], "device": r.get("adapter"), "adapter_type": r.get("adapter_type"),
             "backend_type": r.get("api"), "software_adapter": r.get("software_adapter", False),
             "error": r["reason"] if r["status"] == "failed to start" else None,
             "fix": r.get("fix"), "devices": r.get("devices") or [],
             "output": r.get("traceback") if r["status"] == "failed to start" else None}
            for r in rows if r["status"] in ("loaded", "failed to start")]


def adapter_findings(rows: list[dict[str, Any]]) -> list[Finding]:
    out = []
    for row in rows:
        if row["error"]:
            out.append(Finding(f"backend {row['backend']!r} cannot start", row["error"],
                               row["fix"]))
        elif row["software_adapter"]:
            out.append(Finding(
                f"backend {row['backend']!r} has only a software adapter",
                f"{row['device']}: it works, but routing demotes it below the reference; "
                f"name it (backend={row['backend']!r}) to use it anyway"))
    return out


# -- run directories ----------------------------------------------------------------------


def run_dirs(clean: bool) -> dict[str, Any]:
    """Run directories of dead drivers (by rundir's own staleness test), removed with
    ``clean``."""
    try:
        base = rundir.base_dir()
    except SystemResourceError as exc:  # unsafe or uncreatable: report it, touch nothing
        return {"base": None, "stale": [], "removed": [],
                "error": {"cause": exc.cause, "fix": exc.fix}}
    entries = [{"path": str(p), "sockets": sorted(s.name for s in p.glob("*.sock"))}
               for p in rundir.stale_dirs(base)]
    if not clean:
        return {"base": str(base), "stale": entries, "removed": [], "error": None}
    removed = {str(p) for p in rundir.remove_stale(base)}
    return {"base": str(base), "stale": [e for e in entries if e["path"] not in removed],
            "removed": [e for e in entries if e["path"] in removed], "error": None}


def run_dir_findings(facts: dict[str, Any]) -> list[Finding]:
    if facts["error"]:
        return [Finding("unusable run directory base", facts["error"]["cause"],
                        facts["error"]["fix"])]
    if not facts["stale"]:
        return []
    sockets = sum(len(e["sockets"]) for e in facts["stale"])
    return [Finding(f"stale run directories ({len(facts['stale'])})",
                    f"left by dead drivers in {facts['base']} ({sockets} socket files)",
                    "vyre doctor --clean removes them (so does the next new Driver)")]


# -- the command --------------------------------------------------------------------------


def examine(clean: bool, show_progress: bool = False) -> dict[str, Any]:
    """Everything the doctor knows, as plain data, with ``problems`` and ``notes``."""
    registry = Registry.discover()
    report: dict[str, Any] = {
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "vyre": __version__}
    report["run_dirs"] = run_dirs(clean)  # before probing: a new driver cleans them
    report["plugins"] = listing(registry, probe=False)
    plugins = {r.entry_point.partition(" = ")[0]: r.plugin for r in registry.backends()}
    for row in report["plugins"]:
        row["deprecated"] = [d.to_dict() for d in deprecations.hooks_of(plugins[row["name"]])] \
            if row["name"] in plugins else []
    report["deprecations"] = [d.to_dict() for d in deprecations.DEPRECATIONS]
    report["vulkan"] = vulkan()
    report["adapters"] = adapters(registry, show_progress)
    wants_vulkan = any(row["name"] in VULKAN_BACKENDS or row["id"] in VULKAN_BACKENDS
                       for row in report["plugins"])
    findings = (plugin_findings(report["plugins"], registry.not_installed)
                + vulkan_findings(report["vulkan"], wants_vulkan)
                + adapter_findings(report["adapters"]) + run_dir_findings(report["run_dirs"]))
    report["problems"] = [asdict(f) for f in findings if f.fix]
    report["notes"] = [asdict(f) for f in findings if not f.fix]
    report["ok"] = not report["problems"]
    return report


def run(args: argparse.Namespace) -> int:
    report = examine(args.clean, show_progress=not args.json)
    if args.json:
        print_json(report)
    else:
        _print(report)
    return 0 if report["ok"] else 1


def _print(report: dict[str, Any]) -> None:
    py = report["python"]
    console.print(styled((f"vyre {report['vyre']}", "bold"),
                         f" on Python {py['version']} ({py['executable']})"))
    status = {"loaded": ("loaded", "green"), "disabled": ("disabled", "yellow"),
              "broken": ("broken", "bold red")}
    print_table(["entry point", "backend", "distribution", "version", "status"],
                [[p["name"], p["id"] if p["status"] == "loaded" else "-",
                  p["distribution"] or "-", p["distribution_version"] or "-",
                  styled(status[p["status"]], f": {p['reason']}" if p["reason"] else "")]
                 for p in report["plugins"]], title="plugins")
    vk = report["vulkan"]
    icds = [f"{i['path']} -> {i['library'] or i['error']}" for i in vk["icds"]]
    print_table(["what", "found"],
                [["loader", vk["loader"] or styled(("not found", "bold red"))],
                 [f"drivers ({vk['icd_source']})",
                  "\n".join(icds) or styled(("none", "bold red"))]],
                title="Vulkan")
    print_table(["backend", "adapter", "type", "API", "software", "devices"],
                [[a["backend"], a.get("device") or ("-" if a["error"] else "host"),
                  a.get("adapter_type") or "-", a.get("backend_type") or "-",
                  "-" if a["error"] else (styled(("yes", "yellow")) if a["software_adapter"]
                                          else "no"),
                  describe_devices(a["devices"])]
                 if not a["error"] else [a["backend"], styled((a["error"], "bold red")), "-", "-",
                                         "-", "-"]
                 for a in report["adapters"]], title="adapters (probed in each backend's worker)")
    print_table(["deprecated", "since", "removed in", "Fix"],
                [[f"{d['kind']} {d['name']}", d["since"], d["removed_in"], d["fix"]]
                 for d in report["deprecations"]], title="deprecations")
    dirs = report["run_dirs"]
    for entry in dirs["removed"]:
        console.print(f"removed stale run directory {entry['path']}")
    for note in report["notes"]:
        console.print(styled(("note", "yellow"), f" {note['what']}: {note['detail']}"))
    if not report["problems"]:
        console.print(ok(True, "no problems found"))
        return
    print_table(["problem", "detail", "Fix"],
                [[styled((p["what"], "bold red")), p["detail"], p["fix"]]
                 for p in report["problems"]], title="problems")
    for plugin in report["plugins"]:
        if plugin["traceback"]:
            err_console.print(styled((plugin["name"], "bold"), " failed to load:"))
            err_console.print(plugin["traceback"])
    for adapter in report["adapters"]:
        if adapter["output"]:
            err_console.print(styled((adapter["backend"], "bold"),
                                     "'s worker failed to start; it wrote:"))
            err_console.print(adapter["output"])
