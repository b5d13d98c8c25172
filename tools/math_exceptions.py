"""Development tool for the math library (not product code; needs the ``test`` extra's
gmpy2): the exception list of an f32 function, from every input it misrounds.

    python tools/math_exceptions.py OP [--backend cpu] [--chunks 0:256] [--jobs N]

runs ``ir.<OP>`` in f32 (the library's function, as every backend is given it) over the
chunks' inputs through a Driver, as ``vyre conform --exhaustive --all-inputs`` does,
lists every input whose result differs from the oracle's (each chunk whose digest is not
the recorded one is recomputed by ``vyre_core.conformance.oracle``), and prints the
source of ``_EXCEPTION_INPUTS`` and ``_EXCEPTION_RESULTS`` for them. Made with the
function's list emptied, that is its list: the inputs its fast path rounds the wrong way.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor

from math_constants import hex_list  # (tools/ is the script's folder)

from vyre_core import Driver
from vyre_core.conformance import all_inputs, digests
from vyre_core.conformance.oracle import correctly_rounded


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("op")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--chunks", default="0:256")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    [suite] = all_inputs.suites([args.op], ["f32"])
    _, recorded = digests.read(digests.RECORDS, "f32", args.op)
    found: dict[int, int] = {}
    with Driver() as drv, ThreadPoolExecutor(args.jobs) as threads:
        results = threads.map(lambda c: all_inputs.check_chunk(
            drv, args.backend, suite, c, all_inputs.CHUNK_BITS, recorded[c],
            correctly_rounded, listed=None), all_inputs.parse_chunks(args.chunks))
        for result in results:
            if result.error:
                print(f"chunk {result.chunk}: {result.error}", file=sys.stderr)
                return 1
            print(f"chunk {result.chunk:3d}: {result.misrounded} misrounded "
                  f"({result.seconds:.1f} s)", file=sys.stderr, flush=True)
            found.update((e["input"][0], e["expected"]) for e in result.first)
    inputs = sorted(found)
    print(hex_list("_EXCEPTION_INPUTS", inputs))
    print(hex_list("_EXCEPTION_RESULTS", [found[i] for i in inputs]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
