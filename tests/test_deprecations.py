"""Deprecations: each entry names something that exists, with sane versions; using one
warns once per process with its Fix; from its removal version on it is refused naming
both versions; ``vyre doctor`` lists them."""

from __future__ import annotations

import inspect
import json
import logging
import subprocess
import sys
import types
import warnings
from collections import OrderedDict
from dataclasses import fields

import pytest
from packaging.version import Version

import vyre_core
from vyre_core import DispatchConfig, __version__, deprecations, ir
from vyre_core.cli.doctor import plugin_findings
from vyre_core.contract import Capabilities, hookimpl
from vyre_core.contract.manager import HOOK_NAMES, LoadedBackend
from vyre_core.contract.types import FACTS_NOW_FIELDS
from vyre_core.deprecations import DEPRECATIONS, Deprecation, VyreDeprecationWarning
from vyre_core.driver import call_forms
from vyre_core.errors import InvalidConfigError, PluginLoadError, ValidationError
from vyre_core.ir import validate as validate_module
from vyre_core.ir.requirements import ALL_OPS
from vyre_core.supervisor.options import FLAT

fast = pytest.mark.fast


@pytest.fixture
def fresh(monkeypatch):
    """As in a new process: nothing warned yet, nothing validated. Returns a setter for
    the registry."""
    monkeypatch.setattr(deprecations, "_warned", {})
    monkeypatch.setattr(validate_module, "_CACHE", OrderedDict())

    def use(*entries: Deprecation) -> None:
        monkeypatch.setattr(deprecations, "DEPRECATIONS", entries)

    return use


def plugin(**hooks) -> types.ModuleType:
    module = types.ModuleType("old_backend")
    module.VYRE_CONTRACT = 1
    module.vyre_backend_id = hookimpl(lambda: "old")
    module.vyre_dispatch = hookimpl(lambda program, inputs, config: [])
    for name, fn in hooks.items():
        setattr(module, name, hookimpl(fn))
    return module


def floor_program() -> ir.Program:
    k = ir.Kernel()
    out = k.output("out", ir.f32, 1)
    out[0] = ir.floor(ir.f32(1.5))
    return k.build(validate=False)


# -- the registry itself ----------------------------------------------------------------

@fast
@pytest.mark.parametrize("entry", DEPRECATIONS, ids=lambda d: d.name)
def test_every_entry_names_something_that_exists_and_is_not_yet_removed(entry):
    """An entry past its removal version means the thing should have been deleted in
    this release; one naming nothing is a typo that would never warn."""
    public_types = [owner for owner in vyre_core.__all__
                    if isinstance(getattr(vyre_core, owner), type)]
    names = {"hook": set(HOOK_NAMES), "op": set(ALL_OPS),
             "config": {f.name for f in fields(DispatchConfig)},
             "option": set(FLAT),  # (each read as a property of PoolOptions too)
             "claim": {f"extra[{name!r}]" for name in FACTS_NOW_FIELDS},
             "call": {*vyre_core.__all__,
                      *(f"{owner}.{name}" for owner in public_types
                        for name in dir(getattr(vyre_core, owner))),
                      *(f"{owner}({name}=)" for owner in public_types
                        for name in inspect.signature(getattr(vyre_core, owner)).parameters)},
             }[entry.kind]
    if entry.kind == "call":  # (a form of a call: "Driver.launch(kernel, dim, args)")
        names |= {call_forms.POSITIONAL, call_forms.TIMEOUT}
        assert entry.name.split("(")[0].split("'")[0] in names
    else:
        assert entry.name in names
    assert Version(entry.since) <= Version(__version__) < Version(entry.removed_in)
    assert entry.replacement.endswith(".") and not entry.removed()


# -- hooks ------------------------------------------------------------------------------

@fast
def test_a_plugin_with_a_deprecated_hook_warns_once_with_the_fix(fresh, caplog):
    caplog.set_level(logging.WARNING, "vyre.deprecation")
    old = plugin(vyre_subgroup_size=lambda: 32)
    with pytest.warns(VyreDeprecationWarning) as caught:
        LoadedBackend(old, "old")
        LoadedBackend(old, "old")  # the second load says nothing
    assert len(caught) == 1
    text = str(caught[0].message)
    assert text.startswith("plugin 'old' uses hook 'vyre_subgroup_size', deprecated since "
                           "vyre 0.1.0 and removed in vyre 1.0.0. Fix: Implement "
                           "vyre_capabilities instead, with subgroup_size_range in its record")
    assert [r.getMessage() for r in caplog.records] == [text]


@fast
def test_a_plugin_without_deprecated_hooks_says_nothing(fresh):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LoadedBackend(plugin(vyre_capabilities=lambda: Capabilities(
            supports_subgroup_ops=True, subgroup_size_range=(8, 64))), "new")


@fast
def test_a_hook_past_its_removal_version_is_refused_naming_both_versions(fresh):
    fresh(Deprecation("hook", "vyre_subgroup_size", "0.0.1", "0.1.0", "Use the range."))
    with pytest.raises(PluginLoadError) as caught:
        LoadedBackend(plugin(vyre_subgroup_size=lambda: 32), "old")
    assert caught.value.cause == (
        "plugin 'old' uses hook 'vyre_subgroup_size', deprecated since vyre 0.0.1 and "
        f"removed in vyre 0.1.0, and this is vyre {__version__}")
    assert caught.value.fix == "Use the range."


@fast
def test_a_plugin_for_another_contract_major_is_refused_naming_both():
    old = plugin()
    old.VYRE_CONTRACT = 2
    with pytest.raises(PluginLoadError, match="targets contract 2; this vyre implements "
                                              "contract 1"):
        LoadedBackend(old, "future")


# -- config fields ----------------------------------------------------------------------

@fast
def test_a_deprecated_config_field_warns_only_when_set(fresh):
    fresh(Deprecation("config", "fixpoint_iterations", "0.1.0", "9.0.0", "Use a loop."))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DispatchConfig()  # left at its default: nothing to say
    with pytest.warns(VyreDeprecationWarning, match="DispatchConfig uses config "
                                                    "'fixpoint_iterations'.*Fix: Use a loop"
                      ) as caught:
        DispatchConfig().replace(fixpoint_iterations=3)
    assert caught[0].filename == __file__  # (the caller's line, not vyre's or dataclasses')


@fast
def test_a_removed_config_field_is_refused(fresh):
    fresh(Deprecation("config", "fixpoint_iterations", "0.0.1", "0.1.0", "Use a loop."))
    with pytest.raises(InvalidConfigError, match=r"removed in vyre 0\.1\.0, and this is vyre"):
        DispatchConfig(fixpoint_iterations=3)


# -- ops --------------------------------------------------------------------------------

@fast
def test_a_program_with_a_deprecated_op_validates_and_warns_once(fresh):
    fresh(Deprecation("op", "unop.floor", "0.1.0", "9.0.0", "Use trunc."))
    program = floor_program()
    with pytest.warns(VyreDeprecationWarning, match="a program uses op 'unop.floor'") as caught:
        program.check()
    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        other = ir.Program(program.buffers, (2,), program.body)
        assert other.validate() == []  # another program, same op: already said


@fast
def test_a_program_with_a_removed_op_is_a_v029_finding(fresh):
    fresh(Deprecation("op", "unop.floor", "0.0.1", "0.1.0", "Use trunc."))
    k = ir.Kernel(workgroup=(3,))  # (a fingerprint the validation cache has not seen)
    out = k.output("out", ir.f32, 1)
    out[0] = ir.floor(ir.f32(2.5))
    with pytest.raises(ValidationError) as caught:
        k.build()
    assert caught.value.findings[0]["code"] == "V029"
    assert "op 'unop.floor', deprecated since vyre 0.0.1 and removed in vyre 0.1.0: " \
        "Use trunc." in caught.value.findings[0]["cause"]


# -- doctor -----------------------------------------------------------------------------

@fast
def test_doctor_notes_a_plugin_that_uses_a_deprecated_hook():
    rows = [{"name": "old", "status": "loaded", "deprecated": [DEPRECATIONS[0].to_dict()]}]
    notes = plugin_findings(rows, [])
    assert [(n.what, n.fix) for n in notes] == [("plugin 'old' uses a deprecated hook", None)]
    assert notes[0].detail.startswith("vyre_subgroup_size (deprecated since vyre 0.1.0, "
                                      "removed in 1.0.0): Implement vyre_capabilities")


def test_vyre_doctor_lists_the_deprecations():
    done = subprocess.run([sys.executable, "-m", "vyre_core.cli", "doctor", "--json"],
                          capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    assert {"kind": "hook", "name": "vyre_subgroup_size", "since": "0.1.0",
            "removed_in": "1.0.0", "fix": DEPRECATIONS[0].replacement} in report["deprecations"]
    assert all(row["deprecated"] == [] for row in report["plugins"]), \
        "an installed plugin still implements a deprecated hook"
    assert "VyreDeprecationWarning" not in done.stderr
