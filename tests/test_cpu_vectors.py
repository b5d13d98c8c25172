"""The cpu backend's vector width (``vyre_cpu.vectors``): 512-bit vectors where the CPU
has AVX-512 (LLVM's preference for 256 lifted), 256 on request, numba's own settings
left to decide, a bad width refused with a Fix; and a worker says which it uses."""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np
import pytest
from llvmlite import binding
from vyre_cpu import vectors

import vyre_core as vyre
from vyre_core import Driver, f32
from vyre_core.errors import InvalidConfigError

AVX512 = {"avx": True, "avx2": True, "avx512f": True, "prefer-256-bit": True, "sse2": True}
AVX2 = {"avx": True, "avx2": True, "avx512f": False, "sse2": True}


@vyre.kernel
def doubled(x: vyre.Array[f32], out: vyre.Array[f32]):
    i = vyre.global_id(0)
    if i < x.shape[0]:
        out[i] = x[i] + x[i]


@pytest.mark.fast
def test_a_cpu_with_avx512_gets_its_features_with_the_256_bit_preference_lifted():
    chosen = vectors.features(AVX512, {})
    assert chosen is not None
    parts = chosen.split(",")
    assert parts[-1] == "-prefer-256-bit" and "+prefer-256-bit" not in parts
    assert {"+avx", "+avx2", "+avx512f", "+sse2"} <= set(parts)
    assert vectors.features(AVX512, {vectors.ENV: "512"}) == chosen
    assert vectors.features(AVX512, {vectors.ENV: " 512 "}) == chosen


@pytest.mark.fast
@pytest.mark.parametrize(("host", "environ", "avx"), [
    (AVX2, {}, True),                                        # no AVX-512: nothing to lift
    (AVX512, {vectors.ENV: "256"}, True),                    # asked for 256
    (AVX512, {"NUMBA_CPU_NAME": "skylake-avx512"}, True),    # numba's own choice
    (AVX512, {"NUMBA_CPU_FEATURES": "+avx2"}, True),
    (AVX512, {}, False),                                     # numba keeps AVX off
    ({}, {}, True),                                          # LLVM could not tell
])
def test_numbas_default_is_left_where_nothing_is_to_gain_or_someone_chose(host, environ, avx):
    assert vectors.features(host, environ, avx) is None


@pytest.mark.fast
@pytest.mark.parametrize("raw", ["128", "1024", "wide", "512 bits", "-1"])
def test_a_width_other_than_256_or_512_is_refused_with_a_fix(raw):
    with pytest.raises(InvalidConfigError) as info:
        vectors.features(AVX512, {vectors.ENV: raw})
    assert repr(raw) in info.value.cause
    assert f"{vectors.ENV}=512" in info.value.fix and f"{vectors.ENV}=256" in info.value.fix


@pytest.mark.fast
@pytest.mark.parametrize(("chosen", "avx", "bits"), [
    ("+avx512f,+avx2,+avx,-prefer-256-bit", True, 512),
    ("+avx512f,+avx2,+avx", True, 256),       # the preference kept (NUMBA_CPU_NAME, 256)
    ("+avx2,+avx,+sse2", True, 256),
    ("", True, 128),                          # NUMBA_CPU_NAME=generic: no features
    ("+sse2,-avx", True, 128),
    ("+avx512f,+avx2,+avx,-prefer-256-bit", False, 128),  # NUMBA_ENABLE_AVX=0
])
def test_the_width_a_worker_reports_is_that_of_the_features_numba_compiles_for(
        monkeypatch, chosen, avx, bits):
    monkeypatch.setattr(numba.config, "CPU_FEATURES", chosen)
    monkeypatch.setattr(numba.config, "ENABLE_AVX", avx)
    assert vectors.bits({}) == bits


def _compiled_lifted(cache: Path) -> set[bool]:
    """For each kernel numba's cache in ``cache`` indexes: whether it was compiled with
    the 256-bit preference lifted (the index records the features it was compiled for)."""
    indexes = list(cache.rglob("*.nbi"))
    assert indexes, f"nothing compiled into {cache}"
    return {b"-prefer-256-bit" in index.read_bytes() for index in indexes}


@pytest.mark.processes
def test_a_worker_compiles_at_its_width_says_it_and_a_bad_one_stops_its_start(
        monkeypatch, tmp_path):
    wide = bool(binding.get_host_cpu_features().get("avx512f"))
    x = np.arange(4, dtype=np.float32)
    for width, cache in (("512", tmp_path / "wide"), ("256", tmp_path / "narrow")):
        monkeypatch.setenv(vectors.ENV, width)
        monkeypatch.setenv("VYRE_CPU_CACHE_DIR", str(cache))
        with Driver() as drv:
            bits = drv.probe("cpu").extra["vector_bits"]
            out = np.zeros(4, np.float32)
            drv.launch(doubled, dim=4, args=(x, out), backend="cpu")
        assert out.tolist() == [0.0, 2.0, 4.0, 6.0]
        lifted = wide and width == "512"
        assert (bits == 512) == lifted and bits in (128, 256, 512)
        assert _compiled_lifted(cache) == {lifted}
    monkeypatch.setenv(vectors.ENV, "wide")
    with Driver() as drv, pytest.raises(InvalidConfigError) as info:
        drv.probe("cpu")
    assert "VYRE_CPU_VECTOR_BITS='wide' is not a vector width" in str(info.value)
    assert "Set VYRE_CPU_VECTOR_BITS=512" in str(info.value)
