"""The autotuner: which candidates it tries (pure), the cache it keeps (files, corrupt
ones included), and tuning through real workers: best-of-N in the worker, candidates that
change bytes rejected, the choice cached and used by ``DispatchConfig(tuned=True)``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from vyre_core import DispatchConfig, Driver, ir
from vyre_core.contract.types import Capabilities
from vyre_core.errors import InvalidConfigError, SystemResourceError
from vyre_core.ir.specialize import canonical_values
from vyre_core.testing import dispatch_on
from vyre_core.tuning import cache
from vyre_core.tuning.candidates import Candidate, candidates
from vyre_examples.saxpy import program as saxpy_program

N = 4096
CAPS = Capabilities(max_workgroup_size=(256, 256, 64), max_invocations_per_workgroup=256)


def unrolled(wg: int = 64) -> ir.Program:
    """out[i] = x[i] * UNROLL, added UNROLL times: the same bytes whatever the values."""
    k = ir.Kernel(workgroup=(wg,))
    unroll = k.constant("UNROLL", ir.u32, 4, low=1, high=16)
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, N)
    i = k.let("i", ir.global_id())
    acc = k.let("acc", ir.u32(0))
    with k.loop("r", 0, unroll):
        k.assign(acc, acc + x[i])
    out[i] = acc / unroll
    return k.build()


def by_lane() -> ir.Program:
    """out[i] = the lane's local id: other workgroup sizes give other bytes."""
    k = ir.Kernel(workgroup=(64,))
    out = k.output("out", ir.u32, 1024)
    out[ir.global_id()] = ir.local_id()
    return k.build()


@pytest.fixture
def tuning_dir(tmp_path, monkeypatch):
    where = tmp_path / "tuning"
    monkeypatch.setenv(cache.CACHE_ENV, str(where))
    return where


# -- candidates -------------------------------------------------------------------------

@pytest.mark.fast
def test_the_programs_own_configuration_comes_first_then_every_combination():
    found = candidates(unrolled(), CAPS)
    assert found[0] == Candidate((64, 1, 1), canonical_values({"UNROLL": 4}))
    sizes = {c.workgroup for c in found}
    assert sizes == {(64, 1, 1), (32, 1, 1), (128, 1, 1), (256, 1, 1)}
    values = {c.constants[0][1] for c in found}
    assert values == {4, 1, 2, 8, 16}  # powers of two in [1, 16] around the default
    assert len(found) == len(set(found)) == 4 * 5


@pytest.mark.fast
def test_what_the_callers_config_fixes_stays_fixed():
    base = DispatchConfig(constants={"UNROLL": 2}, workgroup_override=(32,))
    found = candidates(unrolled(), CAPS, base)
    assert found == [Candidate((32, 1, 1), canonical_values({"UNROLL": 2}))]
    asked = candidates(unrolled(), CAPS, base, constants={"UNROLL": [2, 8]})
    assert [c.constants for c in asked] == [canonical_values({"UNROLL": v}) for v in (2, 8)]


@pytest.mark.fast
def test_sizes_past_the_backend_are_left_out():
    small = Capabilities(max_workgroup_size=(64, 1, 1), max_invocations_per_workgroup=64)
    assert {c.workgroup for c in candidates(unrolled(), small)} == {(64, 1, 1), (32, 1, 1)}
    with pytest.raises(InvalidConfigError, match="no workgroup size to try fits"):
        candidates(unrolled(), small, None, workgroups=[(128,)])


@pytest.mark.fast
def test_sizes_that_would_split_a_subgroup_are_left_out():
    """Found in review: widths not a multiple of the program's subgroup size were tried,
    and each failed V034."""
    k = ir.Kernel(workgroup=(64,), subgroup_size=64)
    out = k.output("out", ir.u32, 256)
    out[ir.global_id()] = k.subgroup("add", ir.global_id())
    found = candidates(k.build(), CAPS)
    assert {c.workgroup for c in found} == {(64, 1, 1), (128, 1, 1), (256, 1, 1)}
    with pytest.raises(InvalidConfigError, match="whole subgroups of 64") as info:
        candidates(k.build(), CAPS, None, workgroups=[(32,), (96,)])
    assert "a multiple of 64 invocations" in info.value.fix


@pytest.mark.fast
def test_a_program_sharing_workgroup_memory_keeps_its_size_unless_asked():
    k = ir.Kernel(workgroup=(16,))
    shared = k.workgroup_buffer("s", ir.u32, 16)
    out = k.output("out", ir.u32, 16)
    shared[ir.local_id()] = ir.local_id()
    out[ir.global_id()] = shared[ir.local_id()]
    program = k.build()
    assert [c.workgroup for c in candidates(program, CAPS)] == [(16, 1, 1)]
    assert len(candidates(program, CAPS, None, workgroups=[(16,), (8,)])) == 2


@pytest.mark.fast
def test_asked_values_are_checked_and_too_many_refused():
    assert {c.constants[0][1] for c in candidates(unrolled(), CAPS, workgroups=[(64,)],
                                                  constants={"UNROLL": [2, 3]})} == {4, 2, 3}
    with pytest.raises(InvalidConfigError, match="is not a list of sizes"):
        candidates(unrolled(), CAPS, workgroups=[64, 128])
    with pytest.raises(InvalidConfigError, match="is not a dict of value lists"):
        candidates(unrolled(), CAPS, constants={"UNROLL": 8})
    with pytest.raises(InvalidConfigError, match="is not a dict of value lists"):
        candidates(unrolled(), CAPS, constants={"UNROLL": "16"})
    with pytest.raises(InvalidConfigError, match="lies outside its declared range"):
        candidates(unrolled(), CAPS, constants={"UNROLL": [32]})
    with pytest.raises(InvalidConfigError, match="has no constant 'UNROL'"):
        candidates(unrolled(), CAPS, constants={"UNROL": [2]})
    with pytest.raises(InvalidConfigError, match=r"20 candidates \(4 workgroup sizes x 5 "
                                                 r"values of UNROLL\) is more than the limit"):
        candidates(unrolled(), CAPS, limit=10)


# -- the cache --------------------------------------------------------------------------

KEY = cache.key_for("f" * 64, "cpu", "0.1.0", "device facts", (N,), DispatchConfig())
ENTRY = cache.Tuned(Candidate((128, 1, 1), canonical_values({"UNROLL": 8})), 1e-4, 2e-4)


@pytest.mark.fast
def test_an_entry_round_trips_and_is_written_whole(tuning_dir):
    path = cache.store(KEY, ENTRY)
    assert path.parent == tuning_dir and cache.load(KEY) == ENTRY
    assert sorted(p.name for p in tuning_dir.iterdir()) == [path.name]  # (no temporaries)
    other = cache.key_for("f" * 64, "cpu", "0.1.0", "device facts", (N + 1,), DispatchConfig())
    assert cache.load(other) is None
    fixed = cache.key_for("f" * 64, "cpu", "0.1.0", "device facts", (N,),
                          DispatchConfig(constants={"UNROLL": 2}))
    assert cache.load(fixed) is None and fixed.config != KEY.config


@pytest.mark.fast
@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "is not valid JSON"),
    (json.dumps({"format": 99}), "has format 99, this vyre reads format 1"),
    (json.dumps([1, 2]), "has format None"),
    (json.dumps({"format": 1, "key": {}}), "holds another key's entry"),
])
def test_an_unusable_file_is_refused_with_a_fix_and_left_alone(tuning_dir, text, message):
    path = cache.path_of(KEY)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(InvalidConfigError) as caught:
        cache.load(KEY)
    assert message in caught.value.cause and str(path) in caught.value.cause
    assert caught.value.fix.startswith(f"Delete {path}")
    assert path.read_text() == text


@pytest.mark.fast
def test_an_unusable_directory_is_a_system_error_naming_the_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(cache.CACHE_ENV, str(blocker / "tuning"))  # (no directory in a file)
    with pytest.raises(SystemResourceError, match="writing the tuning cache file") as caught:
        cache.store(KEY, ENTRY)
    assert caught.value.fix.startswith(f"Make {blocker / 'tuning'} writable")
    assert cache.CACHE_ENV in caught.value.fix and blocker.read_text() == ""


# -- through real workers ---------------------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


def test_tuning_measures_every_candidate_and_keeps_the_fastest(driver, tuning_dir):
    x = np.arange(N, dtype=np.uint32)
    seen = []
    result = driver.tune(unrolled(), [x], backend="reference", workgroups=[(64,), (128,)],
                         constants={"UNROLL": [1, 4]}, repeats=2, on_measured=seen.append)
    assert len(result.measured) == len(seen) == 4 and not result.cached
    assert [m.verdict for m in result.measured].count("best") == 1
    best = next(m for m in result.measured if m.verdict == "best")
    assert best.seconds == min(m.seconds for m in result.measured)
    assert result.path is not None and result.path.parent == tuning_dir
    again = driver.tune(unrolled(), [x], backend="reference", workgroups=[(64,), (128,)],
                        constants={"UNROLL": [1, 4]}, repeats=2)
    assert again.cached and again.best == result.best and again.measured == []


def test_a_candidate_that_changes_bytes_is_rejected(driver, tuning_dir):
    result = driver.tune(by_lane(), [], backend="reference", workgroups=[(64,), (32,)], repeats=1)
    verdicts = {m.candidate.workgroup: m.verdict for m in result.measured}
    assert verdicts == {(64, 1, 1): "best", (32, 1, 1): "rejected"}
    rejected = result.measured[1]
    assert rejected.seconds is None and rejected.reason.startswith("other bytes: output 'out'")


def scaled_by_gain() -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    gain = k.constant("G", ir.f32, 1.0)
    x = k.read("x", ir.f32)
    out = k.output("out", ir.f32, N)
    i = k.let("i", ir.global_id())
    out[i] = x[i] * gain
    return k.build()


def test_tuned_true_keeps_the_callers_constants_and_grid(driver, tuning_dir):
    """A review found tuned=True ran the defaults: G=2.0 came out as x * 1.0."""
    x = np.arange(N, dtype=np.float32)
    mine = DispatchConfig(constants={"G": 2.0})
    result = driver.tune(scaled_by_gain(), [x], backend="reference", config=mine, repeats=1)
    assert result.measured[0].candidate.constants == mine.constants
    assert all(m.candidate.constants == mine.constants for m in result.measured)
    tuned = driver.dispatch(scaled_by_gain(), [x], backend="reference",
                            config=mine.replace(tuned=True))[0]
    assert tuned.tobytes() == (x * 2).tobytes()
    # another grid is another key: nothing tuned for it, so it runs as given
    grid = mine.replace(grid_override=(4,), tuned=True)
    assert driver.tuned_config(scaled_by_gain(), [x], backend="reference",
                               config=grid) == grid.replace(
        tuned=False)
    covered = driver.dispatch(scaled_by_gain(), [x], backend="reference", config=grid)[0]
    assert covered.tobytes() == np.concatenate([x[:256] * 2, np.zeros(N - 256,
                                                                      np.float32)]).tobytes()


def test_tuned_true_is_refused_where_there_is_no_choice_to_apply(driver, tuning_dir):
    x = np.arange(N, dtype=np.float32)
    tuned = DispatchConfig(tuned=True)
    for call in (lambda: driver.compile(scaled_by_gain(), backend="reference", config=tuned),
                 lambda: dispatch_on(driver, "reference", scaled_by_gain(), [x], config=tuned),
                 lambda: driver.compile(scaled_by_gain(), backend="reference").dispatch([x],
                                                                                        tuned)):
        with pytest.raises(InvalidConfigError, match="tuned=True has no tuned choice"):
            call()


def test_a_cached_choice_is_checked_against_the_request(driver, tuning_dir):
    x = np.arange(N, dtype=np.uint32)
    first = driver.tune(unrolled(), [x], backend="reference", workgroups=[(64,), (128,)],
                        constants={"UNROLL": [4]}, repeats=1)
    wide = cache.Tuned(Candidate((128, 1, 1), canonical_values({"UNROLL": 4})), 1e-9, 1.0)
    cache.store(first.key, wide)  # (the cache now says 128, whatever was measured)
    with pytest.raises(InvalidConfigError, match="repeats=0 must be an int >= 1"):
        driver.tune(unrolled(), [x], backend="reference", workgroups=[(64,), (128,)], repeats=0)
    again = driver.tune(unrolled(), [x], backend="reference", workgroups=[(64,), (128,)],
                        constants={"UNROLL": [4]}, repeats=1)
    assert again.cached and again.best == wide.best
    narrowed = driver.tune(unrolled(), [x], backend="reference", workgroups=[(32,)],
                           constants={"UNROLL": [4]}, repeats=1)
    assert not narrowed.cached and narrowed.best.workgroup in {(32, 1, 1), (64, 1, 1)}


def test_tuned_true_dispatches_with_the_choice(driver, tuning_dir):
    x = np.arange(N, dtype=np.uint32)
    result = driver.tune(unrolled(), [x], backend="reference", workgroups=[(32,)],
                         constants={"UNROLL": [2]}, repeats=1)
    assert result.best in (Candidate((32, 1, 1), canonical_values({"UNROLL": 2})),
                           Candidate((64, 1, 1), canonical_values({"UNROLL": 4})))
    chosen = driver.tuned_config(unrolled(), [x], backend="reference",
                                 config=DispatchConfig(tuned=True))
    assert (chosen.workgroup_override, chosen.constants) == (result.best.workgroup,
                                                            result.best.constants)
    out = driver.dispatch(unrolled(), [x], backend="reference",
                          config=DispatchConfig(tuned=True))[0]
    assert out.tobytes() == x.tobytes()
    # no entry for these sizes: the config as given
    other = np.arange(N // 2, dtype=np.uint32)
    assert driver.tuned_config(unrolled(), [other], backend="reference",
                               config=DispatchConfig(tuned=True)).constants == ()


def test_the_matmul_example_tunes_its_tile_depth_without_changing_a_byte(driver, tuning_dir):
    """Item 7's example: KTILE is a constant; every value adds in the same order."""
    from vyre_examples.matmul import build

    example = build()
    result = driver.tune(example.program, example.inputs, backend="cpu", config=example.config,
                         constants={"KTILE": [4, 16]}, repeats=1)
    assert sorted(m.verdict for m in result.measured) == ["best", "ok"]
    out = driver.dispatch(example.program, example.inputs, backend="cpu",
                          config=example.config.replace(tuned=True))[0]   # (its dim)
    assert out.tobytes() == example.expected[0].tobytes()


def test_vyre_tune_prints_the_candidates_and_caches_the_choice(tmp_path):
    env = {**os.environ, cache.CACHE_ENV: str(tmp_path / "tuning")}
    command = [sys.executable, "-m", "vyre_core.cli", "tune", "saxpy", "--backend",
               "reference", "--workgroup", "64", "--workgroup", "128", "--repeats", "2"]
    first = json.loads(subprocess.run([*command, "--json"], capture_output=True, text=True,
                                      env=env, timeout=300, check=True).stdout)
    assert first["backend"] == "reference" and not first["cached"]
    own = saxpy_program(16).workgroup  # (the program's own configuration first)
    assert [c["workgroup"] for c in first["candidates"]] == [list(own), *(
        [w, 1, 1] for w in (64, 128) if (w, 1, 1) != own)]
    text = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300,
                          check=True).stdout
    assert "chosen: workgroup" in text and "from the cache" in text
    bad = subprocess.run([*command, "--constant", "NOPE=1"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert bad.returncode == 2 and "has no constant 'NOPE'" in bad.stderr
