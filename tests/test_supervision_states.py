"""The supervision states as tables (``supervisor/rules/states.py``): every move the rules
make is a row, the rows are the code's (no state is set around ``_move``), and
docs/architecture.md shows the same tables. The suite runs with ``states.CHECKING`` on
(conftest.py), so the rule tests and the stateful test check each move as it happens."""

from __future__ import annotations

import ast
import pathlib

import pytest
from supervision_harness import Shell, body_of

from vyre_core.boundary.messages import Op
from vyre_core.supervisor.rules import states
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_core.supervisor.rules.states import CallState, Event, PoolState, WorkerState

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(__file__).resolve().parents[1]
RULES = ROOT / "vyre_core" / "supervisor" / "rules"
MOVES = {"_move", "_move_pool", "_move_call"}


def test_the_suite_checks_every_move() -> None:
    assert states.CHECKING


def test_a_move_no_row_allows_fails_naming_the_event_both_states_and_the_fix() -> None:
    shell = Shell(workers=1)
    w = shell.machine.workers[0]
    assert w.state is WorkerState.STOPPED
    with pytest.raises(AssertionError) as caught:
        shell.machine._move(w, Event.HELLO, WorkerState.BUSY)
    text = str(caught.value)
    assert "'hello' moved it from stopped to busy" in text
    assert "worker table" in text and "Fix: add the row" in text
    assert w.state is WorkerState.STOPPED  # (refused before it is made)


def test_with_checking_off_a_move_is_only_the_assignment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(states, "CHECKING", False)
    shell = Shell(workers=1)
    w = shell.machine.workers[0]
    shell.machine._move(w, Event.HELLO, WorkerState.BUSY)
    assert w.state is WorkerState.BUSY


def test_a_call_moves_through_its_table_on_the_way_to_its_answer() -> None:
    shell = Shell(workers=1)
    assert Request(Call(body_of(Op.PING), [])).tracking.state is CallState.NEW
    req = shell.submit(op=Op.PING)
    assert req.tracking.state is CallState.SENT and shell.machine.state is PoolState.RUNNING
    shell.reply(0, req)
    assert req.tracking.state is CallState.DONE and req.done
    assert shell.machine.workers[0].state is WorkerState.IDLE


def _assigned_states(tree: ast.AST) -> list[tuple[str, int]]:
    """(function, line) of each assignment to an attribute named ``state``."""
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            targets = node.targets if isinstance(node, ast.Assign) else [
                node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
            for target in targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                found += [(fn.name, node.lineno) for t in elements
                          if isinstance(t, ast.Attribute) and t.attr == "state"]
    return found


def test_the_rules_set_a_state_only_through_a_move() -> None:
    """Anywhere else, a state would change without its table knowing."""
    stray = [f"{path.name}:{line} in {fn}" for path in sorted(RULES.glob("*.py"))
             for fn, line in _assigned_states(ast.parse(path.read_text()))
             if fn not in MOVES and fn != "__init__"]
    assert not stray, f"states set around the tables: {stray}"


def test_every_state_is_reached_and_every_event_moves_something() -> None:
    initial = (WorkerState.STOPPED, PoolState.NEW, CallState.NEW)  # (equal strings: no set)
    for whose, table in states.TABLES.items():
        kind = type(table[0].after)
        reached = {r.after for r in table} | {s for s in initial if isinstance(s, kind)}
        assert reached == set(kind), f"{whose}: never reached: {set(kind) - reached}"
        assert all(r.before and all(isinstance(b, kind) for b in r.before) for r in table)
    used = {r.event for table in states.TABLES.values() for r in table}
    assert used == set(Event), f"events that move nothing: {set(Event) - used}"


def test_the_states_show_as_their_plain_values() -> None:
    """``status()`` is read by ``vyre status`` and serialised: plain strings, no enums."""
    shell = Shell(workers=1)
    status = shell.machine.status(shell.now)
    assert type(status["workers"][0]["state"]) is str
    assert status["workers"][0]["state"] == "stopped" and status["state"] == "not started"
    assert type(shell.machine.metrics_snapshot()["state"]) is str


@pytest.mark.parametrize("whose", sorted(states.TABLES))
def test_architecture_md_shows_the_tables_the_code_checks(whose: str) -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert states.render(whose) in page, (
        f"docs/architecture.md's {whose} table differs from supervisor/rules/states.py; "
        f"paste in:\n{states.render(whose)}")


def test_each_module_name_is_the_member_it_names() -> None:
    """The rules read states and events by their module names (states.py says why)."""
    for kind in (WorkerState, PoolState, CallState, Event):
        for member in kind:
            if member.name != "NEW":  # (a pool's and a call's: read off their classes)
                assert getattr(states, member.name) is member, member
