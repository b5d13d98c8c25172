"""vyre's WebGPU backend: programs lowered to WGSL (``lowering``) and run through wgpu
(``device``). Importing this package, or its registration module ``vyre_wgpu.backend``,
never imports wgpu and never opens a device: that happens in the worker, on first use."""

__version__ = "0.1.0"
BACKEND_ID = "wgpu"  # the id routing knows this backend by; every module takes it from here
