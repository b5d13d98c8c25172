"""``vyre run path/to/file.py:kernel --dim N``: a kernel launched on generated arguments
(sizes from ``--dim``, fixed seed) or on ``--inputs FILE.npz`` by parameter name, its
outputs printed as an example's are; and each way the target can be wrong, with a Fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

import blake3
import numpy as np
import pytest
from test_cli import json_of, refused, vyre

from vyre_core.cli.kernel_target import kernel_example, kernel_of, parse_dim, split_spec
from vyre_core.cli.targets import _load_module, load_target
from vyre_core.errors import InvalidInputError

KERNELS = textwrap.dedent("""
    import vyre_core as vyre
    from vyre_core import f32, i32


    @vyre.kernel
    def saxpy(a: f32, x: vyre.Array[f32], y: vyre.Array[f32], out: vyre.Array[f32]):
        i = vyre.global_id(0)
        if i < len(x):
            out[i] = a * x[i] + y[i]


    @vyre.kernel
    def transpose(src: vyre.Array[i32, 2], dst: vyre.Array[i32]):
        r, c = vyre.global_id(0), vyre.global_id(1)
        if r < src.shape[0] and c < src.shape[1]:
            dst[c * src.shape[0] + r] = src[r, c]


    @vyre.kernel
    def loose(x, out):
        out[0] = x[0]


    NOT_A_KERNEL = 3
""")


@pytest.fixture
def module(tmp_path: Path) -> Path:
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def _hash(a: np.ndarray) -> str:
    return blake3.blake3(a.tobytes()).hexdigest()[:16]


@pytest.mark.fast
def test_dim_and_spec_parsing():
    assert split_spec("a/b.py:saxpy") == (Path("a/b.py"), "saxpy")
    assert split_spec("saxpy") is None and split_spec("prog.vyir") is None
    assert parse_dim("1000", "t") == (1000,) and parse_dim("4,5", "t") == (4, 5)
    assert parse_dim("2,3,4", "t") == (2, 3, 4)
    for bad in ("0", "1,2,3,4", "x", "3,", "-1", ""):
        with pytest.raises(InvalidInputError) as err:
            parse_dim(bad, "t")
        assert "is not 1 to 3 counts of at least 1" in err.value.cause
        assert err.value.fix.startswith("Pass --dim N, --dim ROWS,COLS")
    with pytest.raises(InvalidInputError, match="no --dim says how many"):
        parse_dim(None, "t")


@pytest.mark.fast
def test_generated_arguments_follow_dim_and_the_seed(module):
    first = load_target(f"{module}:transpose", dim="3,4").example
    again = load_target(f"{module}:transpose", dim="3,4").example
    src, dst, launch = first.inputs
    assert src.size == 12 and dst.size == 12
    assert launch.tolist() == [3, 4, 3, 4]   # the hidden launch buffer: extents, then dim
    assert src.dtype == np.int32 and src.min() >= 0 and src.max() < 100
    assert all(a.tobytes() == b.tobytes() for a, b in zip(first.inputs, again.inputs,
                                                           strict=True))
    assert first.config.dim == (3, 4)
    a, x, y, out, launch = load_target(f"{module}:saxpy", dim="6").example.inputs
    assert a.dtype == np.float32 and a.size == 1 and x.size == y.size == out.size == 6
    assert launch.tolist() == [6]    # the hidden launch buffer: exactly dim invocations
    assert x.min() >= 0.0 and x.max() < 1.0


@pytest.mark.fast
def test_inputs_by_parameter_name(module, tmp_path):
    npz = tmp_path / "args.npz"
    np.savez(npz, a=np.float32(3), x=np.arange(5, dtype=np.float32))
    a, x, y, _, _ = load_target(f"{module}:saxpy", str(npz), dim="5").example.inputs
    assert a.tolist() == [3.0] and x.tolist() == [0, 1, 2, 3, 4] and y.size == 5
    np.savez(npz, x=np.arange(2, dtype=np.int32), out=np.zeros(2, np.int32))
    assert load_target(f"{module}:loose", str(npz), dim="1").example.inputs[0].tolist() == \
        [0, 1]
    np.savez(npz, z=np.zeros(1))
    with pytest.raises(InvalidInputError) as err:
        load_target(f"{module}:saxpy", str(npz), dim="5")
    assert "--inputs names ['z']" in err.value.cause
    assert err.value.fix == "Name arrays after its parameters: a, x, y, out."


REFUSALS = {
    "no such kernel": ("kernels.py:nope", "3", "the module has no 'nope'",
                       "Name one of its kernels after the colon (kernels: loose, saxpy, "
                       "transpose)."),
    "not a kernel": ("kernels.py:NOT_A_KERNEL", "3", "'NOT_A_KERNEL' is of type int, not a "
                     "@vyre.kernel", "Name a function marked @vyre.kernel"),
    "unannotated": ("kernels.py:loose", "3", "parameter 'x' has no annotation",
                    "Annotate it (x: vyre.Array[f32], or a dtype), or pass it by name"),
    "axes": ("kernels.py:transpose", "12", "parameter 'src' is Array[i32, 2], and the --dim "
             "has 1 axis(es)", "Pass --dim with 2 counts"),
    "no such file": ("missing.py:saxpy", "3", "no such file", "Pass the path of an example"),
    "dim for an example": ("kernels.py", "3", "--dim is given, and target", "Leave out --dim"),
}


@pytest.mark.fast
@pytest.mark.parametrize("case", REFUSALS)
def test_kernel_target_refusals(case, module):
    spec, dim, cause, fix = REFUSALS[case]
    with pytest.raises(InvalidInputError) as err:
        load_target(str(module.parent / spec), dim=dim)
    assert cause in err.value.cause
    assert err.value.fix.startswith(fix), err.value.fix


@pytest.mark.processes
@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_vyre_run_kernel_prints_the_outputs_blake3(module, backend):
    a, x, y, _, _ = kernel_example(kernel_of(_load_module(module), "saxpy", "s"), (300,),
                                    "s").inputs
    record = json_of(vyre("run", f"{module}:saxpy", "--dim", "300", "--backend", backend,
                          "--shadow", "--json"))
    assert (record["target"], record["kind"], record["backend"]) == \
        ("kernels:saxpy", "kernel", backend)
    out, = record["outputs"]
    assert (out["name"], out["dtype"], out["count"]) == ("out", "f32", 300)
    assert out["blake3"] == _hash(a[0] * x + y)
    assert record["shadow"]["ok"] and record["oracle"] is None


@pytest.mark.processes
def test_vyre_run_kernel_2d_with_inputs_and_text(module, tmp_path):
    npz = tmp_path / "src.npz"
    src = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.savez(npz, src=src)
    proc = vyre("run", f"{module}:transpose", "--dim", "3,4", "--inputs", npz)
    assert proc.returncode == 0, proc.stderr
    assert "kernels:transpose  kernel" in proc.stdout and _hash(src.T.copy()) in proc.stdout
    refused(vyre("run", f"{module}:saxpy", "--dim", "0"), "E1101",
            "is not 1 to 3 counts", "Fix: Pass --dim N")
