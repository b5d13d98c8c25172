"""Hypothesis strategies for random IR programs.

The programs are random trees of every expression and statement node with every dtype,
operator, access mode and invocation-id kind. They are *not* type-checked: the wire form
must round-trip any program whose fields lie in the ranges the wire format can carry
(names of 1..64 characters, literal bits within the dtype's width, ids on axes 0..2,
integers in [0, 2**32-1]), valid or not.

Also here: a hand-built program that uses every node, op, dtype, access and id kind
(``every_node_program``), used by the round-trip tests.
"""

from __future__ import annotations

import functools
import itertools

from hypothesis import strategies as st

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
    Break,
    Buffer,
    BufLen,
    Cast,
    Continue,
    DType,
    Fma,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Program,
    Return,
    Select,
    SpecConstant,
    SpecRef,
    Store,
    Subgroup,
    SubgroupOp,
    Table,
    Unary,
    UnOp,
    Var,
    While,
)

U32_MAX = 2**32 - 1
MAX_DEPTH = 6

# Float bit patterns that must survive exactly: zeros of both signs, infinities, quiet and
# signalling NaNs with payloads, subnormals, the extremes.
SPECIAL_BITS = {
    DType.F16: [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 0x0001, 0x83FF,
                0x7BFF, 0xFFFF],
    DType.F32: [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                0x7F800001, 0x7FBFFFFF, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0xFFFFFFFF],
    DType.F64: [0, 1 << 63, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000,
                0xFFF8000000000001, 0x7FF0000000000001, 1, 0x800FFFFFFFFFFFFF, 2**64 - 1],
    DType.U32: [0, 1, 0x7FFFFFFF, 0x80000000, U32_MAX],
    DType.I32: [0, 1, 0x7FFFFFFF, 0x80000000, U32_MAX],
    DType.BOOL: [0, 1],
    **{t: [0, 1, 2**(t.bits - 1) - 1, 2**(t.bits - 1), 2**t.bits - 1]
       for t in (DType.U8, DType.U16, DType.I8, DType.I16, DType.U64, DType.I64)},
}

dtypes = st.sampled_from(list(DType))
accesses = st.sampled_from(list(Access))
binops = st.sampled_from(list(BinOp))
unops = st.sampled_from(list(UnOp))
atomic_ops = st.sampled_from(list(AtomicOp))
id_kinds = st.sampled_from(list(IdKind))
axes = st.integers(0, 2)
u32s = st.integers(0, U32_MAX)

# Mostly a small pool of identifiers (so references, shadowing and duplicates happen), some
# arbitrary identifiers, and some arbitrary non-surrogate unicode text of 1..64 characters
# (the validator refuses those names, the wire form must still carry them exactly).
_POOL = ["x", "y", "i", "j", "acc", "out", "buf", "_t1", "a" * 64]
names = st.one_of(
    st.sampled_from(_POOL),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,63}", fullmatch=True),
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=64),
)


def bits_for(dtype: DType) -> st.SearchStrategy[int]:
    """Literal bits in ``dtype``'s range, with the special float patterns favoured."""
    hi = 1 if dtype is DType.BOOL else 2**dtype.bits - 1
    return st.one_of(st.sampled_from(SPECIAL_BITS[dtype]), st.integers(0, hi))


literals = dtypes.flatmap(lambda t: bits_for(t).map(lambda b: Lit(t, b)))

leaf_exprs = st.one_of(
    literals,
    st.builds(Var, names),
    st.builds(BufLen, names),
    st.builds(InvocationId, id_kinds, axes),
)


@functools.cache
def exprs(depth: int = MAX_DEPTH) -> st.SearchStrategy:
    """Random expression trees at most ``depth`` levels deep."""
    if depth <= 1:
        return leaf_exprs
    sub = exprs(depth - 1)
    return st.one_of(
        leaf_exprs,
        st.builds(Load, names, sub),
        st.builds(Binary, binops, sub, sub),
        st.builds(Unary, unops, sub),
        st.builds(Select, sub, sub, sub),
        st.builds(Cast, dtypes, sub),
        st.builds(Bitcast, dtypes, sub),
        st.builds(Fma, sub, sub, sub),
        st.builds(Atomic, atomic_ops, names, sub, sub, st.none() | sub),
        st.builds(Subgroup, st.sampled_from(list(SubgroupOp)), u32s, st.none() | sub,
                  st.none() | sub),
    )


def _bodies(sub: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(sub, max_size=3).map(tuple)


@functools.cache
def stmts(depth: int = MAX_DEPTH) -> st.SearchStrategy:
    """Random statement trees at most ``depth`` levels of nested statements deep."""
    e = exprs(3)
    simple = st.one_of(
        st.builds(Let, names, e),
        st.builds(Assign, names, e),
        st.builds(Store, names, e, e),
        st.just(Return()),
        st.just(Barrier()),
        st.just(Break()),
        st.just(Continue()),
    )
    if depth <= 1:
        return simple
    sub = stmts(depth - 1)
    return st.one_of(
        simple,
        st.builds(If, e, _bodies(sub), _bodies(sub)),
        st.builds(Loop, names, e, e, _bodies(sub)),
        st.builds(Loop, names, e, e, _bodies(sub), e),
        st.builds(While, e, _bodies(sub), u32s),
        st.builds(Block, _bodies(sub)),
    )


buffers = st.builds(Buffer, names, u32s, dtypes, accesses, st.none() | u32s,
                    st.none() | st.lists(u32s, max_size=4).map(tuple))
workgroups = st.lists(u32s, min_size=1, max_size=3).map(tuple)


@st.composite
def programs(draw, max_buffers: int = 6, max_stmts: int = 5) -> Program:
    """A random, not necessarily valid, program."""
    return Program(
        tuple(draw(st.lists(buffers, max_size=max_buffers))),
        draw(workgroups),
        tuple(draw(st.lists(stmts(), max_size=max_stmts))),
    )


# -- a hand-built program using every node ---------------------------------------------

def every_node_program() -> Program:
    """One program holding every node class, op, dtype, access mode and id kind."""
    bufs = tuple(Buffer(f"b{i}", i, t, a, None if a is Access.READ else 8,
                        (2, 4) if a is Access.OUTPUT else None)
                 for i, (t, a) in enumerate(zip(list(DType), itertools.cycle(Access))))
    one = Lit(DType.U32, 1)
    ids = [InvocationId(k, axis) for k in IdKind for axis in range(3)]
    lits = [Lit(t, b) for t in DType for b in SPECIAL_BITS[t]]
    body: list = [Let(f"id{i}", e) for i, e in enumerate(ids)]
    body += [Let(f"lit{i}", e) for i, e in enumerate(lits)]
    body += [Let(f"bin_{op.value}", Binary(op, Var("id0"), one)) for op in BinOp]
    body += [Let(f"un_{op.value}", Unary(op, Var("lit0"))) for op in UnOp]
    body += [Let(f"cast_{t.value}", Cast(t, Var("id0"))) for t in DType]
    body += [Let(f"bitcast_{t.value}", Bitcast(t, Var("id0"))) for t in DType]
    body += [Let(f"table_{t.value}", Table(t, tuple(SPECIAL_BITS[t]), Var("id0")))
             for t in DType if t is not DType.BOOL]
    body += [Let(f"at_{op.value}", Atomic(op, "b1", one, one,
                                         one if op is AtomicOp.COMPARE_EXCHANGE else None))
             for op in AtomicOp]
    body += [Let(f"sg_{op.value}", Subgroup(
        op, 8, None if op is SubgroupOp.ELECT else
        Lit(DType.BOOL, 1) if op is SubgroupOp.BALLOT else Var("id0"),
        one if op in (SubgroupOp.BROADCAST, SubgroupOp.SHUFFLE) else None))
        for op in SubgroupOp]
    body += [
        Let("sel", Select(Lit(DType.BOOL, 1), Load("b0", one), BufLen("b0"))),
        Let("fma", Fma(Lit(DType.F32, 0x3F800000), Lit(DType.F32, 0), Var("lit3"))),
        Assign("sel", Var("fma")),
        Store("b1", Var("id0"), Var("sel")),
        Loop("k", Lit(DType.U32, 0), Lit(DType.U32, 4), (
            Block((Barrier(), If(Binary(BinOp.LT, Var("k"), one), (Return(),), ()))),
        )),
        If(Lit(DType.BOOL, 0), (Block(()),), (Store("b1", one, one), Barrier())),
        Loop("s", Lit(DType.U32, 0), Lit(DType.U32, 9), (
            If(Binary(BinOp.EQ, Var("s"), one), (Continue(),), ()), Break()), SpecRef("K")),
        While(Binary(BinOp.LT, Var("id0"), one), (Assign("sel", one), Break()), 3),
        Let("spec", SpecRef("K")),
        Return(),
    ]
    constants = (SpecConstant("K", Lit(DType.U32, 3), Lit(DType.U32, 1), Lit(DType.U32, 8)),
                 SpecConstant("F", Lit(DType.F32, 0x3F800000)))
    return Program(bufs, (8, 4, 2), tuple(body), constants)
