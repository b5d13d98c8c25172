"""The kit's tests; collected only with ``pytest --vyre-backend=ID``."""

from __future__ import annotations


def test_placeholder_collected(request):
    assert request.config.getoption("vyre_backend")
