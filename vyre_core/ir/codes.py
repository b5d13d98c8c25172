"""The validator's codes (``V###``), each with the Fix shown with every finding of it:
data a user reads in docs/validator-codes.md, kept apart from the checks that raise them.
A code is never renumbered; a new one takes the next number."""

from __future__ import annotations

from vyre_core.ir.nodes import MAX_TABLE

#: code -> the Fix shown with every finding of that code.
CODES: dict[str, str] = {
    "V001": "give every buffer a unique name",
    "V002": "give every buffer a unique binding number",
    "V003": "declare the buffer in the program or correct its name",
    "V004": "declare the variable with a let before using or assigning it",
    "V005": "choose a name not already in scope; shadowing is not allowed",
    "V006": "declare the buffer with access read_write or output to store into it",
    "V007": "make both operands the same type with an explicit cast, or use an operator "
            "defined for that type",
    "V008": "cast the value to the declared type of the target",
    "V009": "use a bool condition and give both branches the same type",
    "V010": "apply the operation to a type it is defined for (see docs/semantics.md)",
    "V011": "index buffers with a u32 expression: cast a signed index i with i.cast(ir.u32) "
            "(or ir.u32(i), the same cast)",
    "V012": "give loops u32 start and end bounds",
    "V013": "give every workgroup axis a size between 1 and 2**32-1",
    "V014": "declare an element count between 1 and 2**32-1 for output, uniform and "
            "workgroup buffers (and for any buffer that declares one)",
    "V015": "remove the statements after return, break or continue, or move it into an if",
    "V016": "place barriers only under control flow that is uniform across the workgroup",
    "V017": "use atomics only on u32/i32 buffers, with operands of the buffer's type",
    "V018": "declare the buffer read_write, output or workgroup to use atomics on it",
    "V019": "use a bool condition in if statements and while loops",
    "V020": "loop variables are read-only; copy it into a let variable to modify it",
    "V021": "use an identifier: a letter or _ followed by letters, digits or _ (at most 64)",
    "V022": "make the atomic the whole initializer of a let statement",
    "V023": "build nodes with vyre_core.ir (axis 0..2, literal bits in the type's range)",
    "V024": "use binding numbers between 0 and 2**32-1",
    "V025": "use at most 64 buffers in one program (the wire form carries no more); split "
            "the work into several programs",
    "V026": "keep a program within the wire form's limits (8 MiB, 250,000 nodes, 65,536 "
            "statements per block); split the work into several programs",
    "V027": "declare the constant with ir.Kernel.constant before using it, or correct its name",
    "V028": "give each constant a unique name, and a default and range bounds of its own "
            "type with low <= default <= high",
    "V029": "replace the removed op as the cause says (vyre doctor lists every deprecation)",
    "V030": "use break and continue only inside a loop or while body",
    "V031": "give the loop a step of at least 1: a u32 literal, or a u32 constant declared "
            "with low >= 1",
    "V032": "give the while loop a bound between 1 and 2**32-1 passes",
    "V033": "give a shape only to a buffer with a count: 1 to 3 axes of at least 1 whose "
            "product is the count",
    "V034": "use one subgroup size in a program: a power of two from 1 to 128 (32 with a "
            "ballot) that divides the workgroup's invocations",
    "V035": "run subgroup operations only where every invocation of the workgroup runs "
            "them (where a barrier may be; not in a while condition), broadcasting from a "
            "lane they all agree on (shuffle takes a lane per invocation)",
    "V036": "use a loop variable only inside its loop body; to keep a value past the loop, "
            "declare a variable with a let before the loop and assign it inside",
    "V037": "bitcast between numeric types of one width (f16/u16/i16, f32/u32/i32, "
            "f64/u64/i64, u8/i8); to convert a value to another width or to bool, cast it",
    "V038": f"give a table 1 to {MAX_TABLE} values of a numeric type (their bits in its "
            "width) and a u32 index (ir.table(values, index, ir.f32))",
}
