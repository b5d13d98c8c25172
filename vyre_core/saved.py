"""A program saved to disk: its wire bytes (``.vyir``), its inputs (``.npz``, one array
per input buffer, by name) and, in a shadow's replay bundle, its config (``.json``).
What ``vyre run --save`` writes and ``vyre run FILE.vyir`` reads, in one place."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidInputError
from vyre_core.ir import Program


def save_inputs(npz: Path, program: Program, arrays: Sequence[np.ndarray]) -> None:
    """Write ``arrays`` (one per input buffer of ``program``) as an ``.npz`` numpy loads,
    one member per buffer name, whatever the name (``numpy.savez`` takes some names, such
    as ``file``, as its own arguments)."""
    with zipfile.ZipFile(npz, "w", zipfile.ZIP_STORED) as archive:
        for buffer, array in zip(program.inputs, arrays, strict=True):
            with archive.open(f"{buffer.name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asarray(array), allow_pickle=False)


def load_inputs(program: Program, npz: Path) -> list[np.ndarray]:
    """The arrays of ``npz``, one per input buffer of ``program``, by buffer name."""
    names = [b.name for b in program.inputs]
    wanted = ", ".join(names) or "none"
    fix = (f"Save the inputs with numpy.savez(FILE, {', '.join(f'{n}=...' for n in names)}) "
           "and pass it with --inputs FILE.npz.")
    if not names:
        return []
    if not npz.is_file():
        raise InvalidInputError(f"inputs file {str(npz)!r} not found (the program's inputs: "
                                f"{wanted})", fix)
    try:
        with np.load(npz, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"inputs file {str(npz)!r} is not a readable .npz ({exc})",
                                fix) from None
    missing = [n for n in names if n not in arrays]
    extra = sorted(set(arrays) - set(names))
    if missing or extra:
        raise InvalidInputError(
            f"inputs file {str(npz)!r} has arrays {sorted(arrays) or 'none'}; the program's "
            f"inputs are {wanted}" + (f" (missing {', '.join(missing)})" if missing else "")
            + (f" (unknown {', '.join(extra)})" if extra else ""), fix)
    return [arrays[n] for n in names]


def save_config(path: Path, config: DispatchConfig) -> None:
    """Write ``config`` as ``load_config`` reads it (a replay bundle's layout)."""
    path.write_text(json.dumps({"config": config.to_dict()}))


def load_config(path: Path) -> DispatchConfig | None:
    """The config a shadow replay bundle saved beside its program (None: there is none)."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{str(path)!r} is not a replay bundle's config ({exc})",
                                "Remove it, or restore the .json the shadow saved.") from None
    if not isinstance(data, dict) or "config" not in data:
        return None  # some other file of the same name: not a bundle's
    try:
        return DispatchConfig.from_dict(data["config"])
    except (TypeError, AttributeError) as exc:
        raise InvalidInputError(f"{str(path)!r} is not a replay bundle's config ({exc})",
                                "Remove it, or restore the .json the shadow saved.") from None
