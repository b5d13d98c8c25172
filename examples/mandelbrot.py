"""mandelbrot: escape-time iteration counts over a 2-D grid of pixels, in f32.

One invocation per pixel, laid out on a 2-D grid (8x8 workgroups, ``grid_override``).
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

from vyre_core import DispatchConfig, Example, ir

WORKGROUP = (8, 8)
#: The view: lower-left corner and the size of one pixel, in f32.
X0, Y0, STEP = np.float32(-2.25), np.float32(-1.25), np.float32(1.0 / 64)


def program(width: int, height: int, max_iter: int) -> ir.Program:
    k = ir.Kernel(workgroup=WORKGROUP)
    view = k.uniform("view", ir.f32, count=3)          # x0, y0, step
    counts = k.output("counts", ir.u32, count=width * height)
    px = k.let("px", ir.global_id(0))
    py = k.let("py", ir.global_id(1))
    with k.if_((px >= width) | (py >= height)):
        k.ret()
    pixel = k.let("pixel", py * width + px)
    cx = k.let("cx", view[0] + px.cast(ir.f32) * view[2])
    cy = k.let("cy", view[1] + py.cast(ir.f32) * view[2])
    zx = k.let("zx", ir.f32(0.0))
    zy = k.let("zy", ir.f32(0.0))
    with k.loop("it", 0, max_iter) as it:
        zx2 = k.let("zx2", zx * zx)
        zy2 = k.let("zy2", zy * zy)
        with k.if_(zx2 + zy2 > 4.0):
            counts[pixel] = it
            k.ret()
        k.assign(zy, zx * zy * 2.0 + cy)
        k.assign(zx, zx2 - zy2 + cx)
    counts[pixel] = max_iter
    return k.build()


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
    view = np.array([X0, Y0, STEP], dtype=np.float32)
    grid = (-(-width // WORKGROUP[0]), -(-height // WORKGROUP[1]))
    return Example(program(width, height, max_iter), [view],
                   expected=[escape_counts(width, height, max_iter)],
                   config=DispatchConfig(grid_override=grid))


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
