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
from frontier_crawl.figures import count_text, duration_text, per_second, rate_text, this_run_text
from frontier_crawl.output import render_report
from frontier_crawl.output.report import how_it_ended
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


def _revisits_part(p: dict[str, Any]) -> str:
    """A continuous crawl's revisits (all runs) and their rate now."""
    if not p.get("continuous"):
        return ""
    return (f" revisits {count_text(p.get('revisits', 0))} "
            f"({rate_text(p.get('revisits_per_s', 0.0))}/s)")  # fmt: skip


def _this_run(p: dict[str, Any]) -> str:
    """This run's figures, when the crawl had earlier runs (else they are the same)."""
    run = p.get("this_run")
    if not isinstance(run, dict):
        return ""
    if float(p.get("elapsed_s", 0.0)) - float(run.get("elapsed_s", 0.0)) < 0.5:
        return ""
    return this_run_text(run)


def progress_printer(console: Console) -> Progress:
    """A progress callback printing one line per call: the figures every screen shows
    (``figures.py``: pages and elapsed time over every run, pages per second over the last
    ten seconds), this run's apart after a resume."""

    def show(p: dict[str, Any]) -> None:
        run = _this_run(p)
        line = Text.from_markup(
            f"[dim]{duration_text(p['elapsed_s']):>9}[/] pages {count_text(p['pages'])} "
            f"({rate_text(p['pages_per_s'])}/s, last 10 s)" + _revisits_part(p)
            + f" queued {count_text(p['queued'])} in flight {p['in_flight']} hosts "
            f"{count_text(p.get('hosts', 0))}"
            + (f" ({run})" if run else "")
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
    rate_label = str(p.get("rate_label", "pages/s (last 10 s)"))
    grid.add_row(
        count_text(p["pages"]), "pages", rate_text(p["pages_per_s"]), rate_label,
        count_text(p["queued"]), "queued", count_text(p["in_flight"]), "in flight",
    )  # fmt: skip
    extra = Text()
    second = [count_text(hosts), "hosts", duration_text(p["elapsed_s"]), "elapsed (all runs)"]
    if p.get("continuous"):
        second += [count_text(p.get("revisits", 0)), "revisits",
                   rate_text(p.get("revisits_per_s", 0.0)), "revisits/s"]  # fmt: skip
    grid.add_row(*second, *[""] * (8 - len(second)))
    run = _this_run(p)
    if run:
        extra.append(run, style="dim")
    if p.get("ended"):
        extra.append(("\n" if extra else "") + str(p["ended"]), style="bold")
    named = _bottleneck(p)
    if named is not None and extra:
        extra.append("\n")
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


def _section(report: dict[str, Any], key: str) -> dict[str, Any]:
    value = report.get(key)
    return value if isinstance(value, dict) else {}


def final_progress(report: dict[str, Any]) -> dict[str, Any]:
    """The panel's last frame, from the report (so it never shows figures older than the
    report's): the whole crawl's pages per second, nothing in flight."""
    frontier, fresh = _section(report, "frontier"), _section(report, "freshness")
    return {
        "pages": int(report.get("fetched", 0)),
        "pages_per_s": float(report.get("pages_per_s", 0.0)),
        "rate_label": "pages/s (whole crawl)",
        "revisits": int(report.get("revisits", 0)),
        "revisits_per_s": per_second(int(report.get("revisits", 0)),
                                     float(report.get("elapsed_s", 0.0))),
        "continuous": bool(fresh.get("enabled")),
        "queued": int(frontier.get("queued", 0)),
        "in_flight": 0,
        "hosts": int(frontier.get("hosts", 0)),
        "elapsed_s": float(report.get("elapsed_s", 0.0)),
        "this_run": report.get("this_run"),
        "ended": how_it_ended(report),
    }


def where_lines(report: dict[str, Any]) -> list[str]:
    """Where the run's outputs are: the reports, the WARC files, the crawl log(s)."""
    root = Path(str(report.get("output_dir", ".")))
    lines = [f"report:      {root / 'report.html'}", f"             {root / 'report.json'}"]
    warcs = [Path(str(w)) for w in report.get("warc_files") or []]
    if warcs:
        dirs = sorted({str(w.parent) for w in warcs})
        lines.append(f"WARC files:  {len(warcs):,} in {', '.join(dirs)}")
    else:
        lines.append("WARC files:  none")
    logs = [str(p) for p in report.get("crawl_logs") or []]
    if logs:
        lines.append(f"crawl log:   {logs[0]}" + (f" (and {len(logs) - 1} more, one per worker)"
                                                   if len(logs) > 1 else ""))
    return lines


def print_ending(report: dict[str, Any], console: Console) -> None:
    """The last lines of every run: how it ended and where its outputs are."""
    console.print(Text(how_it_ended(report), style="bold"), soft_wrap=True)
    for line in where_lines(report):
        console.print(line, highlight=False, soft_wrap=True, markup=False)


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
    ending: bool = True,
) -> dict[str, Any]:
    """Run (or resume) one crawl (node ``node`` of a cluster crawl) and print its report.
    ``config_path``: the file a reload (SIGHUP, ``ctl reload``) reads again; ``ending``: end
    with how it ended and where its outputs are (the demo says it after its own lines)."""
    check_output_dirs(settings, node_root(settings, node))  # before anything is read
    probe_output_dir(node_root(settings, node))
    shown: list[Progress] = [progress_printer(console)]
    live = console.is_terminal and settings.output.progress_interval_s > 0

    def listening(address: str) -> None:
        where = f"--config {config_path}" if config_path is not None else "--config crawl.toml"
        if node is not None:
            where += f" --node {node}"
        console.print(f"dashboard: http://{address}/ (with its token: frontier-crawl ctl "
                      f"{where} dashboard)", highlight=False, soft_wrap=True, markup=False)
    if settings.workers.processes != 1 or settings.cluster.redis_url:
        from frontier_crawl.workers import Coordinator

        coordinator = Coordinator(
            settings, node, config_path=config_path, on_progress=lambda p: shown[0](p),
            on_listening=listening,
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

        engine = Engine(settings, on_progress=lambda p: shown[0](p), config_path=config_path,
                        on_listening=listening)
        console.print(
            f"crawling {len(settings.crawl.seeds)} seed(s) into "
            f"[bold]{settings.crawl.output_dir}[/]",
            highlight=False,
        )
        run = engine.run
    if live:
        with live_progress(console) as shown[0]:
            report = run()
            shown[0](final_progress(report))  # the last frame: the report's figures
    else:
        report = run()
    render_report(report, console)
    if settings.output.wacz and report.get("complete"):
        write_wacz(settings, console, node)
    if ending:
        print_ending(report, console)
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


def print_report(settings: CrawlSettings, console: Console) -> int:
    """``report`` (one machine, one process or several): the report of the crawl's last run
    printed again from ``output_dir/report.json``, its ``report.html`` written again, and
    how it ended and where its outputs are. 1 when there is no report yet (the crawl never
    finished a run: a running crawl's figures are ``ctl status``'s)."""
    import json

    from frontier_crawl.output import write_report_html

    root = Path(settings.crawl.output_dir)
    path = root / "report.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        console.print(f"no report in {root} yet: the crawl has not ended a run there (a running "
                      "crawl's figures: frontier-crawl ctl status)", highlight=False,
                      markup=False, soft_wrap=True)  # fmt: skip
        return 1
    except (OSError, ValueError) as exc:
        console.print(f"cannot read {path}: {exc}", highlight=False, markup=False)
        return 1
    if not isinstance(report, dict):
        console.print(f"{path} does not hold a report", highlight=False, markup=False)
        return 1
    render_report(report, console)
    try:
        write_report_html(root / "report.html", report)
    except OSError as exc:
        console.print(f"cannot write {root / 'report.html'}: {exc}", highlight=False,
                      markup=False)  # fmt: skip
        return 1
    print_ending(report, console)
    return 0


def print_cluster_report(
    settings: CrawlSettings, console: Console, node: int | None = None
) -> int:
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
    html = _cluster_report_html(settings, node)
    if html is not None:
        from frontier_crawl.output import write_report_html

        try:
            write_report_html(html, report)
            console.print(f"report:      {html}", highlight=False, markup=False, soft_wrap=True)
        except OSError as exc:
            console.print(f"cannot write {html}: {exc}", highlight=False, markup=False)
    return 0 if running or (not missing and status["ended"]) else 1


def _cluster_report_html(settings: CrawlSettings, node: int | None) -> Path | None:
    """Where ``report`` writes the cluster's report.html: ``cluster-report.html`` in this
    machine's output directory (``--node`` names it when ``output_dir`` has ``{node}``)
    beside the node's own report.html; None when no directory is known or none exists."""
    out = settings.crawl.output_dir
    if "{node}" in out:
        if node is None:
            return None
        out = out.replace("{node}", str(node))
    root = Path(out)
    return root / "cluster-report.html" if root.is_dir() else None


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
