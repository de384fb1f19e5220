"""Output: WARC files, the JSONL crawl log and the final report (imports only config)."""

from frontier_crawl.output.crawllog import CrawlLog, LogEntry, iso_time
from frontier_crawl.output.outcomes import Outcome
from frontier_crawl.output.report import CrawlStats, config_warnings, render_report, write_report
from frontier_crawl.output.warc import ArchiveRecord, Revisit, WarcWriter, truncation_reason

__all__ = [
    "ArchiveRecord",
    "CrawlLog",
    "CrawlStats",
    "LogEntry",
    "Outcome",
    "Revisit",
    "WarcWriter",
    "config_warnings",
    "iso_time",
    "render_report",
    "truncation_reason",
    "write_report",
]
