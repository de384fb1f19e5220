"""The report's pages-over-time series (bounded, across runs), its host tallies, and report.html
(self-contained, every crawl-chosen string escaped)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import msgspec

from frontier_crawl.output import (
    CrawlStats,
    merge_rate_buckets,
    render_report_html,
    write_report_html,
    write_status_html,
)
from frontier_crawl.output.report import HOSTS_KEPT, MAX_RATE_BUCKETS
from frontier_crawl.output.report_html import status_report

T0 = 1_800_000_000.0  # a whole minute (T0 % 60 == 0)


def test_pages_over_time_buckets_by_minute_and_divides_by_the_time_it_ran() -> None:
    stats = CrawlStats()
    stats.begin_run(T0 + 10)
    for i in range(30):  # 30 pages in 15 s of the first minute
        stats.record_page_at(T0 + 10 + i * 0.5)
    stats.record_page_at(T0 + 61)
    series = stats.pages_over_time()
    assert [p[:2] for p in series] == [[int(T0), 30], [int(T0) + 60, 1]]
    assert series[0][2] == 50.0  # running from 10 s past the minute to its end
    assert series[1][2] == 1.0  # and 1 s into the next, its last page so far
    alone = CrawlStats()
    alone.begin_run(T0 + 10)
    for i in range(30):
        alone.record_page_at(T0 + 10 + i * 0.5)
    assert alone.pages_over_time() == [[int(T0), 30, 14.5, 0]]  # start to the 30th page


def test_series_survives_a_restart_and_counts_only_running_time() -> None:
    stats = CrawlStats()
    stats.begin_run(T0)
    stats.record_page_at(T0 + 20)
    saved = msgspec.msgpack.encode(stats)
    again = msgspec.msgpack.decode(saved, type=CrawlStats)  # as the engine saves it in LMDB
    again.begin_run(T0 + 3600)  # an hour later
    again.record_page_at(T0 + 3610)
    series = again.pages_over_time()
    assert [p[:2] for p in series] == [[int(T0), 1], [int(T0) + 3600, 1]]
    assert [p[2] for p in series] == [20.0, 10.0]
    assert again.report(1.0, {})["runs"] == 2


def test_series_is_bounded_by_merging_neighbours() -> None:
    stats = CrawlStats()
    stats.begin_run(T0)
    minutes = 5 * MAX_RATE_BUCKETS  # a crawl of three and a half days, a page a minute
    for m in range(minutes):
        stats.record_page_at(T0 + 60 * m)
    assert len(stats.rate_buckets) <= MAX_RATE_BUCKETS
    assert stats.rate_bucket_s == 480.0  # 60 s doubled three times
    assert sum(b[1] for b in stats.rate_buckets) == minutes  # no page lost in a merge


def test_worker_series_merge_on_the_widest_bucket() -> None:
    width, merged = merge_rate_buckets(
        [(60.0, [[T0, 5, 60.0], [T0 + 60, 5, 30.0]]), (120.0, [[T0, 7, 100.0]])]
    )
    assert width == 120.0
    assert merged == [[int(T0), 17, 100.0, 0]]


def test_host_tallies_stay_bounded_and_keep_the_worst() -> None:
    stats = CrawlStats()
    stats.record_host("http://slow.example", 30.0, failed=False)
    for _ in range(5):
        stats.record_host("http://failing.example", 0.1, failed=True)
    for i in range(10 * HOSTS_KEPT):
        stats.record_host(f"http://h{i}.example", 0.01, failed=False)
    assert len(stats.hosts) <= 2 * HOSTS_KEPT
    report = stats.report(1.0, {})
    assert report["slowest_hosts"][0]["host"] == "http://slow.example"  # type: ignore[index]
    assert report["failing_hosts"] == [  # only hosts that failed
        {"host": "http://failing.example", "pages": 5, "failures": 5, "mean_fetch_s": 0.1}
    ]


class _Collect(HTMLParser):
    """Tags, attributes naming outside resources, and the text of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.refs += [v or "" for k, v in attrs if k in ("src", "href", "srcset", "action")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _hostile_report() -> dict[str, object]:
    stats = CrawlStats()
    stats.begin_run(T0)
    for i in range(50):
        stats.record_page_at(T0 + i)
        stats.record(EVIL, 200, f"kind{EVIL}", 100)
    stats.record_host(f"http://{EVIL}", 1.0, failed=True)
    stats.record_hold(f"http://x/{EVIL}", 3.0)
    report = stats.report(50.0, {"count": 1})
    report["warnings"] = [f"warning {EVIL}"]
    report["output_dir"] = f"/tmp/{EVIL}"
    report["cpu"] = {"loop_busy": 0.5, "shares": {"parse": 0.4, EVIL: 0.1}}
    return report


def test_report_html_escapes_every_crawl_string_and_loads_nothing(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    write_report_html(path, _hostile_report())
    page = path.read_text()
    parser = _Collect()
    parser.feed(page)
    assert "script" not in parser.tags and "img" not in parser.tags
    assert parser.refs == []  # no src/href at all: nothing to load
    assert not re.search(r"url\(|@import|https?://(?!x/|&lt;)", page.split("<body>")[0])
    text = "".join(parser.text)
    assert EVIL in text  # shown, as text, in the host, URL, outcome, warning, CPU share
    assert text.count(EVIL) >= 6
    assert "default-src 'none'" in page


def test_report_html_of_an_empty_report() -> None:
    page = render_report_html({})
    assert "No page was fetched." in page and "</html>" in page


def test_where_time_went_sums_the_loop_phases_over_runs() -> None:
    stats = CrawlStats()
    stats.add_loop_time({"run": 10.0, "waiting": 6.0, "parse": 1.0, "frontier": 1.0})
    stats.add_loop_time({"run": 10.0, "waiting": 2.0, "parse": 3.0, "fetch": -0.0})  # run 2
    report = stats.report(20.0, {})
    assert report["loop_s"] == {"run": 20.0, "waiting": 8.0, "parse": 4.0, "frontier": 1.0}
    page = render_report_html(report)
    assert "waiting (politeness delays, the network)" in page and "40.0%" in page  # 8 of 20 s
    assert "parsing links" in page and "20.0%" in page
    assert "other work" in page and "35.0%" in page  # 20 - 8 - 4 - 1 = 7 s


def test_status_html_from_a_running_crawls_status(tmp_path: Path) -> None:
    from frontier_crawl.control.status import empty_status  # the status JSON's shape

    status = empty_status("running")
    status.update(
        pages=40, elapsed_s=20.0, pages_per_s=2.0,
        bottleneck={"name": "politeness", "detail": f"1 host left: {EVIL}"},
        history=[[T0 + 2 * i, 2 * i] for i in range(11)],  # 1 page/s for 20 s
        busiest_hosts=[{"host": f"http://{EVIL}", "pages": 40, "queued": 3}],
        failing_hosts=[{"host": "http://down.example", "failures": 2, "held_s": 5.0}],
        outcomes={"fetched": 40},
    )  # fmt: skip
    path = write_status_html(status, tmp_path)
    assert path == tmp_path / "report.html"
    page = path.read_text()
    parser = _Collect()
    parser.feed(page)
    assert "script" not in parser.tags and parser.refs == []
    text = "".join(parser.text)
    assert f"1 host left: {EVIL}" in text and f"http://{EVIL}" in text
    assert "running: politeness" in text and "http://down.example" in text
    report = status_report(status, str(tmp_path))
    assert sum(p[1] for p in report["pages_over_time"]) == 20  # type: ignore[union-attr]
    assert all(p[1] / p[2] == 1.0 for p in report["pages_over_time"])  # type: ignore[union-attr]
