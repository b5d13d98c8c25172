"""Any grid on any backend, and how many invocations run said plainly (issue 35):
``dim=``, the launch routing weighs, the histogram trap, bad grids and dims. The pure
rules first (fast), then real workers."""

from __future__ import annotations

import numpy as np
import pytest

from vyre_core import ir
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Capabilities
from vyre_core.driver import Driver
from vyre_core.errors import InvalidConfigError, InvalidInputError, LaunchLimitError
from vyre_core.launch import Launch, check_limits, launch_of, plan_launch
from vyre_core.limits import NO_GRID_LIMIT
from vyre_core.registry import Registry
from vyre_core.routing import Router
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy
from vyre_reference import run

u32 = ir.u32


def histogram(bins: int = 256) -> ir.Program:
    """The histogram of docs/ir.md: an output of ``bins``, an input read at global_id."""
    k = ir.Kernel(workgroup=(256,))
    data = k.read("data", u32)
    hist = k.output("hist", u32, count=bins)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < data.len):
        hist.atomic_add(data[i] % bins, 1)
    return k.build()


def row_sums(rows: int, cols: int) -> ir.Program:
    """One invocation per row of a (rows, cols) matrix: out[r, c] = the row's running sum,
    an output shaped like the matrix (inference would launch rows * cols invocations)."""
    k = ir.Kernel(workgroup=(1,))
    m = k.read("m", ir.u32)
    out = k.output("out", u32, count=rows * cols, shape=(rows, cols))
    ran = k.output("ran", u32, count=1)
    r = k.let("r", ir.global_id(0))
    acc = k.let("acc", ir.lit(0, u32))
    with k.loop("c", 0, cols) as c:
        k.assign(acc, acc + m[r * cols + c])
        out[r * cols + c] = acc
    ran.atomic_add(0, 1)
    return k.build()


def grid_stride(n_out: int) -> ir.Program:
    """A guarded grid-stride loop: it says itself how it covers its input."""
    k = ir.Kernel(workgroup=(4,))
    x = k.read("x", u32)
    out = k.output("out", u32, count=n_out)
    i = k.let("i", ir.global_id(0))
    with k.loop("j", i, x.len, step=n_out) as j:
        out[i] = out[i] + x[j]
    return k.build()


# -- the histogram trap (pure) ----------------------------------------------------------------


@pytest.mark.fast
def test_an_inferred_grid_that_leaves_an_input_unread_is_refused_with_a_dim_fix():
    """Fails on main: 256 invocations silently read 256 of 1,000,003 elements."""
    data = np.arange(1_000_003, dtype=np.uint32)
    with pytest.raises(InvalidInputError, match="999747 of them would never be read") as info:
        plan_launch(histogram(), [data], DispatchConfig())
    assert "dim=len(data)" in info.value.fix
    assert plan_launch(histogram(), [data], DispatchConfig(dim=len(data))).grid == (3907, 1, 1)


@pytest.mark.fast
def test_the_rule_catches_reads_at_the_id_and_lets_of_it_only():
    assert histogram().global_reads == frozenset({("data", 0)})
    assert grid_stride(4).global_reads == frozenset()  # a loop's variable: not caught
    assert row_sums(3, 4).global_reads == frozenset()  # an index computed from the id
    k = ir.Kernel(workgroup=(2, 2))
    a = k.read("a", u32)
    fixed = k.read("fixed", u32, count=8)
    out = k.output("out", u32, count=4)
    y = k.let("y", ir.global_id(1).cast(ir.i32))
    out[0] = a[y.cast(u32)] + fixed[ir.global_id(0)]
    assert k.build().global_reads == frozenset({("a", 1)})  # (fixed has a declared count)


@pytest.mark.fast
def test_an_input_also_read_at_an_index_computed_from_the_id_is_not_refused():
    """Failed before this commit (a hostile test): a pairwise sum of halves reads x[i] and
    x[i + o.len], so it covers all of x with half as many invocations: it was refused."""
    k = ir.Kernel(workgroup=(4,))
    x = k.read("x", u32)
    o = k.output("o", u32, count=4)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < o.len):
        o[i] = x[i] + x[i + o.len]
    halves = k.build()
    assert halves.global_reads == frozenset()
    data = np.arange(8, dtype=np.uint32)
    launch = plan_launch(halves, [data], DispatchConfig())
    assert launch.grid == (1, 1, 1)
    assert run(halves, [data], grid=launch.grid)[0].tolist() == [4, 6, 8, 10]


@pytest.mark.fast
def test_a_grid_stride_loop_and_an_explicit_launch_are_not_refused():
    x = np.arange(100, dtype=np.uint32)
    assert plan_launch(grid_stride(4), [x], DispatchConfig()).grid == (1, 1, 1)
    for config in (DispatchConfig(grid_override=(1,)), DispatchConfig(dispatch_elements=4),
                   DispatchConfig(dim=256)):
        plan_launch(histogram(), [np.zeros(1000, np.uint32)], config)


# -- dim (pure) ---------------------------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize("dim", [0, -1, (4, 0), (1, 2, 3, 4), (), 2**32 + 1, 1.5, True,
                                 "4"])
def test_a_dim_that_is_no_invocation_count_is_refused_at_construction(dim):
    with pytest.raises(InvalidConfigError, match="dim=") as info:
        DispatchConfig(dim=dim)
    assert "dim=len(x)" in info.value.fix


@pytest.mark.fast
@pytest.mark.parametrize("other", [{"grid_override": (4,)}, {"dispatch_elements": 4}])
def test_dim_with_another_answer_to_how_many_invocations_is_refused(other):
    with pytest.raises(InvalidConfigError, match="two answers") as info:
        DispatchConfig(dim=4, **other)
    assert "Pass only dim=" in info.value.fix


@pytest.mark.fast
def test_dim_is_one_invocation_per_row():
    """Fails on main (no dim): the shaped output makes inference launch rows * cols."""
    m = np.ones(6 * 128, np.uint32)
    assert plan_launch(row_sums(6, 128), [m], DispatchConfig()).grid == (128, 6, 1)
    assert plan_launch(row_sums(6, 128), [m], DispatchConfig(dim=6)).grid == (6, 1, 1)


@pytest.mark.fast
def test_a_multi_axis_dim_past_the_output_shape_is_refused_as_swapped_axes():
    k = ir.Kernel(workgroup=(4, 4))
    out = k.output("out", u32, count=24, shape=(4, 6))  # 4 rows, 6 columns: x extent 6
    out[ir.global_id(1) * 6 + ir.global_id(0)] = 1
    program = k.build()
    assert plan_launch(program, [], DispatchConfig(dim=(6, 4))).grid == (2, 1, 1)
    assert plan_launch(program, [], DispatchConfig(dim=(3, 2))).grid == (1, 1, 1)  # a part
    with pytest.raises(InvalidConfigError, match=r"past the 4 of output 'out' of shape") as e:
        plan_launch(program, [], DispatchConfig(dim=(4, 6)))
    assert "dim=(6, 4)" in e.value.fix


@pytest.mark.fast
@pytest.mark.parametrize("config", [DispatchConfig(grid_override=(2**31, 1, 1)),
                                    DispatchConfig(grid_override=(1, 2**30 + 1, 1))])
def test_a_launch_past_what_a_u32_global_id_numbers_is_refused(config):
    k = ir.Kernel(workgroup=(4, 4))
    out = k.output("out", u32, count=1)
    out[0] = 1
    with pytest.raises(LaunchLimitError, match="a u32 global id") as info:
        plan_launch(k.build(), [], config)
    assert "split the rest" in info.value.fix


# -- limits and routing (pure) ----------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_the_cpu_backends_claim_no_grid_limit(backend):
    """Fails on main: saxpy.program(20_000_000) has 78,125 workgroups, and cpu and the
    reference refused it (E1104, the limit is 65535) after routing chose them."""
    claims = Registry.discover(backend).get(backend).claims
    assert claims.max_workgroups_per_dimension == NO_GRID_LIMIT
    program = saxpy(20_000_000)
    check_limits(program, (78125, 1, 1), {"x": 20_000_000, "y": 20_000_000, "a": 1,
                                          "out": 20_000_000}, claims, backend)
    check_limits(program, (70000, 70000, 70000), {"out": 1}, claims, backend)


class _Reg:
    def __init__(self, name: str, precedence: int) -> None:
        self.id, self.precedence, self.is_reference = name, precedence, False
        self.sort_key = (precedence, name)


def _router() -> Router:
    small = Capabilities(max_workgroup_size=(256, 1, 1), max_invocations_per_workgroup=256,
                         max_workgroups_per_dimension=100, max_storage_buffer_bytes=1 << 20,
                         supported_ops=frozenset(ir.ALL_OPS))
    large = Capabilities(max_workgroup_size=(256, 1, 1), max_invocations_per_workgroup=256,
                         max_workgroups_per_dimension=NO_GRID_LIMIT,
                         max_storage_buffer_bytes=1 << 30, supported_ops=frozenset(ir.ALL_OPS))
    return Router(lambda: [(_Reg("small", 1), small), (_Reg("large", 2), large)])


@pytest.mark.fast
def test_routing_weighs_the_launch_and_passes_over_a_backend_that_would_refuse_it():
    """Fails on main: routing weighed only the program, and chose a backend that then
    refused the launch (E1104)."""
    router = _router()
    program = saxpy(101 * 256)
    assert router.route(program).backend == "small"
    launch, sent = launch_of(program, DispatchConfig(), saxpy_inputs(101 * 256))
    assert isinstance(launch, Launch) and launch.grid == (101, 1, 1)
    assert sent.grid_override == (101, 1, 1) and sent.dim is None
    assert router.route(launch).backend == "large"
    small = next(e for e in router.explain(launch) if e.backend == "small")
    assert small.reasons == ("the launch: grid axis x has 101 workgroups, the limit is 100",)
    fits, _ = launch_of(program, DispatchConfig(dim=100 * 256), saxpy_inputs(101 * 256))
    assert router.route(fits).backend == "small"  # (the cache key holds the grid)
    big, _ = launch_of(saxpy(16), DispatchConfig(dim=16), saxpy_inputs(1 << 19))
    assert router.route(big).backend == "large"  # a 2 MiB input past small's 1 MiB


@pytest.mark.fast
def test_a_launch_is_weighed_without_inputs_when_its_grid_is_known():
    program = saxpy(20_000_000)
    launch, _ = launch_of(program, DispatchConfig())  # (the output's count says it)
    assert isinstance(launch, Launch) and launch.grid == (78125, 1, 1)
    k = ir.Kernel(workgroup=(4,))
    x = k.read_write("x", u32)
    x[ir.global_id(0)] = 1
    unsized = k.build()
    assert launch_of(unsized, DispatchConfig())[0] is not None
    assert not isinstance(launch_of(unsized, DispatchConfig())[0], Launch)
    assert launch_of(unsized, DispatchConfig(dim=8))[0].grid == (2, 1, 1)


# -- real workers -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def drv():
    with Driver(Registry.discover("reference,cpu")) as driver:
        yield driver


@pytest.mark.processes
def test_an_unknown_dispatch_keyword_gets_a_fix_naming_dim(drv):
    """Fails on main: a bare TypeError."""
    program = histogram()
    for call in (lambda: drv.dispatch(program, [np.zeros(4, np.uint32)], grid=(4,)),
                 lambda: drv.dispatch_async(program, [np.zeros(4, np.uint32)], grid=(4,)),
                 lambda: drv.dispatch_on("reference", program, [np.zeros(4, np.uint32)],
                                         grid=(4,))):
        with pytest.raises(InvalidConfigError, match="unknown keyword argument grid=") as e:
            call()
        assert "dim=" in e.value.fix and "DispatchConfig(grid_override=" in e.value.fix


@pytest.mark.processes
@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_a_grid_past_65535_workgroups_runs_on_the_cpu_backends(drv, backend):
    """Fails on main: E1104 'grid axis x has 70000 workgroups, the limit is 65535'."""
    n = 70_000
    program = saxpy(n, workgroup=1)
    data = saxpy_inputs(n)
    out, = drv.dispatch(program, data, backend=backend)
    assert out.tobytes() == (np.float32(2.5) * data[0] + data[1]).tobytes()
    chosen = next(e for e in drv.explain(program, inputs=data) if e.chosen)
    assert drv.dispatch(program, data)[0].tobytes() == out.tobytes(), chosen


@pytest.mark.processes
def test_the_histogram_of_a_million_inputs_is_refused_then_counts_every_one_with_dim(drv):
    """Fails on main: sum(hist) == 256, no warning."""
    data = np.arange(1_000_003, dtype=np.uint32)
    with pytest.raises(InvalidInputError, match="would never be read"):
        drv.dispatch(histogram(), [data])
    hist, = drv.dispatch(histogram(), [data], dim=len(data))
    assert hist.sum() == len(data)
    assert hist.tobytes() == np.bincount(data % 256, minlength=256).astype(np.uint32).tobytes()
    pending = drv.dispatch_async(histogram(), [data], dim=len(data))
    assert pending.result(60)[0].tobytes() == hist.tobytes()


@pytest.mark.processes
def test_one_invocation_per_row_with_dim(drv):
    rows, cols = 5, 128
    m = np.arange(rows * cols, dtype=np.uint32)
    out, ran = drv.dispatch(row_sums(rows, cols), [m], dim=rows)
    assert ran.tolist() == [rows]
    assert out.tobytes() == np.cumsum(m.reshape(rows, cols), axis=1).astype(
        np.uint32).tobytes()
    pipeline = drv.compile(row_sums(rows, cols), backend="cpu")
    again, ran = pipeline.dispatch([m], dim=rows)
    assert ran.tolist() == [rows] and again.tobytes() == out.tobytes()


@pytest.mark.processes
def test_a_bad_launch_is_refused_before_any_worker_starts():
    with Driver(Registry.discover("reference")) as fresh:
        with pytest.raises(LaunchLimitError, match="u32 global id"):
            fresh.dispatch(histogram(), [np.zeros(4, np.uint32)],
                           config=DispatchConfig(grid_override=(2**24 + 1,)))
        with pytest.raises(InvalidInputError, match="would never be read"):
            fresh.dispatch(histogram(), [np.zeros(1000, np.uint32)])
        assert fresh.pools.existing("reference") is None


@pytest.mark.fast
def test_every_dim_a_u32_axis_numbers_fits_a_backend_without_a_grid_limit():
    """Failed before this commit (a hostile test): dim=2**32 over workgroups of one is
    2**32 workgroups, one more than the 'no limit' the cpu backends claimed."""
    k = ir.Kernel(workgroup=(1,))
    k.output("out", u32, count=1)[0] = u32(1)
    launch, _ = launch_of(k.build(), DispatchConfig(dim=2**32))
    assert launch.grid == (2**32, 1, 1)
    assert _router().route(launch).backend == "large"


@pytest.mark.fast
@pytest.mark.parametrize("dim", [1.0, "64", (2.0,), [0]])
def test_a_step_dim_that_is_not_invocation_counts_is_refused_with_a_fix(dim):
    """dim=1.0 on a sequence step raised a bare TypeError before this commit."""
    from vyre_core import SequenceBuilder
    from vyre_core.errors import InvalidSequenceError
    b = SequenceBuilder()
    b.transient("out", u32, 16)
    k = ir.Kernel(workgroup=(16,))
    k.output("out", u32, count=16)[ir.global_id(0)] = u32(1)
    with pytest.raises(InvalidSequenceError, match="invocation counts") as info:
        b.step(k.build(), dim=dim)
    assert "dim=n" in info.value.fix
