"""A test backend: the reference interpreter behind the contract with the reference's
limits, counting how many dispatches reach it."""

from __future__ import annotations

import vyre_reference


class CountingBackend:
    VYRE_CONTRACT = 1

    def __init__(self) -> None:
        self.calls = 0

    def vyre_backend_id(self) -> str:
        return "counting"

    def vyre_dispatch(self, program, inputs, config):
        self.calls += 1
        return vyre_reference.run(program, inputs, grid=config.grid_override)

    def vyre_max_workgroup_size(self):
        return (1024, 1024, 64)

    def vyre_max_invocations_per_workgroup(self) -> int:
        return 1024

    def vyre_max_workgroups_per_dimension(self) -> int:
        return 65535

    def vyre_max_storage_buffer_bytes(self) -> int:
        return 2**31

    def vyre_max_workgroup_memory_bytes(self) -> int:
        return 1 << 16
