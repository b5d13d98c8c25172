"""``Example``: a runnable sample — a program (or a sequence of steps), its inputs, and what
it must produce.

An example module (``examples/*.py``, or any file ``vyre run`` is pointed at) exposes
``build() -> Example``. ``expected`` is worked out without vyre (plain numpy), so every
run of an example is also a check of the backend that ran it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from vyre_core.compare import buffers_divergence
from vyre_core.config import DispatchConfig
from vyre_core.ir import Program
from vyre_core.ir.dtypes import DType
from vyre_core.sequence import Sequence as StepSequence
from vyre_core.sequence import output_buffers

if TYPE_CHECKING:
    from vyre_core.contract.types import Outputs, SequenceRun
    from vyre_core.driver import Driver, ResidentBuffer
    from vyre_core.kernels import KernelFunction


class Runs(Protocol):
    """What runs an example in this process: a backend host, as a worker runs one
    (``vyre_workers.backend_host.BackendHost``), named by what it does so vyre_core never
    imports the worker package."""

    def dispatch(self, program: Program, inputs: Sequence[Any],
                 config: DispatchConfig | None = None) -> Outputs: ...

    def dispatch_sequence(self, sequence: StepSequence, inputs: Sequence[Any],
                          resident: dict[str, int],
                          config: DispatchConfig | None = None) -> SequenceRun: ...

    def allocate_resident(self, byte_len: int) -> int: ...

    def upload_resident(self, handle: int, data: bytes) -> None: ...

    def free_resident(self, handle: int) -> None: ...


@dataclass(frozen=True)
class Example:
    program: Program | StepSequence           # one dispatch, or steps run as one request
    inputs: Sequence[np.ndarray | bytes]     # one per input buffer, ABI order
    expected: Sequence[np.ndarray] | None = None  # one per output; None: no oracle
    ulp: int = 0                              # float outputs may differ by this many ULPs
    config: DispatchConfig | None = None      # e.g. a grid for a 2-D launch
    #: a sequence's resident buffers: their contents, uploaded before each run
    resident: Mapping[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of_kernel(cls, kernel: KernelFunction, dim: int | tuple[int, ...], args: Sequence[Any],
                  expected: Sequence[np.ndarray] | None = None, ulp: int = 0,
                  config: DispatchConfig | None = None) -> Example:
        """The launch ``drv.launch(kernel, dim=dim, args=args)`` as an example: its
        program, its dispatch inputs (the arrays it writes included) and ``dim``; the
        outputs are the arrays the kernel writes, in parameter order."""
        plan = kernel.plan(dim, args)
        return cls(plan.program, plan.inputs, expected, ulp,
                   (config or DispatchConfig()).replace(dim=dim))

    def output_buffers(self) -> list[tuple[str, DType]]:
        """Name and dtype of each output (a sequence's: its returns), in order."""
        return output_buffers(self.program)

    def run(self, drv: Driver, backend: str | None = None) -> Outputs:
        """Run it through ``drv`` on the routed (or named) backend. A sequence's resident
        buffers are allocated there, filled from ``resident``, and freed afterwards."""
        if not isinstance(self.program, StepSequence):
            return drv.dispatch(self.program, self.inputs, backend=backend, config=self.config)
        if not self.resident:
            return drv.dispatch(self.program, self.inputs, backend=backend,
                                config=self.config)
        chosen = drv.route(self.program, backend=backend).backend
        buffers = self.upload_resident(drv, chosen)
        try:
            return drv.dispatch(self.program, self.inputs, resident=buffers, backend=chosen,
                                config=self.config)
        finally:
            for buf in buffers.values():
                buf.free()

    def upload_resident(self, drv: Driver, backend: str) -> dict[str, ResidentBuffer]:
        """The sequence's resident buffers, allocated in one worker of ``backend`` and
        filled from ``resident``."""
        buffers: dict[str, ResidentBuffer] = {}
        for name, data in self.resident.items():
            first = next(iter(buffers.values()), None)
            buffers[name] = drv.allocate_resident(data.nbytes, backend=backend, near=first)
            buffers[name].upload(data)
        return buffers

    def run_in(self, host: Runs) -> list[np.ndarray]:
        """Its outputs from a backend host in this process, as a worker would run it but
        without the process boundary (tests, benchmarks): a sequence's resident buffers
        are allocated there, filled, and freed."""
        config = self.config or DispatchConfig()
        if not isinstance(self.program, StepSequence):
            return host.dispatch(self.program, self.inputs, config)
        handles: dict[str, int] = {}
        try:
            for name, data in self.resident.items():
                handles[name] = host.allocate_resident(data.nbytes)
                host.upload_resident(handles[name], data.tobytes())
            return host.dispatch_sequence(self.program, list(self.inputs), handles,
                                          config).outputs
        finally:
            for handle in handles.values():
                host.free_resident(handle)

    def mismatch(self, outputs: Sequence[np.ndarray]) -> str | None:
        """None when ``outputs`` match ``expected`` (exact bytes, floats within ``ulp``);
        else which output differs and where first."""
        if self.expected is None:
            return None
        return buffers_divergence(self.output_buffers(), self.expected, outputs, self.ulp)
