"""Stands in for a device library (wgpu, cupy, ...): importing it starts a driver thread,
so a test can tell whether discovery imported it."""

import threading

_stop = threading.Event()
driver_thread = threading.Thread(target=_stop.wait, name="fake-gpu-driver", daemon=True)
driver_thread.start()
