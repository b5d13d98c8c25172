"""lib.cumsum on real workers: the bytes of the order's numpy model (tests/lib_model.py)
on the reference, cpu and wgpu backends, numpy's own bytes up to one chunk, values
within the bound docs/lib.md states beyond it, on random and adversarial inputs; the
refusals; and the order itself without a process (fast)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lib_model import canonical, cumsum, gamma
from test_lib_reduce import adversarial

from vyre_core import Driver, lib
from vyre_core.errors import InvalidInputError
from vyre_core.lib.scan import CHUNK

SHAPES = [((1,), None), ((7,), 0), ((CHUNK,), None), ((CHUNK + 1,), None),
          ((3 * CHUNK + 5,), -1), ((2, 3, 4), 1), ((2500, 3), 0), ((3, 2500), 1),
          ((5, 7), None), ((CHUNK * CHUNK + 3,), None)]
#: dtype -> the backends whose bytes are checked (the cpu backend compiles each kernel
#: once per dtype, seconds each: it runs three)
BACKENDS = {np.float32: ["reference", "cpu", "wgpu"], np.int32: ["reference", "cpu", "wgpu"],
            np.uint32: ["reference", "wgpu"], np.float64: ["reference", "cpu", "wgpu"],
            np.float16: ["reference", "wgpu"]}


def chain(n: int) -> int:
    """The most additions on any element's path to a result of a scan of ``n``."""
    if n <= CHUNK:
        return n - 1
    return (CHUNK - 1) + chain(-(-n // CHUNK)) + CHUNK


@pytest.fixture(scope="module")
def drv():
    with Driver() as driver:
        yield driver


@pytest.mark.processes
@pytest.mark.parametrize("dtype", list(BACKENDS), ids=lambda d: np.dtype(d).name)
def test_every_backend_gives_the_models_bytes(drv, dtype):
    for k, (shape, axis) in enumerate(SHAPES):
        if dtype in (np.float16, np.float64) and math.prod(shape) > 100_000:
            continue  # (the reference's f16/f64 are slow; f32 covers the deep scan)
        backends = BACKENDS[dtype]
        if dtype != np.float32 and math.prod(shape) > 100_000:  # (the reference: f32's)
            backends = [b for b in backends if b != "reference"]
        x = adversarial(dtype, shape, seed=k)
        for exclusive in (False, True):
            want = cumsum(x, axis, exclusive).tobytes()
            for backend in backends:
                got = lib.cumsum(drv, x, axis, exclusive=exclusive, backend=backend)
                assert got.tobytes() == want, (shape, axis, exclusive, backend)


@pytest.mark.processes
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_up_to_one_chunk_the_bytes_are_numpys(drv, dtype):
    for shape, axis in [((CHUNK,), None), ((7, 300), 1), ((300, 7), 0), ((2, 3, 4), None)]:
        x = adversarial(dtype, shape, seed=3)
        with np.errstate(all="ignore"):
            want = canonical(np.cumsum(x, axis, dtype=x.dtype))
        assert lib.cumsum(drv, x, axis, backend="cpu").tobytes() == want.tobytes()


@pytest.mark.processes
@settings(max_examples=10, deadline=None)
@given(st.integers(CHUNK + 1, 5 * CHUNK * CHUNK), st.integers(0, 2**32 - 1))
def test_beyond_a_chunk_the_values_are_within_the_bound_of_the_exact_sums(drv, n, seed):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    got = lib.cumsum(drv, x, backend="cpu").astype(np.float64)
    exact = np.cumsum(x.astype(np.float64))  # (itself within gamma(n) in float64)
    bound = (gamma(chain(n), np.float32) + gamma(n, np.float64)) * np.cumsum(
        np.abs(x.astype(np.float64)))
    assert np.all(np.abs(got - exact) <= bound)


@pytest.mark.processes
def test_an_array_of_the_driver_crosses_and_an_empty_one_gives_an_empty_result(drv):
    x = np.arange(5000, dtype=np.int32)
    shared = drv.asarray(x)
    assert lib.cumsum(drv, shared, backend="cpu").tobytes() == np.cumsum(
        x, dtype=np.int32).tobytes()
    assert lib.cumsum(drv, np.zeros((3, 0), np.float32), 1).shape == (3, 0)
    assert lib.cumsum(drv, np.zeros((3, 0), np.float32)).shape == (0,)
    assert lib.cumsum(drv, np.float32(2.5)).tolist() == [2.5]  # (numpy: a 0-d is (1,))


def test_a_bad_axis_or_dtype_is_refused_before_any_work():
    with pytest.raises(InvalidInputError, match="out of range"):
        lib.cumsum(None, np.zeros((2, 3), np.float32), 2)
    with pytest.raises(InvalidInputError, match="dtype int64"):
        lib.cumsum(None, np.zeros(3, np.int64))


# -- the order, without a process ----------------------------------------------------------

def _by_the_rule(values: list[float]) -> list[float]:
    """The order as docs/lib.md states it, one float32 addition at a time."""
    f = np.float32
    if len(values) <= CHUNK:
        out, acc = [], None
        for v in values:
            acc = f(v) if acc is None else f(acc + f(v))
            out.append(acc)
        return out
    chunks = [values[s:s + CHUNK] for s in range(0, len(values), CHUNK)]
    totals = [_by_the_rule(c)[-1] for c in chunks]
    scanned = _by_the_rule(totals)
    out = []
    for c, chunk in enumerate(chunks):
        acc = None
        for v in chunk:
            acc = (f(v) if c == 0 else f(scanned[c - 1] + f(v))) if acc is None \
                else f(acc + f(v))
            out.append(acc)
    return out


@pytest.mark.fast
@pytest.mark.parametrize("n", [1, 2, CHUNK, CHUNK + 1, 3 * CHUNK + 7, CHUNK * CHUNK + 5])
def test_the_model_is_the_rule_docs_lib_md_states(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    assert cumsum(x).tobytes() == np.array(_by_the_rule(x.tolist()), np.float32).tobytes()


@pytest.mark.fast
def test_the_chain_of_additions_is_what_docs_lib_md_says():
    assert [chain(n) for n in (1, 1000, CHUNK, CHUNK + 1, 1 << 24)] == [0, 999, 1023, 2048,
                                                                        4109]


@pytest.mark.parametrize("shape, axis", [((3 * CHUNK + 5,), None), ((2500, 3), 0),
                                         ((CHUNK * CHUNK + 3,), None)])
def test_the_cpu_backend_runs_every_kernel_of_the_scan_proven(tmp_path, monkeypatch, shape,
                                                              axis):
    """Each step of the sequence run in this process on the cpu backend's pipeline: no
    launch leaves workgroups to the checked version (``chunk_scan``'s read of
    ``scanned[g - inner]`` under ``(g // inner) % chunks > 0`` is proven inside: issue 39),
    and the result is the model's bytes. Fails before this commit (every ``chunk_scan``
    launch fell back)."""
    import vyre_cpu.backend
    from vyre_cpu import compiler

    from vyre_core.config import DispatchConfig
    from vyre_core.lib import scan
    from vyre_core.sequence.nodes import Role

    monkeypatch.setenv(compiler.ENV, str(tmp_path))
    monkeypatch.setattr(compiler, "_loaded", compiler.collections.OrderedDict())
    fell_back = []
    checked = compiler.Compiled.fallback
    monkeypatch.setattr(compiler.Compiled, "fallback",
                        lambda self, threaded: fell_back.append(self) or checked(self, threaded))
    x = adversarial(np.float32, shape, seed=3)
    seq = scan._sequence(x.dtype, shape, axis, False)
    memory = {b.name: np.frombuffer(b.data, b.dtype.storage_np).copy()
              if b.role is Role.CONSTANT else np.zeros(b.count, b.dtype.storage_np)
              for b in seq.buffers}
    memory["x"] = x.reshape(-1)
    for _, step in seq.steps():
        config = DispatchConfig(grid_override=step.grid)
        got = vyre_cpu.backend.Pipeline(step.program, config).dispatch(
            [memory[name] for b, name in step.bound if b.is_input], config)
        memory.update(zip(step.outputs(), map(np.array, got), strict=True))
        assert not fell_back, (shape, step.program.buffers[1].name)
    assert memory["result"].tobytes() == cumsum(x, axis, False).tobytes()
