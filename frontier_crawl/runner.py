"""Run one crawl with console output: progress while it runs, the report at the end; the
cluster commands ``report`` and ``add-seeds``.

On a terminal the progress is one live panel (rich ``Live``) redrawn in place at each progress
tick; otherwise (a pipe, a file, a CI log) one plain line per tick, as before.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.text import Text

from frontier_crawl.config import CrawlSettings
from frontier_crawl.output import render_report
from frontier_crawl.safefs import check_output_dirs, probe_output_dir
from frontier_crawl.workers import (
    merge_reports,
    node_root,
    partition_of,
    redis_of,
    worker_count,
)

if TYPE_CHECKING:
    from rich.panel import Panel

    from frontier_crawl.frontier.mailbox import Link

# The engine (with the fetcher, parser and frontier), the coordinator, the cluster and the
# mailbox are imported where a run needs them: a crawl of several processes runs no engine in
# this one (its coordinator's), a crawl of one process no coordinator, and only a cluster
# command talks to Redis.

Progress = Callable[[dict[str, Any]], None]


def _bottleneck(p: dict[str, Any]) -> tuple[str, str] | None:
    """(name, sentence) of the progress snapshot's bottleneck, once the engine names one."""
    b = p.get("bottleneck")
    if isinstance(b, dict):
        return str(b.get("name", "")), str(b.get("detail", ""))
    if isinstance(b, str) and b:  # "name: detail", the engine's progress line form
        name, _, detail = b.partition(": ")
        return name, detail
    return None


def progress_printer(console: Console) -> Progress:
    """A progress callback printing one line per call."""

    def show(p: dict[str, Any]) -> None:
        line = Text.from_markup(
            f"[dim]{p['elapsed_s']:6.1f}s[/] pages {p['pages']:,} ({p['pages_per_s']:.0f}/s) "
            f"queued {p['queued']:,} in flight {p['in_flight']} hosts {p['hosts']:,}"
            + _spider_part(p)
            + ("  [yellow]PAUSED: low disk space[/]" if _space_unsaid(p) else "")
        )
        named = _bottleneck(p)
        if named is not None:  # crawl-chosen text (host names): appended as plain text
            line.append(f"  {named[0]}: {named[1]}" if named[1] else f"  {named[0]}", "cyan")
        if p.get("waiting"):  # a cluster node: the nodes it waits for, and how long
            line.append(f"  {p['waiting']}", "yellow")
        console.print(line, highlight=False, soft_wrap=True)

    return show


def _space_unsaid(p: dict[str, Any]) -> bool:
    """Paused for disk space, and the bottleneck does not already say so (it does while it
    is ``paused``; a stop or a full Redis takes precedence)."""
    return bool(p.get("paused_for_space")) and "low disk space" not in str(p.get("bottleneck"))


def _spider_part(p: dict[str, Any]) -> str:
    """Items, and the time per page in callbacks and pipelines (median/p99), with a spider."""
    if "items" not in p:
        return ""
    (cb50, cb99), (pl50, pl99) = p["callback_ms"], p["pipeline_ms"]
    return (
        f" items {p['items']:,} callback {cb50:.2f}/{cb99:.2f} ms pipelines "
        f"{pl50:.2f}/{pl99:.2f} ms (median/p99 per page, {100 * p['spider_share']:.0f}% of time)"
    )


def progress_panel(p: dict[str, Any]) -> Panel:
    """The live panel for one progress snapshot."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table

    grid = Table.grid(padding=(0, 3))
    for _ in range(4):
        grid.add_column(justify="right", style="bold")
        grid.add_column(style="dim")
    hosts = p.get("hosts", 0)
    grid.add_row(
        f"{p['pages']:,}", "pages", f"{p['pages_per_s']:,.1f}", "pages/s",
        f"{p['queued']:,}", "queued", f"{p['in_flight']:,}", "in flight",
    )  # fmt: skip
    extra = Text()
    if isinstance(hosts, int):
        grid.add_row(f"{hosts:,}", "hosts", f"{p['elapsed_s']:,.0f} s", "elapsed", "", "", "", "")
    named = _bottleneck(p)
    if named is not None:
        extra.append("bottleneck ", style="dim")
        extra.append(named[0], style="bold cyan")
        if named[1]:
            extra.append(f": {named[1]}")  # plain text: it may name hosts, never markup
    spider = _spider_part(p)
    if spider:
        extra.append(("\n" if extra else "") + spider.strip(), style="dim")
    if _space_unsaid(p):
        extra.append("\nPAUSED: low disk space", style="bold yellow")
    if p.get("waiting"):
        extra.append(("\n" if extra else "") + str(p["waiting"]), style="yellow")
    parts: list[Table | Text] = [grid]
    if extra:
        parts.append(extra)
    return Panel(Group(*parts), title="frontier-crawl", title_align="left", border_style="blue",
                 expand=False)  # fmt: skip


@contextmanager
def live_progress(console: Console) -> Iterator[Progress]:
    """A progress callback redrawing one panel in place (for a terminal). Log lines written
    to stderr meanwhile are printed above the panel, not across it (rich's ``Live`` imported
    here: only a crawl on a terminal draws one)."""
    from rich.live import Live

    with Live(console=console, auto_refresh=False, transient=False) as live:
        moved = _log_streams_to(sys.stderr)  # Live's proxy now: it prints above the panel

        def show(p: dict[str, Any]) -> None:
            live.update(progress_panel(p), refresh=True)

        try:
            yield show
        finally:
            for handler, stream in moved:
                handler.setStream(stream)


def _log_streams_to(stream: TextIO) -> list[tuple[logging.StreamHandler[TextIO], TextIO]]:
    """Point the root logger's stderr handlers at ``stream``; (handler, old stream) pairs."""
    moved: list[tuple[logging.StreamHandler[TextIO], TextIO]] = []
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.__stderr__:
            old = handler.setStream(stream)
            if old is not None:
                moved.append((handler, old))
    return moved


def crawl(
    settings: CrawlSettings,
    console: Console,
    config_path: Path | None = None,
    node: int | None = None,
) -> dict[str, Any]:
    """Run (or resume) one crawl (node ``node`` of a cluster crawl) and print its report.
    ``config_path``: the file a reload (SIGHUP, ``ctl reload``) reads again."""
    check_output_dirs(settings, node_root(settings, node))  # before anything is read
    probe_output_dir(node_root(settings, node))
    shown: list[Progress] = [progress_printer(console)]
    live = console.is_terminal and settings.output.progress_interval_s > 0
    if settings.workers.processes != 1 or settings.cluster.redis_url:
        from frontier_crawl.workers import Coordinator

        coordinator = Coordinator(
            settings, node, config_path=config_path, on_progress=lambda p: shown[0](p)
        )
        where = (
            f" as node {node} of {settings.cluster.nodes}" if coordinator.node is not None else ""
        )
        console.print(
            f"crawling {len(settings.crawl.seeds)} seed(s) into [bold]{coordinator.root}[/] "
            f"with {coordinator.count} worker processes{where}",
            highlight=False,
        )
        run: Callable[[], dict[str, Any]] = coordinator.run
    else:
        from frontier_crawl.engine import Engine

        engine = Engine(settings, on_progress=lambda p: shown[0](p), config_path=config_path)
        console.print(
            f"crawling {len(settings.crawl.seeds)} seed(s) into "
            f"[bold]{settings.crawl.output_dir}[/]",
            highlight=False,
        )
        run = engine.run
    if live:
        with live_progress(console) as shown[0]:
            report = run()
    else:
        report = run()
    render_report(report, console)
    if settings.output.wacz and report.get("complete"):
        write_wacz(settings, console, node)
    return report


def write_wacz(settings: CrawlSettings, console: Console, node: int | None = None) -> int:
    """``frontier-crawl wacz`` (and ``output.wacz`` once a crawl completes): package the
    crawl's finished WARC files into ``output_dir/<warc_prefix>.wacz``, holding the crawl's
    state lock meanwhile (no run of the crawl may start, and none may be running). 0 when
    written, 1 when there was nothing to package or packaging failed, 2 when the crawl runs."""
    from frontier_crawl.output.wacz import package_wacz, wacz_path
    from frontier_crawl.proctree import StateLock, StateLocked

    root = node_root(settings, node)
    out = wacz_path(root, settings.output.warc_prefix)
    if not (root / "state").is_dir():
        console.print(f"frontier-crawl wacz: {root} holds no crawl (no state/ directory)",
                      highlight=False, soft_wrap=True)  # fmt: skip
        return 1
    try:
        lock = StateLock.acquire(root / "state", wait_s=0.0)
    except StateLocked as exc:
        console.print(f"frontier-crawl wacz: {exc}", highlight=False, soft_wrap=True)
        return 2
    try:
        console.print(f"packaging the WARC files of {root} into {out} ...", highlight=False,
                      soft_wrap=True)
        seeds = ", ".join(settings.crawl.seeds[:5])
        result = package_wacz(root, out, title=f"frontier-crawl: {root.name}", description=seeds)
    except (ValueError, RuntimeError, OSError) as exc:
        console.print(f"frontier-crawl wacz: not written: {exc}", highlight=False, soft_wrap=True)
        return 1
    finally:
        lock.release()
    size = result.bytes / 2**20
    console.print(f"WACZ: {result.path} ({result.warc_files} WARC file(s), {result.pages} "
                  f"page(s), {size:.1f} MiB)", highlight=False, soft_wrap=True)  # fmt: skip
    return 0


def print_cluster_report(settings: CrawlSettings, console: Console) -> int:
    """``report``: the sum of the reports the nodes published to Redis (at the end of each
    run), and the cluster now: every node's live summary and the totals, the nodes that do not
    report (never joined, silent, stopped) and for how long (``cluster/view.py``).

    0 when the crawl is over and every node has published its report, or while the crawl
    runs (some node alive: the figures are live); else 1 (no node runs and the crawl is not
    over: the figures are those of the nodes' last runs)."""
    from frontier_crawl.cluster import (
        REPORT_WAIT_S,
        Redis,
        cluster_reports,
        cluster_status,
        crawl_keys,
        missing_phrase,
        read_view,
    )

    # a short wait, not a node's cluster.unreachable_timeout_s: someone waits for the answer
    link = Redis(
        settings.cluster.redis_url, REPORT_WAIT_S,
        give_up=f"the report command waits {REPORT_WAIT_S:g} s for Redis",
    )  # fmt: skip
    processes = worker_count(settings)
    try:
        keys = crawl_keys(link, settings.cluster.key_prefix)
        reports = cluster_reports(link, keys)
        status = cluster_status(link, keys, processes * settings.cluster.nodes)
        view = read_view(link, keys, settings.cluster.nodes, processes)
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
    running = bool(view["alive"]) and not status["ended"]
    report["live"] = view
    report["nodes_not_reporting"] = [missing_phrase(m) for m in view["missing"]]
    report["running"] = running
    render_report(report, console)
    return 0 if running or (not missing and status["ended"]) else 1


def add_seeds(settings: CrawlSettings, path: Path, console: Console) -> int:
    """``add-seeds``: each URL (canonical, crawlable) to the partition that owns its host, in
    batches of at most ``cluster.max_batch_bytes``, one Redis transaction each; a running
    cluster crawls them at once, an ended one when its nodes are started again (before any
    node started: the crawl's identity is stored, as the first node does). Depth 0, as seeds;
    the owner applies the scope and the seen-set."""
    from frontier_crawl.cluster import add_batches, crawl_keys
    from frontier_crawl.frontier.mailbox import encode_batches
    from frontier_crawl.frontier.urls import canonicalize, origin
    from frontier_crawl.workers.partition import CLUSTER_UPGRADABLE, cluster_identity

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
        by_partition.setdefault(owner, []).append((url, 0, None, 0, "", b"", 0))
    cap = settings.cluster.max_batch_bytes
    batches = {p: encode_batches(links, cap) for p, links in by_partition.items()}
    link = redis_of(settings)
    try:
        keys = crawl_keys(
            link, settings.cluster.key_prefix, cluster_identity(settings), CLUSTER_UPGRADABLE
        )
        n = add_batches(link, keys, batches) if batches else 0
    finally:
        link.close()
    urls = sum(len(v) for v in by_partition.values())
    console.print(
        f"added {urls} seed(s) in {n} batch(es) for {len(batches)} partition(s)"
        + (f"; {bad} line(s) are not crawlable URLs, skipped" if bad else ""),
        highlight=False,
    )
    return 0
