"""f64_kernel: e**x by Horner's rule on a degree-17 Taylor polynomial, in f64.

Double precision is a capability, not a given: every f64 buffer or value puts the feature
``f64`` in the program's requirements, and routing passes over each backend whose
capabilities say ``supports_f64`` is false, with the reason ``needs f64 (supports_f64 is
false)``; the program runs on the first backend that can (the reference backend always
has f64). A backend's capabilities are its static claims until its worker has
started, then what the worker probed on its device: the wgpu backend claims no f64 up front
and turns it on only after an f64 smoke kernel passes on the real device (Vulkan's
``shader-f64``). See the decision, backend by backend, with:

    vyre route f64_kernel

Why f64 here: on ``[-1, 1]`` the polynomial matches ``exp`` to within 1e-15; in f32 the
rounding of every Horner step alone is ~1e-7. The numpy oracle runs the same Horner steps
in float64. A backend may fuse ``acc * x + c`` into one rounding (GPU compilers do), which
moves a result by at most a few ULPs: the example allows 4.

Run it: ``python examples/f64_kernel.py`` or ``vyre run f64_kernel``.
"""

from __future__ import annotations

import math
import sys

import numpy as np

import vyre_core as vyre
from vyre_core import Example, f64

DEGREE = 17
#: Taylor coefficients of e**x, highest degree first (Horner order).
COEFFS = np.array([1.0 / math.factorial(d) for d in range(DEGREE, -1, -1)], dtype=np.float64)


@vyre.kernel
def exp_taylor(x: vyre.Array[f64], coeffs: vyre.Array[f64], out: vyre.Array[f64]):
    i = vyre.global_id(0)
    if i < len(x):
        xi = x[i]
        acc = coeffs[0]
        for d in range(1, DEGREE + 1):
            acc = acc * xi + coeffs[d]
        out[i] = acc


def horner(x: np.ndarray) -> np.ndarray:
    """The kernel's steps in float64, vectorised over ``x``."""
    acc = np.full_like(x, COEFFS[0])
    for c in COEFFS[1:]:
        acc = acc * x + c
    return acc


def build(n: int = 1 << 16, seed: int = 0) -> Example:
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, n)
    return Example.of_kernel(exp_taylor, n, (x, COEFFS, np.zeros_like(x)),
                             expected=[horner(x)], ulp=4)


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
