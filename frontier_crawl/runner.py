"""Run one crawl with console output: progress lines while it runs, the report at the end;
the cluster commands ``report`` and ``add-seeds``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from frontier_crawl.cluster import Keys, add_batches, cluster_reports, cluster_status
from frontier_crawl.config import CrawlSettings
from frontier_crawl.engine import Engine
from frontier_crawl.frontier.mailbox import Link, encode_links
from frontier_crawl.frontier.urls import canonicalize, origin
from frontier_crawl.output import render_report
from frontier_crawl.workers import (
    Coordinator,
    merge_reports,
    partition_of,
    redis_of,
    worker_count,
)


def progress_printer(console: Console) -> Callable[[dict[str, Any]], None]:
    """A progress callback printing one line per call."""

    def show(p: dict[str, Any]) -> None:
        console.print(
            f"[dim]{p['elapsed_s']:6.1f}s[/] pages {p['pages']:,} ({p['pages_per_s']:.0f}/s) "
            f"queued {p['queued']:,} in flight {p['in_flight']} hosts {p['hosts']:,}"
            + ("  [yellow]PAUSED: low disk space[/]" if p.get("paused_for_space") else ""),
            highlight=False,
            soft_wrap=True,
        )

    return show


def crawl(settings: CrawlSettings, console: Console, node: int | None = None) -> dict[str, Any]:
    """Run (or resume) one crawl (node ``node`` of a cluster crawl) and print its report."""
    root = settings.crawl.output_dir
    if settings.workers.processes != 1 or settings.cluster.redis_url:
        coordinator = Coordinator(settings, node)
        where = (
            f" as node {node} of {settings.cluster.nodes}" if coordinator.node is not None else ""
        )
        console.print(
            f"crawling {len(settings.crawl.seeds)} seed(s) into [bold]{coordinator.root}[/] "
            f"with {coordinator.count} worker processes{where}",
            highlight=False,
        )
        report = coordinator.run()
    else:
        engine = Engine(settings, on_progress=progress_printer(console))
        console.print(
            f"crawling {len(settings.crawl.seeds)} seed(s) into [bold]{root}[/]", highlight=False
        )
        report = engine.run()
    render_report(report, console)
    return report


def print_cluster_report(settings: CrawlSettings, console: Console) -> int:
    """``report``: the sum of the reports the nodes published to Redis (at their end); 0 when
    every node has published one and the crawl is over, else 1 (the figures so far)."""
    link = redis_of(settings)
    keys = Keys(settings.cluster.key_prefix)
    try:
        reports = cluster_reports(link, keys)
        status = cluster_status(link, keys, worker_count(settings) * settings.cluster.nodes)
    finally:
        link.close()
    missing = [n for n in range(settings.cluster.nodes) if n not in reports]
    report = merge_reports([reports[n] for n in sorted(reports)])
    report["nodes"] = settings.cluster.nodes
    report["nodes_reported"] = sorted(reports)
    report.update(status)
    if missing:
        report["complete"] = False
        report["nodes_missing"] = missing
    render_report(report, console)
    return 0 if not missing and status["ended"] else 1


def add_seeds(settings: CrawlSettings, path: Path, console: Console) -> int:
    """``add-seeds``: each URL (canonical, crawlable) to the partition that owns its host, in
    one Redis transaction; a running cluster crawls them at once, an ended one when its nodes
    are started again. Depth 0, as seeds; the owner applies the scope and the seen-set."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        console.print(f"cannot read {path}: {exc}", highlight=False)
        return 2
    total = worker_count(settings) * settings.cluster.nodes
    by_partition: dict[int, list[Link]] = {}
    bad = 0
    for line in lines:
        raw = line.split("#", 1)[0].strip()
        if not raw:
            continue
        url = canonicalize(raw)
        if url is None:
            bad += 1
            continue
        owner = partition_of(origin(url), total, settings.workers.partition_by)
        by_partition.setdefault(owner, []).append((url, 0, None, 0))
    batches = {p: [encode_links(links)] for p, links in by_partition.items()}
    link = redis_of(settings)
    try:
        n = add_batches(link, Keys(settings.cluster.key_prefix), batches) if batches else 0
    finally:
        link.close()
    urls = sum(len(v) for v in by_partition.values())
    console.print(
        f"added {urls} seed(s) in {n} batch(es) for {len(batches)} partition(s)"
        + (f"; {bad} line(s) are not crawlable URLs, skipped" if bad else ""),
        highlight=False,
    )
    return 0
