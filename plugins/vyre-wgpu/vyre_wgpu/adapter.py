"""The adapter vyre opens and what it says it is: identity, features and limits to ask
for, and whether it is a CPU implementation. Worker-only; wgpu is imported on first use."""

from __future__ import annotations

import os
from typing import Any

from vyre_core.contract import DeviceInfo
from vyre_core.errors import UnsupportedFeatureError
from vyre_wgpu import cffi_parsing

#: Features requested whenever the adapter has them; the lowering emits f16/f64 only for
#: programs that use them, and the probes decide whether they are reported.
OPTIONAL_FEATURES = ("shader-f16", "shader-f64", "timestamp-query", "subgroup")

#: Limits requested at the adapter's own values (the WebGPU defaults are far lower).
USED_LIMITS = (
    "max-compute-workgroup-size-x", "max-compute-workgroup-size-y",
    "max-compute-workgroup-size-z", "max-compute-invocations-per-workgroup",
    "max-compute-workgroups-per-dimension", "max-compute-workgroup-storage-size",
    "max-storage-buffer-binding-size", "max-buffer-size",
    "max-storage-buffers-per-shader-stage", "max-uniform-buffer-binding-size",
    "max-bindings-per-bind-group",
)

#: Graphics APIs whose adapters are devices; OpenGL adapters are devices only where none of
#: these has one (through GL, wgpu offers again the GPUs Vulkan offers: the same devices).
_PRIMARY_APIS = ("Vulkan", "Metal", "D3D12")
_SOFTWARE_NAMES = ("llvmpipe", "lavapipe", "swiftshader", "softpipe")
_NO_ADAPTER_FIX = ("Install a Vulkan driver: on Debian `apt-get install mesa-vulkan-drivers "
                   "libvulkan1` (lavapipe runs on the CPU), or route to another backend "
                   "(backend='reference').")


def wgpu_module():
    """wgpu, imported here only (registration never imports it), with cffi's parsing
    made cheap for this process (``cffi_parsing``: a worker's start 1.5-2 s shorter)."""
    cffi_parsing.apply()
    import wgpu

    return wgpu


def shader_cache_dir() -> str | None:
    """Point Mesa's on-disk shader cache at a directory vyre owns, unless the user set
    ``MESA_SHADER_CACHE_DIR``; must run before the first adapter is requested."""
    current = os.environ.get("MESA_SHADER_CACHE_DIR")
    if current:
        return current
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "vyre", "mesa-shader-cache")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return None  # Mesa falls back to its own default; nothing breaks
    os.environ["MESA_SHADER_CACHE_DIR"] = path
    return path


def no_wayland_noise() -> None:
    """Making its instance, wgpu's OpenGL backend asks libwayland for a display; without an
    absolute ``XDG_RUNTIME_DIR`` (a service, a container, ssh) libwayland cannot connect and
    prints "error: XDG_RUNTIME_DIR is invalid or not set in the environment." on stderr, once
    per try. Then it can reach no display at all, so ``WAYLAND_DISPLAY`` is pointed at an
    absolute path that does not exist: the same failure, said nowhere. Must run before the
    first adapter is requested; leaves a usable Wayland session as it is."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    display = os.environ.get("WAYLAND_DISPLAY", "")
    if runtime.startswith("/") or display.startswith("/") or "WAYLAND_SOCKET" in os.environ:
        return
    os.environ["WAYLAND_DISPLAY"] = "/nonexistent/vyre-no-wayland-session"


def request_adapter(power_preference: str = "high-performance") -> Any:
    """The wgpu adapter vyre uses; UnsupportedFeatureError when there is none."""
    shader_cache_dir()
    no_wayland_noise()
    wgpu = wgpu_module()
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
    except Exception as exc:  # wgpu raises RuntimeError when no backend has an adapter
        raise UnsupportedFeatureError(f"no WebGPU adapter: {type(exc).__name__}: {exc}",
                                      _NO_ADAPTER_FIX) from exc
    if adapter is None:
        raise UnsupportedFeatureError("no WebGPU adapter was found", _NO_ADAPTER_FIX)
    return adapter


def enumerate_adapters() -> list[Any]:
    """The adapters that are devices: those of the primary APIs (OpenGL's only where they
    have none), hardware before software, each group in wgpu's order. A device id is a
    position in this list. Lists adapters only; no device is opened."""
    shader_cache_dir()
    no_wayland_noise()
    try:
        adapters = list(wgpu_module().gpu.enumerate_adapters_sync())
    except Exception as exc:
        raise UnsupportedFeatureError(f"no WebGPU adapter: {type(exc).__name__}: {exc}",
                                      _NO_ADAPTER_FIX) from exc
    if not adapters:
        raise UnsupportedFeatureError("no WebGPU adapter was found", _NO_ADAPTER_FIX)
    primary = [a for a in adapters if dict(a.info).get("backend_type") in _PRIMARY_APIS]
    return sorted(primary or adapters, key=lambda a: is_software(dict(a.info)))


def devices() -> list[DeviceInfo]:
    """The adapters as devices (wgpu reports no memory size)."""
    found = []
    for index, adapter in enumerate(enumerate_adapters()):
        facts = adapter_facts(adapter)
        found.append(DeviceInfo(index, f"{facts['device']} ({facts['backend_type']})",
                                facts["vendor"], None, facts["software_adapter"]))
    return found


def adapter_for(device_id: int | None) -> Any:
    """The adapter of device ``device_id``; the preferred one for None."""
    if device_id is None:
        return request_adapter()
    adapters = enumerate_adapters()
    if not 0 <= device_id < len(adapters):
        raise UnsupportedFeatureError(
            f"backend 'wgpu' has no device {device_id} ({len(adapters)} adapters now)",
            "Name a device `vyre backends --probe` lists in PoolOptions(devices=...).")
    return adapters[device_id]


def adapter_facts(adapter: Any) -> dict[str, Any]:
    """The adapter's identity as plain data (crosses the process boundary)."""
    info = dict(adapter.info)
    facts: dict[str, Any] = {k: str(info.get(k, "") or "") for k in (
        "vendor", "architecture", "device", "description", "backend_type", "adapter_type")}
    for k in ("vendor_id", "device_id"):
        try:
            facts[k] = int(info.get(k, 0) or 0)
        except (TypeError, ValueError):
            facts[k] = 0
    facts["software_adapter"] = is_software(facts)
    return facts


def is_software(facts: dict[str, Any]) -> bool:
    """A CPU implementation of the GPU API (lavapipe, SwiftShader)."""
    if str(facts.get("adapter_type", "")).lower() == "cpu":
        return True
    names = " ".join(str(facts.get(k, "")) for k in ("vendor", "device", "description"))
    return any(n in names.lower() for n in _SOFTWARE_NAMES)


def same_adapter(facts: dict[str, Any], before: dict[str, Any]) -> bool:
    """Whether an adapter offered after a loss is the one the device was on."""
    return all(facts[k] == before[k] for k in ("vendor", "device", "backend_type",
                                                "adapter_type"))
