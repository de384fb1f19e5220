"""Which worker owns a host (a stable hash of its origin or registered domain), where each
worker keeps its files, and the cluster identity that pins the partitioning."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import msgspec
from publicsuffixlist import PublicSuffixList

from frontier_crawl.cluster import (
    Redis,
)
from frontier_crawl.config import CrawlSettings
from frontier_crawl.frontier.identity import LAYOUT_VERSION, UPGRADABLE_LAYOUTS
from frontier_crawl.frontier.mailbox import decode_links, owner_of
from frontier_crawl.frontier.urls import host_of


def worker_count(settings: CrawlSettings) -> int:
    """``workers.processes``, with 0 meaning one per core."""
    return settings.workers.processes or os.cpu_count() or 1


def worker_dir(root: Path, index: int) -> Path:
    return root / f"worker-{index}"


@functools.cache
def _suffixes() -> PublicSuffixList:
    return PublicSuffixList()


def partition_key(origin: str, by: str) -> str:
    """What a host's partition is hashed from (``workers.partition_by``): its origin, or its
    registered domain (an IP address, or a host that is itself a public suffix, by itself)."""
    if by == "host":
        return origin
    host = host_of(origin)
    if not host or host[-1].isdigit() or ":" in host:  # IPv4 (no TLD ends in a digit), IPv6
        return host
    return _suffixes().privatesuffix(host) or host


def partition_of(origin: str, partitions: int, by: str) -> int:
    """The partition that owns ``origin`` (the same in every process and on every node)."""
    return owner_of(partition_key(origin, by), partitions)


def _is_batch(data: bytes) -> bool:
    """Whether stream bytes are a link batch (checked before they reach an inbox, whose
    every entry must decode)."""
    try:
        decode_links(data)
    except msgspec.DecodeError:
        return False
    return True


def node_root(settings: CrawlSettings, node: int | None) -> Path:
    """``crawl.output_dir``, in a cluster crawl with ``{node}`` replaced by the node's number."""
    if not settings.cluster.redis_url or node is None:
        return Path(settings.crawl.output_dir)
    return Path(settings.crawl.output_dir.replace("{node}", str(node)))


def cluster_identity(settings: CrawlSettings) -> dict[str, Any]:
    """What every node of a cluster crawl must agree on: the frontier's identity (its layout
    version), the seeds, the scope and the partitioning."""
    return {
        "layout_version": LAYOUT_VERSION,
        "crawl.seeds": sorted(settings.crawl.seeds),
        "scope.allow_domains": list(settings.scope.allow_domains),
        "scope.exclude": list(settings.scope.exclude),
        "cluster.nodes": settings.cluster.nodes,
        "workers.processes": worker_count(settings),
        "workers.partition_by": settings.workers.partition_by,
    }


#: identity values a cluster may hold from an older version that this one goes on from: the
#: frontier's layouts each node upgrades its own state from (``cluster_identity``'s own value
#: is this version's; the one stored in Redis stays the first node's), and, with any value
#: (None), the seen-set's Bloom filter sizing older versions pinned and this one ignores
CLUSTER_UPGRADABLE: dict[str, list[int] | None] = {
    "layout_version": sorted(UPGRADABLE_LAYOUTS),
    "frontier.seen_capacity": None,
    "frontier.seen_error_rate": None,
}


def redis_of(settings: CrawlSettings) -> Redis:
    c = settings.cluster
    return Redis(c.redis_url, c.unreachable_timeout_s)
