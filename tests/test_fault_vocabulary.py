"""The fault vocabulary of ``vyre_core.testing.faults``: what tests ask and what the fault
backend reads. A fault that is misspelt must be refused on either side: a dispatch that
quietly computes would make a fault test pass without its fault."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidConfigError
from vyre_core.testing.faults import (
    DISPATCH_FAULTS,
    STARTUP_ENV,
    STARTUP_FAULTS,
    active_startup_faults,
    fault,
    parse_label,
    startup_faults,
)

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

DOC = Path(__file__).resolve().parent.parent / "docs" / "fault-injection.md"


def test_a_fault_is_a_dispatch_config_whose_label_asks_for_it():
    config = fault("sleep", 0.5, retries=0, timeout=9.0)
    assert config == DispatchConfig(label="fault:sleep:0.5", retries=0, timeout=9.0)
    assert fault("exit").label == "fault:exit"
    assert fault("device").label == "fault:device" and fault("device", 2).label == "fault:device:2"
    assert fault("crash_once", Path("/tmp/flag")).label == "fault:crash_once:/tmp/flag"


@pytest.mark.parametrize("kind", sorted(DISPATCH_FAULTS))
def test_every_label_reads_back_as_its_fault(kind):
    arg = {"none": None, "required": "3", "optional": "1"}[DISPATCH_FAULTS[kind][0]]
    assert parse_label(fault(kind, arg).label) == (kind, arg or "")


@pytest.mark.parametrize(("kind", "arg", "cause", "fix"), [
    ("exitt", None, "unknown dispatch fault 'exitt'", "Name one of: abort, chatter"),
    ("sleep", None, "the dispatch fault 'sleep' needs an argument", "Pass it: sleep:ARG."),
    ("sleep", "", "the dispatch fault 'sleep' needs an argument", "Pass it: sleep:ARG."),
    ("exit", 3, "the dispatch fault 'exit' takes no argument, got 3", "Leave the argument"),
    ("crash_once", "a,b", "may not hold a comma: 'crash_once:a,b'", "without commas"),
])
def test_a_bad_fault_is_refused_with_a_fix(kind, arg, cause, fix):
    with pytest.raises(InvalidConfigError) as caught:
        fault(kind, arg)
    assert cause in caught.value.cause and fix in caught.value.fix


@pytest.mark.parametrize("label", [None, "", "my label", "faults", "Fault:exit"])
def test_a_label_that_asks_for_no_fault_reads_as_none(label):
    assert parse_label(label) is None


@pytest.mark.parametrize("label", ["fault:exitt", "fault:sleep", "fault:exit:1", "fault:"])
def test_the_backend_side_refuses_a_bad_label_too(label):
    with pytest.raises(InvalidConfigError):
        parse_label(label)


def test_startup_faults_make_the_variable_the_backend_reads():
    value = startup_faults("devices:2", "no_recover", "no_f64_on:1")
    assert value == "devices:2,no_recover,no_f64_on:1"
    assert active_startup_faults({STARTUP_ENV: value}) == {"devices:2", "no_recover",
                                                           "no_f64_on:1"}
    assert active_startup_faults({}) == frozenset()
    with pytest.raises(InvalidConfigError, match="unknown start-up fault 'crash_imprt'"):
        active_startup_faults({STARTUP_ENV: "crash_imprt"})
    with pytest.raises(InvalidConfigError, match="'devices' needs an argument"):
        startup_faults("devices")


@pytest.mark.parametrize(("heading", "vocabulary"), [
    ("Faults per dispatch", DISPATCH_FAULTS), ("Faults at a worker's start", STARTUP_FAULTS)])
def test_the_docs_list_exactly_the_vocabulary(heading, vocabulary):
    section = DOC.read_text().split(f"\n## {heading}", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_0-9]+)(?:\[?:ARG\]?)?` \| (.*) \|$", section, re.M)
    assert rows == [(kind, what) for kind, (_, what) in vocabulary.items()]
