"""A plugin whose entry module fails at import (a missing native library)."""

raise ImportError("vyre_broken_import cannot find libvyre_missing_device.so")
