"""vyre's fault-injection fixtures, a pytest plugin (entry point ``pytest11``) that every
suite in an environment with vyre may use; docs/fault-injection.md has a worked example.

* ``vyre_driver``: a Driver with tight fault timings (``TIGHT``; a ``vyre_driver`` marker
  changes them, a group by the fields it names:
  ``@pytest.mark.vyre_driver(restart={"max_restarts": 1})``), closed after the test;
* ``vyre_workers``: its workers (``Workers``): kill, freeze, resume, lose a device, wait;
* ``vyre_startup_faults``: ``vyre_startup_faults("crash_prepare")`` makes the workers that
  start from then on fail so (``VYRE_FAULTS``), for this test only;
* ``vyre_full_disk``: the driver's run directory on a small tmpfs the test can ``fill()``
  and ``free()`` (root only: skipped elsewhere, saying why);
* ``vyre_stalls``: when this test's process did not run (``Stalls``), to add to a
  deadline's bound so that a loaded machine's stall is not taken for a late call.

The fault backend is the ``vyre-faults`` distribution (backend ``faults``, and
``faults-wgpu`` for device loss inside wgpu).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from vyre_core.driver import Driver
    from vyre_core.testing.disk import SmallDisk
    from vyre_core.testing.waiting import Stalls
    from vyre_core.testing.workers import Workers


def __getattr__(name: str) -> Any:
    """``TIGHT`` (vyre_core/testing/tight.py), loaded on first use: this plugin loads in
    every pytest run of an environment with vyre, and pays for nothing until then."""
    if name == "TIGHT":
        from vyre_core.testing.tight import TIGHT

        return TIGHT
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "vyre_driver(**options): PoolOptions of the "
                                       "vyre_driver fixture, over its tight defaults "
                                       "(options_over(TIGHT, **options))")


@pytest.fixture
def vyre_driver(request: pytest.FixtureRequest) -> Iterator[Driver]:
    from vyre_core.driver import Driver
    from vyre_core.testing.tight import TIGHT, options_over

    if "vyre_full_disk" in request.fixturenames:  # (its run directory goes there)
        request.getfixturevalue("vyre_full_disk")
    marker = request.node.get_closest_marker("vyre_driver")
    options = options_over(TIGHT, **(marker.kwargs if marker else {}))
    with Driver(options=options) as driver:
        yield driver


@pytest.fixture
def vyre_workers(vyre_driver: Driver) -> Workers:
    from vyre_core.testing.workers import Workers

    return Workers(vyre_driver)


@pytest.fixture
def vyre_startup_faults(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    from vyre_core.testing.faults import STARTUP_ENV, startup_faults

    monkeypatch.delenv(STARTUP_ENV, raising=False)

    def start_with(*items: str) -> None:
        monkeypatch.setenv(STARTUP_ENV, startup_faults(*items))

    return start_with


@pytest.fixture
def vyre_full_disk() -> Iterator[SmallDisk]:
    from vyre_core.supervisor.rundir import ENV
    from vyre_core.testing.disk import DiskUnavailable, SmallDisk

    try:
        disk = SmallDisk().__enter__()
    except DiskUnavailable as exc:
        pytest.skip(f"vyre_full_disk: {exc}")
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(ENV, str(disk.path))
            yield disk
    finally:
        disk.__exit__(None, None, None)


@pytest.fixture
def vyre_stalls() -> Iterator[Stalls]:
    """This test's ``Stalls``: when its process did not run, to allow for in a deadline."""
    from vyre_core.testing.waiting import Stalls

    with Stalls() as stalls:
        yield stalls
