"""saxpy: ``out[i] = a * x[i] + y[i]`` over f32, the elementwise kernel of the README.

Run it: ``python examples/saxpy.py [N]``. It builds the program, routes it to the best
backend, runs it in that backend's supervised worker process and checks every output
against the same expression written in numpy.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from vyre_core import ir


def program(n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    x = k.read("x", ir.f32)
    y = k.read("y", ir.f32)
    a = k.uniform("a", ir.f32)
    out = k.output("out", ir.f32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = a[0] * x[i] + y[i]
    return k.build()


def inputs(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32),
            np.array([2.5], dtype=np.float32)]


def expected(x: np.ndarray, y: np.ndarray, a: np.ndarray) -> list[np.ndarray]:
    return [a[0] * x + y]


def main(argv: list[str]) -> int:
    import vyre_core as vyre

    n = int(argv[1]) if len(argv) > 1 else 1_000_000
    prog, data = program(n), inputs(n)
    with vyre.Driver() as drv:
        decision = drv.route(prog)
        drv.dispatch(prog, data)  # the first call starts the backend's worker process
        start = time.perf_counter()
        out, = drv.dispatch(prog, data)
        seconds = time.perf_counter() - start
        worker = drv.status()["pools"][decision.backend]["workers"][0]
    ok = out.tobytes() == expected(*data)[0].tobytes()
    print(f"saxpy  n={n}  program {prog.fingerprint()[:16]}")
    print(f"  routed to {decision.backend!r}: {decision.reason}")
    print(f"  ran in worker pid {worker['pid']} (generation {worker['generation']})")
    print(f"  out[:4] = {out[:4]}")
    print(f"  {seconds * 1e3:.1f} ms, result {'matches numpy byte for byte' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
