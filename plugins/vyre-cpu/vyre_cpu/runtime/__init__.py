"""The IR's operations as small numba functions, each with the exact total semantics of
docs/semantics.md (the reference interpreter is the oracle): integer arithmetic wraps,
division by zero and shifts are defined, float results are rounded once in their own
type, float-to-int casts saturate, NaN stores are canonical, out-of-bounds loads read 0
and stores are dropped. Generated kernels (``codegen.py``) call them by name; LLVM
inlines them.

f32 arithmetic is computed in f64 and rounded once to f32: for + - * / and sqrt that is
the correctly rounded f32 result (f64 carries more than twice f32's precision), and it
keeps numba's own typing out of the question.

The rooms, by kind of helper: ``ints`` (u32, i32), ``small`` (8 and 16 bits), ``wide`` (64
bits), ``floats`` (f32, f64, f16, casts, bitcasts) and ``memory`` (buffers, the stop
words, workgroup arrays, atomics, subgroups), over ``base``. The generated source
star-imports this package (``from vyre_cpu.runtime import *``): every public name of each
room is here."""

from vyre_cpu.runtime.base import F32_NAN, F64_NAN  # noqa: F401
from vyre_cpu.runtime.floats import *  # noqa: F403
from vyre_cpu.runtime.ints import *  # noqa: F403
from vyre_cpu.runtime.memory import *  # noqa: F403
from vyre_cpu.runtime.small import *  # noqa: F403
from vyre_cpu.runtime.wide import *  # noqa: F403
