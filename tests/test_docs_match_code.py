"""The reference pages in docs/ are checked against the code, so they cannot drift."""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path

import numpy as np

from vyre_core.contract import hookspec
from vyre_core.contract.manager import HOOK_NAMES, REQUIRED_HOOKS
from vyre_core.errors import catalog

DOCS = Path(__file__).resolve().parent.parent / "docs"


def table_rows(page: str, prefix: str) -> list[list[str]]:
    text = (DOCS / page).read_text()
    return [[cell.strip() for cell in line.strip("|").split(" | ")]
            for line in text.splitlines() if line.startswith(prefix)]


def test_error_catalog_lists_every_class_with_its_code_and_docstring():
    rows = {code: (cls, when) for code, cls, when in table_rows("errors.md", "| E")}
    assert rows == {f"E{code}": (f"`{cls.__name__}`", inspect.getdoc(cls).splitlines()[0])
                    for code, cls in catalog().items()}


def test_contract_page_lists_every_hook_with_its_arguments_and_default():
    rows = {name.strip("`"): (args, default)
            for name, args, default in table_rows("contract.md", "| `vyre_")}
    expected = {}
    for name in HOOK_NAMES:
        fn = getattr(hookspec, name)
        doc = " ".join(inspect.getdoc(fn).split())
        default = ("**required**" if name in REQUIRED_HOOKS
                   else re.search(r"Default: (.*)$", doc).group(1))
        expected[name] = (", ".join(inspect.signature(fn).parameters) or "—", default)
    assert rows == expected


def test_readme_tour_runs_as_written(capsys):
    """A new user pastes the README's tour: a kernel, a routed launch, the routing
    explanation, a worker killed, the dispatch surviving it, the stale handle refused."""
    page = DOCS.parent / "README.md"
    readme = page.read_text()
    match = re.search(r"```python\n(.*?)```", readme, re.S)
    tour = match.group(1)
    assert len(tour.splitlines()) <= 30
    assert f"## A tour in {len(tour.splitlines())} lines" in readme
    namespace: dict = {}  # (run at its own lines of README.md: the kernel's source is read there)
    line = readme.count("\n", 0, match.start(1))
    exec(compile("\n" * line + tour, str(page), "exec"), namespace)
    assert "@vyre.kernel" in tour and "ir.Kernel" not in tour  # written as a kernel
    x, y = namespace["x"], namespace["y"]
    assert namespace["result"].tobytes() == (np.float32(2.0) * x + y).tobytes()
    assert namespace["again"].tobytes() == namespace["result"].tobytes()
    printed = capsys.readouterr().out.splitlines()
    assert "* cpu (rank 500): chosen" in printed
    assert printed[-2:] == ["2", "Compile the program again (Driver.compile) and use the new "
                            "handle; Driver.dispatch recompiles by itself."]


def section(page: str, heading: str) -> str:
    """The text of ``page`` under ``## heading``, up to the next ``## ``."""
    text = (DOCS / page).read_text()
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_ir_page_python_blocks_run_as_written(capsys):
    """The IR page's blocks run in order in one namespace, as a reader pastes them."""
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / "ir.md").read_text(), re.S)
    assert len(blocks) >= 5
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/ir.md", "exec"), namespace)
    assert "V008: stores i32 into f32 buffer 'dst'" in capsys.readouterr().out


def test_sequences_page_block_runs_and_prints_what_it_says(capsys):
    (block,) = re.findall(r"```python\n(.*?)```", (DOCS / "sequences.md").read_text(), re.S)
    exec(compile(block, "docs/sequences.md", "exec"), {})
    assert capsys.readouterr().out == (
        "[16. 16. 16.] [LoopRun(iterations=3, converged=True)]\n[3 3 3 3] [0 0 0 0]\n"
        "[LoopRun(iterations=3, converged=True), LoopRun(iterations=6, converged=True)]\n")


def test_ir_page_op_table_is_exactly_all_ops():
    from vyre_core.ir import ALL_OPS

    rows = [line.split(" | ")[0].strip("| `")
            for line in section("ir.md", "Op ids").splitlines() if line.startswith("| `")]
    assert len(rows) == len(set(rows)), "an op id is listed twice"
    assert set(rows) == ALL_OPS


def _usage(p: argparse.ArgumentParser, prefix: str) -> tuple[str, list[str]]:
    """``vyre run TARGET`` and its options as the page writes them (``--backend ID``)."""
    positionals = [a.metavar or a.dest for a in p._actions
                   if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
    options = [s if a.nargs == 0 else f"{s} {a.metavar or a.dest.upper()}"
               for a in p._actions if not isinstance(a, argparse._HelpAction)
               for s in a.option_strings]
    return " ".join([prefix, *positionals]), sorted(options)


def test_cli_page_lists_every_command_with_exactly_its_options():
    from vyre_core.cli.app import parser

    top = parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    expected = dict([_usage(top, "vyre")] + [_usage(p, f"vyre {name}")
                                             for name, p in commands.choices.items()])
    rows = table_rows("cli.md", "| `vyre")
    page = {command.strip("`"): sorted(re.findall(r"`([^`]+)`", options))
            for command, options, _ in rows}
    assert len(page) == len(rows), "a command is listed twice"
    assert page == expected


def test_cli_page_example_module_is_a_valid_target(tmp_path):
    """The page's example module loads as a TARGET, passes its own check, and its --save
    pair replays as the same program."""
    from vyre_core.cli.targets import load_target, save_target
    from vyre_reference import run

    block, = re.findall(r"```python\n(.*?)```", (DOCS / "cli.md").read_text(), re.S)
    module = tmp_path / "triple.py"
    module.write_text(block)
    target = load_target(str(module))
    example = target.example
    assert example.mismatch(run(example.program, example.inputs)) is None
    save_target(target, tmp_path / "triple.vyir")
    saved = load_target(str(tmp_path / "triple.vyir"))
    assert saved.example.program == example.program
    assert [a.tobytes() for a in saved.example.inputs] == [a.tobytes() for a in example.inputs]


def test_cli_page_verdicts_match_the_runner():
    from vyre_core.cli.conform import CELL, VERDICTS
    from vyre_core.conformance.runner import PASSING

    rows = [line.strip("|").split(" | ") for line in section("cli.md", "vyre conform").splitlines()
            if line.startswith("| `")]
    assert {v.strip(" `"): (cell.strip(), ok.strip()) for v, cell, _, ok in rows} == {
        v: (CELL[v].plain, "yes" if v in PASSING else "no")
        for v in VERDICTS}


def test_error_tree_on_the_errors_page_matches_the_groups():
    from vyre_core import errors

    tree = (DOCS / "errors.md").read_text().split("## Catching by meaning")[1]
    block = tree.split("```")[1]
    for group in errors.GROUPS:
        branch = block.split(f"── {group.__name__}")[1].split("──", 3)
        listed = {name.strip(" ,\n│├└") for part in branch[1:3] for name in part.split(",")}
        listed = {n.split()[0] for n in listed if n}
        members = {c.__name__ for c in catalog().values() if issubclass(c, group)}
        assert listed == members, group.__name__


def test_pool_options_table_lists_every_option():
    """Every field of PoolOptions, and every field of its groups under its group's name
    (``| `timeouts`: `startup` |``)."""
    from dataclasses import fields

    from vyre_core.supervisor.options import GROUPS, PoolOptions

    rows = [row for row in table_rows("operations.md", "| `") if len(row) == 3]
    listed = {option for name, _, _ in rows for option in re.findall(r"`(\w+)`", name)}
    missing = {f.name for f in fields(PoolOptions)} - listed
    assert not missing, f"PoolOptions fields missing from docs/operations.md: {missing}"
    grouped = {(names[0], option) for names in (re.findall(r"`(\w+)`", name)
                                                for name, _, _ in rows)
               if names and names[0] in GROUPS for option in names[1:]}
    missing = {(group, f.name) for group, kind in GROUPS.items() for f in fields(kind)
               if f.init} - grouped
    assert not missing, f"group fields missing from docs/operations.md: {missing}"


def test_the_deprecations_table_lists_every_entry():
    from vyre_core.deprecations import DEPRECATIONS

    rows = {(what, since, removed) for what, since, removed, _ in
            table_rows("operations.md", "| hook `") + table_rows("operations.md", "| op `")
            + table_rows("operations.md", "| config `") + table_rows("operations.md", "| call `")
            + table_rows("operations.md", "| option `") + table_rows("operations.md", "| claim `")}
    assert rows == {(f"{d.kind} `{d.name}`", d.since, d.removed_in) for d in DEPRECATIONS}


def test_the_public_surface_is_exactly_what_vyre_core_exports():
    """docs/architecture.md lists every name of ``vyre_core.__all__``, and nothing else;
    every name importable from it resolves."""
    import vyre_core

    listed = {name.strip("`") for name, _ in table_rows("architecture.md", "| `")}
    assert listed == set(vyre_core.__all__)
    for name in vyre_core.__all__:
        assert getattr(vyre_core, name) is not None


def test_what_the_docs_import_from_vyre_core_is_exported():
    import vyre_core

    text = "\n".join(p.read_text() for p in [*DOCS.glob("*.md"), DOCS.parent / "README.md"])
    used = set(re.findall(r"\bvyre\.([A-Z]\w+)", text))  # (not loggers, entry points)
    for names in re.findall(r"from vyre_core import ([A-Za-z0-9_, ]+)", text):
        used |= {n.strip() for n in names.split(",")}
    assert used <= set(vyre_core.__all__), sorted(used - set(vyre_core.__all__))


def test_every_room_docs_architecture_names_exists_and_every_module_has_a_room():
    """The rooms of docs/architecture.md are real files, and every module of the package
    and the wgpu plugin is named there (a newcomer finds the room for a change by reading
    it, so a room missing from it is as wrong as one that is gone)."""
    root = DOCS.parent
    text = (DOCS / "architecture.md").read_text()
    rooms = text[text.index("## The rooms"):text.index("## The public surface")]
    named = set(re.findall(r"`([\w/.-]+\.py)`", rooms))
    sources = [p for base in ("vyre_core", "workers", "plugins")
               for p in (root / base).rglob("*.py")]
    missing = sorted(n for n in named if not any(str(p).endswith("/" + n) for p in sources))
    assert not missing, f"docs/architecture.md names rooms that do not exist: {missing}"
    modules = [p for p in (root / "plugins/vyre-wgpu/vyre_wgpu").glob("*.py")]
    modules += list((root / "vyre_core").glob("*.py"))
    unnamed = sorted(str(p.relative_to(root)) for p in modules if p.name != "__init__.py"
                     and not any(str(p).endswith("/" + n) for n in named))
    assert not unnamed, f"modules without a room in docs/architecture.md: {unnamed}"
