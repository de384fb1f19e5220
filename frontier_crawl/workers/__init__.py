"""Host-partitioned worker processes (``workers.processes = N``) and their coordinator, a room
of their own: ``partition.py`` (who owns a host), ``seam.py`` (the shared status array and the
command pipe between the coordinator and its workers), ``peers.py`` (a worker: :class:`Peers`,
the engine's ``PeersLike`` seam, and its process entry point), ``coordinator.py``
(:class:`Coordinator`: starts the workers, detects the end, serves the control API) and
``merge.py`` (their status, progress and reports merged).

Each worker is an ordinary :class:`~frontier_crawl.engine.Engine` with its own output directory
``output_dir/worker-<i>/`` (frontier LMDB, seen-set, WARC files, crawl log, report). It owns the
hosts whose origin hashes to ``i`` (:func:`~frontier_crawl.frontier.mailbox.owner_of`); links to
other hosts go to their owner in durable batches (``frontier/mailbox.py``).

Termination without timeouts: every worker publishes, in shared memory, whether it is idle
(nothing queued or in flight, inbox empty), how many batches it has committed to others and how
many it has ingested. The coordinator declares the crawl over when two consecutive snapshots are
identical, every worker is idle in both, and batches sent equal batches received: a batch still in
an inbox makes the counts differ, and any activity between the snapshots changes them.
The coordinator then raises a shared flag, every worker finishes normally, and the coordinator
merges their reports into ``output_dir/report.json``.

Signals: the coordinator forwards SIGINT/SIGTERM to the workers (graceful stop, then the merged
report); a second signal is forwarded too and makes everyone exit at once. SIGHUP is forwarded:
every worker reads crawl.toml again.

Control API: with ``[control] listen`` set, the coordinator serves the crawl's one API
(``control/server.py``). Each worker has a pipe from the coordinator, which its loop drains like
the API's queue (and which wakes its wait). Commands are routed: added seeds to the worker that
owns each URL's host (``owner_of``); block, unblock and host delays to every worker (they name a
host, and the owner is a function of the origin: each scheme and port of a host may belong to
another worker); pause, resume, stop, concurrency (per worker process) and reload to all. The
status is every worker's snapshot, merged.

Cluster mode (``cluster.redis_url`` set, ``--node n``): the coordinator is node ``n`` of
``cluster.nodes``; its workers run the partitions ``n*processes + i`` of ``nodes x
processes`` (directories ``worker-<partition>``). A link for a partition of this node takes
the LMDB path above; for another node's, the worker adds the batch to that partition's Redis
stream (``frontier_crawl.cluster``), and the owner node's coordinator moves it into the
worker's inbox. The coordinator's idea of "over" becomes this node's answer to the cluster's
termination probe, and the crawl ends when Redis says every node is over
(``frontier_crawl.cluster.node``).
"""

from typing import TYPE_CHECKING

from frontier_crawl.workers.merge import merge_progress, merge_reports, merge_status
from frontier_crawl.workers.partition import (
    cluster_identity,
    node_root,
    partition_key,
    partition_of,
    redis_of,
    worker_count,
    worker_dir,
)

if TYPE_CHECKING:
    from frontier_crawl.workers.coordinator import Coordinator
    from frontier_crawl.workers.peers import Peers


def __getattr__(name: str) -> object:
    """``Peers`` (a worker's, with the engine it needs) and ``Coordinator`` imported when first
    asked for: the coordinator's process never runs an engine, a 1-process crawl's never
    coordinates."""
    if name == "Peers":
        from frontier_crawl.workers.peers import Peers

        return Peers
    if name == "Coordinator":
        from frontier_crawl.workers.coordinator import Coordinator

        return Coordinator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "Coordinator",
    "Peers",
    "cluster_identity",
    "merge_progress",
    "merge_reports",
    "merge_status",
    "node_root",
    "partition_key",
    "partition_of",
    "redis_of",
    "worker_count",
    "worker_dir",
]
