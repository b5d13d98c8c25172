"""mandelbrot: escape-time iteration counts over a 2-D grid of pixels, in f32.

One invocation per pixel, laid out on a 2-D grid (``dim=(width, height)``, 8x8
workgroups) over a 2-D array of counts.
Each iterates ``z = z*z + c`` in a loop and leaves it early with ``return`` once
``|z|^2 > 4``, writing how many iterations that took (u32); pixels that never escape get
``max_iter``. Invocations past the image's edge return at once. Branches and early exits
make the work differ per pixel: the kind of divergent control flow a GPU serialises.

Escape times are chaotic: one differently rounded operation can change a count. So the
kernel is written as separate f32 roundings (no ``fma``) and the numpy oracle performs the
same operations in the same order in float32; the counts must match exactly. That makes
it a sharp test of a backend: one whose compiler reorders float additions (Mesa's lavapipe
would evaluate ``(zx2 - zy2) + cx`` as ``(zx2 + cx) - zy2`` if the wgpu lowering let it)
or fuses a multiply into an add gets some counts wrong, and the check against the
reference says where (``vyre run mandelbrot --backend wgpu --shadow``).

Run it: ``python examples/mandelbrot.py`` or ``vyre run mandelbrot``.
"""

from __future__ import annotations

import sys

import numpy as np

import vyre_core as vyre
from vyre_core import Example, f32, i32, u32

WORKGROUP = (8, 8)
#: The view: lower-left corner and the size of one pixel, in f32.
X0, Y0, STEP = np.float32(-2.25), np.float32(-1.25), np.float32(1.0 / 64)


@vyre.kernel(workgroup=WORKGROUP)
def mandelbrot(x0: f32, y0: f32, step: f32, max_iter: i32, counts: vyre.Array[u32, 2]):
    px, py = vyre.global_id(0), vyre.global_id(1)
    if px >= counts.shape[1] or py >= counts.shape[0]:
        return
    cx = x0 + f32(px) * step
    cy = y0 + f32(py) * step
    zx = f32(0)
    zy = f32(0)
    for it in range(max_iter):
        zx2 = zx * zx
        zy2 = zy * zy
        if zx2 + zy2 > 4.0:
            counts[py, px] = u32(it)
            return
        zy = zx * zy * 2.0 + cy
        zx = zx2 - zy2 + cx
    counts[py, px] = u32(max_iter)


def escape_counts(width: int, height: int, max_iter: int) -> np.ndarray:
    """The kernel's arithmetic in float32, vectorised over pixels (row-major)."""
    py, px = np.indices((height, width))
    cx = X0 + px.astype(np.float32) * STEP
    cy = Y0 + py.astype(np.float32) * STEP
    zx, zy = np.zeros_like(cx), np.zeros_like(cy)
    counts = np.full((height, width), max_iter, dtype=np.uint32)
    live = np.ones((height, width), dtype=bool)
    for it in range(max_iter):
        zx2, zy2 = zx * zx, zy * zy
        escaped = live & (zx2 + zy2 > np.float32(4.0))
        counts[escaped] = it
        live &= ~escaped
        # escaped pixels keep their last z (the kernel has returned for them)
        zy, zx = (np.where(live, zx * zy * np.float32(2.0) + cy, zy),
                  np.where(live, zx2 - zy2 + cx, zx))
    return counts.reshape(-1)


def build(width: int = 192, height: int = 160, max_iter: int = 128) -> Example:
    counts = np.zeros((height, width), np.uint32)
    return Example.of_kernel(mandelbrot, (width, height), (X0, Y0, STEP, max_iter, counts),
                             expected=[escape_counts(width, height, max_iter)])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
