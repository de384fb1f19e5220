"""Fixtures shared by the e2e tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.redis_server import PASSWORD, RedisServer


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A real redis-server of its own (AOF, appendfsync always, the test password), stopped
    by its PID."""
    server = RedisServer(tmp_path / "redis", password=PASSWORD)
    server.start()
    try:
        yield server
    finally:
        server.stop()
