"""What users of Warp, numba and Taichi report as traps, and what a vyre kernel does
instead (docs/kernels.md, "What users of other kernel languages struggle with"): the rows
of that table whose behaviour no other test module shows. Pure, on the reference in this
process, but for the one test that starts a second Python."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from kernels import blur, launch, saxpy

import vyre_core as vyre
from vyre_core import f32, f64, i32, u32
from vyre_core.errors import InvalidConfigError, KernelSyntaxError, ValidationError

pytestmark = pytest.mark.fast

TESTS = Path(__file__).resolve().parent
PAGE = TESTS.parent / "docs" / "kernels.md"

OFFSET = 1                                   # module-level numbers, rebound by the tests
CONFIG = types.SimpleNamespace(step=4)
WEIGHTS = np.ones(3, np.float32)             # a module-level array: refused


@vyre.func
def config_step():
    return CONFIG.step


@vyre.kernel
def shifted(x: vyre.Array[i32]):
    i = vyre.global_id(0)
    x[i] = x[i] + OFFSET + config_step()


def run_shifted() -> list[int]:
    return launch(shifted, 3, (np.zeros(3, np.int32),))[0].tolist()


def test_a_module_level_number_rebound_after_a_launch_is_read_again(monkeypatch):
    """Warp kept the first value (NVIDIA/warp#135): here a launch after the rebinding
    compiles the kernel again for the value Python now holds, and only then."""
    here = sys.modules[__name__]
    assert run_shifted() == [5, 5, 5]
    compiles = shifted.compiles
    assert run_shifted() == [5, 5, 5] and shifted.compiles == compiles   # nothing rebound
    monkeypatch.setattr(here, "OFFSET", 10)
    assert run_shifted() == [14, 14, 14] and shifted.compiles == compiles + 1
    monkeypatch.setattr(CONFIG, "step", -4)               # an attribute, read in a func
    assert run_shifted() == [6, 6, 6] and shifted.compiles == compiles + 2
    assert run_shifted() == [6, 6, 6] and shifted.compiles == compiles + 2


def test_a_closure_number_rebound_after_a_launch_is_read_again():
    scale = 2

    @vyre.kernel
    def times(x: vyre.Array[i32]):
        x[vyre.global_id(0)] *= scale

    assert launch(times, 2, (np.array([3, 4], np.int32),))[0].tolist() == [6, 8]
    scale = 5                          # (the kernel reads it at its next launch)
    assert launch(times, 2, (np.array([3, 4], np.int32),))[0].tolist() == [15, 20]
    assert times.compiles == 2


def test_a_module_level_array_is_refused_not_baked_into_the_kernel():
    """Taichi folded a global numpy array's element into the kernel (taichi#8224)."""

    @vyre.kernel
    def weighted(x: vyre.Array[f32]):
        x[0] = WEIGHTS[0]

    with pytest.raises(KernelSyntaxError) as info:
        weighted.program(dim=1, args=(np.zeros(1, np.float32),))
    assert info.value.details["line"] == weighted.fn.__code__.co_firstlineno + 2
    assert "not an array" in info.value.cause and "array parameters" in info.value.fix


def test_a_kernel_that_failed_to_compile_fails_again_at_every_launch():
    """Warp ran a kernel whose failed statement was dropped on its second launch
    (NVIDIA/warp#1713): here nothing is cached until a compile succeeds."""

    @vyre.kernel
    def unknown(x: vyre.Array[f32]):
        x[0] = no_such_function(x[0])  # noqa: F821

    @vyre.kernel(workgroup=(4,))
    def shared_in_a_branch(x: vyre.Array[u32]):
        tile = vyre.shared(u32, 4)
        if vyre.local_id(0) > 0:
            vyre.barrier()                   # V016: a barrier not every invocation reaches
        x[0] = tile[0]

    for kernel, error, dtype in ((unknown, KernelSyntaxError, np.float32),
                                 (shared_in_a_branch, ValidationError, np.uint32)):
        for attempt in (1, 2):
            with pytest.raises(error):
                kernel.program(dim=4, args=(np.zeros(4, dtype),))
            assert kernel.compiles == attempt and not kernel._compiled


def test_a_literal_takes_the_other_operands_type():
    """numba types a float literal as float64 and Warp as float32 (numba#4654,
    warp#1297): here 0.1 beside an f64 is the f64 0.1, and 1 beside a u32 is a u32."""

    @vyre.kernel
    def literals(x: vyre.Array[f64], n: vyre.Array[u32]):
        x[0] = x[0] * 0.1
        n[0] = n[0] + 1

    x = np.array([3.0], np.float64)
    n = np.array([2**32 - 1], np.uint32)
    launch(literals, 1, (x, n))
    assert x.tobytes() == (np.float64(3.0) * 0.1).tobytes() != np.float64(
        np.float32(3.0) * np.float32(0.1)).tobytes()
    assert n.tolist() == [0]                                  # u32 wraps


def test_a_launch_of_more_than_2_31_invocations_on_an_axis_is_refused():
    """global_id is an i32: Warp's ids wrapped negative past 2**31 (NVIDIA/warp#1799)."""
    x = np.zeros(4, np.float32)
    assert saxpy.program(dim=2**31, args=(1.0, x, x, x))    # the largest id is 2**31 - 1
    img = np.zeros((2, 2), np.float32)
    for kernel, dim, args in ((saxpy, 2**31 + 1, (1.0, x, x, x)),
                              (blur, (2, 2**31 + 1), (img, img))):
        with pytest.raises(InvalidConfigError) as info:
            kernel.program(dim=dim, args=args)
        assert "2**31" in info.value.cause and "split" in info.value.fix


@pytest.mark.processes
def test_a_kernels_fingerprint_is_the_same_in_another_process():
    """Warp named some kernels by Python's salted hash(), so they compiled again in every
    process (NVIDIA/warp#1696): a vyre kernel's program is named by its content."""
    x = np.zeros(4, np.float32)
    here = saxpy.program(dim=4, args=(1.0, x, x, x)).fingerprint()
    code = ("import json, numpy as np; from kernels import saxpy; x = np.zeros(4, np.float32);"
            " print(json.dumps(saxpy.program(dim=4, args=(1.0, x, x, x)).fingerprint()))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(TESTS)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == here


def test_every_row_of_the_pages_table_cites_a_thread_and_names_tests_that_exist():
    """Each trap of docs/kernels.md's table names a thread of Warp's, numba's or Taichi's
    tracker and at least one test that shows what vyre does; each test exists."""
    text = PAGE.read_text()
    table = text[text.index("## What users of other kernel languages struggle with"):]
    rows = [line for line in table.splitlines() if line.startswith("| ")][2:]
    assert len(rows) >= 10
    for row in rows:
        assert re.search(r"(NVIDIA/warp|numba/numba|taichi-dev/taichi)#\d+", row), row
        named = re.findall(r"`(test_\w+\.py)::(test_\w+)`", row.rsplit("|", 2)[1])
        assert named, row
        for module, test in named:
            source = (TESTS / module).read_text()
            assert re.search(rf"^def {test}\(", source, re.M), f"{module}::{test}"


def test_the_pages_links_to_its_own_sections_name_its_headings():
    text = PAGE.read_text()
    slugs = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
             for h in re.findall(r"^#{2,3} (.+)$", text, re.M)}
    links = set(re.findall(r"\]\(#([\w-]+)\)", text))
    assert links and links <= slugs, sorted(links - slugs)
