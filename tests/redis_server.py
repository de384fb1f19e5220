"""A real redis-server (Debian's) for the cluster tests and bench, on a free loopback port
with its own directory, AOF on with ``appendfsync always``, stopped by its PID."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

PASSWORD = "s3cret-Pa55word"  #: the tests' Redis password: must never appear in any output

REDIS_SERVER = shutil.which("redis-server")


def free_port() -> int:
    """A port that was free a moment ago: another process may take it before it is used (see
    ``RedisServer.start`` and ``reserved_port``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def reserved_port() -> Iterator[int]:
    """A loopback port that nothing listens on and nobody else can take meanwhile (bound, not
    listening: a connection to it is refused), for tests of an unreachable server that run
    beside others."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


class RedisServer:
    """``start()`` / ``kill()`` (-9) / ``stop()``; ``start()`` again reuses the directory."""

    def __init__(
        self, directory: Path, password: str = "", appendfsync: str = "always", tls: bool = False
    ) -> None:
        if REDIS_SERVER is None:
            pytest.skip("redis-server is not installed (.ci/run installs it)")
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.password = password
        self.appendfsync = appendfsync
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._started = False  #: started once: clients know the port, a restart keeps it
        self.tls = tls
        if tls:  # a CA of the test's own (trustme) and a certificate for 127.0.0.1
            import trustme

            ca = trustme.CA()
            cert = ca.issue_cert("127.0.0.1")
            ca.cert_pem.write_to_path(str(self.dir / "ca.pem"))
            cert.private_key_pem.write_to_path(str(self.dir / "key.pem"))
            cert.cert_chain_pems[0].write_to_path(str(self.dir / "cert.pem"))

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        if self.tls:
            return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_ca_certs={self.dir / 'ca.pem'}"
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
        if self.tls:
            args[1:3] = ["--port", "0", "--tls-port", str(self.port)]
            args += ["--tls-cert-file", str(self.dir / "cert.pem"), "--tls-key-file",
                     str(self.dir / "key.pem"), "--tls-ca-cert-file", str(self.dir / "ca.pem"),
                     "--tls-auth-clients", "no"]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # answered by this redis-server, not by whatever else a test beside it runs there
        client = redis.Redis.from_url(self.url, socket_timeout=1.0, socket_connect_timeout=1.0)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    if client.info("server")["process_id"] == self.proc.pid:
                        break
                    raise redis.ConnectionError("another redis-server answers on this port")
                except redis.RedisError:
                    if self.proc.poll() is not None and not self._started and self._port_taken():
                        # the free port was taken meanwhile (tests run in parallel): no client
                        # knows this port yet, so take another
                        (self.dir / "redis.log").unlink()
                        self.port = free_port()
                        self.start()
                        return
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        raise RuntimeError(
                            f"redis-server did not start: {self.dir / 'redis.log'}"
                        ) from None
                    time.sleep(0.02)
        finally:
            client.close()
        self._started = True

    def _port_taken(self) -> bool:
        """Whether redis-server's log says its port was in use."""
        try:
            return "Address already in use" in (self.dir / "redis.log").read_text()
        except OSError:
            return False

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


def crawl_prefix(client: redis.Redis, base: str = "frontier-crawl") -> str:
    """The prefix of the keys of the crawl Redis names under ``base`` (``cluster/crawlid.py``:
    ``<key_prefix>:<crawl id>``)."""
    import json

    raw = client.get(f"{base}:identity")
    assert raw is not None, f"no crawl under {base}"
    crawl = json.loads(raw).get("crawl")
    return f"{base}:{crawl}" if crawl else base
