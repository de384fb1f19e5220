"""A real redis-server (Debian's) for the cluster tests and bench, on a free loopback port
with its own directory, AOF on with ``appendfsync always``, stopped by its PID."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

REDIS_SERVER = shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """``start()`` / ``kill()`` (-9) / ``stop()``; ``start()`` again reuses the directory."""

    def __init__(self, directory: Path, password: str = "", appendfsync: str = "always") -> None:
        if REDIS_SERVER is None:
            pytest.skip("redis-server is not installed (.ci/run installs it)")
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.password = password
        self.appendfsync = appendfsync
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        args = [
            REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
            "--save", "", "--appendonly", "yes", "--appendfsync", self.appendfsync,
            "--maxmemory-policy", "noeviction", "--daemonize", "no", "--logfile",
            str(self.dir / "redis.log"),
        ]  # fmt: skip
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = self.client()
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except (redis.ConnectionError, redis.BusyLoadingError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(
                        f"redis-server did not start: {self.dir / 'redis.log'}"
                    ) from None
                time.sleep(0.02)
        client.close()

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def kill(self) -> None:
        """kill -9, by its PID."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None
