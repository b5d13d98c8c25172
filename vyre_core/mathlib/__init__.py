"""vyre's math library, written in the IR: functions made of the basic operations only, so
that every backend that runs the basic operations as written (each rounded once, to
nearest even: docs/semantics.md) gives the same bits for them, and a result proved
correctly rounded once is so everywhere (docs/design-42.md).

``ff``: float-float arithmetic, the exact building blocks, and the one final rounding.
``exp2``: ``2^x`` correctly rounded in f32 and f16 (checked over every input).
``library``: the functions, the operations they compute, and the library's version.
``inline``: writing the functions out into a program, where it uses those operations.
"""
