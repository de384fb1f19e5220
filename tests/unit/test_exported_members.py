"""The names the engine and workers packages export (httpx's guard): tests, the CLI and the
runner import them from the package, whatever module of it holds them."""

from __future__ import annotations

import frontier_crawl.engine as engine
import frontier_crawl.workers as workers


def test_engine_exports() -> None:
    assert engine.__all__ == [
        "STATS_BLOB", "CommandSource", "Engine", "FetcherLike", "Layout", "Parts", "PeersLike",
        "PendingLike", "open_parts", "set_aside_state",
    ]  # fmt: skip
    for name in engine.__all__:
        assert getattr(engine, name) is not None
    assert engine.Engine.__module__ == "frontier_crawl.engine.core"


def test_workers_exports() -> None:
    assert workers.__all__ == [
        "Coordinator", "Peers", "cluster_identity", "merge_progress", "merge_reports",
        "merge_status", "node_root", "partition_key", "partition_of", "redis_of",
        "worker_count", "worker_dir",
    ]  # fmt: skip
    for name in workers.__all__:
        assert getattr(workers, name) is not None
