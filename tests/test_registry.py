"""Backend discovery through the ``vyre.backends`` entry-point group.

In-process: the reference backend of this venv, plugin selection, duplicate ids,
ordering and lookups. In subprocesses (so the test process's imports stay clean):
a third-party backend pip-installed as its own distribution and run end to end,
broken plugins reported rather than fatal, and discovery free of side effects.
The throwaway plugin sources live in tests/plugins/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
from installed_dists import write_dist

from vyre_core.contract import Capabilities, hookimpl
from vyre_core.driver import Driver
from vyre_core.errors import PluginLoadError
from vyre_core.ir import ALL_OPS, NEWER_OPS
from vyre_core.registry import (
    ENTRY_POINT_GROUP,
    SELECT_ENV,
    BackendRegistration,
    Registry,
    register_plugin,
)

PLUGINS = Path(__file__).parent / "plugins"
SUBPROCESS_TIMEOUT = 60


@pytest.fixture(autouse=True)
def _no_plugin_selection(monkeypatch):
    monkeypatch.delenv(SELECT_ENV, raising=False)


# -- the reference backend of this venv -------------------------------------------------------


def test_discovery_finds_the_reference_backend_with_exact_fields():
    registry = Registry.discover()
    assert registry.broken == []
    assert "reference" in registry.ids()
    ref = registry.get("reference")
    assert ref.id == "reference"
    assert ref.version == "0.1.0"
    assert ref.distribution == "vyre-reference"
    assert ref.precedence == 900
    assert ref.is_reference is True
    assert ref.entry_point == "reference = vyre_reference.backend"
    assert ref.claims.supports_f64 is True
    assert ref.claims.supports_f16 is True
    assert ref.claims.max_workgroup_size == (1024, 1024, 64)
    assert ref.claims.max_invocations_per_workgroup == 1024
    # (it forms subgroups of any size a program declares, and runs every op)
    assert ref.claims.supports_subgroup_ops is True
    assert ref.claims.subgroup_size_range == (1, 128)
    assert ref.claims.supported_ops == ALL_OPS
    import vyre_reference.backend
    assert ref.plugin is vyre_reference.backend
    assert registry.reference() is ref


def test_select_nothing_by_argument_gives_no_backends():
    registry = Registry.discover(select="")
    assert registry.backends() == [] and registry.ids() == [] and registry.broken == []
    assert registry.reference() is None


def test_select_nothing_by_environment_gives_no_backends(monkeypatch):
    monkeypatch.setenv(SELECT_ENV, "")
    assert Registry.discover().ids() == []
    monkeypatch.setenv(SELECT_ENV, " , ")
    assert Registry.discover().ids() == []


def test_select_by_name(monkeypatch):
    assert Registry.discover(select="reference").ids() == ["reference"]
    assert Registry.discover(select=" reference , not-installed ").ids() == ["reference"]
    assert Registry.discover(select="not-installed").ids() == []
    monkeypatch.setenv(SELECT_ENV, "reference")
    assert Registry.discover().ids() == ["reference"]
    monkeypatch.setenv(SELECT_ENV, "")
    assert Registry.discover(select="reference").ids() == ["reference"]  # argument wins


def test_a_selection_naming_plugins_that_are_not_installed_is_refused_with_the_closest(
        monkeypatch):
    """A typo in VYRE_LOAD_PLUGINS left the plugin out in silence, and the driver then said
    only that no backend can run the program."""
    registry = Registry.discover(select="refrence, cpu, not-installed")
    assert registry.ids() == ["cpu"] and registry.not_installed == ["not-installed", "refrence"]
    with pytest.raises(PluginLoadError) as caught:
        registry.check_selection()
    assert caught.value.cause == (
        f"{SELECT_ENV} names plugins that are not installed: 'not-installed', 'refrence' "
        "(did you mean 'reference' for 'refrence'?)")
    assert "installed: cpu, reference, wgpu" in caught.value.fix
    Registry.discover(select="reference").check_selection()  # (all installed: nothing said)
    monkeypatch.setenv(SELECT_ENV, "refrence")
    with pytest.raises(PluginLoadError, match=r"'refrence' \(did you mean 'reference'\?\)"):
        Driver()


# -- add / order / get ------------------------------------------------------------------------


def backend_module(backend_id: str, precedence: int | None = None,
                   reference: bool = False) -> types.ModuleType:
    plugin = types.ModuleType(f"vyre_{backend_id}_backend")
    plugin.VYRE_CONTRACT = 1
    plugin.vyre_backend_id = hookimpl(lambda: backend_id)
    plugin.vyre_dispatch = hookimpl(lambda program, inputs, config: [])
    if precedence is not None:
        plugin.vyre_backend_precedence = hookimpl(lambda: precedence)
    if reference:
        plugin.vyre_is_reference_oracle = hookimpl(lambda: True)
    return plugin


def registration(backend_id: str, precedence: int | None = None, *, entry_point: str = "",
                 reference: bool = False) -> BackendRegistration:
    return register_plugin(backend_module(backend_id, precedence, reference),
                           entry_point=entry_point or f"{backend_id} = vyre_{backend_id}")


def test_register_plugin_reads_identity_hooks_and_defaults():
    reg = registration("solo")
    assert (reg.id, reg.version, reg.precedence, reg.is_reference, reg.distribution) == (
        "solo", "unspecified", 1000, False, None)
    assert reg.claims == Capabilities()
    assert reg.entry_point == "solo = vyre_solo"
    assert register_plugin(backend_module("anon")).entry_point == "vyre_anon_backend"


@pytest.mark.filterwarnings("ignore::vyre_core.deprecations.VyreDeprecationWarning")  # (contract 1)
def test_static_claims_hold_only_the_ops_the_plugin_says_it_supports():
    """Before: claims left vyre_supported_ops out, so routing sent a program with an op
    the backend does not execute to it until a worker had probed it."""
    plugin = backend_module("narrow")
    plugin.vyre_supported_ops = hookimpl(lambda: frozenset({"binop.add", "binop.mul"}))
    assert register_plugin(plugin).claims.supported_ops == {"binop.add", "binop.mul"}
    plugin.vyre_backend_claims = hookimpl(lambda: {"supported_ops": ["binop.add", "binop.sub"]})
    assert register_plugin(plugin).claims.supported_ops == {"binop.add"}  # both say so
    # (a plugin that names none: every op but those newer than its contract)
    assert registration("wide").claims.supported_ops == ALL_OPS - NEWER_OPS


@pytest.mark.filterwarnings("ignore::vyre_core.deprecations.VyreDeprecationWarning")  # (contract 1)
def test_supported_ops_may_come_as_any_iterable_and_name_ops_of_a_newer_vyre():
    """Found in review: a generator was used up by the check, leaving no op at all; an
    op this vyre does not know (a newer vyre's) made the plugin unloadable."""
    plugin = backend_module("lazy")
    plugin.vyre_supported_ops = hookimpl(lambda: (op for op in ("binop.add", "binop.fma3")))
    assert register_plugin(plugin).claims.supported_ops == {"binop.add"}


@pytest.mark.filterwarnings("ignore::vyre_core.deprecations.VyreDeprecationWarning")  # (contract 1)
@pytest.mark.parametrize(("answer", "cause"), [
    ("add", "returned 'add' from vyre_supported_ops"),
    ([1, 2], "returned [1, 2] from vyre_supported_ops"),
    (5, "returned 5 from vyre_supported_ops"),
])
def test_a_bad_supported_ops_answer_is_refused_at_registration(answer, cause):
    plugin = backend_module("odd")
    plugin.vyre_supported_ops = hookimpl(lambda: answer)
    with pytest.raises(PluginLoadError) as caught:
        register_plugin(plugin)
    assert cause in caught.value.cause and "ALL_OPS" in caught.value.fix


def test_the_claims_alone_name_the_ops_newer_ones_included():
    """Without contract 1's query the claims are the whole answer: the ops newer than the
    contract when named there, a newer vyre's op left out, nothing warned."""
    plugin = backend_module("claimer")
    plugin.vyre_backend_claims = hookimpl(lambda: {"supported_ops": [*ALL_OPS, "binop.fma3"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert register_plugin(plugin).claims.supported_ops == ALL_OPS


@pytest.mark.parametrize("ops", ["binop.add", [1, 2], 5])
def test_claimed_ops_that_are_no_set_of_names_are_refused_at_registration(ops):
    plugin = backend_module("odd")
    plugin.vyre_backend_claims = hookimpl(lambda: {"supported_ops": ops})
    with pytest.raises(PluginLoadError) as caught:
        register_plugin(plugin)
    assert caught.value.cause == (f"plugin 'vyre_odd_backend' makes bad claims: "
                                  f"supported_ops is {ops!r}, not a set of op names")
    assert "ALL_OPS" in caught.value.fix


def test_an_entry_point_named_otherwise_than_its_backend_is_refused_with_the_right_line():
    """VYRE_LOAD_PLUGINS selects by the entry point's name, routing by the backend's id: a
    plugin whose two names differ could be selected under one name and routed under the
    other."""
    with pytest.raises(PluginLoadError) as caught:
        register_plugin(backend_module("gpu2"), name="gpu", entry_point="gpu = vyre_gpu2")
    assert caught.value.cause == "entry point 'gpu' provides backend 'gpu2': the two names differ"
    assert "pyproject.toml (gpu2 = vyre_gpu2)" in caught.value.fix


def test_adding_a_duplicate_id_is_refused_naming_both_entry_points():
    registry = Registry()
    first = registration("reference", 900, entry_point="reference = vyre_reference.backend")
    registry.add(first)
    with pytest.raises(PluginLoadError) as err:
        registry.add(registration("reference", 5, entry_point="fastref = vyre_fastref.backend"))
    message = str(err.value)
    assert "backend id 'reference' is registered twice" in message
    assert "reference = vyre_reference.backend" in message
    assert "fastref = vyre_fastref.backend" in message
    assert "\nFix: " in message and SELECT_ENV in message
    assert registry.backends() == [first] and registry.get("reference") is first


def test_backends_are_ordered_by_precedence_then_id():
    registry = Registry()
    for reg in (registration("zeta", 5), registration("ref", 900, reference=True),
                registration("alpha", 5), registration("beta", 1),
                registration("late"), registration("mid", 100)):
        registry.add(reg)
    assert registry.ids() == ["beta", "alpha", "zeta", "mid", "ref", "late"]
    assert [r.sort_key for r in registry.backends()] == [
        (1, "beta"), (5, "alpha"), (5, "zeta"), (100, "mid"), (900, "ref"), (1000, "late")]
    assert registry.reference().id == "ref"


def test_get_of_an_unknown_id_lists_the_registered_ids():
    registry = Registry()
    with pytest.raises(PluginLoadError, match=r"no backend 'gpu' is registered \(registered: "
                                              r"none\)"):
        registry.get("gpu")
    registry.add(registration("b", 2))
    registry.add(registration("a", 3))
    with pytest.raises(PluginLoadError) as err:
        registry.get("gpu")
    assert "no backend 'gpu' is registered (registered: b, a)" in str(err.value)
    assert "\nFix: " in str(err.value)


# -- throwaway distributions, used from subprocesses ------------------------------------------

DEMO_PYPROJECT = f"""\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "vyre-thirdparty-demo"
version = "0.3.0"

[project.entry-points."{ENTRY_POINT_GROUP}"]
demo = "vyre_demo_backend"

[tool.setuptools]
py-modules = ["vyre_demo_backend"]
"""


@pytest.fixture(scope="module")
def demo_site(tmp_path_factory) -> Path:
    """A real pip install (offline, --target) of the third-party demo distribution, built
    by the venv's own setuptools (the test extras install it and wheel)."""
    root = tmp_path_factory.mktemp("thirdparty")
    dist, site = root / "vyre-thirdparty-demo", root / "site"
    dist.mkdir()
    (dist / "pyproject.toml").write_text(DEMO_PYPROJECT)
    shutil.copy(PLUGINS / "vyre_demo_backend.py", dist / "vyre_demo_backend.py")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps",
                           "--no-build-isolation", "--no-index", "--disable-pip-version-check",
                           "--quiet", "--target", str(site), str(dist)],
                          timeout=300, cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (site / "vyre_demo_backend.py").is_file()
    assert (site / "vyre_thirdparty_demo-0.3.0.dist-info" / "entry_points.txt").is_file()
    return site


def venv_order_with(*extra: tuple[int, str]) -> list[list]:
    """[precedence, id] of every backend this venv provides plus ``extra``, in registry
    order: what a subprocess that also sees the throwaway distributions must list."""
    keys = [r.sort_key for r in Registry.discover().backends()] + list(extra)
    return [list(k) for k in sorted(keys)]


def run_python(script: str, *sites: Path, cwd: Path) -> dict:
    """Run ``script`` in a fresh interpreter of this venv with ``sites`` on PYTHONPATH;
    its last stdout line is JSON."""
    env = {k: v for k, v in os.environ.items() if k != SELECT_ENV}
    env["PYTHONPATH"] = os.pathsep.join(str(s) for s in sites)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- a third-party backend end to end ---------------------------------------------------------

DEMO_SCRIPT = """
import importlib.metadata, json
import numpy as np
from vyre_core import ir
from vyre_core.registry import Registry
from vyre_core.routing import Router
from vyre_workers.backend_host import BackendHost

registry = Registry.discover()

k = ir.Kernel(workgroup=(4,))
a = k.read("a", ir.u32)
b = k.read("b", ir.u32)
out = k.output("out", ir.u32, count=10)
i = k.let("i", ir.global_id(0))
with k.if_(i < a.len):
    out[i] = a[i] ^ b[i]
program = k.build()

decision = Router.from_registry(registry).route(program)  # no backend named
demo = registry.get(decision.backend)
host = BackendHost(demo.plugin, name=decision.backend)
a = np.arange(10, dtype=np.uint32) * np.uint32(0x01010101)
b = np.array([0xFFFFFFFF, 1, 2, 3, 0x80000000, 5, 6, 7, 8, 0x0F0F0F0F], dtype=np.uint32)
result, = host.dispatch(program, [a, b])
plan = host.plan(program, [a, b])
print(json.dumps({
    "ids": registry.ids(),
    "order": [list(r.sort_key) for r in registry.backends()],
    "broken": [p.name for p in registry.broken],
    "demo": {"id": demo.id, "version": demo.version, "distribution": demo.distribution,
             "precedence": demo.precedence, "is_reference": demo.is_reference,
             "entry_point": demo.entry_point,
             "claims_workgroup": list(demo.claims.max_workgroup_size),
             "claims_invocations": demo.claims.max_invocations_per_workgroup,
             "claims_per_dimension": demo.claims.max_workgroups_per_dimension},
    "module_file": demo.plugin.__file__,
    "installed_version": importlib.metadata.version("vyre-thirdparty-demo"),
    "host": {"id": host.id(), "version": host.version(), "precedence": host.precedence(),
             "max_workgroup_size": list(host.capabilities().max_workgroup_size),
             "max_invocations": host.capabilities().max_invocations_per_workgroup},
    "routed": [decision.backend, decision.reason],
    "grid": list(plan.grid),
    "dtype": str(result.dtype),
    "result": result.tolist(),
    "dispatches": demo.plugin.dispatches,
}))
"""


def test_a_pip_installed_third_party_backend_runs_end_to_end(demo_site, tmp_path):
    report = run_python(DEMO_SCRIPT, demo_site, cwd=tmp_path)
    assert report["ids"][0] == "demo"  # precedence 50 sorts before every bundled backend
    assert report["order"] == venv_order_with((50, "demo"))
    assert report["broken"] == []
    assert report["demo"] == {
        "id": "demo", "version": "0.3.0", "distribution": "vyre-thirdparty-demo",
        "precedence": 50, "is_reference": False, "entry_point": "demo = vyre_demo_backend",
        "claims_workgroup": [64, 1, 1], "claims_invocations": 64,
        "claims_per_dimension": 1024}
    assert Path(report["module_file"]).parent == demo_site  # the installed copy ran
    assert report["installed_version"] == "0.3.0"
    assert report["host"] == {"id": "demo", "version": "0.3.0", "precedence": 50,
                              "max_workgroup_size": [64, 1, 1], "max_invocations": 64}
    assert report["routed"] == ["demo", "first capable backend by precedence (rank 50)"]
    assert report["grid"] == [3, 1, 1]  # ceil(10 / 4) workgroups
    assert report["dtype"] == "uint32"
    assert report["result"] == [
        0xFFFFFFFF, 0x01010100, 0x02020200, 0x03030300, 0x84040404,
        0x05050500, 0x06060600, 0x07070700, 0x08080800, 0x06060606]
    a = np.arange(10, dtype=np.uint32) * np.uint32(0x01010101)
    b = np.array([0xFFFFFFFF, 1, 2, 3, 0x80000000, 5, 6, 7, 8, 0x0F0F0F0F], dtype=np.uint32)
    assert report["result"] == (a ^ b).tolist()
    assert report["dispatches"] == 1


def test_the_demo_distribution_is_invisible_to_this_process(demo_site):
    """The install went to its own --target folder, never into the venv."""
    assert "demo" not in Registry.discover().ids()
    assert "vyre_demo_backend" not in sys.modules


# -- broken plugins ---------------------------------------------------------------------------

BROKEN_SCRIPT = """
import json
from vyre_core.registry import Registry

registry = Registry.discover()
print(json.dumps({
    "order": [list(r.sort_key) for r in registry.backends()],
    "broken": [{"name": p.name, "distribution": p.distribution, "error": p.error,
                "traceback": p.traceback} for p in registry.broken],
}))
"""


def test_broken_plugins_are_reported_not_fatal(demo_site, tmp_path):
    broken_site = write_dist(tmp_path / "broken-site", "vyre-broken-import",
                             {"broken_import": "vyre_broken_import",
                              "missing_module": "vyre_no_such_module_anywhere"},
                             ("vyre_broken_import",))
    write_dist(broken_site, "vyre-bad-signature", {"bad_signature": "vyre_bad_signature"},
               ("vyre_bad_signature",))
    write_dist(broken_site, "vyre-misnamed", {"misnamed": "vyre_demo_backend"}, ())
    report = run_python(BROKEN_SCRIPT, broken_site, demo_site, cwd=tmp_path)
    assert report["order"] == venv_order_with((50, "demo"))  # the good backends are all there
    broken = {p["name"]: p for p in report["broken"]}
    assert sorted(broken) == ["bad_signature", "broken_import", "misnamed", "missing_module"]
    assert broken["misnamed"]["error"].startswith(
        "[E1402] entry point 'misnamed' provides backend 'demo': the two names differ\nFix: "
        "Name the entry point after the backend in the plugin's pyproject.toml (demo = "
        "vyre_demo_backend)")

    imp = broken["broken_import"]
    assert imp["distribution"] == "vyre-broken-import"
    assert imp["error"] == "ImportError: vyre_broken_import cannot find libvyre_missing_device.so"
    assert "Traceback (most recent call last)" in imp["traceback"]
    assert "vyre_broken_import.py" in imp["traceback"]
    assert ("ImportError: vyre_broken_import cannot find libvyre_missing_device.so"
            in imp["traceback"])

    missing = broken["missing_module"]
    assert missing["distribution"] == "vyre-broken-import"
    assert missing["error"] == ("ModuleNotFoundError: No module named "
                                "'vyre_no_such_module_anywhere'")
    assert "ModuleNotFoundError" in missing["traceback"]

    bad = broken["bad_signature"]
    assert bad["distribution"] == "vyre-bad-signature"
    assert bad["error"].startswith("[E1402] plugin 'bad_signature' has a bad hook")
    assert "stream_handle" in bad["error"] and "\nFix: " in bad["error"]
    assert "PluginLoadError" in bad["traceback"]
    assert "vyre_dispatch(program, inputs, config, stream_handle)" in bad["traceback"]


# -- side-effect-free discovery ---------------------------------------------------------------

SIDE_EFFECT_SCRIPT = """
import json, sys, threading
import psutil
from vyre_core.registry import Registry

registry = Registry.discover()
report = {
    "order": [list(r.sort_key) for r in registry.backends()],
    "broken": [p.error for p in registry.broken],
    "lazy_claims_subgroup": registry.get("lazy-device").claims.supports_subgroup_ops,
    "entry_module_imported": "vyre_lazy_device_backend" in sys.modules,
    "wgpu_imported": "wgpu" in sys.modules,
    "fake_device_imported": "vyre_fake_gpu_device" in sys.modules,
    "threads": threading.active_count(),
    "thread_names": [t.name for t in threading.enumerate()],
    "children": [p.pid for p in psutil.Process().children(recursive=True)],
}
# positive control: the probes do see a device library once one is imported
import vyre_fake_gpu_device
report["threads_after_device_import"] = threading.active_count()
report["fake_device_after_import"] = "vyre_fake_gpu_device" in sys.modules
print(json.dumps(report))
"""


def test_discovery_imports_no_device_library_and_starts_nothing(tmp_path):
    site = write_dist(tmp_path / "lazy-site", "vyre-lazy-device",
                      {"lazy-device": "vyre_lazy_device_backend"},
                      ("vyre_lazy_device_backend", "vyre_fake_gpu_device"))
    report = run_python(SIDE_EFFECT_SCRIPT, site, cwd=tmp_path)
    assert report["order"] == venv_order_with((10, "lazy-device"))
    assert report["broken"] == []
    assert report["lazy_claims_subgroup"] is True
    assert report["entry_module_imported"] is True  # the small entry module is loaded ...
    assert report["wgpu_imported"] is False          # ... but no device library
    assert report["fake_device_imported"] is False
    assert report["threads"] == 1, report["thread_names"]
    assert report["children"] == []
    assert report["threads_after_device_import"] == 2
    assert report["fake_device_after_import"] is True
