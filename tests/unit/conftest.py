"""The unit tier touches no Kuzu database and no network: a unit test that tries fails at once, naming the tier.

Tests that need either belong in tests/integration (real Kuzu, loopback servers) or tests/e2e (a real LLM).
"""

from __future__ import annotations

import socket
from typing import Any

import kuzu
import pytest


class TierViolation(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _unit_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_kuzu(*args: Any, **kwargs: Any) -> None:
        raise TierViolation("a unit test opened a Kuzu database: move it to tests/integration")

    def no_network(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise TierViolation(f"a unit test connected to {address}: move it to tests/integration")
        return real_connect(self, address)

    real_connect = socket.socket.connect
    monkeypatch.setattr(kuzu.Database, "__init__", no_kuzu)
    monkeypatch.setattr(socket.socket, "connect", no_network)
