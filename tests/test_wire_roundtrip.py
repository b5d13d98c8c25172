"""The canonical wire form: round trips, canonical bytes, header and fingerprints."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import blake3
import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from ir_strategies import SPECIAL_BITS, every_node_program, programs

from vyre_core import ir
from vyre_core.errors import InvalidProgramError
from vyre_core.ir import (
    Access,
    Assign,
    Atomic,
    AtomicOp,
    Barrier,
    Binary,
    BinOp,
    Bitcast,
    Block,
    Buffer,
    BufLen,
    Cast,
    DType,
    Expr,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Program,
    Return,
    Stmt,
    Store,
    Unary,
    UnOp,
    Var,
    wire,
)
from vyre_core.ir.nodes import walk
from vyre_examples.saxpy import program as saxpy

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

HEADER = b"VYIR" + bytes([wire.PLAIN_FORMAT_VERSION])


def assert_round_trips(p: Program) -> None:
    data = p.to_wire()
    back = Program.from_wire(data)
    assert back == p
    assert back.to_wire() == data
    assert back.fingerprint() == p.fingerprint()


# -- random programs -------------------------------------------------------------------

@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_random_program_round_trips_to_equal_program_and_identical_bytes(p):
    assert_round_trips(p)


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_decoding_accepts_bytearray_and_memoryview_of_the_same_bytes(p):
    data = p.to_wire()
    assert Program.from_wire(bytearray(data)) == p
    assert Program.from_wire(memoryview(data)) == p


# -- hand-built programs ---------------------------------------------------------------

def _reduction() -> Program:
    k = ir.Kernel(workgroup=(8, 4))
    src = k.read("src", ir.u32)
    total = k.read_write("total", ir.u32, count=1)
    scratch = k.workgroup_buffer("scratch", ir.u32, 32)
    lid = k.let("lid", ir.local_id(0) + ir.local_id(1) * 8)
    scratch[lid] = src[ir.global_id(0)]
    k.barrier()
    with k.loop("s", 0, 5):
        k.barrier()
    with k.if_(lid == 0):
        acc = k.let("acc", 0)
        with k.loop("j", 0, 32):
            k.assign(acc, acc + scratch[ir.global_id(1)])
        total.atomic_add(0, acc)
    with k.else_():
        k.ret()
    return k.build()


HAND_BUILT = {
    "empty": Program((), (1,), ()),
    "saxpy": saxpy(1000),
    "reduction": _reduction(),
    "every_node": every_node_program(),
    "only_return": Program((), (64, 1, 1), (Return(),)),
    "nested_blocks": Program((), (1, 2, 3), (Block((Block((Block(()),)),)),)),
    "max_buffers": Program(tuple(Buffer(f"b{i}", i, DType.U32, Access.READ, None)
                                 for i in range(wire.MAX_BUFFERS)), (1,), ()),
    "extreme_ints": Program((Buffer("b" * wire.MAX_NAME_LEN, 2**32 - 1, DType.F64,
                                    Access.OUTPUT, 2**32 - 1),),
                            (2**32 - 1, 0, 1), ()),
    "unicode_names": Program((Buffer("é" * 64, 0, DType.U32, Access.READ, None),), (1,),
                             (Let("𝔵" * 64, Var("変数")),)),
    "cmpxchg": Program((Buffer("b", 0, DType.U32, Access.READ_WRITE, 4),), (1,),
                       (Let("old", Atomic(AtomicOp.COMPARE_EXCHANGE, "b", Lit(DType.U32, 0),
                                          Lit(DType.U32, 7), Lit(DType.U32, 3))),)),
}


@pytest.mark.parametrize("name", sorted(HAND_BUILT))
def test_hand_built_program_round_trips(name):
    assert_round_trips(HAND_BUILT[name])


def _node_class_names(base: type) -> set[str]:
    # Names, not classes: @dataclass(slots=True) replaces each class, and the replaced
    # originals linger in __subclasses__() until garbage-collected.
    return {cls.__name__ for cls in base.__subclasses__()}


def test_hand_built_programs_cover_every_node_op_dtype_access_and_id_kind():
    nodes = [n for p in HAND_BUILT.values() for n in walk(p.body)]
    assert {type(n).__name__ for n in nodes} == _node_class_names(Expr) | _node_class_names(Stmt)
    assert {n.op for n in nodes if isinstance(n, Binary)} == set(BinOp)
    assert {n.op for n in nodes if isinstance(n, Unary)} == set(UnOp)
    assert {n.op for n in nodes if isinstance(n, Atomic)} == set(AtomicOp)
    assert {n.kind for n in nodes if isinstance(n, InvocationId)} == set(IdKind)
    assert {n.dtype for n in nodes if isinstance(n, Lit)} == set(DType)
    assert {n.dtype for n in nodes if isinstance(n, Cast)} == set(DType)
    assert {n.dtype for n in nodes if isinstance(n, Bitcast)} == set(DType)
    bufs = [b for p in HAND_BUILT.values() for b in p.buffers]
    assert {b.access for b in bufs} == set(Access)
    assert {b.dtype for b in bufs} == set(DType)
    assert any(isinstance(n, Atomic) and n.comparand is not None for n in nodes)
    assert any(isinstance(n, Atomic) and n.comparand is None for n in nodes)


@pytest.mark.parametrize("dtype", list(DType))
def test_every_special_literal_bit_pattern_survives_exactly(dtype):
    p = Program((), (1,), tuple(Let(f"v{i}", Lit(dtype, b))
                                for i, b in enumerate(SPECIAL_BITS[dtype])))
    back = Program.from_wire(p.to_wire())
    assert [s.value.bits for s in back.body] == SPECIAL_BITS[dtype]


def test_program_at_exactly_max_depth_round_trips():
    # depth 1 is a top-level statement; every nested node adds one level.
    stmt: Stmt = Return()
    for _ in range(wire.MAX_DEPTH - 1):
        stmt = Block((stmt,))
    assert_round_trips(Program((), (1,), (stmt,)))
    expr: Expr = Lit(DType.I32, 5)
    for _ in range(wire.MAX_DEPTH - 2):
        expr = Unary(UnOp.NEG, expr)
    assert_round_trips(Program((), (1,), (Let("x", expr),)))


# -- canonical bytes: equal IR, equal bytes --------------------------------------------

def _saxpy_direct() -> Program:
    gid, i = InvocationId(IdKind.GLOBAL, 0), Var("i")
    return Program(
        (Buffer("x", 0, DType.F32, Access.READ, None),
         Buffer("y", 1, DType.F32, Access.READ, None),
         Buffer("a", 2, DType.F32, Access.UNIFORM, 1),
         Buffer("out", 3, DType.F32, Access.OUTPUT, 1000)),
        [256],
        [Let("i", gid),
         If(Binary(BinOp.LT, i, BufLen("x")),
            (Store("out", i, Binary(BinOp.ADD,
                                    Binary(BinOp.MUL, Load("a", Lit(DType.U32, 0)),
                                           Load("x", i)),
                                    Load("y", i))),))],
    )


def test_builder_and_direct_node_construction_give_equal_bytes_and_fingerprint():
    built, direct = saxpy(1000), _saxpy_direct()
    assert built == direct
    assert built.to_wire() == direct.to_wire()
    assert built.fingerprint() == direct.fingerprint()


def _store_plus_one(one) -> Program:
    k = ir.Kernel()
    out = k.output("out", ir.u32, 16)
    gid = ir.global_id()
    out[gid] = gid + one
    return k.build()


@pytest.mark.parametrize("one", [1, np.uint32(1), np.int64(1), ir.u32(1), ir.lit(1)],
                         ids=["int", "np.uint32", "np.int64", "ir.u32", "ir.lit"])
def test_literal_spelling_does_not_change_bytes_or_fingerprint(one):
    ref = _store_plus_one(1)
    p = _store_plus_one(one)
    assert p.to_wire() == ref.to_wire()
    assert p.fingerprint() == ref.fingerprint()


def test_float_literal_spellings_give_equal_bytes():
    spellings = [Lit.of(DType.F32, 1.5), Lit.of(DType.F32, np.float32(1.5)),
                 Lit.of(DType.F32, np.float64(1.5)), ir.f32(1.5).node, ir.lit(1.5).node,
                 Lit(DType.F32, 0x3FC00000)]
    wires = {Program((), (1,), (Let("v", s),)).to_wire() for s in spellings}
    assert len(wires) == 1


def test_workgroup_spelled_with_fewer_axes_or_as_list_gives_equal_bytes():
    a = Program((), (64,), ())
    b = Program((), [64, 1, 1], ())
    c = Program((), (64, 1), ())
    assert a == b == c
    assert a.to_wire() == b.to_wire() == c.to_wire()


def test_negative_zero_and_positive_zero_literals_give_different_bytes():
    pos = Program((), (1,), (Let("z", ir.f32(0.0).node),))
    neg = Program((), (1,), (Let("z", ir.f32(-0.0).node),))
    assert pos.body[0].value.bits == 0
    assert neg.body[0].value.bits == 0x80000000
    assert pos != neg
    assert pos.to_wire() != neg.to_wire()
    assert pos.fingerprint() != neg.fingerprint()
    assert Program.from_wire(neg.to_wire()).body[0].value.bits == 0x80000000


def test_nan_payloads_are_distinct_and_each_round_trips():
    a = Program((), (1,), (Let("n", Lit(DType.F32, 0x7FC00000)),))
    b = Program((), (1,), (Let("n", Lit(DType.F32, 0x7FC00001)),))
    assert a.to_wire() != b.to_wire()
    assert Program.from_wire(a.to_wire()) == a
    assert Program.from_wire(b.to_wire()) == b


def test_different_ir_gives_different_bytes():
    variants = [
        Program((), (1,), (Let("v", Lit(DType.U32, 1)),)),
        Program((), (1,), (Let("v", Lit(DType.I32, 1)),)),
        Program((), (1,), (Let("w", Lit(DType.U32, 1)),)),
        Program((), (1,), (Assign("v", Lit(DType.U32, 1)),)),
        Program((), (2,), (Let("v", Lit(DType.U32, 1)),)),
        Program((), (1,), (Let("v", Lit(DType.U32, 1)), Return())),
        Program((), (1,), (If(Lit(DType.BOOL, 1), (Return(),), ()),)),
        Program((), (1,), (If(Lit(DType.BOOL, 1), (), (Return(),)),)),
    ]
    assert len({p.to_wire() for p in variants}) == len(variants)
    assert len({p.fingerprint() for p in variants}) == len(variants)


def test_non_canonical_msgpack_spelling_decodes_to_the_canonical_program():
    canonical = Program((), (64,), (Return(),))
    # Same structure, but every integer spelled as a 4-byte uint32 (0xce) instead of a
    # fixint: the decoded program re-encodes to the canonical bytes.
    def u32(n: int) -> bytes:
        return b"\xce" + n.to_bytes(4, "big")
    body = b"\x93" + b"\x90" + b"\x93" + u32(64) + u32(1) + u32(1) + b"\x91\x91" + u32(69)
    p = Program.from_wire(HEADER + body)
    assert p == canonical
    assert p.to_wire() == canonical.to_wire()
    assert p.fingerprint() == canonical.fingerprint()


# -- header and fingerprint -------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(HAND_BUILT))
def test_wire_bytes_start_with_magic_and_format_version(name):
    program = HAND_BUILT[name]
    data = program.to_wire()
    assert data[:4] == b"VYIR"
    # version 1, what it always was, unless the program declares constants
    assert data[4] == (wire.FORMAT_VERSION if program.constants else wire.PLAIN_FORMAT_VERSION)
    assert (wire.PLAIN_FORMAT_VERSION, wire.FORMAT_VERSION) == (1, 2)


@pytest.mark.parametrize("name", sorted(HAND_BUILT))
def test_fingerprint_is_blake3_hex_of_wire_bytes(name):
    p = HAND_BUILT[name]
    assert p.fingerprint() == blake3.blake3(p.to_wire()).hexdigest()
    assert len(p.fingerprint()) == 64
    int(p.fingerprint(), 16)


def test_golden_bytes_of_a_small_program_never_change():
    # Tags are append-only (wire.py): a change here breaks every stored fingerprint.
    p = Program(
        (Buffer("o", 0, DType.I32, Access.OUTPUT, 4),),
        (2,),
        (Let("v", Binary(BinOp.SHL, InvocationId(IdKind.LOCAL, 1), Lit(DType.U32, 3))),
         Store("o", Lit(DType.U32, 0), Cast(DType.I32, Var("v"))),
         Loop("i", Lit(DType.U32, 0), BufLen("o"), (Barrier(),)),
         If(Lit(DType.BOOL, 1), (Return(),), ())),
    )
    expected = HEADER + msgpack.packb([
        [["o", 0, 1, 2, 4]],
        [2, 1, 1],
        [[64, "v", [6, 10, [5, 1, 1], [1, 0, 3]]],
         [66, "o", [1, 0, 0], [9, 1, [2, "v"]]],
         [68, "i", [1, 0, 0], [4, "o"], [[70]]],
         [67, [1, 3, 1], [[69]], []]],
    ])
    assert p.to_wire() == expected
    assert p.to_wire().hex() == (
        "5659495201939195a16f000102049302010194"
        "9340a17694060a93050101930100039442a16f93010000"
        "930901"
        "9202a176"
        "9544a169930100009204a16f"
        "91914694439301030191914590"
    )


_FINGERPRINT_SCRIPT = textwrap.dedent("""
    from vyre_core import ir

    def build():
        k = ir.Kernel(workgroup=(32, 2))
        names = {"zeta", "alpha", "mid", "beta"}  # set order depends on PYTHONHASHSEED
        bufs = {n: k.read_write(n, ir.u32, count=8) for n in sorted(names)}
        lid = k.let("lid", ir.local_id(0))
        for n in sorted(names):
            bufs[n][lid] = bufs[n][lid] + ir.popcount(lid)
        with k.loop("i", 0, 4):
            k.barrier()
        v = k.let("f", ir.f32(-0.0) + ir.f32(float("nan")))
        with k.if_(v != v):
            bufs["alpha"].atomic_add(0, 1)
        return k.build()
""")


def _fingerprint_in_subprocess(hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    code = _FINGERPRINT_SCRIPT + "\nprint(build().fingerprint())\n"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.processes
def test_fingerprint_is_stable_across_processes_with_different_hash_seeds():
    namespace: dict = {}
    exec(_FINGERPRINT_SCRIPT, namespace)
    here = namespace["build"]().fingerprint()
    seeds = {"1", "2718281"}
    seeds.discard(os.environ.get("PYTHONHASHSEED"))
    for seed in sorted(seeds):
        assert _fingerprint_in_subprocess(seed) == here


# -- depth limit when encoding ----------------------------------------------------------

def test_encoding_statements_nested_deeper_than_max_depth_raises_invalid_program_error():
    stmt: Stmt = Return()
    for _ in range(10_000):
        stmt = Block((stmt,))
    p = Program((), (1,), (stmt,))
    with pytest.raises(InvalidProgramError, match="Fix:"):
        p.to_wire()
    with pytest.raises(InvalidProgramError, match="Fix:"):
        p.fingerprint()


def test_encoding_expressions_nested_deeper_than_max_depth_raises_invalid_program_error():
    expr: Expr = Lit(DType.I32, 1)
    for _ in range(10_000):
        expr = Unary(UnOp.NEG, expr)
    p = Program((), (1,), (Let("x", expr),))
    with pytest.raises(InvalidProgramError) as info:
        p.to_wire()
    assert "Fix:" in str(info.value)
    assert str(wire.MAX_DEPTH) in str(info.value)


def test_encoding_one_level_past_max_depth_raises_invalid_program_error():
    stmt: Stmt = Return()
    for _ in range(wire.MAX_DEPTH):
        stmt = Block((stmt,))
    with pytest.raises(InvalidProgramError, match="Fix:"):
        Program((), (1,), (stmt,)).to_wire()


def test_validating_a_too_deep_program_raises_invalid_program_error_not_recursion_error():
    expr: Expr = Lit(DType.I32, 1)
    for _ in range(5_000):
        expr = Unary(UnOp.NEG, expr)
    p = Program((), (1,), (Let("x", expr),))
    with pytest.raises(InvalidProgramError, match="Fix:"):
        p.validate()


@pytest.mark.parametrize("node", [
    Let("x", Lit("u32", 1)),                                    # dtype not a DType
    Let("x", Binary("add", Lit(DType.U32, 1), Lit(DType.U32, 1))),  # op not a BinOp
    Let("x", InvocationId("global", 0)),                        # kind not an IdKind
    Let("x", Lit(DType.U32, 2**70)),                            # bits beyond any msgpack int
    Let("x", Lit(DType.U32, np.uint32(1))),                     # bits not a Python int
    Let("x", 3),                                                # not an expression
    Lit(DType.U32, 1),                                          # not a statement
], ids=["str-dtype", "str-binop", "str-id-kind", "bits-2**70", "numpy-bits", "int-expr",
        "expr-as-stmt"])
def test_encoding_a_malformed_node_raises_invalid_program_error(node):
    p = Program((), (1,), (node,))
    with pytest.raises(InvalidProgramError, match="Fix:"):
        p.to_wire()
    with pytest.raises(InvalidProgramError, match="Fix:"):
        p.validate()


@pytest.mark.parametrize("buffer", [
    Buffer("b", 0, "u32", Access.READ, None),
    Buffer("b", 0, DType.U32, "read", None),
    Buffer("b", np.int64(0), DType.U32, Access.READ, None),
    Buffer("b", 0, DType.U32, Access.OUTPUT, np.int64(4)),
], ids=["str-dtype", "str-access", "numpy-binding", "numpy-count"])
def test_encoding_a_malformed_buffer_raises_invalid_program_error(buffer):
    with pytest.raises(InvalidProgramError, match="Fix:"):
        Program((buffer,), (1,), ()).to_wire()


# -- structural limits the validator must agree with -----------------------------------

@pytest.mark.parametrize(("program", "code"), [
    (Program((Buffer("b", 0, DType.U32, Access.READ, -1),), (1,), ()), "V014"),
    (Program((Buffer("b", 2**40, DType.U32, Access.READ, None),), (1,), ()), "V024"),
    (Program((), (2**40,), ()), "V013"),
], ids=["negative-count", "binding-2**40", "workgroup-axis-2**40"])
def test_a_program_whose_bytes_would_not_decode_is_refused_by_the_validator(program, code):
    """Whatever validates clean must round-trip; these cannot, so the validator says why."""
    assert code in {f.code for f in program.validate()}


def test_a_workgroup_of_more_than_three_axes_is_refused_at_construction():
    with pytest.raises(InvalidProgramError, match="Fix: Pass a workgroup size"):
        Program((), (1, 1, 1, 1), ())
