"""Run one crawl with console output: progress lines while it runs, the report at the end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

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
            + ("  [yellow]PAUSED: low disk space[/]" if p.get("paused_for_space") else "")
            + (f"  [cyan]{escape(p['bottleneck'])}[/]" if p.get("bottleneck") else ""),
            highlight=False,
            soft_wrap=True,
        )

    return show


def crawl(
    settings: CrawlSettings, console: Console, config_path: Path | None = None
) -> dict[str, Any]:
    """Run (or resume) one crawl and print its report. ``config_path``: the file a reload
    (SIGHUP, ``ctl reload``) reads again."""
    root = settings.crawl.output_dir
    if settings.workers.processes != 1:
        coordinator = Coordinator(settings, config_path=config_path)
        console.print(
            f"crawling {len(settings.crawl.seeds)} seed(s) into [bold]{root}[/] "
            f"with {coordinator.count} worker processes",
            highlight=False,
        )
        report = coordinator.run()
    else:
        engine = Engine(settings, on_progress=progress_printer(console), config_path=config_path)
        console.print(
            f"crawling {len(settings.crawl.seeds)} seed(s) into [bold]{root}[/]", highlight=False
        )
        report = engine.run()
    render_report(report, console)
    return report
