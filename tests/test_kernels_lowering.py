"""The kernel frontend without a process: each statement form gives what Python means
(run on the in-process reference), each refused construct names its line and column,
and the typing rules hold (docs/kernels.md)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from kernels import blur, launch, saxpy

import vyre_core as vyre
from vyre_core import f32, i32, u32
from vyre_core.errors import InvalidInputError, KernelSyntaxError, ValidationError
from vyre_reference import run

pytestmark = pytest.mark.fast

SCALE = 3          # a module-level number, captured at compile time
TABLE = [1, 2, 3]  # a module-level list: refused


def one(kernel, *scalars, dtype=np.int32, n=1):
    """Run a kernel whose last parameter is an output array of ``n`` elements."""
    out = np.zeros(n, dtype)
    launch(kernel, n, (*scalars, out))
    return out


def refused(kernel, args, dim=1) -> KernelSyntaxError:
    with pytest.raises(KernelSyntaxError) as info:
        kernel.program(dim=dim, args=args)
    return info.value


def where(err: KernelSyntaxError, fn_line: int) -> tuple[int, int]:
    """The error's line relative to the kernel's ``def`` line, and its column."""
    return err.details["line"] - fn_line, err.details["col"]


def def_line(kernel) -> int:
    return kernel.fn.__code__.co_firstlineno


def test_saxpy_fills_out_in_place_with_numpys_bytes():
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, np.float32)
    out = np.full(n + 0, -1, np.float32)
    launch(saxpy, n, (2.0, x, y, out))
    assert out.tobytes() == (np.float32(2.0) * x + y).tobytes()


def test_a_new_size_or_scalar_is_not_a_new_compile():
    k = vyre.kernel(saxpy.fn)
    for n, a in ((10, 2.0), (999, 3.5), (64, -1.0)):
        x = np.arange(n, dtype=np.float32)
        out = np.zeros(n, np.float32)
        launch(k, n, (a, x, x, out))
        assert out.tobytes() == (np.float32(a) * x + x).tobytes()
    assert k.compiles == 1
    k.program(dim=(4, 4), args=(1.0, x, x, out))   # a 2-axis launch: its own workgroup
    assert k.compiles == 2


def test_blur_interior_is_the_mean_of_nine_exactly_as_summed_in_order():
    rng = np.random.default_rng(1)
    img = rng.random((9, 7), dtype=np.float32)
    out = np.zeros_like(img)
    launch(blur, img.shape, (img, out))
    want = np.zeros_like(img)
    for r in range(1, 8):
        for c in range(1, 6):
            acc = np.float32(0)
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    acc = np.float32(acc + img[r + dr, c + dc])
            want[r, c] = acc / np.float32(9)
    assert out.tobytes() == want.tobytes()


def test_the_program_is_stable_and_needs_no_ids_or_addresses():
    x = np.zeros(4, np.float32)
    prog = saxpy.program(dim=4, args=(1.0, x, x, x))
    again = vyre.kernel(saxpy.fn).program(dim=4, args=(1.0, x, x, x))
    assert prog.fingerprint() == again.fingerprint()
    assert [(b.name, b.access.value) for b in prog.buffers] == [
        ("a", "uniform"), ("x", "read"), ("y", "read"), ("out", "read_write"),
        ("launch", "uniform")]


# -- typing -------------------------------------------------------------------------------

@vyre.kernel
def index_math(x: vyre.Array[i32], out: vyre.Array[i32]):
    i = vyre.global_id(0)
    for j in range(2):
        out[i * 2 + j] = x[len(x) - 1 - i] + j * SCALE


def test_ids_range_variables_len_and_literals_mix_without_casts():
    x = np.arange(4, dtype=np.int32)
    out = np.zeros(8, np.int32)
    launch(index_math, 4, (x, out))
    assert out.tolist() == [3, 6, 2, 5, 1, 4, 0, 3]


def test_mixing_i32_and_u32_is_refused_with_the_cast_named():
    @vyre.kernel
    def mixed(n: u32, out: vyre.Array[u32]):
        i = vyre.global_id(0)
        out[0] = n + i

    err = refused(mixed, (1, np.zeros(1, np.uint32)))
    assert where(err, def_line(mixed)) == (3, 18)
    assert "mixes u32 and i32" in err.cause and "u32(i)" in err.fix


def test_mixing_int_and_float_is_refused_with_the_cast_named():
    @vyre.kernel
    def mixed(x: vyre.Array[f32]):
        i = vyre.global_id(0)
        x[i] = x[i] * i

    err = refused(mixed, (np.zeros(1, np.float32),))
    assert where(err, def_line(mixed)) == (3, 16)
    assert "f32(i)" in err.fix
    assert err.details["caret"].strip() == "^" * len("x[i] * i")


def test_a_local_changing_type_is_refused_at_its_line():
    @vyre.kernel
    def retyped(x: vyre.Array[f32]):
        v = 1
        v = 2.5
        x[0] = v

    err = refused(retyped, (np.zeros(1, np.float32),))
    assert where(err, def_line(retyped))[0] == 3
    assert "keeps its type" in err.cause


def test_int_division_with_slash_is_refused_since_python_gives_a_float():
    @vyre.kernel
    def halves(x: vyre.Array[i32]):
        i = vyre.global_id(0)
        x[i] = x[i] / 2

    err = refused(halves, (np.zeros(1, np.int32),))
    assert "//" in err.fix and where(err, def_line(halves)) == (3, 16)


# -- Python's meaning of // % ** and comparisons --------------------------------------------

@vyre.kernel
def divmod_grid(a: vyre.Array[i32], b: vyre.Array[i32], q: vyre.Array[i32],
                r: vyre.Array[i32]):
    i = vyre.global_id(0)
    if i < len(a):
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]


def test_floor_division_and_modulo_match_python_on_negative_ints():
    values = [-7, -6, -5, -3, -2, -1, 0, 1, 2, 3, 5, 6, 7, -2**31, 2**31 - 1]
    pairs = [(x, y) for x, y in itertools.product(values, values)]
    a = np.array([x for x, _ in pairs], np.int32)
    b = np.array([y for _, y in pairs], np.int32)
    q, r = np.zeros_like(a), np.zeros_like(a)
    launch(divmod_grid, len(a), (a, b, q, r))
    for x, y, got_q, got_r in zip(a.tolist(), b.tolist(), q.tolist(), r.tolist(),
                                  strict=True):
        if y == 0:   # the total result: x // 0 is -1 (all ones), x % 0 is 0
            continue
        want_q = x // y
        if not -2**31 <= want_q < 2**31:      # -2**31 // -1 wraps, as i32 arithmetic does
            want_q -= 2**32
        assert (got_q, got_r) == (want_q, x % y), (x, y)


def test_division_by_zero_gives_the_documented_total_result():
    a = np.array([7, -7, 0], np.int32)
    b = np.zeros(3, np.int32)
    q, r = np.zeros_like(a), np.zeros_like(a)
    launch(divmod_grid, 3, (a, b, q, r))
    assert q.tolist() == [-1, -1, -1] and r.tolist() == [0, 0, 0]


@vyre.kernel
def powers(x: vyre.Array[f32], out: vyre.Array[f32]):
    i = vyre.global_id(0)
    out[i] = x[i] ** 3 + x[i] ** 0 + 2 ** 3


def test_power_with_a_constant_exponent_multiplies_out():
    x = np.array([1.5, -2.0], np.float32)
    out = np.zeros(2, np.float32)
    launch(powers, 2, (x, out))
    assert out.tobytes() == (x * x * x + np.float32(1) + np.float32(8)).tobytes()


@vyre.kernel
def chained(x: vyre.Array[i32], out: vyre.Array[i32]):
    i = vyre.global_id(0)
    out[i] = 1 if 0 <= x[i] < 10 != x[i] else 0


def test_chained_comparisons_mean_each_pair():
    x = np.array([-1, 0, 9, 10, 11], np.int32)
    out = np.zeros(5, np.int32)
    launch(chained, 5, (x, out))
    assert out.tolist() == [int(0 <= v < 10 != v) for v in x.tolist()]


# -- statements --------------------------------------------------------------------------------

@vyre.kernel
def statements(n: i32, out: vyre.Array[i32]):
    """Every statement form in one kernel."""
    i = vyre.global_id(0)
    total = 0
    for j in range(n, -1, -2):          # a negative step from a runtime start
        if j == 4:
            continue
        elif j < 0:
            break
        else:
            total += j
    k = 0
    while k * k < n:
        k += 1
    a, b = k, total
    a, b = b, a                         # a swap reads the old values
    flag = (not (a < b) and a > 0) or False
    x: f32 = 2.5
    x *= 2
    out[i * 6] = a
    out[i * 6 + 1] = b
    out[i * 6 + 2] = 1 if flag else 0
    out[i * 6 + 3] = int(x)
    out[i * 6 + 4] = abs(-7) + min(3, n) + max(-1, 0)
    if n > 100:
        return
    out[i * 6 + 5] = 99
    pass


def test_every_statement_form_means_what_python_means():
    def python(n):
        total = sum(j for j in range(n, -1, -2) if j != 4)
        k = 0
        while k * k < n:
            k += 1
        a, b = total, k
        flag = (not (a < b) and a > 0) or False
        return [a, b, int(flag), int(2.5 * 2), 7 + min(3, n) + 0, 99 if n <= 100 else 0]

    for n in (0, 7, 10, 150):
        assert one(statements, n, n=6).tolist() == python(n), n


@vyre.func
def doubled(v):
    t = v * 2
    return t


@vyre.kernel(workgroup=(1,))
def runs_its_condition_each_pass(counter: vyre.Array[i32], out: vyre.Array[i32]):
    i = 0
    while doubled(i) < 10:              # (a call's body: statements before its value)
        i += 1
    n = 0
    while vyre.atomic_add(counter, 0, 1) < 5:
        n += 1
        if n > 100:                     # (on a condition run once: out of the loop)
            break
    out[0] = i
    out[1] = n


def test_a_while_condition_that_runs_statements_runs_them_before_every_test():
    """Python tests a while condition before each pass. A condition whose value comes after
    statements (an inlined function's body, an atomic) ran them once before the loop, so
    the loop tested a stale value: doubled(i) < 10 never became false (2**32 - 1 passes)."""
    counter, out = np.zeros(1, np.int32), np.zeros(2, np.int32)
    launch(runs_its_condition_each_pass, 1, (counter, out))
    assert out.tolist() == [5, 5] and counter.tolist() == [6]  # (tested 6 times)


@vyre.func
def marked(a, i):
    a[i] = 7
    return 1


@vyre.func
def counted(a):
    return vyre.atomic_add(a, 0, 1)


def test_what_writes_memory_is_refused_where_python_might_not_run_it():
    """Both sides of and/or/if-else are evaluated: a store in a called function's body ran
    whether Python would have called it or not (marked(a, 0) wrote a[0] = 7 behind a
    false `and`); so did an atomic inside a function. A function without effects is
    fine there."""
    @vyre.kernel(workgroup=(1,))
    def shortcut(a: vyre.Array[i32], out: vyre.Array[i32]):
        out[0] = 1 if out[0] > 1 and marked(a, 0) > 0 else 2

    @vyre.kernel(workgroup=(1,))
    def counts(a: vyre.Array[i32], out: vyre.Array[i32]):
        out[0] = counted(a) if out[0] > 1 else 0

    @vyre.kernel(workgroup=(1,))
    def bare(a: vyre.Array[i32], out: vyre.Array[i32]):
        out[0] = vyre.atomic_add(a, 0, 1) if out[0] > 1 else 0

    @vyre.kernel(workgroup=(1,))
    def pure(a: vyre.Array[i32], out: vyre.Array[i32]):
        out[0] = doubled(a[0]) if out[0] > 1 else 0

    args = (np.zeros(1, np.int32), np.zeros(1, np.int32))
    for kernel, what, line in ((shortcut, "marked() inside and/or/if-else, whose body has "
                                "a store", 2), (counts, "counted() inside", 2),
                               (bare, "an atomic inside and/or/if-else", 2)):
        err = refused(kernel, args)
        assert what in err.cause and "if statement of its own" in err.fix, err.cause
        assert where(err, def_line(kernel))[0] == line
    a, out = np.array([3], np.int32), np.zeros(1, np.int32)
    launch(pure, 1, (a, out))
    assert out.tolist() == [0]


@vyre.func
def first_set(a, v):
    a[0] = v
    return 0


@vyre.kernel(workgroup=(1,))
def left_to_right(a: vyre.Array[i32], out: vyre.Array[i32]):
    a[1] += first_set(a, 100) + 1        # (a[1] read, then the call: 2 + 1)
    out[0] = a[0] + first_set(a, 50)     # (a[0] read as 100, then set to 50: 100 + 0)
    out[1] = i32(a[0] < first_set(a, 7) + 60)  # (50 < 60: read before the call sets 7)
    out[2 + first_set(a, 9)] = a[0]      # (the value, 7, before the index's call)


def test_operands_are_read_left_to_right_around_a_call_that_stores():
    """Python evaluates a load on the left before a call on the right; the call's stores
    were emitted before the statement that held the load, so it read the value the call
    left (a[1] += f() gave 101, not 3)."""
    a, out = np.array([5, 2], np.int32), np.zeros(3, np.int32)
    launch(left_to_right, 1, (a, out))
    assert a.tolist() == [9, 3] and out.tolist() == [100, 1, 7]


def test_an_augmented_store_whose_index_calls_a_function_that_stores_is_refused():
    @vyre.kernel(workgroup=(1,))
    def twice(a: vyre.Array[i32]):
        a[first_set(a, 3)] += 1

    err = refused(twice, (np.zeros(2, np.int32),))
    assert "would each run it" in err.cause and "i = ...; then a[i] += v" in err.fix


@vyre.kernel
def maths(x: vyre.Array[f32], out: vyre.Array[f32]):
    i = vyre.global_id(0)
    out[i] = math.sqrt(x[i]) + math.exp(x[i]) - f32(math.floor(x[i])) + math.pow(x[i], 2.0)


def test_math_functions_lower_to_the_irs():
    x = np.array([0.25, 2.0, 3.5], np.float32)
    out = np.zeros(3, np.float32)
    launch(maths, 3, (x, out))
    want = np.sqrt(x) + np.exp(x) - np.floor(x) + np.power(x, np.float32(2))
    np.testing.assert_allclose(out, want, rtol=1e-6)


@vyre.func
def clamp(v, lo, hi):
    return min(max(v, lo), hi)


@vyre.func
def bump(a, i):
    a[i] += 1


@vyre.kernel
def calls(x: vyre.Array[i32], out: vyre.Array[i32]):
    i = vyre.global_id(0)
    out[i] = clamp(x[i], 0, 10) + clamp(x[i] * 2, -5, 5)
    bump(out, i)


def test_funcs_are_inlined_with_their_own_locals_and_arrays_by_reference():
    x = np.array([-3, 4, 20], np.int32)
    out = np.zeros(3, np.int32)
    launch(calls, 3, (x, out))
    assert out.tolist() == [min(max(v, 0), 10) + min(max(v * 2, -5), 5) + 1
                            for v in x.tolist()]


@vyre.kernel(workgroup=(4,))
def reduce(x: vyre.Array[u32], sums: vyre.Array[u32], total: vyre.Array[u32]):
    tile = vyre.shared(u32, 4)
    lid = vyre.local_id(0)
    tile[lid] = x[vyre.global_id(0)]
    vyre.barrier()
    if lid == 0:
        s = u32(0)
        for j in range(4):
            s += tile[j]
        sums[vyre.workgroup_id(0)] = s
        vyre.atomic_add(total, 0, s)


def test_shared_memory_barrier_and_atomics():
    x = np.arange(16, dtype=np.uint32)
    sums, total = np.zeros(4, np.uint32), np.zeros(1, np.uint32)
    launch(reduce, 16, (x, sums, total))
    assert sums.tolist() == x.reshape(4, 4).sum(axis=1).tolist() and total[0] == 120


@vyre.kernel
def tuned(x: vyre.Array[f32], *, REPEAT: vyre.Constant[i32] = 2):
    i = vyre.global_id(0)
    for _ in range(REPEAT):
        x[i] += 1.0


def test_constants_are_specialization_constants_with_the_default():
    x = np.zeros(2, np.float32)
    plan = tuned.plan(2, (x,))
    assert [c.name for c in plan.program.constants] == ["REPEAT"]
    out, = run(plan.program, plan.inputs, grid=(1,), constants={"REPEAT": 5})
    assert out.tolist() == [5.0, 5.0]
    launch(tuned, 2, (x,))
    assert x.tolist() == [2.0, 2.0]


def test_unannotated_parameters_take_the_first_arguments_types():
    @vyre.kernel
    def scale(a, x, out):
        i = vyre.global_id(0)
        out[i] = x[i] * a

    x = np.arange(3, dtype=np.float32)
    out = np.zeros(3, np.float32)
    launch(scale, 3, (2.0, x, out))
    assert out.tolist() == [0.0, 2.0, 4.0]
    xi, oi = np.arange(3, dtype=np.int32), np.zeros(3, np.int32)
    launch(scale, 3, (2, xi, oi))
    assert oi.tolist() == [0, 2, 4] and scale.compiles == 2


def test_an_argument_of_another_dtype_is_refused_not_converted():
    with pytest.raises(InvalidInputError, match="float64"):
        saxpy.program(dim=1, args=(1.0, np.zeros(1), np.zeros(1, np.float32),
                                   np.zeros(1, np.float32)))


def test_validation_findings_name_the_python_line():
    @vyre.kernel
    def divergent(x: vyre.Array[f32]):
        i = vyre.global_id(0)
        if x[i] > 0.0:
            vyre.barrier()

    with pytest.raises(ValidationError) as info:
        divergent.program(dim=1, args=(np.zeros(1, np.float32),))
    line = def_line(divergent) + 4
    assert any(f"test_kernels_lowering.py:{line}:" in f["where"]
               for f in info.value.findings)


# -- refusals: each names its line and column ------------------------------------------------

def _refusals():
    @vyre.kernel
    def a_list(x: vyre.Array[f32]):
        v = [1, 2]
        x[0] = v[0]

    @vyre.kernel
    def a_try(x: vyre.Array[f32]):
        try:  # noqa: SIM105
            x[0] = 1.0
        except Exception:
            pass

    @vyre.kernel
    def a_float_index(x: vyre.Array[f32]):
        x[1.5] = 1.0

    @vyre.kernel
    def unknown(x: vyre.Array[f32]):
        x[0] = nowhere  # noqa: F821

    @vyre.kernel
    def a_global_list(x: vyre.Array[f32]):
        x[0] = TABLE[0]

    @vyre.kernel
    def returns(x: vyre.Array[f32]):
        return x[0]

    @vyre.kernel
    def a_slice(x: vyre.Array[f32]):
        x[0] = x[1:2]

    @vyre.kernel
    def prints(x: vyre.Array[f32]):
        print(x[0])

    @vyre.kernel
    def maybe(x: vyre.Array[f32]):
        if x[0] > 0.0:
            v = 1.0
        x[1] = v

    @vyre.kernel
    def lambdas(x: vyre.Array[f32]):
        f = lambda v: v  # noqa: E731
        x[0] = f(1.0)

    @vyre.kernel
    def an_fstring(x: vyre.Array[f32]):
        s = f"{x[0]}"
        x[0] = s

    @vyre.kernel
    def with_block(x: vyre.Array[f32]):
        with open("f"):
            x[0] = 1.0

    @vyre.kernel
    def nonlocal_write(x: vyre.Array[f32]):
        global SCALE
        x[0] = 1.0

    @vyre.kernel
    def keywords(x: vyre.Array[f32]):
        x[0] = f32(vyre.global_id(axis=0))

    @vyre.kernel
    def comprehension(x: vyre.Array[f32]):
        x[0] = sum([v for v in range(3)])

    @vyre.kernel
    def deletes(x: vyre.Array[f32]):
        v = 1.0
        del v

    @vyre.kernel
    def a_dict(x: vyre.Array[f32]):
        d = {1: 2.0}
        x[0] = d[1]

    @vyre.kernel
    def float_floordiv(x: vyre.Array[f32]):
        x[0] = x[0] // 2.0

    @vyre.func
    def recurse(v):
        return recurse(v)

    @vyre.kernel
    def recursion(x: vyre.Array[f32]):
        x[0] = recurse(x[0])

    @vyre.kernel
    def assigns_param(a: f32, x: vyre.Array[f32]):
        a = 2.0
        x[0] = a

    @vyre.kernel
    def atomic_in_select(x: vyre.Array[u32]):
        x[1] = vyre.atomic_add(x, 0, 1) if x[2] > 0 else 0

    @vyre.kernel
    def dead_code(x: vyre.Array[f32]):
        for k in range(3):
            break
            x[k] = 1.0

    @vyre.kernel
    def range_past_i32(x: vyre.Array[f32]):
        for k in range(0, 10**12):
            x[0] = f32(k)

    @vyre.func
    def no_result(v):
        w = v + 1  # noqa: F841

    @vyre.kernel
    def no_value(x: vyre.Array[f32]):
        x[0] = no_result(x[0])

    # kernel, the refused line (from the def), the column, a word of the cause
    return [(a_list, 2, 13, "list"), (a_try, 2, 9, "try"), (a_float_index, 2, 11, "index"),
            (unknown, 2, 16, "unknown name"), (a_global_list, 2, 16, "list"),
            (returns, 2, 16, "return"), (a_slice, 2, 18, "slice"), (prints, 2, 9, "print"),
            (maybe, 4, 16, "before it is assigned"), (lambdas, 2, 13, "lambda"),
            (an_fstring, 2, 13, "f-string"), (with_block, 2, 9, "with"),
            (nonlocal_write, 2, 9, "global"), (keywords, 2, 35, "keyword"),
            (comprehension, 2, 20, "comprehension"), (deletes, 3, 9, "del"),
            (a_dict, 2, 13, "dict"), (float_floordiv, 2, 16, "//"),
            (recursion, None, None, "recursion"), (assigns_param, 2, 9, "parameter"),
            (atomic_in_select, 2, 16, "atomic"), (dead_code, 4, 13, "follows a break"),
            (range_past_i32, 2, 27, "not an i32"), (no_value, 2, 16, "has no value")]


@pytest.mark.parametrize("case", _refusals(), ids=lambda c: c[0].__name__)
def test_each_refusal_names_its_line_column_caret_and_fix(case):
    kernel, line, col, word = case
    args = tuple(np.zeros(3, np.uint32 if kernel.__name__ == "atomic_in_select"
                          else np.float32) if p != "a" else 1.0
                 for p in kernel.params.names)
    err = refused(kernel, args)
    assert word in err.cause and err.fix
    text = str(err)
    assert f"{err.details['file']}:{err.details['line']}:{err.details['col']}:" in text
    assert err.details["caret"].index("^") == err.details["col"] - 1
    assert err.details["source_line"] in text
    if line is not None:
        assert where(err, def_line(kernel)) == (line, col), text


@vyre.kernel
def scoped(x: vyre.Array[i32], out: vyre.Array[i32], cnt: vyre.Array[u32]):
    i = vyre.global_id(0)
    if x[i] > 0:  # noqa: SIM108 (the if statement is what is tested)
        s = 1
    else:
        s = -1
    j = 5
    for j in range(i):  # noqa: B007 (j is read after the loop)
        pass
    old = u32(0)
    for _ in range(2):
        old = vyre.atomic_add(cnt, 0, 1)
    vyre.atomic_compare_exchange(cnt, 1, 0, 7)
    out[i] = s * 100 + j + i32(old) * 0


def test_locals_live_for_the_whole_kernel_as_in_python():
    """A local assigned in both branches, a loop variable after its loop (its last value,
    or the value before when the loop ran no pass), an atomic's old value assigned in a
    loop, a compare-exchange."""
    x = np.array([3, -2, 0, 5], np.int32)
    out, cnt = np.zeros(4, np.int32), np.zeros(2, np.uint32)
    launch(scoped, 4, (x, out, cnt))
    assert out.tolist() == [100 + 5, -100 + 0, -100 + 1, 100 + 2]
    assert cnt.tolist() == [2 * 4, 7]     # exactly dim=4 invocations ran, not a workgroup
    body = scoped.program(dim=4, args=(x, out, cnt)).body
    # the launch guard, then s declared first
    assert [type(s).__name__ for s in body[:4]] == ["If", "Let", "Let", "If"]


@pytest.mark.fast
def test_a_kernel_compiled_from_a_string_under_a_real_files_name_is_refused_with_a_fix():
    """Before this commit its source was read from that file at the wrong lines: a bare
    SyntaxError (or the wrong function)."""
    text = ("import vyre_core as vyre\n\n\n\n\n@vyre.kernel\n"
            "def shadowed(x: vyre.Array[vyre.f32]):\n    x[vyre.global_id(0)] = 1.0\n")
    namespace: dict = {}
    exec(compile(text, __file__, "exec"), namespace)
    with pytest.raises(KernelSyntaxError, match="is not its definition") as info:
        namespace["shadowed"].program(dim=1, args=(np.zeros(1, np.float32),))
    assert "compile(text, '<kernels>', 'exec')" in info.value.fix


@vyre.kernel(workgroup=(1,))
def swaps(x: vyre.Array[i32]):
    i = vyre.global_id(0)
    x[0], x[1] = x[1], x[0]
    x[2], x[i + 3] = x[i + 3] + 1, x[2] + 1


def test_unpacking_into_array_elements_reads_every_value_first():
    """``x[0], x[1] = x[1], x[0]`` swaps, as in Python (it stored x[1] twice before)."""
    x = np.array([1, 2, 3, 4], np.int32)
    launch(swaps, 1, (x,))
    assert x.tolist() == [2, 1, 5, 4]


@pytest.mark.fast
def test_an_index_outside_its_axis_is_out_of_bounds_not_another_rows_element():
    """Before this commit a[r, c - 1] at c == 0 read the end of the previous row (a
    silent wrong stencil); now each axis is checked: it reads 0 and a store is dropped."""
    @vyre.kernel
    def shift(a: vyre.Array[i32, 2], out: vyre.Array[i32, 2], back: vyre.Array[i32, 2]):
        r, c = vyre.global_id(0), vyre.global_id(1)
        out[r, c] = a[r, c - 1] + a[r, c + 4]   # (c + 4 is past every column of 4)
        back[r, c - 1] = 7                       # column -1: dropped, never (r-1, 3)

    a = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    out, back = np.zeros_like(a), np.zeros_like(a)
    launch(shift, (3, 4), (a, out, back))
    want = np.zeros_like(a)
    want[:, 1:] = a[:, :-1]
    assert out.tolist() == want.tolist()
    assert back[:, 3].tolist() == [0, 0, 0] and (back[:, :3] == 7).all()
