"""vyre-faults: two vyre backends that misbehave on request, for fault-injection tests.

``faults`` (``vyre_faults.backend``) computes like the reference backend; ``faults-wgpu``
(``vyre_faults.wgpu``) is the wgpu backend itself. Each fails as a dispatch's label or
the ``VYRE_FAULTS`` variable asks, in the vocabulary of ``vyre_core.testing.faults``.
This package stays empty so that discovery imports nothing more than each backend."""
