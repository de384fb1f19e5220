"""A continuous crawl ([recrawl]) of a site whose pages change at known rates, checked from the
server's own log (tests/recrawl_site.py) and the WARC files.

One crawl runs for about 90 s in three segments: SIGTERM to its whole process group and the
same command again, then kill -9 of its main PID (as the OOM killer does: its children are left
to notice) and the same command 100 ms later (as systemd's ``Restart=`` does). Checked over the
whole log: every revisit of a page with validators is conditional; the intervals of pages that
never change grow, those of pages that change stay short; every change is captured within
``max_interval_s`` (plus the politeness of the host's other due URLs, and the downtime); the
WARC revisit records are valid and refer to real earlier records; politeness holds; after each
restart the schedule goes on (the first requests are conditional, an unchanged page is not
fetched again before its interval).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.conftest import render_toml
from tests.e2e.test_crash import warcio_check
from tests.e2e.test_fault_matrix import Crawl, gone
from tests.recrawl_site import Hit, RecrawlSite
from tests.waiting import wait_until

#: intervals of seconds, not the defaults' hours and days: the crawl runs for about 90 s and
#: must show intervals growing (4 -> 6 -> 9 -> 13.5 -> 15) for pages that never change and
#: shrinking to the minimum for one that changes every 3 s
MIN_S, INITIAL_S, MAX_S = 3.0, 4.0, 15.0
#: politeness.min_delay_s stays at its default (1 s): a host's 7 pages due at once wait up to
#: 7 s for their turn, and one more delay for the page in flight
DELAY_S = 1.0
SLACK_S = 8 * DELAY_S
FAST_PERIOD_S = 3.0
#: a segment of the crawl: long enough for an unchanged page to be visited four times
SEGMENT_S = 30.0
SEGMENTS = 3

pytestmark = pytest.mark.timeout(300)

RECRAWL = {"enabled": True, "min_interval_s": MIN_S, "initial_interval_s": INITIAL_S,
           "max_interval_s": MAX_S}  # fmt: skip


@pytest.fixture
def site() -> Iterator[RecrawlSite]:
    # /vanish goes away (404, 410, a redirect) 25 s after its first visit: visited a few times
    # before (counted from the first visit: a crawler slow to start under load saw it gone)
    with RecrawlSite(hosts=3, fast_period_s=FAST_PERIOD_S, vanish_after_s=25.0) as s:
        yield s


def config(tmp_path: Path, site: RecrawlSite, **sections: dict[str, Any]) -> Path:
    """crawl.toml at the defaults but for the recrawl intervals (see MIN_S) and these keys."""
    base: dict[str, dict[str, Any]] = {
        "crawl": {"seeds": site.seeds(), "output_dir": "out"},
        "fetch": {"resolve": site.resolve_entries()},
        "recrawl": dict(RECRAWL),
    }
    for name, values in sections.items():
        base.setdefault(name, {}).update(values)
    path = tmp_path / "crawl.toml"
    path.write_text(render_toml(base))
    return path


class Segments:
    """The crawl's runs, and when the crawler was down between them (wall clock)."""

    def __init__(self, crawl: Crawl, site: RecrawlSite) -> None:
        self.crawl, self.site = crawl, site
        self.starts: list[int] = [0]  #: index of the first hit of each run in the site's log
        self.down: list[tuple[float, float]] = []  #: (stopped, first request of the next run)

    def run_for(self, seconds: float) -> None:
        """Let the crawl run for ``seconds`` of its own requests (the log's clock)."""
        first = self.starts[-1]
        proc = self.crawl.proc
        assert proc is not None
        start = wait_until("the run's first request", lambda: self.site.hits()[first:],
                           60, alive=proc, detail=self.crawl.output)[0].arrived  # fmt: skip
        wait_until(f"{seconds} s of crawling", lambda: time.time() >= start + seconds,
                   seconds + 30, every_s=0.2, alive=proc, detail=self.crawl.output)  # fmt: skip

    def restart(self, how: str) -> None:
        crawl = self.crawl
        tree = crawl.tree()
        stopped = time.time()
        if how == "sigterm-group":
            os.killpg(crawl.pid, signal.SIGTERM)
            assert crawl.wait() == 0, crawl.output()[-3000:]
            gone(tree)
            report = json.loads((crawl.cfg.parent / "out" / "report.json").read_text())
            assert report["stopped_by_signal"] is True and report["complete"] is False
            assert report["freshness"]["enabled"] is True
            assert report["freshness"]["visits"]["not_modified"] > 0, report["freshness"]
        else:  # kill -9 of the main PID, the same command 100 ms later (its children left)
            os.kill(crawl.pid, signal.SIGKILL)
            time.sleep(0.1)  # the restart delay systemd's RestartSec gives (not a wait)
        self.starts.append(len(self.site.hits()))
        crawl.start()
        proc = crawl.proc
        assert proc is not None
        first = wait_until("the restarted run's first request",
                           lambda: self.site.hits()[self.starts[-1]:], 60,
                           alive=proc, detail=crawl.output)[0]  # fmt: skip
        self.down.append((stopped, first.arrived))
        if how != "sigterm-group":  # the killed one's children (its WARC writer) did not outlive it
            gone(tree, 10)

    def downtime(self, a: float, b: float) -> float:
        """Seconds of [a, b] the crawler was down."""
        return sum(max(0.0, min(b, up) - max(a, stop)) for stop, up in self.down)


def pages_by_url(hits: list[Hit]) -> dict[tuple[str, str], list[Hit]]:
    out: dict[tuple[str, str], list[Hit]] = defaultdict(list)
    for h in hits:
        if h.path != "/robots.txt":
            out[h.host, h.path].append(h)
    return out


def warc_records(root: Path) -> list[Any]:
    records = []
    for path in sorted((root / "warc").glob("*.warc.gz")):
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                rec.payload = rec.content_stream().read()
                if rec.rec_type in ("response", "revisit"):
                    records.append(rec)
    return records


def test_continuous_crawl_of_a_changing_site(tmp_path: Path, site: RecrawlSite) -> None:
    cfg = config(tmp_path, site)
    crawl = Crawl(cfg).start()
    seg = Segments(crawl, site)
    try:
        seg.run_for(SEGMENT_S)
        seg.restart("sigterm-group")
        seg.run_for(SEGMENT_S)
        seg.restart("kill-9-main")
        seg.run_for(SEGMENT_S)
        os.killpg(crawl.pid, signal.SIGTERM)
        assert crawl.wait() == 0, crawl.output()[-3000:]
    finally:
        if crawl.proc is not None and crawl.proc.poll() is None:
            for pid in crawl.tree():
                os.kill(pid, signal.SIGKILL)
    end = time.time()
    hits = site.hits()
    assert "Traceback" not in crawl.output(), crawl.output()[-3000:]
    by_url = pages_by_url(hits)
    assert len(by_url) == 3 * 7, sorted(by_url)

    # -- revisits are conditional, with validators the server gave for that URL
    for (host, path), visits in by_url.items():
        served_etags = {h.headers.get("if-none-match") for h in visits} - {None}
        if path == "/plain":  # no validator: never conditional (its revisits: same payload)
            assert not any(h.conditional for h in visits)
            continue
        oks = [i for i, h in enumerate(visits) if h.status == 200]
        assert oks, (host, path, [(round(h.arrived - site.start, 1), h.status) for h in visits])
        first_ok = oks[0]
        later = visits[first_ok + 1 :]
        assert later, (host, path)
        if path == "/vanish":  # conditional until it is gone
            later = [h for h in later if h.arrived < site.vanish_at[host]]
        assert all(h.conditional for h in later), [(h.path, h.headers) for h in later]
        if path == "/lastmod":
            assert not served_etags
            assert all("if-modified-since" in h.headers for h in later)
        if path == "/etag":
            assert all("if-modified-since" not in h.headers for h in later)
        if path in ("/fast", "/etag"):  # a tag the server gave (this page, an earlier version)
            assert all(t.strip('"').rsplit("-", 1)[0] == path[1:] for t in served_etags)

    # -- intervals: growing for unchanging pages, short for changing ones (within one run)
    def gaps(visits: list[Hit]) -> list[float]:
        out = []
        for a, b in pairwise(visits):
            if seg.downtime(a.arrived, b.arrived) == 0:
                out.append(b.arrived - a.arrived)
        return out

    for host in site.names():
        static, fast = gaps(by_url[host, "/static"]), gaps(by_url[host, "/fast"])
        assert len(static) >= 4, static
        assert static[0] < INITIAL_S + SLACK_S and max(static) >= MAX_S - 1.0, static
        assert max(static[-3:]) <= MAX_S + SLACK_S, static
        assert statistics.median(fast) <= MIN_S + SLACK_S / 2, fast
        assert statistics.median(fast) < statistics.median(static) / 2, (fast, static)

    # -- every change captured within max_interval_s (plus politeness and downtime)
    last_start = seg.starts[-1]
    for host in site.names():
        for path in ("/fast", "/etag"):
            captures = [h for h in by_url[host, path] if h.status == 200]
            first = captures[0].arrived
            for k, change in enumerate(site.changes(path, end), start=1):
                if change < first:
                    continue
                deadline = change + MAX_S + SLACK_S
                deadline += seg.downtime(change, deadline + 30.0)
                if deadline > end:
                    break
                assert any(h.version >= k and change <= h.arrived <= deadline
                           for h in captures), (host, path, k, change - site.start)  # fmt: skip

    # -- politeness: request starts to a host at least min_delay_s apart (within a run: a
    # kill -9 forgets when the last request went out)
    starts = [0, *seg.starts[1:], len(hits)]
    for a, b in pairwise(starts):
        per_host: dict[str, list[float]] = defaultdict(list)
        for h in hits[a:b]:
            per_host[h.host].append(h.arrived_mono)
        for host, times in per_host.items():
            times.sort()
            close = [round(y - x, 3) for x, y in pairwise(times)
                     if y - x < DELAY_S - 0.01]  # fmt: skip
            assert not close, (host, close)

    # -- after each restart the schedule goes on: the first requests are conditional, and an
    # unchanged page is not fetched again before the interval it had (only ever growing)
    for n, (begin, (stopped, _)) in enumerate(zip(seg.starts[1:], seg.down, strict=True), 1):
        # what the crawl had surely committed: visits answered 2 s before the stop or kill
        before = [h for h in hits[:begin] if h.arrived < stopped - 2.0]
        after = hits[begin:]
        seen = pages_by_url(before)
        for host in site.names():
            page = seen[host, "/static"]
            nxt = next(h for h in after if (h.host, h.path) == (host, "/static"))
            assert nxt.conditional, nxt
            if len(page) >= 2:
                interval = page[-1].arrived - page[-2].arrived
                assert nxt.arrived - page[-1].arrived >= min(interval, MAX_S) - DELAY_S, (
                    n, host, interval, nxt.arrived - page[-1].arrived)  # fmt: skip
        firsts = {}
        for h in after:
            if h.path != "/robots.txt" and (h.host, h.path) not in firsts:
                firsts[h.host, h.path] = h
        for key, h in firsts.items():
            if key[1] not in ("/plain", "/vanish") and any(x.status == 200 for x in seen[key]):
                assert h.conditional, (n, key, h.headers)
    assert last_start > 0

    # -- WARC: warcio reads every record; revisits refer to real earlier records
    root = tmp_path / "out"
    warcs = sorted((root / "warc").glob("*.warc.gz"))
    warcio_check(warcs)
    records = warc_records(root)
    responses = {r.rec_headers.get_header("WARC-Record-ID"): r for r in records
                 if r.rec_type == "response"}  # fmt: skip
    profiles: dict[str, int] = defaultdict(int)
    for rec in records:
        if rec.rec_type != "revisit":
            continue
        h = rec.rec_headers
        profile = h.get_header("WARC-Profile")
        profiles[profile.rsplit("/", 1)[1]] += 1
        refers = h.get_header("WARC-Refers-To")
        assert refers in responses, (profile, refers, h.get_header("WARC-Target-URI"))
        earlier = responses[refers].rec_headers
        assert earlier.get_header("WARC-Target-URI") == h.get_header("WARC-Refers-To-Target-URI")
        assert earlier.get_header("WARC-Date") == h.get_header("WARC-Refers-To-Date")
        assert earlier.get_header("WARC-Date") < h.get_header("WARC-Date")
        if profile.endswith("identical-payload-digest"):
            assert rec.payload == b""  # no second copy of the bytes
            assert h.get_header("WARC-Payload-Digest") == earlier.get_header("WARC-Payload-Digest")
    assert profiles["server-not-modified"] > 0 and profiles["identical-payload-digest"] > 0
    # a changed page is a full response record each time it changed
    fast = [r for r in records if r.rec_type == "response"
            and r.rec_headers.get_header("WARC-Target-URI").endswith("/fast")]  # fmt: skip
    assert len(fast) >= 3 * 5

    # -- the crawl log and the report say what the visits were
    lines = [json.loads(x) for x in (root / "crawl.jsonl").read_text().splitlines()]
    outcomes = defaultdict(int)
    for line in lines:
        outcomes[line["outcome"]] += 1
    assert outcomes["not-modified"] > 0 and outcomes["unchanged"] > 0, outcomes
    assert all(line.get("visit", 0) >= 1 for line in lines if line["outcome"] == "unchanged")
    report = json.loads((root / "report.json").read_text())
    fresh = report["freshness"]
    assert fresh["enabled"] is True and fresh["scheduled"] >= 3 * 5, fresh
    assert fresh["visits"]["changed"] > 0 and fresh["visits"]["gone"] >= 1, fresh
    assert fresh["per_hour"]["revisits"] > 0, fresh
    assert sum(fresh["intervals"]["counts"]) == fresh["scheduled"], fresh


#: the spider of the spider test: the seeds' pages (parse) send every link to ``page`` with
#: meta naming the link; ``page`` yields one item naming the version the page shows
SPIDER = '''
from frontier_crawl import Request, Spider


class VersionSpider(Spider):
    def parse(self, response):
        for url in response.links:
            yield Request(url, callback="page", meta={"tag": "from-index", "path": url})

    def page(self, response):
        yield {"url": response.url, "tag": response.meta["tag"], "path": response.meta["path"],
               "version": response.css("h1::text").get()}
'''


def test_spider_revisits_same_callback_items_once_per_change(
    tmp_path: Path, site: RecrawlSite
) -> None:
    """A revisit goes to the same callback with the same meta; a changed page's item comes
    again with its fetch time (``recrawl.item_time_field``, default "fetched_at"), an unchanged
    one's not at all; exactly once per visit across a kill -9 of the main PID."""
    (tmp_path / "version_spider.py").write_text(SPIDER)
    cfg = config(tmp_path, site, spider={"source": "version_spider.py"})
    cfg.write_text(cfg.read_text() + '\n[[output.feeds]]\npath = "items.jsonl"\nformat = "jsonl"\n')
    crawl = Crawl(cfg).start()
    seg = Segments(crawl, site)
    try:
        seg.run_for(20.0)
        seg.restart("kill-9-main")
        seg.run_for(20.0)
        os.killpg(crawl.pid, signal.SIGTERM)
        assert crawl.wait() == 0, crawl.output()[-3000:]
    finally:
        if crawl.proc is not None and crawl.proc.poll() is None:
            for pid in crawl.tree():
                os.kill(pid, signal.SIGKILL)
    assert "Traceback" not in crawl.output(), crawl.output()[-3000:]
    items = [json.loads(x) for x in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    hits = site.hits()
    served: dict[tuple[str, str], list[Hit]] = defaultdict(list)
    for h in hits:
        if h.status == 200 and h.path != "/":
            served[site.url(h.host, h.path), f"{h.path} version {h.version}"].append(h)
    seen = defaultdict(int)
    for item in items:
        assert item["tag"] == "from-index" and item["path"] == item["url"], item  # same meta
        key = (item["url"], item["version"])
        seen[key] += 1
        assert key in served, item  # a page the server sent, in the version it sent
        stamp = item["fetched_at"]  # ISO 8601 UTC, as the crawl log's time
        assert stamp.endswith("Z"), item
        at = datetime.fromisoformat(stamp).timestamp()
        assert any(abs(at - h.arrived) < 1.0 for h in served[key]), (item, served[key])
    assert all(n == 1 for n in seen.values()), [k for k, n in seen.items() if n > 1]
    for host in site.names():
        versions = {v for (u, v) in seen if u == site.url(host, "/fast")}
        assert len(versions) >= 4, versions  # a changed page's item again, each change
        for path in ("/static", "/lastmod", "/plain"):  # unchanged: its first visit's only
            assert seen[site.url(host, path), f"{path} version 0"] == 1
    # every changed capture has its item, but those the kill -9 lost (not committed: fetched
    # again, conditional on the older validators, so their item came from the refetch)
    missing = [k for k in served if k not in seen]
    assert len(missing) <= 2 * len(site.names()), missing
