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

# Frozen: codes are append-only. Renumbering or removing a class fails here; a new class
# must be added to this table (and nowhere else may a code be reused).
FROZEN_CODES: dict[str, int] = {
    "VyreError": 1000,
    "InvalidProgramError": 1001,
    "ValidationError": 1002,
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
    "NoCapableBackendError": 1401,
    "PluginLoadError": 1402,
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


def test_every_error_class_in_the_module_is_in_the_catalog():
    defined = {obj for obj in vars(errors).values()
               if inspect.isclass(obj) and issubclass(obj, VyreError)}
    assert defined == set(catalog().values())


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
