"""One crawl over several machines: Redis carries link batches, membership and counters.

Frontiers stay local on each node's disk; Redis holds messages, not the crawl. The only
subsystem that imports ``redis``; ``frontier_crawl.workers`` wires it (see ``node.py`` for
the protocol: partitions, delivery, membership, the end of the crawl; ``view.py`` for the
nodes' live summaries and the cluster's view built from them).
"""

from frontier_crawl.cluster.client import (
    REPORT_WAIT_S,
    ClusterError,
    ClusterRefused,
    ClusterUnavailable,
    Keys,
    Redis,
    redact,
)
from frontier_crawl.cluster.crawlid import crawl_keys
from frontier_crawl.cluster.node import (
    ClusterNode,
    add_batches,
    cluster_reports,
    cluster_status,
    partitions_of,
)
from frontier_crawl.cluster.sender import RemoteSender, batch_id
from frontier_crawl.cluster.view import (
    RateWindow,
    build_view,
    make_summary,
    missing_phrase,
    read_view,
    waiting_sentence,
)

__all__ = [
    "REPORT_WAIT_S",
    "ClusterError",
    "ClusterNode",
    "ClusterRefused",
    "ClusterUnavailable",
    "Keys",
    "RateWindow",
    "Redis",
    "RemoteSender",
    "add_batches",
    "batch_id",
    "build_view",
    "cluster_reports",
    "cluster_status",
    "crawl_keys",
    "make_summary",
    "missing_phrase",
    "partitions_of",
    "read_view",
    "redact",
    "waiting_sentence",
]
