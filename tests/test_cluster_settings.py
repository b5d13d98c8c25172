"""Which cluster a Driver's workers run on (``cluster=`` / ``VYRE_CLUSTER``), decided
without starting anything: the values vyre knows, a Fix for every other, and a clear
error when Ray is not installed. Pools on a real Ray cluster: tests/faults/test_ray_cluster.py."""

from __future__ import annotations

import sys

import pytest

from vyre_core import Driver
from vyre_core.cluster import connect
from vyre_core.errors import ClusterUnavailableError, InvalidConfigError

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("value, kind, address", [
    (None, "local", None), ("", "local", None), ("local", "local", None), ("ray", "ray", None),
    ("auto", "ray", "auto"), ("10.0.0.5:6379", "ray", "10.0.0.5:6379"),
    ("head.example:6379", "ray", "head.example:6379"),
    ("ray://head.example:10001", "ray", "ray://head.example:10001"),
    (" ray ", "ray", None),
])
def test_the_clusters_vyre_knows(value, kind, address, monkeypatch):
    monkeypatch.delenv(connect.ENV, raising=False)
    spec = connect.parse(value)
    assert (spec.kind, spec.address) == (kind, address)


def test_the_environment_names_it_when_the_argument_does_not(monkeypatch):
    monkeypatch.setenv(connect.ENV, "auto")
    assert connect.parse(None) == connect.ClusterSpec("ray", "auto")
    assert connect.parse("local").local  # the argument wins


@pytest.mark.parametrize("value", ["nowhere", "ray:", "host:0", "host:70000", "ray://host",
                                   "http://host:80", "ray:/x", 5])
def test_anything_else_is_refused_with_a_fix(value, monkeypatch):
    monkeypatch.delenv(connect.ENV, raising=False)
    with pytest.raises(InvalidConfigError) as err:
        connect.parse(value)
    assert "not a cluster vyre knows" in str(err.value) and "'HOST:PORT'" in str(err.value)


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv(connect.ENV, "ray:/x")
    with pytest.raises(InvalidConfigError, match="VYRE_CLUSTER='ray:/x'"):
        Driver()


def test_without_ray_installed_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    with pytest.raises(ClusterUnavailableError) as err:
        Driver(cluster="ray")
    assert "not installed" in str(err.value) and "pip install 'vyre[ray]'" in str(err.value)
