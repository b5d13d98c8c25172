"""vyre's CPU backend: each program compiled once to native code with numba (parallel over
workgroups on every core), with the IR's total semantics kept exactly."""

__version__ = "0.1.0"
