"""Output: WARC files, the JSONL crawl log, feeds and the final report, as JSON and HTML
(imports only config)."""

from frontier_crawl.output.crawllog import CrawlLog, LogEntry, ProblemEntry, iso_time
from frontier_crawl.output.outcomes import SPIDER_PROBLEMS, Outcome
from frontier_crawl.output.report import (
    CrawlStats,
    LogHistogram,
    config_warnings,
    merge_rate_buckets,
    render_report,
    write_report,
)
from frontier_crawl.output.report_html import (
    render_report_html,
    write_report_html,
    write_status_html,
)
from frontier_crawl.output.warc import (
    IDENTICAL_PAYLOAD_DIGEST,
    SERVER_NOT_MODIFIED,
    ArchiveRecord,
    Revisit,
    WarcWriter,
    new_record_id,
    truncation_reason,
)

__all__ = [
    "IDENTICAL_PAYLOAD_DIGEST",
    "SERVER_NOT_MODIFIED",
    "SPIDER_PROBLEMS",
    "ArchiveRecord",
    "CrawlLog",
    "CrawlStats",
    "LogEntry",
    "LogHistogram",
    "Outcome",
    "ProblemEntry",
    "Revisit",
    "WarcWriter",
    "config_warnings",
    "iso_time",
    "merge_rate_buckets",
    "new_record_id",
    "render_report",
    "render_report_html",
    "truncation_reason",
    "write_report",
    "write_report_html",
    "write_status_html",
]
