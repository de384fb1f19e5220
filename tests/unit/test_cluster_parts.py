"""Cluster parts without Redis: the password never shown, config and usage errors (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from frontier_crawl.cluster import batch_id, partitions_of, redact
from frontier_crawl.cluster.crawlid import differing_keys

GOOD = """
[crawl]
seeds = ["http://example.test/"]
output_dir = "out-{node}"
"""


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:pw@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("rediss://user:p%40ss@redis.example:6380/2", "rediss://:***@redis.example:6380/2"),
        ("redis://:pw@[::1]/0", "redis://:***@[::1]/0"),
        ("redis://user@host/0", "redis://:***@host/0"),
        ("redis://host/0?password=pw&db=1", "redis://host/0?password=***&db=1"),
        ("rediss://:pw@h:1/0?ssl_ca_certs=/a/ca.pem", "rediss://:***@h:1/0?ssl_ca_certs=/a/ca.pem"),
    ],
)
def test_redact_hides_the_password(url: str, shown: str) -> None:
    assert redact(url) == shown
    assert "pw" not in redact(url) and "p%40ss" not in redact(url)


def test_partitions_and_batch_ids() -> None:
    assert list(partitions_of(0, 2)) == [0, 1] and list(partitions_of(2, 2)) == [4, 5]
    assert batch_id(b"abc") == batch_id(b"abc") != batch_id(b"abd")
    assert len(batch_id(b"")) == 16
    assert differing_keys({"a": 1, "b": [1]}, {"a": 1, "b": [2], "c": 0}) == ["b", "c"]


def _cli(tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("snippet", "args", "expected"),
    [
        ('[cluster]\nredis_url = "http://x/"\n', ["--node", "0"], "cluster.redis_url: must start"),
        ('[cluster]\nredis_url = "redis://x/"\nnodes = 0\n', ["--node", "0"], "cluster.nodes"),
        ("", ["--node", "0"], "--node needs a cluster: set cluster.redis_url"),
        ("", ["add-seeds", "urls.txt"], "add-seeds needs a cluster"),
        ('[cluster]\nredis_url = "redis://:pw@x/"\n', [], "start each node with --node N"),
    ],
)
def test_cluster_usage_errors_exit_2(
    tmp_path: Path, snippet: str, args: list[str], expected: str
) -> None:
    proc = _cli(tmp_path, GOOD + snippet, *args)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert ":pw@" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out-0").exists()


@pytest.mark.parametrize(
    ("origin", "key"),
    [
        ("http://www.example.co.uk:8080", "example.co.uk"),
        ("https://a.b.example.com", "example.com"),
        ("http://example.com", "example.com"),
        ("http://foo.github.io", "foo.github.io"),  # a private suffix: each site its own
        ("http://alpha.demo:8000", "alpha.demo"),  # unknown TLD: the "*" rule
        ("http://127.0.0.1:8000", "127.0.0.1"),
        ("http://[::1]:8000", "::1"),
        ("http://co.uk", "co.uk"),  # a public suffix itself
    ],
)
def test_partition_by_registered_domain(origin: str, key: str) -> None:
    from frontier_crawl.workers import partition_key, partition_of

    assert partition_key(origin, "registered-domain") == key
    assert partition_key(origin, "host") == origin
    # every host of a site in one partition, whatever the scheme, port or subdomain
    sites = [f"{s}://{h}.example.co.uk{p}" for s in ("http", "https") for h in "abcdefgh"
             for p in ("", ":8080")]  # fmt: skip
    assert len({partition_of(o, 7, "registered-domain") for o in sites}) == 1
    assert len({partition_of(o, 7, "host") for o in sites}) > 1


@pytest.mark.timeout(60)
def test_check_does_not_print_the_password(tmp_path: Path) -> None:
    proc = _cli(tmp_path, GOOD + '[cluster]\nredis_url = "redis://:pw-123@h:6379/0"\n', "--check")
    assert proc.returncode == 0, proc.stderr
    assert 'redis_url = "redis://:***@h:6379/0"' in proc.stdout and "pw-123" not in proc.stdout
