"""vyre.lib: the primitives every kernel author needs, with a defined order of operations.

``from vyre_core import lib``; each function takes the driver first, numpy arrays (or
arrays of ``Driver.empty``/``asarray``, which cross without a copy) and returns numpy's
result. The floating-point order of every reduction is written down (docs/lib.md) and the
same on every backend, so results are the same bytes on each. Written as ``@vyre.kernel``
passes run as sequences; no concrete backend is imported.
"""

from vyre_core.lib import steps
from vyre_core.lib.histogram import bincount, histogram
from vyre_core.lib.matmul import matmul
from vyre_core.lib.reduce import argmax, argmin, dot, max, mean, min, norm, prod, sum
from vyre_core.lib.scan import cumsum
from vyre_core.lib.softmax import logsumexp, softmax
from vyre_core.lib.sorts import argsort, sort
from vyre_core.lib.transpose import transpose

__all__ = ["argmax", "argmin", "argsort", "bincount", "cumsum", "dot", "histogram",
           "logsumexp", "matmul", "max", "mean", "min", "norm", "prod", "softmax", "sort",
           "steps", "sum", "transpose"]
