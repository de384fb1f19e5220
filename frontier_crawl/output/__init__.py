"""Output: WARC files, the JSONL crawl log and the final report (imports only config)."""

from frontier_crawl.output.crawllog import CrawlLog, LogEntry, iso_time
from frontier_crawl.output.outcomes import Outcome
from frontier_crawl.output.report import CrawlStats, render_report, write_report
from frontier_crawl.output.warc import ArchiveRecord, WarcWriter

__all__ = [
    "ArchiveRecord",
    "CrawlLog",
    "CrawlStats",
    "LogEntry",
    "Outcome",
    "WarcWriter",
    "iso_time",
    "render_report",
    "write_report",
]
