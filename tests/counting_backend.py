"""A test backend: the reference interpreter behind the contract with the reference's
limits, counting how many dispatches reach it."""

from __future__ import annotations

import vyre_reference
from vyre_core.contract import Capabilities


class CountingBackend:
    VYRE_CONTRACT = 1

    def __init__(self) -> None:
        self.calls = 0

    def vyre_backend_id(self) -> str:
        return "counting"

    def vyre_dispatch(self, program, inputs, config):
        self.calls += 1
        return vyre_reference.run(program, inputs, grid=config.grid_override)

    def vyre_capabilities(self) -> Capabilities:
        return Capabilities(max_workgroup_size=(1024, 1024, 64),
                            max_invocations_per_workgroup=1024,
                            max_workgroups_per_dimension=self.grid_limit(),
                            max_storage_buffer_bytes=2**31, max_workgroup_memory_bytes=1 << 16)

    def grid_limit(self) -> int:
        return 65535
