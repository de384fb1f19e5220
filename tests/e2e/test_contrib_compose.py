"""contrib/compose: the two-node cluster's files agree with each other and with the crawler (no
Docker engine here to run them): crawl.toml loads as the nodes load it, names Redis by the
compose service and redis.conf's password; each node service passes its own --node; Redis
starts from redis.conf as written (a real redis-server) with the settings the cluster's
guarantee rests on."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import redis

from frontier_crawl.config import load
from frontier_crawl.config.settings import CrawlSection
from tests.waiting import wait_until

COMPOSE = Path(__file__).resolve().parents[2] / "contrib" / "compose"
CONFIG = "/etc/frontier-crawl/crawl.toml"


def requirepass() -> str:
    for line in (COMPOSE / "redis.conf").read_text().splitlines():
        if line.startswith("requirepass "):
            return line.split(None, 1)[1]
    raise AssertionError("redis.conf sets no requirepass")


def test_compose_nodes_and_config_agree() -> None:
    yaml = pytest.importorskip("yaml")  # PyYAML, with the docs extra (mkdocs reads YAML too)
    compose = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    services = compose["services"]
    settings = load(COMPOSE / "crawl.toml")
    assert settings.cluster.nodes == 2
    nodes = sorted(name for name in services if name.startswith("node"))
    assert len(nodes) == settings.cluster.nodes
    url = urlsplit(settings.cluster.redis_url)
    assert url.hostname in services and url.port == 6379
    assert unquote(url.password or "") == requirepass()
    grace_s = float(str(services[nodes[0]]["stop_grace_period"]).removesuffix("s"))
    for n, name in enumerate(nodes):
        node = services[name]
        assert node["command"] == ["--config", CONFIG, "--node", str(n)]
        mounts = {v.split(":")[1]: v.split(":")[0] for v in node["volumes"]}
        assert mounts[CONFIG] == "./crawl.toml"
        assert mounts[settings.crawl.output_dir] == f"{name}-crawl"  # its own volume
        assert node["depends_on"]["redis"]["condition"] == "service_healthy"
        assert node["build"]["context"] == "../.."  # the repository's Dockerfile
        assert float(str(node["stop_grace_period"]).removesuffix("s")) == grace_s
    assert grace_s > CrawlSection().stop_timeout_s


@pytest.mark.timeout(60)
def test_redis_conf_starts_redis(tmp_path: Path) -> None:
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (.ci/run installs it)")
    sock = tmp_path / "redis.sock"
    # the file as written, but no TCP port, and run in a directory of the test's own (the
    # redis image runs in /data); its FATAL CONFIG FILE ERROR goes to stdout
    proc = subprocess.Popen(
        [server, str(COMPOSE / "redis.conf"), "--port", "0", "--unixsocket", str(sock),
         "--dir", str(tmp_path), "--daemonize", "no", "--logfile", str(tmp_path / "log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
    )  # fmt: skip
    try:
        client = redis.Redis(unix_socket_path=str(sock), password=requirepass())

        def answers() -> bool:
            try:
                return bool(client.ping())
            except (redis.ConnectionError, OSError):  # not listening yet
                return False

        wait_until("redis-server answering", answers, 20, alive=proc)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        client.close()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(10)
