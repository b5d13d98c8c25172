"""A plugin whose vyre_dispatch takes an argument the contract does not have."""

from vyre_core.contract import hookimpl

VYRE_CONTRACT = 1


@hookimpl
def vyre_backend_id() -> str:
    return "bad-signature"


@hookimpl
def vyre_dispatch(program, inputs, config, stream_handle):
    raise AssertionError("never loaded, so never called")
