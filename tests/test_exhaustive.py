"""``vyre conform --exhaustive --all-inputs`` (vyre_core.conformance.all_inputs) on chunks
of 2^12 inputs: a chunk's digest is the blake3 of the oracle's result bits over the
inputs the kernel makes, the same each time; the package's records agree with the
oracle; on the real backends (reference, cpu, wgpu) the tool lists exactly the inputs a
deliberately perturbed record disagrees on, with their expected and actual bits, and
exactly the misrounded inputs an independent dispatch shows; a run over the same run
directory takes its finished chunks from the log; bad options are refused before any
work, with their Fix."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import blake3
import numpy as np
import pytest
from fresh_env import fresh_env
from mathlib_cases import apply

from vyre_core.config import DispatchConfig
from vyre_core.conformance import all_inputs, digests, oracle, sweep
from vyre_core.conformance.all_inputs import Suite
from vyre_core.driver import Driver
from vyre_core.errors import InvalidConfigError
from vyre_core.mathlib.library import version as math_library_version

BITS = 12  # inputs per chunk: 2^12
ONE = 0x3F800000 >> BITS  # the f32 chunk from 1.0 up
VYRE = Path(sys.executable).with_name("vyre")

#: the inputs the perturbed oracle gets wrong: (f32 sqrt, bits in the chunk from 1.0)
PERTURBED = [0x3F800000 + j for j in (0, 7, 100, 2048, 4095)]


def perturbed(op: str, dtype: str, *args: np.ndarray) -> np.ndarray:
    """The oracle, one bit off at PERTURBED."""
    out = oracle.correctly_rounded(op, dtype, *args).copy()
    bits = out.view(np.uint32)
    bits[np.isin(args[0].view(np.uint32), PERTURBED)] ^= 1
    return out


def record(directory: Path, work: list[tuple[Suite, int]], oracle_fn=None) -> None:
    with ThreadPoolExecutor(1) as pool:
        all_inputs.record(work, BITS, directory, all_inputs.RunLog(directory / "rec"), pool,
                          oracle_fn or oracle.correctly_rounded)


# -- digests and records (no process) ---------------------------------------------------

@pytest.mark.parametrize("suite,chunk", [(Suite("exp2", "f32"), ONE),
                                         (Suite("atan2", "f16"), 0x3C00 << 16 >> BITS),
                                         (Suite("sin", "f16"), 9),
                                         (Suite("pow", "f32"), 3)])
def test_a_chunk_digest_is_the_hash_of_the_oracle_bits_and_reproducible(suite, chunk):
    """The inputs as the kernel makes them (f32: the bits; f16 pairs: the first operand
    from the low 16 bits), hashed as little-endian result bits, 16 bytes."""
    start = chunk << BITS
    bits = np.arange(start, start + (1 << BITS), dtype=np.uint64)
    if suite.dtype == "f32" and suite.op == "exp2":
        operands = [bits.astype(np.uint32).view(np.float32)]
    elif suite.op == "atan2":
        operands = [(bits % 65536).astype(np.uint16).view(np.float16),
                    (bits // 65536).astype(np.uint16).view(np.float16)]
    elif suite.op == "sin":
        operands = [bits.astype(np.uint16).view(np.float16)]
    else:  # the sweep's structured sample of pairs
        operands = [np.concatenate(c)[start:start + (1 << BITS)]
                    for c in zip(*sweep.operands("pow", sweep.DEFAULT_INPUTS), strict=True)]
    want = blake3.blake3(oracle.correctly_rounded_bits(suite.op, suite.dtype, *operands)
                         .astype("<u4" if suite.dtype == "f32" else "<u2").tobytes())
    first = all_inputs.record_chunk(suite, chunk, BITS, oracle.correctly_rounded)
    again = all_inputs.record_chunk(suite, chunk, BITS, oracle.correctly_rounded)
    assert first.digest == again.digest == want.hexdigest(length=16)
    assert first.inputs == 1 << BITS


@pytest.mark.parametrize("dtype,op", [
    (p.name.split("_")[0], p.name.split("_", 1)[1].removesuffix(".digests"))
    for p in sorted(digests.RECORDS.glob("*.digests"))])
def test_the_package_records_are_the_oracle(dtype, op):
    """Each record file (chunks of 2^24) against the oracle, on its first recorded chunk
    and, for f32, the chunks from 1.0 and -1.0 up."""
    chunk_bits, chunks = digests.read(digests.RECORDS, dtype, op)
    assert chunk_bits == all_inputs.CHUNK_BITS
    suite = Suite(op, dtype)
    picked = {min(chunks)} | ({0x3F, 0xBF} & set(chunks) if dtype == "f32" else set())
    for chunk in sorted(picked):
        got = all_inputs.record_chunk(suite, chunk, chunk_bits, oracle.correctly_rounded)
        assert got.digest == chunks[chunk], f"{dtype} {op} chunk {chunk}"


@pytest.mark.fast
def test_selection_and_its_refusals():
    assert all_inputs.parse_chunks("0:3,7,2") == [0, 1, 2, 7]
    work = all_inputs.plan(all_inputs.suites(["exp", "pow"], ["f16"]), [0, 1], 24)
    assert [(s.op, s.dtype, c) for s, c in work] == [
        ("exp", "f16", 0), ("pow", "f16", 0), ("pow", "f16", 1)]
    assert len(all_inputs.plan(all_inputs.suites(["exp"], ["f32"]), None, 24)) == 256
    for bad in (lambda: all_inputs.suites(["expm1"]), lambda: all_inputs.suites(None, ["f64"]),
                lambda: all_inputs.parse_chunks("a:b"), lambda: all_inputs.parse_chunks("-1"),
                lambda: all_inputs.plan(all_inputs.suites(["exp"], ["f16"]), [1], 24),
                lambda: all_inputs.plan(all_inputs.suites(["exp"]), None, 30)):
        with pytest.raises(InvalidConfigError) as exc:
            bad()
        assert exc.value.fix


@pytest.mark.fast
def test_a_missing_record_is_refused_before_any_work(tmp_path):
    work = all_inputs.plan(all_inputs.suites(["sqrt"], ["f32"]), [ONE], BITS)
    with pytest.raises(InvalidConfigError, match="no recorded digest of f32 sqrt") as exc:
        all_inputs.recorded(work, BITS, tmp_path)
    assert "--record" in exc.value.fix


# -- on the backends ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver(workers=2) as drv:
        yield drv


def check(driver, backends, work, directory: Path, run_dir: Path, oracle_fn):
    expected = all_inputs.recorded(work, BITS, directory)
    with ThreadPoolExecutor(2) as threads:
        return all_inputs.check(driver, backends, work, BITS, expected,
                                all_inputs.RunLog(run_dir), threads, oracle_fn)


def test_a_perturbed_record_is_reported_with_exactly_its_inputs(driver, tmp_path):
    """Digests recorded from an oracle one bit off at five inputs of f32 sqrt (correctly
    rounded on every backend): each backend's chunk differs, and the tool lists those
    five, with the record's bits as expected and the true ones as actual."""
    work = all_inputs.plan(all_inputs.suites(["sqrt"], ["f32"]), [ONE], BITS)
    record(tmp_path, work, perturbed)
    results = check(driver, ["reference", "cpu", "wgpu"], work, tmp_path, tmp_path / "run",
                    perturbed)
    x = np.array(PERTURBED, np.uint32).view(np.float32)
    true = oracle.correctly_rounded_bits("sqrt", "f32", x)
    for r in results:
        assert r.error is None, r.error
        assert r.misrounded == len(PERTURBED), r.backend
        assert [(m["input"], m["expected"], m["actual"]) for m in r.first] == [
            ([b], int(t) ^ 1, int(t)) for b, t in zip(PERTURBED, true, strict=True)]


def test_the_tool_finds_what_an_independent_dispatch_finds(driver, tmp_path):
    """exp on f32 (a chunk from 1.0) and sin on f16, atan2 on f32 pairs (a chunk of the
    sample), pow on f16 pairs: the misrounded inputs the tool lists are those where the
    sweep's own program (inputs uploaded, not made in the kernel) differs from the
    oracle. (Every backend now gives the correctly rounded result for these, so both
    lists are empty: the test above lists the inputs of a perturbed record.)"""
    cases = [(Suite("exp", "f32"), ONE), (Suite("sin", "f16"), 0x3C00 >> BITS),
             (Suite("atan2", "f32"), 3), (Suite("pow", "f16"), 0x42003C00 >> BITS)]
    record(tmp_path, cases)
    results = check(driver, ["reference", "cpu", "wgpu"], cases, tmp_path, tmp_path / "run",
                    oracle.correctly_rounded)
    by_key = {(r.backend, r.op, r.chunk): r for r in results}
    for backend in ("reference", "cpu", "wgpu"):
        for suite, chunk in cases:
            operands = suite.operands(chunk << BITS, 1 << BITS)
            got = independent(driver, backend, suite, operands)
            want = oracle.correctly_rounded_bits(suite.op, suite.dtype, *operands)
            wrong = np.flatnonzero(got != want)
            r = by_key[(backend, suite.op, chunk)]
            assert r.error is None and r.misrounded == len(wrong), (backend, suite, r)
            assert [m["actual"] for m in r.first] == got[wrong[:20]].tolist()


def independent(driver, backend: str, suite: Suite, operands: list[np.ndarray]) -> np.ndarray:
    """The operation over ``operands`` by the math tests' own program of it (one per op
    and type: compiled once per run on cpu, whichever module dispatches it first)."""
    from vyre_core import ir

    t = ir.f32 if suite.dtype == "f32" else ir.f16
    got = apply(driver, backend, getattr(ir, suite.op), t, *operands,
                config=DispatchConfig(timeout=120.0))
    return got.view(oracle.FORMATS[suite.dtype].bits)


class NoDispatch:
    """A driver with the backends of ``like`` (their versions) that must not dispatch;
    ``version`` replaces cpu's version (another build of the backend)."""

    def __init__(self, like, version: str | None = None) -> None:
        self.registrations = [dataclasses.replace(r, version=version)
                              if version and r.id == "cpu" else r for r in like.backends()]

    def backends(self):
        return self.registrations

    def dispatch(self, *args, **kwargs):
        raise AssertionError("a logged chunk was dispatched again")


def test_a_run_resumes_from_its_log(driver, tmp_path):
    """A second run over the same run directory dispatches nothing for finished chunks
    and reports what the first found; a chunk checked against another record, by another
    version of the backend or of the math library, or not yet run, runs."""
    work = all_inputs.plan(all_inputs.suites(["sqrt", "exp2"], ["f32"]), [ONE, ONE + 1],
                           BITS)
    record(tmp_path, work)
    first = check(driver, ["cpu"], work[:3], tmp_path, tmp_path / "run",
                  oracle.correctly_rounded)
    again = check(NoDispatch(driver), ["cpu"], work[:3], tmp_path, tmp_path / "run",
                  oracle.correctly_rounded)
    assert [(r.op, r.chunk, r.digest, r.misrounded) for r in again] == [
        (r.op, r.chunk, r.digest, r.misrounded) for r in first]
    with pytest.raises(AssertionError, match="dispatched again"):
        check(NoDispatch(driver), ["cpu"], work, tmp_path, tmp_path / "run",
              oracle.correctly_rounded)
    with pytest.raises(AssertionError, match="dispatched again"):
        check(NoDispatch(driver, "9.9-rebuilt"), ["cpu"], work[:3], tmp_path,
              tmp_path / "run", oracle.correctly_rounded)
    log = all_inputs.RunLog(tmp_path / "run")
    code = all_inputs.code_of(driver, "cpu")
    assert log.finished(first[0].key, first[0].expected, code) is not None
    assert log.finished(first[0].key, "0" * 32, code) is None
    other_library = code.replace(math_library_version(), "0" * 32)
    assert log.finished(first[0].key, first[0].expected, other_library) is None
    with (tmp_path / "run" / "chunks.jsonl").open("a") as f:
        f.write('{"backend": "cpu", "op": "sq')  # (a line cut short by a kill)
    assert all_inputs.RunLog(tmp_path / "run").done.keys() == log.done.keys()


# -- the command -------------------------------------------------------------------------

def vyre(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(VYRE), "conform", "--exhaustive", *map(str, args)],
                          env=fresh_env(), capture_output=True, text=True, timeout=300)


def test_the_command_records_checks_and_reports(tmp_path):
    common = ("--all-inputs", "--op", "sqrt,exp2", "--dtype", "f32", "--chunk-bits", BITS,
              "--chunks", f"{ONE}:{ONE + 2}", "--digests", tmp_path / "d", "--json")
    recorded = vyre(*common, "--record", "--run-dir", tmp_path / "rec")
    assert recorded.returncode == 0, recorded.stderr
    assert len(json.loads(recorded.stdout)["chunks"]) == 4
    assert digests.read(tmp_path / "d", "f32", "sqrt")[1].keys() == {ONE, ONE + 1}
    proc = vyre(*common, "--backend", "reference", "--run-dir", tmp_path / "run", "--jobs", 2)
    report = json.loads(proc.stdout)
    assert [(r["op"], r["chunks"], r["inputs"], r["errors"]) for r in report["summary"]] == [
        ("exp2", 2, 2 << BITS, 0), ("sqrt", 2, 2 << BITS, 0)]
    assert proc.returncode == (0 if all(r["misrounded"] == 0 for r in report["summary"])
                               else 1)
    assert len((tmp_path / "run" / "chunks.jsonl").read_text().splitlines()) == 4


@pytest.mark.parametrize("args,phrase", [
    (("--all-inputs", "--op", "expm1"), "no such op here: expm1"),
    (("--all-inputs", "--chunks", "300"), "past the last one"),
    (("--all-inputs", "--op", "exp", "--dtype", "f32", "--chunk-bits", "12", "--chunks",
      "5"), "no recorded digest of f32 exp"),
    (("--all-inputs", "--record", "--backend", "cpu"), "not a backend"),
    (("--all-inputs", "--jobs", "0"), "at least one job"),
])
def test_bad_options_are_refused_with_a_fix(args, phrase, tmp_path):
    proc = vyre(*args, "--run-dir", tmp_path / "run", "--digests", tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert phrase in lines[0] and lines[-1].startswith("Fix: "), proc.stderr
    assert not (tmp_path / "run" / "chunks.jsonl").exists()


def test_all_inputs_needs_exhaustive():
    proc = subprocess.run([str(VYRE), "conform", "--all-inputs"], env=fresh_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "a mode of --exhaustive, --all-inputs" in proc.stderr
