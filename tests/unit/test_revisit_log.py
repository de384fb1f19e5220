"""The crawl log and the counters of revisits: ``LogEntry.visit`` and the ``unchanged`` outcome."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from rich.console import Console

from frontier_crawl.output import (
    CrawlLog,
    CrawlStats,
    LogEntry,
    Outcome,
    ProblemEntry,
    render_report,
    render_report_html,
)

#: a first fetch's line as the crawler has always written it (byte for byte)
FIRST_FETCH_LINE = (
    b'{"time":"2024-05-01T12:00:00.123Z","url":"http://h.test/a","status":200,'
    b'"outcome":"fetched","error":null,"bytes":1234,"duration_s":0.25,"depth":1,'
    b'"referrer":"http://h.test/","content_type":"text/html","held_s":0.0}\n'
)


def entry(**kw: object) -> LogEntry:
    fields: dict[str, object] = {
        "time": "2024-05-01T12:00:00.123Z", "url": "http://h.test/a", "status": 200,
        "outcome": "fetched", "error": None, "bytes": 1234, "duration_s": 0.25, "depth": 1,
        "referrer": "http://h.test/", "content_type": "text/html",
    }  # fmt: skip
    fields.update(kw)
    return LogEntry(**fields)  # type: ignore[arg-type]


def lines(tmp_path: Path, *entries: LogEntry) -> list[bytes]:
    path = tmp_path / "crawl.jsonl"
    with CrawlLog(path) as log:
        for e in entries:
            log.write(e)
    return path.read_bytes().splitlines(keepends=True)


def test_first_fetch_lines_are_unchanged(tmp_path: Path) -> None:
    """No ``visit`` key on a first fetch, whether visit is left out or given as 0."""
    assert lines(tmp_path, entry(), entry(visit=0)) == [FIRST_FETCH_LINE, FIRST_FETCH_LINE]


def test_revisit_lines_carry_the_visit(tmp_path: Path) -> None:
    got = lines(
        tmp_path,
        entry(visit=3, outcome=Outcome.UNCHANGED, bytes=1234),
        entry(visit=1, outcome=Outcome.NOT_MODIFIED, status=304, bytes=0),
        ProblemEntry(**{**msgspec.structs.asdict(entry(visit=2)), "outcome": "callback-error",
                        "message": "KeyError: 'x'", "where": "s.py:1 in S.parse"}),
    )  # fmt: skip
    parsed = [json.loads(line) for line in got]
    assert [(p["outcome"], p["visit"]) for p in parsed] == [
        ("unchanged", 3), ("not-modified", 1), ("callback-error", 2)
    ]  # fmt: skip
    assert got[0] == FIRST_FETCH_LINE.replace(b'"fetched"', b'"unchanged"').replace(
        b"0.0}\n", b'0.0,"visit":3}\n'
    )
    decoded = msgspec.json.decode(got[0], type=LogEntry)
    assert decoded.visit == 3
    assert msgspec.json.decode(FIRST_FETCH_LINE, type=LogEntry).visit is msgspec.UNSET


def test_unchanged_is_counted_beside_not_modified() -> None:
    """An unchanged revisit is a 2xx with its bytes, counted as ``unchanged``, not as a page
    fetched (neither is a 304); the console report shows both."""
    stats = CrawlStats()
    stats.record(Outcome.FETCHED, 200, None, 100)
    stats.record(Outcome.UNCHANGED, 200, None, 100)
    stats.record(Outcome.UNCHANGED, 200, None, 100)
    stats.record(Outcome.NOT_MODIFIED, 304, None, 0)
    report = stats.report(2.0, {})
    assert (report["fetched"], report["unchanged"], report["not_modified"]) == (1, 2, 1)
    assert report["bytes"] == 300
    assert report["status_classes"] == {"1xx": 0, "2xx": 3, "3xx": 1, "4xx": 0, "5xx": 0}
    assert report["outcomes"] == {"fetched": 1, "not-modified": 1, "unchanged": 2}
    console = Console(record=True, width=120, color_system=None)
    render_report(report, console)
    row = next(r for r in console.export_text().splitlines() if "not modified" in r)
    assert " ".join(row.split()) == "not modified (304) / unchanged (same payload) 1 / 2"
    page = render_report_html(report)
    assert ">unchanged<" in page  # an outcome bar of its own


def test_saved_counters_keep_unchanged_and_read_old_ones() -> None:
    """The counters persist through msgpack (the engine's saved stats): ``unchanged``
    survives a restart, and counters saved before it existed read back with 0."""
    stats = CrawlStats()
    stats.record(Outcome.UNCHANGED, 200, None, 10)
    again = msgspec.msgpack.decode(msgspec.msgpack.encode(stats), type=CrawlStats)
    assert again.unchanged == 1
    old = msgspec.to_builtins(stats)
    del old["unchanged"]
    assert msgspec.convert(old, CrawlStats).unchanged == 0
