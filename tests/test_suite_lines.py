"""The kernel suite's line counts (issue 36: ten kernels of a public suite take no more
lines in vyre than in Warp), read from the ports' source text: no Warp needed.

The counting rule (``vyre_benchmarks.suite.lines``), the same for both ports: the lines of
each ``@vyre.kernel``/``@vyre.func`` or ``@wp.kernel``/``@wp.func`` function, ``def``
line to last line, without decorators, blank lines, comments and docstrings."""

from __future__ import annotations

from pathlib import Path

import pytest

from vyre_benchmarks.suite.lines import kernel_lines
from vyre_benchmarks.suite.problems import PROBLEMS

pytestmark = pytest.mark.fast
SUITE = Path(__file__).resolve().parent.parent / "benchmarks" / "suite"


def counts() -> tuple[dict[str, int], dict[str, int]]:
    return kernel_lines(SUITE / "vyre_kernels.py"), kernel_lines(SUITE / "warp_kernels.py")


def table(vyre: dict[str, int], warp: dict[str, int]) -> str:
    """The per-problem table of BENCHMARKS.md (a function shared by two problems counts in
    each row, once in the total)."""
    rows = ["| kernel | origin | vyre lines | Warp lines |", "| --- | --- | ---: | ---: |"]
    for p in PROBLEMS.values():
        rows.append(f"| {p.name} | {p.origin} | {sum(vyre[k] for k in p.kernels)} | "
                    f"{sum(warp[k] for k in p.kernels)} |")
    rows.append(f"| **total** | | **{sum(vyre.values())}** | **{sum(warp.values())}** |")
    return "\n".join(rows)


def test_both_ports_have_the_same_functions_and_every_problem_uses_only_those():
    vyre, warp = counts()
    assert list(vyre) == list(warp)
    used = {k for p in PROBLEMS.values() for k in p.kernels}
    assert used == set(vyre)
    assert len(PROBLEMS) == 10
    assert {p.kind for p in PROBLEMS.values()} == {
        "stencil", "linear algebra", "statistics", "k-loop", "sparse"}


def test_the_counting_rule_skips_blank_lines_comments_docstrings_and_decorators(tmp_path):
    src = tmp_path / "k.py"
    src.write_text('import x\n\n\n@x.kernel(workgroup=(4,))\ndef f(a,\n      b):\n'
                   '    """Doc,\n    two lines."""\n    # a comment\n\n    a[0] = (b\n'
                   '            + 1)  # trailing\n\n\ndef plain():\n    pass\n\n\n'
                   '@wp.func\ndef g():\n    return 1\n')
    assert kernel_lines(src) == {"f": 4, "g": 2}


def test_the_table_matches_benchmarks_md():
    doc = (SUITE.parent.parent / "BENCHMARKS.md").read_text()
    assert table(*counts()) in doc


def test_vyre_takes_no_more_kernel_lines_than_warp():
    vyre, warp = counts()
    print("\n" + table(vyre, warp))
    assert sum(vyre.values()) <= sum(warp.values())
