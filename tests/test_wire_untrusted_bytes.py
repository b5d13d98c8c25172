"""``Program.from_wire`` on untrusted bytes: every malformation raises InvalidProgramError
(with a Fix line), never KeyError/IndexError/RecursionError/ValueError/TypeError/
MemoryError, and quickly."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import textwrap

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ir_strategies import every_node_program, programs

from vyre_core import ir
from vyre_core.errors import InvalidProgramError, VyreError
from vyre_core.ir import AtomicOp, BinOp, Program, UnOp, wire
from vyre_core.ir.dtypes import DType
from vyre_core.ir.wire import (
    E_ATOMIC,
    E_BIN,
    E_BITCAST,
    E_BUFLEN,
    E_CAST,
    E_FMA,
    E_ID,
    E_LIT,
    E_LOAD,
    E_SELECT,
    E_TABLE,
    E_UN,
    E_VAR,
    S_ASSIGN,
    S_BARRIER,
    S_BLOCK,
    S_IF,
    S_LET,
    S_LOOP,
    S_RETURN,
    S_STORE,
)

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

HEADER = wire.MAGIC + bytes([wire.PLAIN_FORMAT_VERSION])


def packed(obj) -> bytes:
    return HEADER + msgpack.packb(obj, use_bin_type=True)


OUT = ["o", 0, 0, 2, 4]  # buffer "o": u32, output, count 4
LIT = [E_LIT, 0, 1]      # u32 literal 1


def prog(*stmts, buffers=(OUT,), workgroup=(1, 1, 1)) -> list:
    return [[list(b) for b in buffers], list(workgroup), list(stmts)]


def with_stmt(stmt) -> bytes:
    return packed(prog(stmt))


def with_expr(expr) -> bytes:
    return with_stmt([S_LET, "x", expr])


def assert_rejected(data) -> InvalidProgramError:
    """``from_wire(data)`` raises InvalidProgramError whose message carries a Fix line."""
    try:
        Program.from_wire(data)
    except InvalidProgramError as exc:
        assert "Fix:" in str(exc)
        return exc
    except Exception as exc:
        pytest.fail(f"raised {type(exc).__name__} instead of InvalidProgramError: "
                    f"{str(exc)[:200]}")
    pytest.fail("malformed bytes were accepted")


# -- valid templates: each corrupted case below differs from one of these ---------------

STMT_TEMPLATES = {
    S_LET: [S_LET, "x", LIT],
    S_ASSIGN: [S_ASSIGN, "x", LIT],
    S_STORE: [S_STORE, "o", LIT, LIT],
    S_IF: [S_IF, [E_LIT, 3, 1], [[S_RETURN]], [[S_BARRIER]]],
    S_LOOP: [S_LOOP, "i", [E_LIT, 0, 0], [E_LIT, 0, 4], [[S_BARRIER]]],
    S_RETURN: [S_RETURN],
    S_BARRIER: [S_BARRIER],
    S_BLOCK: [S_BLOCK, [[S_RETURN]]],
}
EXPR_TEMPLATES = {
    E_LIT: LIT,
    E_VAR: [E_VAR, "v"],
    E_LOAD: [E_LOAD, "o", LIT],
    E_BUFLEN: [E_BUFLEN, "o"],
    E_ID: [E_ID, 0, 2],
    E_BIN: [E_BIN, 0, LIT, LIT],
    E_UN: [E_UN, 0, LIT],
    E_SELECT: [E_SELECT, [E_LIT, 3, 0], LIT, LIT],
    E_CAST: [E_CAST, 2, LIT],
    E_BITCAST: [E_BITCAST, 0, [E_LIT, 2, 0x7FC00001]],
    E_FMA: [E_FMA, LIT, LIT, LIT],
    E_TABLE: [E_TABLE, 10, [0, 2**64 - 1], LIT],
    E_ATOMIC: [E_ATOMIC, 8, "o", LIT, LIT, LIT],
}

VALID = {
    "base": packed(prog()),
    **{f"stmt-{t}": with_stmt(s) for t, s in STMT_TEMPLATES.items()},
    **{f"expr-{t}": with_expr(e) for t, e in EXPR_TEMPLATES.items()},
    "atomic-no-comparand": with_expr([E_ATOMIC, 0, "o", LIT, LIT, None]),
    "f64-max-bits": with_expr([E_LIT, 5, 2**64 - 1]),
    "bool-true": with_expr([E_LIT, 3, 1]),
    "64-buffers": packed(prog(buffers=[[f"b{i}", i, 0, 0, None] for i in range(64)])),
    "64-char-name": packed(prog(buffers=[["n" * 64, 2**32 - 1, 5, 4, 2**32 - 1]])),
    "max-axis": packed(prog(workgroup=(2**32 - 1, 0, 1))),
    "max-depth-blocks": None,  # filled below
}


def nested_blocks_bytes(levels: int) -> bytes:
    """A program whose body is ``levels`` Blocks nested inside each other around a Return,
    encoded by hand (msgpack.packb refuses to nest this deep)."""
    block_open = b"\x92" + bytes([S_BLOCK]) + b"\x91"   # [S_BLOCK, [ ... ]]
    return (HEADER + b"\x93\x90\x93\x01\x01\x01\x91" + block_open * levels
            + b"\x91" + bytes([S_RETURN]))


def nested_unary_bytes(levels: int) -> bytes:
    """``let x = -(-(...(-1)))`` with ``levels`` negations, encoded by hand."""
    neg = b"\x93" + bytes([E_UN, list(UnOp).index(UnOp.NEG)])
    lit = b"\x93" + bytes([E_LIT, 1, 1])
    return (HEADER + b"\x93\x90\x93\x01\x01\x01\x91" + b"\x93" + bytes([S_LET]) + b"\xa1x"
            + neg * levels + lit)


VALID["max-depth-blocks"] = nested_blocks_bytes(wire.MAX_DEPTH - 1)
VALID["max-depth-unary"] = nested_unary_bytes(wire.MAX_DEPTH - 2)


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_templates_decode(name):
    p = Program.from_wire(VALID[name])
    assert Program.from_wire(p.to_wire()) == p


# -- the adversarial corpus -------------------------------------------------------------

# Values that are wrong for an integer field. msgpack has no integers beyond 64 bits, so
# 2**64-1 and -2**63 are the "huge" ints the wire can carry.
BAD_INTS = {"str": "1", "negative": -1, "float": 1.0, "true": True, "false": False,
            "uint64-max": 2**64 - 1, "int64-min": -(2**63), "array": [1], "nil": None}
BAD_NAMES = {"empty": "", "65-chars": "n" * 65, "int": 5, "nil": None, "array": ["x"],
             "true": True, "float": 1.5}


def _int_fields() -> dict[str, object]:
    """(field, builder) for every integer field of the wire form: builder(v) -> bytes."""
    return {
        "binding": lambda v: packed(prog(buffers=[["o", v, 0, 2, 4]])),
        "buffer-dtype": lambda v: packed(prog(buffers=[["o", 0, v, 2, 4]])),
        "buffer-access": lambda v: packed(prog(buffers=[["o", 0, 0, v, 4]])),
        "buffer-count": lambda v: packed(prog(buffers=[["o", 0, 0, 2, v]])),
        "workgroup-x": lambda v: packed(prog(workgroup=(v, 1, 1))),
        "workgroup-z": lambda v: packed(prog(workgroup=(1, 1, v))),
        "lit-dtype": lambda v: with_expr([E_LIT, v, 1]),
        "lit-bits": lambda v: with_expr([E_LIT, 0, v]),
        "id-kind": lambda v: with_expr([E_ID, v, 0]),
        "id-axis": lambda v: with_expr([E_ID, 0, v]),
        "binop": lambda v: with_expr([E_BIN, v, LIT, LIT]),
        "unop": lambda v: with_expr([E_UN, v, LIT]),
        "cast-dtype": lambda v: with_expr([E_CAST, v, LIT]),
        "bitcast-dtype": lambda v: with_expr([E_BITCAST, v, LIT]),
        "table-dtype": lambda v: with_expr([E_TABLE, v, [1], LIT]),
        "table-bits": lambda v: with_expr([E_TABLE, 0, [v], LIT]),
        "atomic-op": lambda v: with_expr([E_ATOMIC, v, "o", LIT, LIT, None]),
        "stmt-tag": lambda v: with_stmt([v, "x", LIT]),
        "expr-tag": lambda v: with_expr([v, 0, 1]),
    }


def _name_fields() -> dict[str, object]:
    return {
        "buffer-name": lambda v: packed(prog(buffers=[[v, 0, 0, 2, 4]])),
        "let-name": lambda v: with_stmt([S_LET, v, LIT]),
        "assign-name": lambda v: with_stmt([S_ASSIGN, v, LIT]),
        "store-buffer": lambda v: with_stmt([S_STORE, v, LIT, LIT]),
        "loop-var": lambda v: with_stmt([S_LOOP, v, LIT, LIT, []]),
        "var-name": lambda v: with_expr([E_VAR, v]),
        "load-buffer": lambda v: with_expr([E_LOAD, v, LIT]),
        "buflen-buffer": lambda v: with_expr([E_BUFLEN, v]),
        "atomic-buffer": lambda v: with_expr([E_ATOMIC, 0, v, LIT, LIT, None]),
    }


def _corpus() -> dict[str, object]:
    """id -> bytes (or a zero-argument callable for the big ones)."""
    cases: dict[str, object] = {}
    body = VALID["base"][5:]
    real = every_node_program().to_wire()

    # header
    cases |= {
        "empty": b"", "one-byte": b"V", "three-bytes": b"VYI", "magic-only": b"VYIR",
        "header-only": HEADER, "lowercase-magic": b"vyir\x01" + body,
        "wrong-magic": b"VYIS\x01" + body, "shifted-magic": b"\x00VYIR\x01" + body,
        "msgpack-without-header": body, "json": b'{"buffers": []}',
        "version-0": b"VYIR\x00" + body, "version-2": b"VYIR\x02" + body,
        "version-3": b"VYIR\x03" + body, "version-255": b"VYIR\xff" + body,
    }
    # msgpack-level malformation
    cases |= {
        "trailing-byte": real + b"\x00",
        "two-programs": real + real[5:],
        "reserved-byte-0xc1": HEADER + b"\xc1",
        "invalid-utf8-name":
            HEADER + b"\x93\x91\x95\xa2\xff\xfe\x00\x00\x02\x04\x93\x01\x01\x01\x90",
        "bin-name": packed(prog(buffers=[[b"o", 0, 0, 2, 4]])),
        "ext-type": packed(prog(buffers=[[msgpack.ExtType(1, b"x"), 0, 0, 2, 4]])),
        "timestamp": HEADER + b"\x93\x90\x93\x01\x01\x01\x91\xd6\xff\x00\x00\x00\x01",
        "map-top": packed({"buffers": [], "workgroup": [1, 1, 1], "body": []}),
        "map-in-body": packed([[], [1, 1, 1], [{"tag": S_RETURN}]]),
        "name-over-max-str-len": packed(prog(buffers=[["n" * 300, 0, 0, 2, 4]])),
        "array32-claims-2**31": HEADER + b"\xdd\x80\x00\x00\x00" + b"\x90" * 8,
        "array32-claims-2**32-1": HEADER + b"\xdd\xff\xff\xff\xff\x90",
        "array16-claims-65535": HEADER + b"\xdc\xff\xff\x90\x90",
        "nested-array32-claims-2**31":
            HEADER + b"\x93\x90\x93\x01\x01\x01\xdd\x80\x00\x00\x00\x90",
        "map32-claims-2**31": HEADER + b"\xdf\x80\x00\x00\x00\x01\x01",
        "str32-claims-2**31": HEADER + b"\x93\x91\x95\xdb\x80\x00\x00\x00abc",
        "bin32-claims-2**31": HEADER + b"\xc6\x80\x00\x00\x00abc",
        "ext32-claims-2**31": HEADER + b"\xc9\x80\x00\x00\x00\x01abc",
        "stmt-list-over-max-nodes": lambda: HEADER + b"\x93\x90\x93\x01\x01\x01\xdd"
            + (wire.MAX_NODES + 1).to_bytes(4, "big") + b"\x91\x45" * 16,
    }
    # wrong shape
    cases |= {
        "nil": packed(None), "int": packed(0), "str": packed("program"), "float": packed(1.5),
        "true": packed(True), "empty-array": packed([]),
        "two-fields": packed([[], [1, 1, 1]]),
        "four-fields": packed([[], [1, 1, 1], [], []]),
        "buffers-nil": packed([None, [1, 1, 1], []]),
        "buffers-str": packed(["o", [1, 1, 1], []]),
        "buffer-not-array": packed([["o"], [1, 1, 1], []]),
        "buffer-4-fields": packed(prog(buffers=[["o", 0, 0, 2]])),
        "buffer-6-fields": packed(prog(buffers=[["o", 0, 0, 2, 4, 0]])),
        "65-buffers": packed(prog(buffers=[[f"b{i}", i, 0, 0, None] for i in range(65)])),
        "workgroup-nil": packed([[], None, []]),
        "workgroup-int": packed([[], 64, []]),
        "workgroup-2-axes": packed([[], [1, 1], []]),
        "workgroup-4-axes": packed([[], [1, 1, 1, 1], []]),
        "body-nil": packed([[], [1, 1, 1], None]),
        "body-str": packed([[], [1, 1, 1], "return"]),
        "body-int": packed([[], [1, 1, 1], 69]),
        "stmt-int": with_stmt(S_RETURN),
        "stmt-nil": with_stmt(None),
        "stmt-empty": with_stmt([]),
        "stmt-str": with_stmt("return"),
        "expr-as-stmt": with_stmt(LIT),
        "stmt-as-expr": with_expr([S_RETURN]),
        "stmt-as-let-value": with_expr([S_LET, "y", LIT]),
        "expr-empty": with_expr([]),
        "expr-int": with_expr(1),
        "expr-nil": with_expr(None),
        "expr-str": with_expr("x"),
        "if-then-not-array": with_stmt([S_IF, [E_LIT, 3, 1], [S_RETURN], []]),
        "if-then-nil": with_stmt([S_IF, [E_LIT, 3, 1], None, []]),
        "if-else-str": with_stmt([S_IF, [E_LIT, 3, 1], [], "else"]),
        "if-then-holds-expr": with_stmt([S_IF, [E_LIT, 3, 1], [LIT], []]),
        "loop-body-not-array": with_stmt([S_LOOP, "i", LIT, LIT, S_RETURN]),
        "block-body-nil": with_stmt([S_BLOCK, None]),
        "block-body-holds-expr": with_stmt([S_BLOCK, [LIT]]),
        "atomic-comparand-str": with_expr([E_ATOMIC, 8, "o", LIT, LIT, "c"]),
        "atomic-comparand-stmt": with_expr([E_ATOMIC, 8, "o", LIT, LIT, [S_RETURN]]),
        "load-index-nil": with_expr([E_LOAD, "o", None]),
        "select-arm-str": with_expr([E_SELECT, [E_LIT, 3, 0], LIT, "x"]),
    }
    # tags out of range
    cases |= {
        "stmt-tag-0": with_stmt([0]), "stmt-tag-63": with_stmt([63, "x", LIT]),
        "stmt-tag-72": with_stmt([72]), "stmt-tag-255": with_stmt([255]),
        "stmt-tag-is-expr-tag": with_stmt([E_VAR, "x"]),
        "expr-tag-0": with_expr([0, 0, 1]), "expr-tag-12": with_expr([12, 0, 1]),
        "expr-tag-is-stmt-tag": with_expr([S_LET, "x", LIT]),
        "expr-tag-127": with_expr([127]),
        "dtype-past-end": with_expr([E_LIT, len(DType), 1]),
        "buffer-dtype-past-end": packed(prog(buffers=[["o", 0, len(DType), 2, 4]])),
        "access-5": packed(prog(buffers=[["o", 0, 0, 5, 4]])),
        "binop-past-end": with_expr([E_BIN, len(BinOp), LIT, LIT]),
        "unop-past-end": with_expr([E_UN, len(UnOp), LIT]),
        "atomic-past-end": with_expr([E_ATOMIC, len(AtomicOp), "o", LIT, LIT, None]),
        "id-kind-3": with_expr([E_ID, 3, 0]),
        "axis-3": with_expr([E_ID, 0, 3]),
        "cast-dtype-past-end": with_expr([E_CAST, len(DType), LIT]),
        "bitcast-dtype-past-end": with_expr([E_BITCAST, len(DType), LIT]),
        "table-of-none": with_expr([E_TABLE, 0, [], LIT]),
        "table-too-long": with_expr([E_TABLE, 6, [0] * 1025, LIT]),
        "table-u8-bits-256": with_expr([E_TABLE, 6, [1, 256], LIT]),
        "table-values-not-a-list": with_expr([E_TABLE, 0, 5, LIT]),
        "table-f32-bits-2**32": with_expr([E_TABLE, 2, [2**32], LIT]),
        "u32-bits-2**32": with_expr([E_LIT, 0, 2**32]),
        "i32-bits-2**32": with_expr([E_LIT, 1, 2**32]),
        "f32-bits-2**32": with_expr([E_LIT, 2, 2**32]),
        "bool-bits-2": with_expr([E_LIT, 3, 2]),
        "f16-bits-2**16": with_expr([E_LIT, 4, 2**16]),
        "binding-2**32": packed(prog(buffers=[["o", 2**32, 0, 2, 4]])),
        "count-2**32": packed(prog(buffers=[["o", 0, 0, 2, 2**32]])),
        "workgroup-2**32": packed(prog(workgroup=(2**32, 1, 1))),
    }
    # wrong types in every integer and name field
    for field, build in _int_fields().items():
        for label, value in BAD_INTS.items():
            if field == "buffer-count" and value is None:
                continue  # None is a valid (runtime-sized) count
            cases[f"{field}={label}"] = build(value)
    for field, build in _name_fields().items():
        for label, value in BAD_NAMES.items():
            cases[f"{field}={label}"] = build(value)
    # wrong arity of every node
    for tag, tmpl in {**STMT_TEMPLATES, **EXPR_TEMPLATES}.items():
        wrap = with_stmt if tag in STMT_TEMPLATES else with_expr
        cases[f"tag-{tag}-one-field-short"] = wrap(tmpl[:-1])
        cases[f"tag-{tag}-one-field-long"] = wrap([*tmpl, 0])
        cases[f"tag-{tag}-one-field-long-nil"] = wrap([*tmpl, None])
    # deep nesting
    cases |= {
        "10000-nested-arrays": HEADER + b"\x91" * 10_000 + b"\x90",
        "10000-nested-arrays-in-let": HEADER + b"\x93\x90\x93\x01\x01\x01\x91\x93"
            + bytes([S_LET]) + b"\xa1x" + b"\x91" * 10_000 + b"\x90",
        "1000-nested-blocks": nested_blocks_bytes(1000),
        "300-nested-blocks": nested_blocks_bytes(300),
        "max-depth-plus-one-blocks": nested_blocks_bytes(wire.MAX_DEPTH),
        "300-nested-negations": nested_unary_bytes(300),
        "max-depth-plus-one-negations": nested_unary_bytes(wire.MAX_DEPTH - 1),
    }
    # oversized
    cases |= {
        "over-max-wire-bytes": lambda: HEADER + b"\x90" * wire.MAX_WIRE_BYTES,
        "over-max-wire-bytes-bytearray":
            lambda: bytearray(HEADER) + bytearray(wire.MAX_WIRE_BYTES),
        "over-max-wire-bytes-memoryview":
            lambda: memoryview(b"\x00" * (wire.MAX_WIRE_BYTES + 1)),
    }
    # not bytes at all
    cases |= {
        "arg-str": real.hex(), "arg-none": None, "arg-int": 1, "arg-list": list(real),
        "arg-numpy": np.frombuffer(real, dtype=np.uint8), "arg-program": every_node_program(),
        "arg-bytesio": io.BytesIO(real), "arg-dict": {"data": real},
    }
    return cases


CORPUS = _corpus()


def _materialise(case):
    return case() if callable(case) else case


@pytest.mark.parametrize("case_id", list(CORPUS))
def test_malformed_input_raises_invalid_program_error_with_fix(case_id):
    assert_rejected(_materialise(CORPUS[case_id]))


def test_whole_adversarial_corpus_and_every_prefix_is_decoded_without_hanging():
    # A hang guard, not a benchmark (pytest-timeout ends a decoder that hangs): everything
    # above plus every prefix of a real program, in one go, each refused or decoded.
    real = every_node_program().to_wire()
    for case in [*CORPUS.values(), *(real[:n] for n in range(len(real)))]:
        with contextlib.suppress(VyreError):  # classes are checked by the other tests
            Program.from_wire(_materialise(case))


# -- specific messages -----------------------------------------------------------------

def test_newer_format_version_says_upgrade():
    exc = assert_rejected(b"VYIR\x03" + VALID["base"][5:])
    assert "newer" in exc.cause
    assert "Upgrade vyre" in exc.fix


def test_older_format_version_says_rebuild():
    exc = assert_rejected(b"VYIR\x00" + VALID["base"][5:])
    assert "older" in exc.cause
    assert "Rebuild" in exc.fix


def test_wrong_magic_names_the_magic():
    exc = assert_rejected(b"NOPE\x01" + VALID["base"][5:])
    assert "VYIR" in str(exc)


def test_oversized_input_names_the_limit_and_is_not_parsed():
    exc = assert_rejected(HEADER + b"\xc1" * wire.MAX_WIRE_BYTES)  # 0xc1: never valid
    assert str(wire.MAX_WIRE_BYTES) in exc.cause


def test_too_deep_program_names_the_depth_limit():
    exc = assert_rejected(nested_blocks_bytes(300))
    assert str(wire.MAX_DEPTH) in exc.cause


def test_non_bytes_argument_names_its_type():
    exc = assert_rejected("VYIR")
    assert "str" in exc.cause


# -- truncation --------------------------------------------------------------------------

@pytest.mark.parametrize("program", [every_node_program(), Program((), (1,), ())],
                         ids=["every-node", "empty"])
def test_every_proper_prefix_of_real_program_bytes_is_rejected(program):
    data = program.to_wire()
    for n in range(len(data)):
        assert_rejected(data[:n])
    assert Program.from_wire(data) == program


# -- node-count limit ---------------------------------------------------------------------

def test_more_than_max_nodes_is_rejected_and_names_the_limit():
    per_block = wire.MAX_LIST_LEN - 1          # every list is within msgpack's limit
    blocks = wire.MAX_NODES // per_block + 1    # but together they exceed MAX_NODES
    ret = b"\x91" + bytes([S_RETURN])
    block = b"\x92" + bytes([S_BLOCK]) + b"\xdd" + per_block.to_bytes(4, "big") + ret * per_block
    data = HEADER + b"\x93\x90\x93\x01\x01\x01" + bytes([0x90 + blocks]) + block * blocks
    exc = assert_rejected(data)  # (a decoder that walked all ~10**6 nodes: pytest-timeout)
    assert str(wire.MAX_NODES) in exc.cause


# -- encoding is bounded too --------------------------------------------------------------

def _deep_mixed_program(levels: int) -> Program:
    """If / Loop / Block statements nested ``levels`` deep, each holding a deep expression."""
    u1 = ir.Lit(ir.u32, 1)
    expr = u1
    for i in range(levels):
        expr = (ir.Binary(BinOp.ADD, expr, u1) if i % 3 == 0 else
                ir.Select(ir.Lit(ir.bool_, 1), expr, u1) if i % 3 == 1 else
                ir.Unary(UnOp.BIT_NOT, expr))
    stmt = ir.Let("x", expr)
    for i in range(levels):
        stmt = (ir.If(ir.Lit(ir.bool_, 1), (stmt,), ()) if i % 3 == 0 else
                ir.Loop(f"i{i}", u1, u1, (stmt,)) if i % 3 == 1 else ir.Block((stmt,)))
    return Program((), (1,), (stmt,))


@pytest.mark.parametrize("levels", [wire.MAX_DEPTH + 1, 1_000, 10_000])
def test_encoding_a_program_nested_deeper_than_max_depth_raises_invalid_program_error(levels):
    p = _deep_mixed_program(levels)
    for call in (p.to_wire, p.fingerprint, p.validate, p.check):
        with pytest.raises(InvalidProgramError, match="Fix:"):
            call()


def test_expression_nested_deeper_than_max_depth_raises_invalid_program_error():
    expr = ir.Lit(ir.f32, 0)
    for _ in range(10_000):
        expr = ir.Fma(expr, expr, expr)  # a DAG: 10_000 levels, shared children
    with pytest.raises(InvalidProgramError, match="Fix:"):
        Program((), (1,), (ir.Let("y", expr),)).to_wire()


# -- fuzzing -----------------------------------------------------------------------------

def _rejected_or_round_trips(data: bytes) -> None:
    try:
        p = Program.from_wire(data)
    except InvalidProgramError as exc:
        assert "Fix:" in str(exc)
        return
    assert Program.from_wire(p.to_wire()) == p


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_random_bytes_are_rejected(data):
    assert_rejected(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_random_bytes_after_a_valid_header_are_rejected_or_decode(data):
    _rejected_or_round_trips(HEADER + data)


_msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats()
    | st.text(max_size=8) | st.sampled_from([0, 1, 2, 3, 5, 64, 69, 70, 71]),
    lambda inner: st.lists(inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_msgpack_values, min_size=3, max_size=3))
def test_random_msgpack_structures_are_rejected_or_decode(obj):
    _rejected_or_round_trips(packed(obj))


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs(max_stmts=3), st.data())
def test_mutated_program_bytes_are_rejected_or_decode(p, data):
    raw = bytearray(p.to_wire())
    kind = data.draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
    at = data.draw(st.integers(5, len(raw) - 1))
    if kind == "flip":
        raw[at] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "set":
        raw[at] = data.draw(st.integers(0, 255))
    elif kind == "insert":
        raw.insert(at, data.draw(st.integers(0, 255)))
    elif kind == "delete":
        del raw[at]
    else:
        del raw[at:]
    _rejected_or_round_trips(bytes(raw))


# -- error messages and memory stay bounded ------------------------------------------------

@pytest.mark.parametrize("where", ["extra-program-field", "buffer-name", "let-arity"])
def test_deeply_nested_value_in_a_wrong_field_raises_invalid_program_error(where):
    """The error message describes the offending value without walking it (a value
    nested ~1000 arrays deep once made repr() raise RecursionError)."""
    deep = b"\x91" * 1015 + b"\x90"
    data = {
        "extra-program-field": HEADER + b"\x94\x90\x93\x01\x01\x01\x90" + deep,
        "buffer-name": HEADER + b"\x93\x91\x95" + deep + b"\x00\x00\x02\x04\x93\x01\x01\x01\x90",
        "let-arity": HEADER + b"\x93\x90\x93\x01\x01\x01\x91\x94" + bytes([S_LET]) + b"\xa1x"
                     + bytes([0x93, E_LIT, 0, 1]) + deep,
    }[where]
    assert_rejected(data)


_MEMORY_SCRIPT = textwrap.dedent("""
    import resource
    from vyre_core.errors import InvalidProgramError
    from vyre_core.ir import Program, wire
    per_block = 60_000  # within wire.MAX_LIST_LEN, so msgpack itself accepts each array
    blocks = 130        # ~7.8 million empty arrays in ~7.8 MB, under wire.MAX_WIRE_BYTES
    empties = b"\\xdd" + per_block.to_bytes(4, "big") + b"\\x90" * per_block
    body = b"\\xdd" + blocks.to_bytes(4, "big") + (b"\\x92\\x47" + empties) * blocks
    header = wire.MAGIC + bytes([wire.PLAIN_FORMAT_VERSION])
    data = header + b"\\x93\\x90\\x93\\x01\\x01\\x01" + body
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        Program.from_wire(data)
    except InvalidProgramError:
        pass
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(len(data), grown * 1024)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss units")
@pytest.mark.processes
def test_untrusted_bytes_cannot_allocate_far_more_than_max_nodes_objects():
    """Decoding stops once more array elements were built than a MAX_NODES program has,
    so ~8 million empty arrays cost a bounded amount of memory, not one list each."""
    result = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    size, grown = map(int, result.stdout.split())
    assert size < 10 * 2**20
    assert grown < 200 * 2**20, f"decoding {size} bytes grew the process by {grown >> 20} MB"


def test_bytes_built_by_the_ir_module_decode():
    # Sanity: the corpus helpers speak the real format.
    p = Program.from_wire(with_stmt([S_STORE, "o", LIT, [E_LIT, 0, 7]]))
    assert p == Program((ir.Buffer("o", 0, ir.u32, ir.Access.OUTPUT, 4),), (1, 1, 1),
                        (ir.Store("o", ir.Lit(ir.u32, 1), ir.Lit(ir.u32, 7)),))
