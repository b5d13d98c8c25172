"""The contract freeze: the live hookspec equals the committed contract.json, and the
freeze check really catches every kind of break when it is shown a modified copy of the
spec (arguments changed, hook removed, firstresult flipped, new hook without default)
while accepting a new hook that comes with its default."""

from __future__ import annotations

import inspect
import json

import pytest

from vyre_core.contract import freeze
from vyre_core.contract import hookspec as hookspec_module
from vyre_core.contract.defaults import ConservativeDefaults
from vyre_core.contract.hookspec import hookimpl, hookspec
from vyre_core.contract.manager import HOOK_NAMES, REQUIRED_HOOKS

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

SPEC_FUNCTIONS = {name: getattr(hookspec_module, name) for name in HOOK_NAMES}


def spec_copy(*, drop: tuple[str, ...] = (), **replace) -> type:
    """A class namespace holding the live hookspec functions, minus ``drop``, with
    ``replace`` (name -> function) substituted or added. The live module is untouched."""
    namespace = {n: f for n, f in SPEC_FUNCTIONS.items() if n not in drop}
    namespace.update(replace)
    return type("SpecCopy", (), namespace)


# -- the live contract --------------------------------------------------------------------


def test_the_live_contract_matches_the_committed_snapshot():
    assert freeze.drift(freeze.describe(), freeze.load_snapshot()) == []
    assert freeze.describe() == freeze.load_snapshot()


def test_the_snapshot_names_exactly_the_contract_hooks():
    snapshot = freeze.load_snapshot()
    assert set(snapshot) == set(HOOK_NAMES)
    assert json.loads(freeze.SNAPSHOT.read_text())["contract_major"] == 1
    assert len(HOOK_NAMES) == len(set(HOOK_NAMES))
    assert set(freeze.describe()) == set(HOOK_NAMES)  # every vyre_* function is a hookspec


def test_every_hook_is_first_result_and_only_the_required_ones_lack_a_default():
    snapshot = freeze.load_snapshot()
    assert all(h["firstresult"] for h in snapshot.values())
    assert {n for n, h in snapshot.items() if h["required"]} == set(REQUIRED_HOOKS) == {
        "vyre_backend_id", "vyre_dispatch"}
    assert {n for n, h in snapshot.items() if not h["default"]} == set(REQUIRED_HOOKS)


@pytest.mark.parametrize("name", HOOK_NAMES)
def test_every_hook_docstring_states_its_default_or_that_it_is_required(name):
    doc = inspect.getdoc(SPEC_FUNCTIONS[name]) or ""
    if name in REQUIRED_HOOKS:
        assert "REQUIRED" in doc and "Default:" not in doc
    else:
        assert "Default:" in doc and "REQUIRED" not in doc
        assert callable(getattr(ConservativeDefaults, name))


def test_the_unmodified_copy_has_no_drift():
    """The copies below differ from the live spec only in what each test changes."""
    assert freeze.describe(spec_copy()) == freeze.describe()
    assert freeze.drift(freeze.describe(spec_copy()), freeze.load_snapshot()) == []


# -- modified copies: every break is reported ------------------------------------------------


def test_changed_argument_names_are_reported():
    @hookspec(firstresult=True)
    def vyre_compile(program, options):
        """Default: ``None``."""

    problems = freeze.drift(freeze.describe(spec_copy(vyre_compile=vyre_compile)),
                            freeze.load_snapshot())
    assert problems == ["vyre_compile: args changed from ['program', 'config'] "
                        "to ['program', 'options']"]


def test_an_added_argument_is_reported():
    @hookspec(firstresult=True)
    def vyre_upload_resident(handle, data, offset):
        """Default: raise."""

    problems = freeze.drift(freeze.describe(spec_copy(vyre_upload_resident=vyre_upload_resident)),
                            freeze.load_snapshot())
    assert len(problems) == 1
    assert problems[0].startswith("vyre_upload_resident: args changed")


def test_a_removed_hook_is_reported():
    problems = freeze.drift(freeze.describe(spec_copy(drop=("vyre_flush",))),
                            freeze.load_snapshot())
    assert problems == ["vyre_flush was removed"]


def test_a_removed_required_hook_is_reported():
    problems = freeze.drift(freeze.describe(spec_copy(drop=("vyre_dispatch",))),
                            freeze.load_snapshot())
    assert problems == ["vyre_dispatch was removed"]


def test_a_flipped_firstresult_is_reported():
    @hookspec
    def vyre_flush():
        """Default: no-op."""

    problems = freeze.drift(freeze.describe(spec_copy(vyre_flush=vyre_flush)),
                            freeze.load_snapshot())
    assert problems == ["vyre_flush: firstresult changed from True to False"]


def test_a_new_hook_without_a_default_is_reported():
    @hookspec(firstresult=True)
    def vyre_supports_ray_tracing():
        """Ray-tracing intrinsics are emitted."""

    problems = freeze.drift(
        freeze.describe(spec_copy(vyre_supports_ray_tracing=vyre_supports_ray_tracing),
                        ConservativeDefaults),
        freeze.load_snapshot())
    assert problems == ["vyre_supports_ray_tracing is new but has no default in "
                        "ConservativeDefaults"]


def test_a_new_hook_with_a_default_is_accepted():
    @hookspec(firstresult=True)
    def vyre_supports_ray_tracing():
        """Ray-tracing intrinsics are emitted. Default: ``False``."""

    class DefaultsWithRayTracing(ConservativeDefaults):
        @hookimpl(trylast=True)
        def vyre_supports_ray_tracing(self) -> bool:
            return False

    live = freeze.describe(spec_copy(vyre_supports_ray_tracing=vyre_supports_ray_tracing),
                           DefaultsWithRayTracing)
    assert freeze.drift(live, freeze.load_snapshot()) == []
    assert live["vyre_supports_ray_tracing"] == {"args": [], "firstresult": True,
                                                 "required": False, "default": True}


def test_a_lost_default_is_reported():
    stripped = type("StrippedDefaults", (), {n: getattr(ConservativeDefaults, n)
                                            for n in HOOK_NAMES
                                            if n != "vyre_device_lost"
                                            and hasattr(ConservativeDefaults, n)})
    problems = freeze.drift(freeze.describe(defaults=stripped), freeze.load_snapshot())
    assert problems == ["vyre_device_lost lost its default"]


def test_several_breaks_are_all_reported():
    @hookspec(firstresult=True)
    def vyre_dispatch(program, inputs):
        """REQUIRED."""

    @hookspec(firstresult=True)
    def vyre_new_thing(x):
        """No default."""

    problems = freeze.drift(
        freeze.describe(spec_copy(drop=("vyre_prepare", "vyre_shutdown"),
                                  vyre_dispatch=vyre_dispatch, vyre_new_thing=vyre_new_thing)),
        freeze.load_snapshot())
    assert sorted(problems) == sorted([
        "vyre_dispatch: args changed from ['program', 'inputs', 'config'] to "
        "['program', 'inputs']",
        "vyre_prepare was removed",
        "vyre_shutdown was removed",
        "vyre_new_thing is new but has no default in ConservativeDefaults",
    ])


def test_the_copies_never_touched_the_live_spec():
    assert freeze.drift(freeze.describe(), freeze.load_snapshot()) == []
    assert set(freeze.describe()) == set(HOOK_NAMES)
