"""The canonical byte form of a Sequence: ``b"VYSQ"``, a format byte, one msgpack array.

``[buffers, programs, items, returns]``: each distinct program's wire bytes appear once
and steps name them by index; a loop is ``[1, items, times, until_zero, max_iterations,
index]``, its items nested (at most ``MAX_LOOP_DEPTH`` deep). Format 2 added nested loops
and iteration numbers. Decoding treats bytes as untrusted: size, counts and
every field are checked, programs decode through their own bounded decoder, and the
result passes the same rules as a built sequence; any malformation raises
``InvalidSequenceError``. Only the parts: ``model.Sequence`` holds them and checks
the rules.
"""

from __future__ import annotations

from typing import Any

import msgpack

from vyre_core.errors import InvalidProgramError, InvalidSequenceError
from vyre_core.ir.program import Program
from vyre_core.ir.wire import DTYPE_TAGS, MAX_WIRE_BYTES
from vyre_core.sequence.nodes import (
    MAX_BUFFERS,
    MAX_LOOP_DEPTH,
    MAX_STEPS,
    Item,
    Role,
    SequenceBuffer,
    Step,
    StepLoop,
)

MAGIC = b"VYSQ"
FORMAT_VERSION = 2
_ROLES = {Role.INPUT: 0, Role.CONSTANT: 1, Role.TRANSIENT: 2, Role.RESIDENT: 3,
          Role.ITERATION: 4}
_DTYPE_OF = {v: k for k, v in DTYPE_TAGS.items()}
_ROLE_OF = {v: k for k, v in _ROLES.items()}
_STEP, _LOOP = 0, 1


def encode(buffers: tuple[SequenceBuffer, ...], items: tuple[Item, ...],
           returns: tuple[str, ...]) -> bytes:
    """The canonical bytes of a sequence's parts."""
    programs: dict[str, int] = {}
    wires: list[bytes] = []

    def step(s: Step) -> list:
        fp = s.program.fingerprint()
        if fp not in programs:
            programs[fp] = len(wires)
            wires.append(s.program.to_wire())
        return [_STEP, programs[fp], list(s.bindings), list(s.grid)]

    def item(i: Item) -> list:
        if isinstance(i, StepLoop):
            return [_LOOP, [item(s) for s in i.body], i.times, i.until_zero,
                    i.max_iterations, i.index]
        return step(i)

    body = [[[b.name, DTYPE_TAGS[b.dtype], b.count, _ROLES[b.role], b.data] for b in buffers],
            wires, [item(i) for i in items], list(returns)]
    return MAGIC + bytes([FORMAT_VERSION]) + msgpack.packb(body, use_bin_type=True)


def _bad(what: str) -> InvalidSequenceError:
    return InvalidSequenceError(f"sequence bytes are malformed: {what}",
                                "Pass the bytes of Sequence.to_wire() unchanged.")


def decode(data: bytes) -> tuple[tuple[SequenceBuffer, ...], tuple[Item, ...],
                                 tuple[str, ...]]:
    """The parts of a sequence from untrusted bytes, in canonical form (the rules they
    must keep are checked by ``Sequence.check``)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise _bad(f"got {type(data).__name__}, not bytes")
    data = bytes(data)
    if len(data) > MAX_WIRE_BYTES:
        raise _bad(f"{len(data)} bytes, over {MAX_WIRE_BYTES}")
    if data[:4] != MAGIC or data[4:5] != bytes([FORMAT_VERSION]):
        raise _bad(f"no VYSQ header of format {FORMAT_VERSION}")
    try:
        body = msgpack.unpackb(data[5:], raw=False, strict_map_key=True,
                               max_array_len=max(MAX_STEPS, MAX_BUFFERS) * 2, max_map_len=0,
                               max_ext_len=0)
    except Exception as exc:  # msgpack raises several kinds for bad bytes
        raise _bad(f"not msgpack ({type(exc).__name__})") from None
    try:
        buffers_raw, wires, items_raw, returns = _fields(body, 4, "sequence")
        buffers = tuple(_buffer(b) for b in _list(buffers_raw, "buffers"))
        programs = [Program.from_wire(w) if isinstance(w, bytes) else _fail("program")
                    for w in _list(wires, "programs")]
        items = tuple(_item(i, programs, 1) for i in _list(items_raw, "items"))
        names = tuple(r if isinstance(r, str) else _fail("returns") for r in
                      _list(returns, "returns"))
        canonical = encode(buffers, items, names)
    except InvalidProgramError as exc:
        raise _bad(f"a step's program: {exc.cause}") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise _bad(str(exc) or type(exc).__name__) from None
    if canonical != data:  # (unused programs, other orders: one sequence, one form)
        raise _bad("not in canonical form")
    return buffers, items, names


def _fail(what: str) -> Any:
    raise ValueError(f"field {what} has the wrong type")


def _list(value: Any, what: str) -> list:
    return value if isinstance(value, list) else _fail(what)


def _fields(value: Any, n: int, what: str) -> list:
    if not isinstance(value, list) or len(value) != n:
        _fail(what)
    return value


def _int(value: Any, what: str) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else _fail(what)


def _opt_int(value: Any, what: str) -> int | None:
    return None if value is None else _int(value, what)


def _buffer(raw: Any) -> SequenceBuffer:
    name, dtype, count, role, payload = _fields(raw, 5, "buffer")
    if not isinstance(name, str) or (payload is not None and not isinstance(payload, bytes)):
        _fail("buffer")
    return SequenceBuffer(name, _DTYPE_OF[dtype], _int(count, "count"), _ROLE_OF[role],
                          payload)


def _step(raw: Any, programs: list[Program]) -> Step:
    tag, index, bindings, grid = _fields(raw, 4, "step")
    if tag != _STEP:
        _fail("step tag")
    index = _int(index, "program index")
    if not 0 <= index < len(programs):
        _fail("program index")
    return Step(programs[index],
                tuple(b if isinstance(b, str) else _fail("binding")
                      for b in _list(bindings, "bindings")),
                tuple(_int(a, "grid") for a in _list(grid, "grid")))


def _item(raw: Any, programs: list[Program], depth: int) -> Step | StepLoop:
    """A step, or a loop at ``depth`` (1: not inside another), its body decoded only
    within ``MAX_LOOP_DEPTH``."""
    if isinstance(raw, list) and raw and raw[0] == _LOOP:
        _, body, times, flag, most, index = _fields(raw, 6, "loop")
        if depth > MAX_LOOP_DEPTH:
            raise ValueError(f"loops nest deeper than {MAX_LOOP_DEPTH}")
        if (flag is not None and not isinstance(flag, str)) or (
                index is not None and not isinstance(index, str)):
            _fail("loop")
        return StepLoop(tuple(_item(s, programs, depth + 1) for s in _list(body, "loop body")),
                        _opt_int(times, "times"), flag, _opt_int(most, "max_iterations"),
                        index)
    return _step(raw, programs)
