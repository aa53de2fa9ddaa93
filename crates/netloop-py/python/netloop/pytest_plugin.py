"""pytest integration, registered through the ``pytest11`` entry point once
the package is installed:

- ``netloop_network``: a fresh :class:`netloop.Network` named after the test;
  whatever the test started is stopped (and torn down) when it ends, passed
  or failed.
- ``netloop_real_network``: the same, for tests with real hosts: skipped,
  with the reason, where real hosts can't be created (not root, no ``ip``).
- the marker ``@pytest.mark.netloop_real`` skips a test the same way.

With ``NETLOOP_REQUIRE_REAL=1`` in the environment (``scripts/test`` sets it
when run as root, so in CI) such a test fails instead of skipping: a suite
that silently skipped its real-host tests would prove nothing.
"""

from __future__ import annotations

import os
import re
from typing import Iterator

import pytest

from .network import Network, can_run_real_hosts


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "netloop_real: the test creates real hosts (network namespaces); skipped where it can't",
    )


def require_real_hosts() -> None:
    """Skips the calling test (fails it under ``NETLOOP_REQUIRE_REAL=1``)
    where real hosts can't be created, saying why."""
    why = can_run_real_hosts()
    if not why:
        return
    message = f"netloop real hosts unavailable: {why}"
    if os.environ.get("NETLOOP_REQUIRE_REAL") == "1":
        pytest.fail(f"{message} (NETLOOP_REQUIRE_REAL=1: required here)")
    pytest.skip(message)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("netloop_real") is not None:
        require_real_hosts()


def _network(request: pytest.FixtureRequest) -> Iterator[Network]:
    # Network names become part of log file names: keep them tame.
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:60]
    net = Network(name)
    try:
        yield net
    finally:
        if net.started:
            net.stop()


@pytest.fixture
def netloop_network(request: pytest.FixtureRequest) -> Iterator[Network]:
    """A network for this test, torn down at its end."""
    yield from _network(request)


@pytest.fixture
def netloop_real_network(request: pytest.FixtureRequest) -> Iterator[Network]:
    """A network for a test with real hosts; skipped where they can't run."""
    require_real_hosts()
    yield from _network(request)
