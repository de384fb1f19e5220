"""Run one crawl with console output: progress lines while it runs, the report at the end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console

from frontier_crawl.config import CrawlSettings
from frontier_crawl.engine import Engine
from frontier_crawl.output import render_report
from frontier_crawl.workers import Coordinator


def progress_printer(console: Console) -> Callable[[dict[str, Any]], None]:
    """A progress callback printing one line per call."""

    def show(p: dict[str, Any]) -> None:
        console.print(
            f"[dim]{p['elapsed_s']:6.1f}s[/] pages {p['pages']:,} ({p['pages_per_s']:.0f}/s) "
            f"queued {p['queued']:,} in flight {p['in_flight']} hosts {p['hosts']:,}"
            + _spider_part(p)
            + ("  [yellow]PAUSED: low disk space[/]" if p.get("paused_for_space") else ""),
            highlight=False,
            soft_wrap=True,
        )

    return show


def _spider_part(p: dict[str, Any]) -> str:
    """Items, and the time per page in callbacks and pipelines (median/p99), with a spider."""
    if "items" not in p:
        return ""
    (cb50, cb99), (pl50, pl99) = p["callback_ms"], p["pipeline_ms"]
    return (
        f" items {p['items']:,} callback {cb50:.2f}/{cb99:.2f} ms pipelines "
        f"{pl50:.2f}/{pl99:.2f} ms (median/p99 per page, {100 * p['spider_share']:.0f}% of time)"
    )


def crawl(settings: CrawlSettings, console: Console) -> dict[str, Any]:
    """Run (or resume) one crawl and print its report."""
    root = settings.crawl.output_dir
    if settings.workers.processes != 1:
        coordinator = Coordinator(settings)
        console.print(
            f"crawling {len(settings.crawl.seeds)} seed(s) into [bold]{root}[/] "
            f"with {coordinator.count} worker processes",
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
