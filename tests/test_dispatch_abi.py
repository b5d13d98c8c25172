"""The input/output ABI and grid inference of docs/semantics.md, observed through the
reference backend."""

from __future__ import annotations

import numpy as np
import pytest

from vyre_core import ir
from vyre_core.errors import InvalidInputError, LaunchLimitError, ValidationError
from vyre_reference import run

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)


def copy_kernel(count: int | None = None, dtype=ir.u32, out_count: int = 8) -> ir.Program:
    k = ir.Kernel(workgroup=(4,))
    src = k.read("src", dtype, count)
    dst = k.output("dst", dtype, out_count)
    i = k.let("i", ir.global_id(0))
    dst[i] = src[i]
    return k.build()


def counting_kernel(workgroup=(4,), out_count: int = 10) -> ir.Program:
    """Counts invocations with an atomic, and marks which global ids ran."""
    k = ir.Kernel(workgroup=workgroup)
    ran = k.output("ran", ir.u32, out_count)
    total = k.output("total", ir.u32, 1)
    total.atomic_add(0, 1)
    ran[ir.global_id(0)] = 1
    return k.build()


def test_wrong_input_count_lists_the_expected_inputs():
    with pytest.raises(InvalidInputError) as err:
        run(copy_kernel(), [])
    assert "Fix: Pass exactly these inputs, in order: src (u32)." in str(err.value)


def test_wrong_dtype_is_refused_not_converted():
    with pytest.raises(InvalidInputError, match="Fix: Convert it explicitly"):
        run(copy_kernel(dtype=ir.f32), [np.zeros(8, np.float64)])


def test_non_array_input_is_refused():
    with pytest.raises(InvalidInputError, match=r"Fix: Pass np\.asarray"):
        run(copy_kernel(), [[1, 2, 3]])


def test_bytes_input_equals_array_input():
    data = np.arange(8, dtype=np.uint32) * 3
    out_bytes, = run(copy_kernel(), [data.tobytes()])
    out_array, = run(copy_kernel(), [data])
    assert out_bytes.tobytes() == out_array.tobytes() == data.tobytes()


def test_bytes_must_hold_whole_elements():
    with pytest.raises(InvalidInputError, match="not a multiple of the 4-byte u32"):
        run(copy_kernel(), [b"\x00" * 7])


def test_multidimensional_input_is_flattened_in_c_order():
    data = np.arange(8, dtype=np.uint32).reshape(2, 4)
    out, = run(copy_kernel(), [data])
    assert out.tobytes() == np.arange(8, dtype=np.uint32).tobytes()


def test_short_input_is_zero_padded_to_declared_count():
    out, = run(copy_kernel(count=8), [np.array([5, 6, 7], np.uint32)])
    assert out.tolist() == [5, 6, 7, 0, 0, 0, 0, 0]


def test_long_input_is_refused():
    with pytest.raises(InvalidInputError, match="more than its declared count 4"):
        run(copy_kernel(count=4), [np.arange(5, dtype=np.uint32)])


def test_runtime_sized_input_takes_its_length_from_the_data():
    k = ir.Kernel(workgroup=(1,))
    src = k.read("src", ir.u32)
    n = k.output("n", ir.u32, 1)
    n[0] = src.len
    out, = run(k.build(), [np.zeros(37, np.uint32)], grid=(1,))
    assert out.tolist() == [37]


def test_bool_buffers_hold_u32_words_and_accept_numpy_bool():
    k = ir.Kernel(workgroup=(4,))
    flags = k.read("flags", ir.bool_)
    neg = k.output("neg", ir.bool_, 4)
    i = k.let("i", ir.global_id(0))
    neg[i] = ~flags[i]
    prog = k.build()
    words, = run(prog, [np.array([0, 1, 7, 0], np.uint32)])
    bools, = run(prog, [np.array([False, True, True, False])])
    assert words.dtype == np.uint32
    assert words.tolist() == bools.tolist() == [1, 0, 0, 1]


def test_read_write_input_is_not_modified_and_result_is_returned():
    k = ir.Kernel(workgroup=(4,))
    acc = k.read_write("acc", ir.i32)
    i = k.let("i", ir.global_id(0))
    acc[i] = acc[i] * -2
    data = np.array([1, 2, 3, 4], np.int32)
    out, = run(k.build(), [data])
    assert data.tolist() == [1, 2, 3, 4]
    assert out.tolist() == [-2, -4, -6, -8]


def test_outputs_come_back_in_declaration_order():
    k = ir.Kernel(workgroup=(1,))
    b = k.output("b", ir.u32, 1)
    k.read("unused", ir.u32)
    a = k.output("a", ir.f32, 2)
    b[0] = 7
    a[1] = 2.5
    out_b, out_a = run(k.build(), [np.zeros(1, np.uint32)], grid=(1,))
    assert out_b.tolist() == [7] and out_a.tolist() == [0.0, 2.5]


def test_inferred_grid_covers_the_largest_output_in_whole_workgroups():
    ran, total = run(counting_kernel(workgroup=(4,), out_count=10), [])
    assert total.tolist() == [12]  # ceil(10 / 4) = 3 workgroups of 4
    assert ran.tolist() == [1] * 10


def test_given_grid_overrides_inference():
    ran, total = run(counting_kernel(workgroup=(4,), out_count=10), [], grid=(1,))
    assert total.tolist() == [4]
    assert ran.tolist() == [1] * 4 + [0] * 6


def shaped_grid(workgroup, *shapes, flat: int = 1, **config) -> tuple[int, int, int]:
    from vyre_core import abi

    k = ir.Kernel(workgroup=workgroup)
    k.output("flat", ir.u32, flat)
    for n, shape in enumerate(shapes):
        k.output(f"o{n}", ir.u32, shape=shape)
    program = k.build()
    lengths = {b.name: b.count for b in program.outputs}
    return abi.infer_grid(program, lengths, config.get("grid"), config.get("elements"))


def test_a_grid_is_inferred_from_the_largest_2d_or_3d_output_shape_axis_by_axis():
    assert shaped_grid((4, 2), (5, 7)) == (2, 3, 1)  # x: 7 columns, y: 5 rows
    assert shaped_grid((8,), (3, 10)) == (2, 3, 1)   # a 1-D workgroup: one row per y
    assert shaped_grid((2, 2, 2), (3, 3, 5)) == (3, 2, 2)
    assert shaped_grid((4, 4), (2, 2), (8, 8), (3, 3)) == (2, 2, 1)  # the largest shape
    assert shaped_grid((4, 4), (4, 6), (6, 4)) == (2, 1, 1)  # a tie: the first declared
    # a longer flat output, or a 1-axis shape, does not make the grid 1-D
    assert shaped_grid((4, 4), (8, 8), (1000,), flat=5000) == (2, 2, 1)


def test_without_a_2d_shape_the_grid_lays_along_x_and_a_config_still_wins():
    assert shaped_grid((4,), (40,)) == (10, 1, 1)
    assert shaped_grid((4, 2), (5, 7), grid=(1, 1)) == (1, 1, 1)
    assert shaped_grid((4, 2), (5, 7), elements=64) == (8, 1, 1)


def test_a_shape_that_is_not_the_count_is_refused_at_build():
    k = ir.Kernel(workgroup=(4,))
    k.output("o", ir.u32, count=10, shape=(2, 3))
    with pytest.raises(ValidationError, match="V033"):
        k.build()


def test_three_axis_grid_runs_every_invocation():
    _, total = run(counting_kernel(workgroup=(2, 2, 2)), [], grid=(3, 2, 1))
    assert total.tolist() == [2 * 2 * 2 * 3 * 2]


@pytest.mark.parametrize("grid", [(0,), (1, 2, 3, 4), (-1,), (1.5,)])
def test_bad_grid_is_refused_with_a_fix(grid):
    with pytest.raises(InvalidInputError, match="Fix: Pass a grid such as"):
        run(counting_kernel(), [], grid=grid)


def test_invalid_program_is_refused_before_running():
    k = ir.Kernel(workgroup=(4,))
    src = k.read("src", ir.u32)
    src[0] = 1  # store into a read-only buffer
    with pytest.raises(ValidationError, match="V006"):
        run(k.build(validate=False), [np.zeros(4, np.uint32)])


def test_a_dispatch_past_what_a_u32_id_numbers_is_refused_up_front():
    """The reference runs any launch whose ids fit a u32 (past 2**26 invocations in chunks:
    tests/test_reference_chunks.py); past that it refuses before any work."""
    with pytest.raises(LaunchLimitError, match="grid axis x covers 16777217 x 256") as info:
        run(counting_kernel(workgroup=(256,)), [], grid=((1 << 24) + 1,))
    assert "Launch at most 4294967296 invocations along x" in info.value.fix
