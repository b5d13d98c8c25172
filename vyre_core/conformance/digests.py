"""The recorded digests of the exhaustive check: one small text file per dtype and op
(``<dtype>_<op>.digests``), one line per chunk of inputs, so that a backend's check
needs no oracle: it hashes its own results and compares.

A digest is blake3 of the chunk's result bits (u32 per f32 result, u16 per f16 result,
little-endian, in input order), cut to its first 16 bytes (``hexdigest(length=16)``,
blake3's extendable output): 128 bits are far beyond any chance collision over a few
thousand chunks, and the files stay small (design-42 open question 7).
"""

from __future__ import annotations

import os
from pathlib import Path

import blake3
import numpy as np

#: where the records of the package live
RECORDS = Path(__file__).with_name("exhaustive")
LENGTH = 16


def hasher() -> blake3.blake3:
    """A fresh hash; ``update`` it with each part of a chunk's results in order."""
    return blake3.blake3()


def update(h: blake3.blake3, bits: np.ndarray) -> None:
    h.update(np.ascontiguousarray(bits, bits.dtype.newbyteorder("<")).tobytes())


def hexdigest(h: blake3.blake3) -> str:
    return h.hexdigest(length=LENGTH)


def path(directory: Path, dtype: str, op: str) -> Path:
    return directory / f"{dtype}_{op}.digests"


def read(directory: Path, dtype: str, op: str) -> tuple[int | None, dict[int, str]]:
    """(chunk_bits, {chunk: digest}) of the record; (None, {}) where there is none."""
    file = path(directory, dtype, op)
    if not file.exists():
        return None, {}
    chunk_bits, chunks = None, {}
    for line in file.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.split()
        if key == "chunk_bits":
            chunk_bits = int(value)
        else:
            chunks[int(key)] = value
    return chunk_bits, chunks


def write(directory: Path, dtype: str, op: str, chunk_bits: int,
          chunks: dict[int, str]) -> None:
    """The record of ``chunks``, replacing the file at once (an interrupted record
    leaves the previous whole file, never half a line)."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"# vyre conform --exhaustive --all-inputs: {dtype} {op}, chunks of "
             f"2^{chunk_bits} inputs, blake3 (first {LENGTH} bytes) of the correctly "
             "rounded result bits, little-endian",
             f"chunk_bits {chunk_bits}", *(f"{c} {chunks[c]}" for c in sorted(chunks))]
    file = path(directory, dtype, op)
    partial = file.with_suffix(f".partial{os.getpid()}")
    partial.write_text("\n".join(lines) + "\n")
    partial.replace(file)
