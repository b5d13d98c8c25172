"""Option groups (issue 41 step 16): ``PoolOptions``' restart policy, timeouts and transport
are each one frozen object checked when made, the shadow's options are one object, and the
flat spellings of vyre 0.1 keep working for one version: they warn once (kind ``option``,
``call`` for the shadow's), say the group form, and are refused from 1.0.0."""

from __future__ import annotations

import dataclasses
import inspect
import warnings

import pytest

import vyre_core
from vyre_core import (
    Driver,
    PoolOptions,
    RestartPolicy,
    ShadowOptions,
    Timeouts,
    Transport,
    deprecations,
)
from vyre_core.deprecations import DEPRECATIONS, OPTION_GROUPS, Deprecation, VyreDeprecationWarning
from vyre_core.errors import InvalidConfigError
from vyre_core.registry import Registry
from vyre_core.supervisor.options import FLAT, GROUPS, MAX_SECONDS
from vyre_core.testing import TIGHT, options_over

fast = pytest.mark.fast


@pytest.fixture
def fresh(monkeypatch):
    """Nothing warned yet in this process; returns a setter for the registry."""
    monkeypatch.setattr(deprecations, "_warned", {})

    def use(*entries: Deprecation) -> None:
        monkeypatch.setattr(deprecations, "DEPRECATIONS", entries)

    return use


def refusal(make) -> InvalidConfigError:
    with pytest.raises(InvalidConfigError) as caught:
        make()
    return caught.value


# -- the groups, each checked when made ------------------------------------------------------

@fast
@pytest.mark.parametrize(("group", "field", "value", "rule"), [
    (RestartPolicy, "max_restarts", -1, "a whole number >= 0"),
    (RestartPolicy, "max_restarts", True, "a whole number >= 0"),
    (RestartPolicy, "window", 0, f"seconds above 0 and at most {MAX_SECONDS:g}"),
    (RestartPolicy, "cooldown", float("inf"), f"seconds above 0 and at most {MAX_SECONDS:g}"),
    (RestartPolicy, "recycle_after", 0, "None or a whole number >= 1"),
    (RestartPolicy, "recycle_rss_bytes", 1.5, "None or a whole number >= 1"),
    (Timeouts, "startup", -1, f"seconds above 0 and at most {MAX_SECONDS:g}"),
    (Timeouts, "compile", float("nan"), f"seconds above 0 and at most {MAX_SECONDS:g}"),
    (Timeouts, "heartbeat", MAX_SECONDS * 2, f"seconds above 0 and at most {MAX_SECONDS:g}"),
    (Timeouts, "kill_grace", 0, f"seconds above 0 and at most {MAX_SECONDS:g}"),
    (Timeouts, "cancel_grace", "1", f"seconds above 0 and at most {MAX_SECONDS:g}"),
    (Transport, "max_message_bytes", 0, "1 to "),
    (Transport, "fork_server", 1, "True or False"),
    (Transport, "spin", 1, "0 to 0.01 seconds"),
])
def test_each_group_refuses_a_bad_field_naming_it_as_the_group_takes_it(group, field, value,
                                                                        rule):
    error = refusal(lambda: group(**{field: value}))
    assert error.cause.endswith(f": {field}={value!r}")
    assert error.fix.startswith(f"Use {group.__name__}({field}=...): {rule}")


@fast
def test_a_heartbeat_interval_not_below_the_heartbeat_timeout_is_refused():
    error = refusal(lambda: Timeouts(heartbeat_interval=5.0, heartbeat=5.0))
    assert error.cause == "bad timeouts: heartbeat_interval=5.0 is not below heartbeat=5.0"
    assert error.fix == ("Use Timeouts(heartbeat_interval=...): well below "
                         "Timeouts(heartbeat=...) (a third or less).")


@fast
def test_the_silence_limit_is_three_heartbeats_worked_out_once():
    assert Timeouts(heartbeat_interval=1.0).silence_limit == 3.0
    assert Timeouts(heartbeat_interval=0.01).silence_limit == 0.25
    assert "silence_limit" not in repr(Timeouts())
    assert dataclasses.replace(Timeouts(), heartbeat_interval=2.0).silence_limit == 6.0


@fast
@pytest.mark.parametrize("group", ["restart", "timeouts", "transport"])
def test_a_group_of_the_wrong_type_is_refused_with_its_class(group):
    kind = GROUPS[group].__name__
    error = refusal(lambda: PoolOptions(**{group: {"startup": 1}}))
    assert error.cause == f"bad pool options: {group}={{'startup': 1}}"
    assert error.fix == f"Use {group}: a {kind} (for example {group}={kind}(...))."


@fast
def test_the_groups_defaults_are_pool_options_defaults():
    options = PoolOptions()
    assert (options.restart, options.timeouts, options.transport) == \
        (RestartPolicy(), Timeouts(), Transport())
    assert options.timeouts.startup == 60.0 and options.restart.max_restarts == 10
    assert options.transport.fork_server is True


# -- the flat names of vyre 0.1 -------------------------------------------------------------

@fast
def test_every_flat_name_has_its_deprecation_naming_its_group_field():
    entries = deprecations.of_kind("option")
    assert set(entries) == set(FLAT)
    for flat, (group, field) in FLAT.items():
        entry = entries[flat]
        assert (entry.since, entry.removed_in) == ("0.1.0", "1.0.0")
        kind = GROUPS[group].__name__
        assert f"PoolOptions({group}={kind}({field}=...))" in entry.replacement
        assert field in {f.name for f in dataclasses.fields(GROUPS[group])}
    assert {g for g, _, _ in OPTION_GROUPS} == set(GROUPS)


@fast
@pytest.mark.parametrize("flat", sorted(FLAT))
def test_a_flat_keyword_makes_the_same_options_as_its_group_and_warns_once(fresh, flat):
    group, field = FLAT[flat]
    value = {"fork_server": False, "max_message_bytes": 1 << 20, "spin": 0.001,
             "recycle_after": 5, "recycle_rss_bytes": 1 << 30, "max_restarts": 2,
             "heartbeat_interval": 0.25}.get(flat, 7.0)
    grouped = PoolOptions(**{group: GROUPS[group](**{field: value})})
    with pytest.warns(VyreDeprecationWarning, match=rf"option '{flat}'.*Fix: Pass "
                                                    rf"PoolOptions\({group}=") as caught:
        assert PoolOptions(**{flat: value}) == grouped
    assert len(caught) == 1 and caught[0].filename == __file__  # (the caller's line)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert PoolOptions(**{flat: value}) == grouped  # once per process


@fast
def test_flat_keywords_of_one_group_make_one_group_object(fresh):
    with pytest.warns(VyreDeprecationWarning):
        options = PoolOptions(workers=2, kill_grace=0.5, heartbeat_timeout=5.0, max_restarts=3,
                              restart_window=30.0)
    assert options == PoolOptions(workers=2, timeouts=Timeouts(kill_grace=0.5, heartbeat=5.0),
                                  restart=RestartPolicy(max_restarts=3, window=30.0))


@fast
def test_a_bad_flat_value_is_refused_by_its_group(fresh):
    with pytest.warns(VyreDeprecationWarning):
        error = refusal(lambda: PoolOptions(startup_timeout=-1))
    assert error.cause == "bad timeouts: startup=-1"
    assert error.fix.startswith("Use Timeouts(startup=...): seconds above 0")


@fast
def test_a_flat_name_and_its_group_together_are_refused(fresh):
    error = refusal(lambda: PoolOptions(kill_grace=0.5, timeouts=Timeouts(startup=3.0)))
    assert error.cause == "PoolOptions got kill_grace= and timeouts= together"
    assert error.fix == ("Set it inside the group: PoolOptions(timeouts=Timeouts("
                         "kill_grace=...)), without kill_grace= (a deprecated flat name).")
    # (another group's flat name is no mix; nor is dataclasses.replace of a whole group)
    with pytest.warns(VyreDeprecationWarning):
        assert PoolOptions(max_restarts=1, timeouts=Timeouts(startup=3.0)).restart == \
            RestartPolicy(max_restarts=1)
    options = dataclasses.replace(PoolOptions(), timeouts=Timeouts(kill_grace=1.0))
    assert options.timeouts.kill_grace == 1.0


@fast
def test_a_flat_attribute_read_warns_once_and_answers_the_groups_value(fresh):
    options = PoolOptions(timeouts=Timeouts(kill_grace=0.75), restart=RestartPolicy(cooldown=9.0),
                          transport=Transport(spin=0.0))
    with pytest.warns(VyreDeprecationWarning, match="option 'kill_grace'") as caught:
        assert options.kill_grace == 0.75
    assert caught[0].filename == __file__
    with pytest.warns(VyreDeprecationWarning, match="option 'restart_window'"):
        assert options.restart_window == 10.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert options.kill_grace == 0.75  # once per process
    with pytest.warns(VyreDeprecationWarning):
        assert (options.cooldown, options.spin, options.heartbeat_timeout) == (9.0, 0.0, 30.0)


@fast
def test_a_flat_name_past_its_removal_version_is_refused(fresh):
    fresh(Deprecation("option", "kill_grace", "0.0.1", "0.1.0", "Use the group."))
    error = refusal(lambda: PoolOptions(kill_grace=0.5))
    assert error.cause == (f"this program uses option 'kill_grace', deprecated since vyre "
                           f"0.0.1 and removed in vyre 0.1.0, and this is vyre "
                           f"{vyre_core.__version__}")
    assert error.fix == "Use the group."
    options = PoolOptions(timeouts=Timeouts(kill_grace=0.5))
    assert refusal(lambda: options.kill_grace).fix == "Use the group."


@fast
def test_flat_names_stay_out_of_the_signature_and_the_fields():
    names = {f.name for f in dataclasses.fields(PoolOptions)}
    assert names == {"workers", "standby", "devices", "threads", "gpus_per_worker", "tracing",
                     "restart", "timeouts", "transport"}
    assert set(inspect.signature(PoolOptions).parameters) == names


# -- the fault kit ----------------------------------------------------------------------------

@fast
def test_the_fault_kits_tight_options_are_in_group_form():
    assert TIGHT.restart == RestartPolicy(max_restarts=3, window=30.0)
    assert TIGHT.timeouts == Timeouts(kill_grace=0.5, heartbeat=5.0)


@fast
def test_options_over_changes_only_the_fields_it_names(fresh):
    changed = options_over(TIGHT, workers=2, restart={"max_restarts": 1})
    assert changed.restart == RestartPolicy(max_restarts=1, window=30.0)
    assert (changed.workers, changed.timeouts) == (2, TIGHT.timeouts)
    assert options_over(TIGHT, restart=RestartPolicy()).restart == RestartPolicy()
    with pytest.warns(VyreDeprecationWarning, match="option 'max_restarts'"):
        assert options_over(TIGHT, max_restarts=1) == PoolOptions(
            restart=changed.restart, timeouts=TIGHT.timeouts)


# -- shadow options -------------------------------------------------------------------------

@fast
@pytest.mark.parametrize("every", [0, -1, 1.5, True, "2"])
def test_shadow_options_refuse_a_bad_every(every):
    error = refusal(lambda: ShadowOptions(every=every))
    assert error.cause.startswith(f"ShadowOptions(every={every!r}) must be an int")
    assert error.fix.startswith("Pass ShadowOptions(every=N)")


@fast
def test_shadow_options_refuse_a_dir_that_is_not_a_path(tmp_path):
    assert refusal(lambda: ShadowOptions(every=2, dir=3)).fix.startswith(
        "Pass ShadowOptions(dir=...) a directory path")
    assert ShadowOptions(every=2, dir=tmp_path).dir == tmp_path
    assert ShadowOptions() == ShadowOptions(None, None)


def reference_only() -> Registry:
    return Registry.discover("reference")


def test_the_shadow_is_one_object_and_its_flat_keywords_warn(fresh, tmp_path):
    with Driver(reference_only(), shadow=ShadowOptions(every=3, dir=tmp_path)) as drv:
        assert drv.shadow_report()["every"] == 3
        assert drv.shadow_report()["directory"] == str(tmp_path)
    with pytest.warns(VyreDeprecationWarning) as caught:
        drv = Driver(reference_only(), shadow_every=2, shadow_dir=tmp_path)
    with drv:
        assert drv.shadow_report()["every"] == 2
        assert drv.shadow_report()["directory"] == str(tmp_path)
    said = sorted(str(w.message) for w in caught)
    assert "call 'Driver(shadow_dir=)'" in said[0] and "call 'Driver(shadow_every=)'" in said[1]
    assert "Fix: Pass Driver(shadow=ShadowOptions(every=N))." in said[1]
    assert {w.filename for w in caught} == {__file__}
    with Driver(reference_only()) as drv:
        assert drv.shadow_report() is None


def test_both_shadow_forms_at_once_are_refused(fresh, tmp_path):
    error = refusal(lambda: Driver(reference_only(), shadow=ShadowOptions(every=2),
                                   shadow_dir=tmp_path))
    assert error.cause == "Driver got shadow= and shadow_dir= together"
    assert error.fix == ("Pass the shadow's options in one place: "
                         "Driver(shadow=ShadowOptions(every=N, dir=...)).")


def test_the_shadows_flat_keywords_are_refused_past_their_removal(fresh):
    fresh(Deprecation("call", "Driver(shadow_every=)", "0.0.1", "0.1.0", "Use shadow=."))
    assert refusal(lambda: Driver(reference_only(), shadow_every=2)).fix == "Use shadow=."


def test_a_driver_takes_flat_pool_fields_for_one_version(fresh):
    with pytest.warns(VyreDeprecationWarning, match="option 'kill_grace'") as caught:
        drv = Driver(reference_only(), workers=2, kill_grace=0.5)
    with drv:
        assert drv.options == PoolOptions(workers=2, timeouts=Timeouts(kill_grace=0.5))
    assert caught[0].filename == __file__
    with Driver(reference_only(), timeouts=Timeouts(startup=5.0)) as drv:
        assert drv.options.timeouts.startup == 5.0


def test_every_new_name_is_exported_and_listed_as_deprecated():
    for name in ("RestartPolicy", "Timeouts", "Transport", "ShadowOptions"):
        assert name in vyre_core.__all__
    kinds = {(d.kind, d.name) for d in DEPRECATIONS}
    assert {("call", "Driver(shadow_every=)"), ("call", "Driver(shadow_dir=)")} <= kinds
