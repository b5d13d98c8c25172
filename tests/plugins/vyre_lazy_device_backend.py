"""A plugin whose entry module is small: the device libraries (the fake one and the real
name ``wgpu``) are imported only inside the dispatch, never at discovery."""

from vyre_core.contract import hookimpl

VYRE_CONTRACT = 1


@hookimpl
def vyre_backend_id() -> str:
    return "lazy-device"


@hookimpl
def vyre_backend_precedence() -> int:
    return 10


@hookimpl
def vyre_backend_claims() -> dict:
    return {"supports_subgroup_ops": True, "subgroup_size": 32}


@hookimpl
def vyre_dispatch(program, inputs, config):
    import vyre_fake_gpu_device  # noqa: F401  (opens the "device")
    import wgpu  # noqa: F401

    raise NotImplementedError("discovery must never get here")
