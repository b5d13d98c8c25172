"""docs/kernels.md runs as written, and every kernel it defines gives the same bytes on the
reference, cpu and wgpu backends and the bytes of its builder twin (builder_twins.py).

The page's blocks run once, in order, in one namespace, each at its own lines of the page
(the kernels' source is read from it), on the reference backend as a reader runs them.
Each launch and sequence they make is recorded (the kernel, ``dim``, a copy of the
arguments as passed, what the launch left in them); the tests then run every recording
again on each backend, and its twin there. So the page keeps its plain
``backend="reference"`` text and still cannot hold a kernel that is checked nowhere else:
a new kernel on the page without a twin here fails
``test_every_kernel_on_the_page_runs_and_has_a_twin``.

No kernel on the page calls a transcendental function (wgpu's ``exp``/``sin`` are within
1-2 ULP of the reference's, issue 42), so every comparison is of exact bytes."""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builder_twins import (
    blur_twin,
    guide_count_program,
    guide_histogram_program,
    guide_normalise_program,
    guide_scaled_program,
    guide_sequence,
    saxpy_twin,
    twin_inputs,
)

import vyre_core as vyre
from vyre_core import Driver, SequenceBuilder
from vyre_core.driver import ResidentBuffer
from vyre_core.kernels.kernel import KernelFunction
from vyre_core.sequence import Sequence

pytestmark = [pytest.mark.processes]

PAGE = Path(__file__).resolve().parent.parent / "docs" / "kernels.md"
BACKENDS = ["reference", "cpu", "wgpu"]

#: the page's kernels that it shows refused (never launched)
REFUSED = {"maybe", "mixed"}
#: the page's kernels it runs only as steps of a sequence (their twins: in its twin's)
STEPS_ONLY = {"bump"}


#: kernel name -> its builder twin, from the kernel's program for the launch (whose
#: dtypes an unannotated kernel takes from its arguments)
TWINS = {
    "saxpy": lambda program: saxpy_twin(),
    "blur": lambda program: blur_twin(),
    "histogram": lambda program: guide_histogram_program(),
    "count": lambda program: guide_count_program(),
    "normalise": lambda program: guide_normalise_program(),
    "scaled": lambda program: guide_scaled_program(program.buffer("x").dtype),
}
#: the page's sequences, in order -> their builder twins (their steps are twins above)
SEQUENCE_TWINS = [guide_sequence]


def _copy(value: Any) -> Any:
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


@dataclass
class Launch:
    """One launch the page made: its kernel, dim, config, the arguments as passed (copies),
    and the arguments as the launch left them (the caller's arrays, copied once the page
    has run: an async launch fills them when its result() returns)."""

    kernel: KernelFunction
    dim: Any
    config: Any
    before: list
    after: list


@dataclass
class SequenceRun:
    sequence: Any
    inputs: list
    outputs: list


@dataclass
class Page:
    namespace: dict
    printed: list[str]
    shown: list[str]
    launches: list[Launch]
    sequences: list[SequenceRun]
    steps: set[str]           # the kernels the page adds to sequences


def _run_page() -> Page:
    text = PAGE.read_text()
    launches: list[Launch] = []
    sequences: list[SequenceRun] = []
    steps: set[str] = set()
    launch, launch_async = Driver.launch, Driver.launch_async
    dispatch, step = Driver.dispatch, SequenceBuilder.step

    inside: list[bool] = []  # (a launch on resident buffers runs as a sequence: not the page's)

    def recorded(run):
        def wrapper(self, kernel, args, *, dim, config=None, **kwargs):
            before = [_copy(a) for a in args]
            inside.append(True)
            try:
                result = run(self, kernel, args, dim=dim, config=config, **kwargs)
            finally:
                inside.pop()
            if not any(isinstance(a, ResidentBuffer) for a in args):  # (tied to a worker:
                launches.append(Launch(kernel, dim, config, before, list(args)))  # see
            return result                       # test_kernels_resident, every backend)
        return wrapper

    def sequence_recorded(self, sequence, inputs=(), **kwargs):
        copies = [_copy(a) for a in inputs]
        outputs = dispatch(self, sequence, inputs, **kwargs)
        if inside or not isinstance(sequence, Sequence):
            return outputs
        sequences.append(SequenceRun(sequence, copies, [_copy(o) for o in outputs]))
        return outputs

    def step_recorded(self, program, *args, **kwargs):
        if isinstance(program, KernelFunction) and not inside:
            steps.add(program.__name__)
        return step(self, program, *args, **kwargs)

    namespace: dict = {}
    shown: list[str] = []
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        mp.setattr(Driver, "launch", recorded(launch))
        mp.setattr(Driver, "launch_async", recorded(launch_async))
        mp.setattr(Driver, "dispatch", sequence_recorded)
        mp.setattr(SequenceBuilder, "step", step_recorded)
        for match in re.finditer(r"```python\n(.*?)```", text, re.S):
            line = text.count("\n", 0, match.start(1))
            exec(compile("\n" * line + match.group(1), str(PAGE), "exec"), namespace)
            shown += [c[2:] for c in match.group(1).splitlines() if c.startswith("# ")]
    for made in launches:
        made.after = [_copy(a) for a in made.after]
    return Page(namespace, out.getvalue().splitlines(), shown, launches, sequences, steps)


@pytest.fixture(scope="module")
def page() -> Page:
    return _run_page()


@pytest.fixture(scope="module")
def drv():
    with vyre.Driver() as d:
        yield d


def _same(got: Any, want: Any) -> bool:
    if not isinstance(want, np.ndarray):
        return got == want
    return got.dtype == want.dtype and got.shape == want.shape and \
        got.tobytes() == want.tobytes()


def test_the_page_runs_as_written_and_prints_what_it_shows(page):
    """The error the page shows is the one printed (every block ran: its asserts held)."""
    assert page.printed == page.shown


def test_every_kernel_on_the_page_runs_and_has_a_twin(page):
    kernels = {name for name, v in page.namespace.items() if isinstance(v, KernelFunction)}
    launched = {made.kernel.__name__ for made in page.launches}
    assert kernels == launched | page.steps | REFUSED, sorted(kernels)
    assert launched == set(TWINS), "give each kernel the page launches a twin in TWINS"
    assert page.steps - launched == STEPS_ONLY
    assert len(page.sequences) == len(SEQUENCE_TWINS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_launch_on_the_page_gives_the_same_bytes_on_every_backend(page, drv, backend):
    for made in page.launches:
        args = [_copy(a) for a in made.before]
        drv.launch(made.kernel, dim=made.dim, args=args, backend=backend, config=made.config)
        for position, (got, want) in enumerate(zip(args, made.after, strict=True)):
            assert _same(got, want), (made.kernel.__name__, made.dim, position, backend)
    for run in page.sequences:
        got = drv.dispatch(run.sequence, [_copy(a) for a in run.inputs],
                           backend=backend)
        assert all(_same(g, w) for g, w in zip(got, run.outputs, strict=True)), backend


#: (not cpu: the launches above hold every kernel on cpu to the page's bytes, which the
#: twins give here on the reference; a twin's own numba compile on cpu was a third of the
#: module's time, for builder programs the cpu backend's own tests check)
@pytest.mark.parametrize("backend", ["reference", "wgpu"])
def test_every_kernel_on_the_page_gives_its_builder_twins_bytes(page, drv, backend):
    """Each launch's arrays as the page's launch left them are what the twin writes for
    the same inputs (matched by buffer name), and each sequence's outputs are its twin's."""
    for made in page.launches:
        plan = made.kernel.plan(made.dim, [_copy(a) for a in made.before])
        twin = TWINS[made.kernel.__name__](plan.program)
        outs = drv.dispatch(twin, twin_inputs(plan.program, plan.inputs, twin),
                            backend=backend, config=made.config, dim=made.dim)
        written = [b.name for b in twin.outputs]
        names = made.kernel.params.names
        for name, out in zip(written, outs, strict=True):
            want = made.after[names.index(name)]
            assert out.tobytes() == want.tobytes(), (made.kernel.__name__, name, backend)
    for run, twin in zip(page.sequences, SEQUENCE_TWINS, strict=True):
        got = drv.dispatch(twin(), [_copy(a) for a in run.inputs], backend=backend)
        assert all(_same(g, w) for g, w in zip(got, run.outputs, strict=True)), backend
