"""The error family: stable codes, messages that start with the code and end with a
``Fix:`` line, plain-data round trips across process boundaries, and the one mapping of
foreign exceptions into the family."""

from __future__ import annotations

import inspect
import json
import pickle

import msgpack
import pytest

from vyre_core import errors
from vyre_core.errors import (
    DeviceOutOfMemoryError,
    DispatchError,
    ValidationError,
    VyreError,
    as_vyre_error,
    catalog,
)

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

# Frozen: codes are append-only. Renumbering or removing a class fails here; a new class
# must be added to this table (and nowhere else may a code be reused).
FROZEN_CODES: dict[str, int] = {
    "VyreError": 1000,
    "InvalidProgramError": 1001,
    "ValidationError": 1002,
    "InvalidSequenceError": 1003,
    "KernelSyntaxError": 1004,
    "InvalidInputError": 1101,
    "UnsupportedFeatureError": 1102,
    "InvalidConfigError": 1103,
    "LaunchLimitError": 1104,
    "DeviceOutOfMemoryError": 1201,
    "DeviceLostError": 1202,
    "KernelCompileError": 1203,
    "DispatchError": 1204,
    "DispatchTimeoutError": 1301,
    "WorkerCrashedError": 1302,
    "PoolFailedError": 1303,
    "PipelineInvalidatedError": 1304,
    "ProtocolError": 1305,
    "SystemResourceError": 1306,
    "MessageLostError": 1307,
    "DispatchCancelledError": 1308,
    "NoCapableBackendError": 1401,
    "PluginLoadError": 1402,
    "ClusterUnavailableError": 1403,
}

CLASSES = sorted(catalog().values(), key=lambda cls: cls.code)
DETAILS = {"count": 3, "names": ["a", "b"], "nested": {"k": [1, 2, {"x": "y"}]},
           "label": "dispatch 'x'", "negative": -7}


def by_name(cls: type[VyreError]) -> str:
    return cls.__name__


def make(cls: type[VyreError], fix: str | None = None) -> VyreError:
    return cls(f"something about {cls.__name__} went wrong", fix, **DETAILS)


def assert_same(a: VyreError, b: VyreError) -> None:
    assert type(b) is type(a)
    assert (b.code, b.cause, b.fix, b.details) == (a.code, a.cause, a.fix, a.details)
    assert str(b) == str(a)


# -- the catalog -----------------------------------------------------------------------------


def test_catalog_is_exactly_the_frozen_table():
    assert {cls.__name__: code for code, cls in catalog().items()} == FROZEN_CODES
    assert all(cls.code == code for code, cls in catalog().items())


def test_every_error_class_in_the_module_is_in_the_catalog_or_a_group():
    defined = {obj for obj in vars(errors).values()
               if inspect.isclass(obj) and issubclass(obj, VyreError)}
    assert defined == set(catalog().values()) | set(errors.GROUPS)
    assert not set(catalog().values()) & set(errors.GROUPS)


# What a caller can do about each error: the groups are part of the public surface.
GROUP_OF = {
    errors.CallerError: {"InvalidProgramError", "ValidationError", "InvalidSequenceError",
                         "KernelSyntaxError",
                         "InvalidInputError", "InvalidConfigError", "LaunchLimitError",
                         "PipelineInvalidatedError", "DispatchCancelledError"},
    errors.BackendFaultError: {"DeviceOutOfMemoryError", "DeviceLostError",
                               "KernelCompileError", "DispatchError", "DispatchTimeoutError",
                               "WorkerCrashedError", "ProtocolError", "MessageLostError"},
    errors.UnavailableError: {"UnsupportedFeatureError", "PoolFailedError",
                              "SystemResourceError", "NoCapableBackendError",
                              "PluginLoadError", "ClusterUnavailableError"},
}


def test_every_class_but_the_base_is_in_exactly_one_group():
    for cls in catalog().values():
        groups = [g for g in errors.GROUPS if issubclass(cls, g)]
        if cls is VyreError:
            assert groups == []
        else:
            assert len(groups) == 1, cls
            assert cls.__name__ in GROUP_OF[groups[0]], cls
    assert set().union(*GROUP_OF.values()) == {c.__name__ for c in catalog().values()} - {
        "VyreError"}


@pytest.mark.parametrize("group", errors.GROUPS, ids=by_name)
def test_a_group_catches_its_members_after_a_round_trip(group):
    for name in GROUP_OF[group]:
        cls = next(c for c in catalog().values() if c.__name__ == name)
        with pytest.raises(group):
            raise VyreError.from_dict(make(cls).to_dict())


def test_catalog_returns_a_copy():
    catalog().clear()
    assert len(catalog()) == len(FROZEN_CODES)


@pytest.mark.parametrize("cls", CLASSES, ids=by_name)
def test_every_class_has_a_one_line_docstring(cls):
    doc = cls.__dict__.get("__doc__")
    assert doc and doc.strip(), f"{cls.__name__} has no docstring of its own"
    assert "\n" not in doc.strip(), f"{cls.__name__}'s docstring is not one line"


@pytest.mark.parametrize("cls", CLASSES, ids=by_name)
def test_every_class_is_a_vyre_error_with_a_default_fix(cls):
    assert issubclass(cls, VyreError) and issubclass(cls, Exception)
    assert isinstance(cls.default_fix, str) and cls.default_fix.strip()


# -- messages --------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES, ids=by_name)
def test_message_starts_with_the_code_and_ends_with_the_default_fix(cls):
    err = make(cls)
    text = str(err)
    assert text.startswith(f"[E{cls.code}] ")
    assert text.splitlines()[0] == f"[E{cls.code}] something about {cls.__name__} went wrong"
    assert text.splitlines()[-1] == f"Fix: {cls.default_fix}"
    assert err.fix == cls.default_fix
    assert err.args == (text,)


@pytest.mark.parametrize("cls", CLASSES, ids=by_name)
def test_custom_fix_replaces_the_default(cls):
    err = make(cls, "Do exactly this instead.")
    assert err.fix == "Do exactly this instead."
    assert str(err).splitlines()[-1] == "Fix: Do exactly this instead."
    assert cls.default_fix not in str(err)


@pytest.mark.parametrize("cls", CLASSES, ids=by_name)
def test_raised_error_is_caught_as_vyre_error(cls):
    with pytest.raises(VyreError, match=r"Fix: ") as caught:
        raise make(cls)
    assert type(caught.value) is cls


# -- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("fix", [None, "A custom fix."])
@pytest.mark.parametrize("cls", CLASSES, ids=by_name)
def test_dict_round_trip_keeps_class_and_fields(cls, fix):
    err = make(cls, fix)
    data = err.to_dict()
    assert data["type"] == cls.__name__ and data["code"] == cls.code
    assert_same(err, VyreError.from_dict(data))


@pytest.mark.parametrize("cls", CLASSES, ids=by_name)
def test_dict_survives_msgpack(cls):
    err = make(cls, "Fix it over the wire.")
    wire = msgpack.packb(err.to_dict())
    assert_same(err, VyreError.from_dict(msgpack.unpackb(wire, raw=False)))


@pytest.mark.parametrize("cls", CLASSES, ids=by_name)
def test_dict_survives_json(cls):
    err = make(cls)
    assert_same(err, VyreError.from_dict(json.loads(json.dumps(err.to_dict()))))


@pytest.mark.parametrize("cls", CLASSES, ids=by_name)
def test_pickle_round_trip_keeps_class_and_fields(cls):
    err = make(cls, "Pickled fix.")
    assert_same(err, pickle.loads(pickle.dumps(err)))


def test_unknown_code_gives_the_base_class_with_the_cause():
    err = VyreError.from_dict({"type": "FutureError", "code": 9999, "cause": "from the future",
                               "fix": "Upgrade.", "details": {"n": 1}})
    assert type(err) is VyreError
    assert err.cause == "from the future" and err.fix == "Upgrade." and err.details == {"n": 1}
    assert str(err).startswith("[E1000] from the future")


def test_minimal_dict_gives_the_base_class_with_the_default_fix():
    err = VyreError.from_dict({"cause": "bare"})
    assert type(err) is VyreError
    assert err.cause == "bare" and err.fix == VyreError.default_fix and err.details == {}


def test_code_as_string_still_finds_the_class():
    data = make(errors.LaunchLimitError).to_dict()
    data["code"] = str(data["code"])
    assert type(VyreError.from_dict(data)) is errors.LaunchLimitError


def test_details_with_numpy_scalars_and_objects_always_encode():
    """A worker reporting an error must never die encoding it (issue 11, defect 11)."""
    import numpy as np

    err = DispatchError("x", count=np.uint32(7), ratio=np.float32(0.5), flag=np.bool_(True),
                        shape=(2, 3), where={1: object()}, kinds={"b", "a"}, big=2**70)
    data = msgpack.unpackb(msgpack.packb(err.to_dict()), raw=False)
    back = VyreError.from_dict(data)
    assert back.details["count"] == 7 and type(back.details["count"]) is int
    assert back.details["ratio"] == 0.5 and back.details["flag"] is True
    assert back.details["shape"] == [2, 3] and back.details["kinds"] == ["a", "b"]
    assert back.details["where"]["1"].startswith("<object object")
    assert back.details["big"] == str(2**70)


@pytest.mark.parametrize("data", [
    None, 7, "text", [1, 2], {"code": "abc"}, {"code": None, "cause": 5},
    {"code": 1302, "details": "not a map"}, {"code": 1302, "details": {"cause": "clash"}},
    {"code": 1302, "details": {1: "int key", "not an identifier": 2}},
    {"code": 1002, "details": {"findings": None}}, {"code": 10**30}, {"code": 1.5e300},
    {"cause": b"bytes", "fix": ["a"]},
])
def test_from_dict_is_total(data):
    """An ERROR reply with a malformed error map crashed the supervisor (defect 9)."""
    err = VyreError.from_dict(data)
    assert isinstance(err, VyreError)
    assert str(err).startswith("[E") and "\nFix: " in str(err)


def test_from_dict_survives_any_msgpack_value():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
            st.text() | st.integers(), inner, max_size=4), max_leaves=20)

    @settings(max_examples=300, deadline=None)
    @given(st.dictionaries(st.sampled_from(["code", "cause", "fix", "details", "type"]),
                           values) | values)
    def check(data):
        err = VyreError.from_dict(data)
        assert isinstance(err, VyreError)
        msgpack.packb(err.to_dict())

    check()


def test_os_errors_map_to_system_resource_error_with_a_fix_naming_the_resource():
    import errno as errno_module

    for code, words in ((errno_module.ENOSPC, "disk space"), (errno_module.EMFILE, "ulimit -n"),
                        (errno_module.EAGAIN, "processes")):
        err = errors.system_resource_error(OSError(code, "refused"), "starting a worker")
        assert isinstance(err, errors.SystemResourceError)
        assert isinstance(err, errors.UnavailableError)
        assert err.cause.startswith("starting a worker failed: ")
        assert errno_module.errorcode[code] in err.cause and words in err.fix


# -- ValidationError -------------------------------------------------------------------------


def test_validation_error_findings_default_to_empty():
    err = ValidationError("program is invalid")
    assert err.findings == []
    assert err.details == {"findings": []}


def test_validation_error_findings_survive_every_round_trip():
    findings = [{"code": "V006", "message": "store into read-only 'src'", "fix": "Declare it."},
                {"code": "V015", "message": "unreachable", "fix": "Remove it."}]
    err = ValidationError("2 findings", findings=findings)
    assert err.findings == findings
    for again in (VyreError.from_dict(err.to_dict()),
                  VyreError.from_dict(msgpack.unpackb(msgpack.packb(err.to_dict()), raw=False)),
                  pickle.loads(pickle.dumps(err))):
        assert isinstance(again, ValidationError)
        assert again.findings == findings


def test_validator_raises_validation_error_with_findings():
    from vyre_core import ir

    k = ir.Kernel(workgroup=(4,))
    src = k.read("src", ir.u32)
    src[0] = 1  # store into a read-only buffer
    with pytest.raises(ValidationError) as caught:
        k.build()
    assert any(f["code"] == "V006" for f in caught.value.findings)
    assert str(caught.value).splitlines()[-1].startswith("Fix: ")


# -- as_vyre_error ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES, ids=by_name)
def test_vyre_errors_pass_through_unchanged(cls):
    err = make(cls)
    assert as_vyre_error(err, "anything") is err


def test_memory_error_becomes_device_out_of_memory():
    err = as_vyre_error(MemoryError("cannot allocate"), "backend 'x' vyre_dispatch")
    assert type(err) is DeviceOutOfMemoryError
    assert "backend 'x' vyre_dispatch" in err.cause
    assert str(err).splitlines()[-1] == f"Fix: {DeviceOutOfMemoryError.default_fix}"


def _raise_value_error() -> None:
    raise ValueError("boom: bad index 7")


@pytest.mark.parametrize("exc_type", [ValueError, KeyError, RuntimeError, ZeroDivisionError])
def test_other_exceptions_become_dispatch_error_with_type_message_and_traceback(exc_type):
    try:
        raise exc_type("the original message")
    except exc_type as exc:
        err = as_vyre_error(exc, "backend 'x' vyre_dispatch")
    assert type(err) is DispatchError
    assert err.cause.startswith("backend 'x' vyre_dispatch failed: ")
    assert exc_type.__name__ in err.cause and "the original message" in err.cause
    tb = err.details["traceback"]
    assert isinstance(tb, str)
    assert tb.startswith("Traceback (most recent call last):")
    assert exc_type.__name__ in tb and "the original message" in tb
    assert str(err).splitlines()[-1].startswith("Fix: ")


def test_wrapped_traceback_names_the_failing_function_and_crosses_msgpack():
    try:
        _raise_value_error()
    except ValueError as exc:
        err = as_vyre_error(exc, "pipeline dispatch")
    assert "_raise_value_error" in err.details["traceback"]
    back = VyreError.from_dict(msgpack.unpackb(msgpack.packb(err.to_dict()), raw=False))
    assert type(back) is DispatchError
    assert back.details["traceback"] == err.details["traceback"]
    assert back.cause == "pipeline dispatch failed: ValueError: boom: bad index 7"
