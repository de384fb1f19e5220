"""End to end: crawl the hostile site; every failure is a recorded outcome, nothing hangs.

One crawl of the whole site (module fixture), then one test per behaviour, each checked from
the server's own log, crawl.jsonl, report.json and the WARC files. The fetcher is wrapped so the
test also sees every request the engine submitted (no request may be for a non-http(s) URL).

The bound on the crawl's duration is derived from the settings below in :func:`crawl_bound_s`.
"""

from __future__ import annotations

import gzip
import json
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from frontier_crawl.config import PolitenessSection, load
from frontier_crawl.engine import Engine
from frontier_crawl.fetch import Fetcher
from tests.conftest import render_toml
from tests.hostile.recording import RecordingFetcher
from tests.hostile.server import Hit, RawHttpServer
from tests.hostile.site import CHAIN_HOPS, DOMAIN, MANY_LINKS, HostileSite, serve

MB = 1 << 20
# Settings that differ from the defaults, all for time: every case of this site hangs, drips or
# loops until a limit cuts it, so each limit is set to seconds (defaults: connect 10 s, timeout
# 30 s, low-speed window 15 s, 3 retries 2 s apart up to 300 s, 5 redirects, depth 20, robots.txt
# 4 attempts 30 s apart, 10 MiB bodies: a crawl of many minutes). The limits themselves, not
# their size, are what the test checks; the default-sized version of the bad-URL cases runs by
# hand in bench/fault_site.py.
CONNECT_TIMEOUT_S = 1.0
TIMEOUT_S = 4.0
#: a connect cut sooner than this was cut by connect_timeout_s, not timeout_s
CONNECT_BOUND_S = (CONNECT_TIMEOUT_S + TIMEOUT_S) / 2
LOW_SPEED_TIME_S = 2
LOW_SPEED_BYTES_S = 100
RETRIES = 1
RETRY_BACKOFF_S = 0.1
MAX_RETRY_DELAY_S = 2.0
MAX_REDIRECTS = 3
MAX_DEPTH = 3
ROBOTS_ATTEMPTS = 2
ROBOTS_RETRY_S = 0.1
MAX_BODY_BYTES = MB
#: keys of the lead's adaptive politeness, set when this version has them (0 delay, tiny backoff)
OPTIONAL_POLITENESS = {"delay_factor": 0.0, "backoff_s": 0.1}
#: bound of one fast page fetch on loopback, engine included, one host at a time (measured
#: about 4 ms: two LMDB commits with fdatasync per engine tick)
FAST_FETCH_S = 0.01
#: of the 10,000 links only every 20th is in scope: extraction is checked on all of them, while
#: the crawl fetches 500 (10,000 serial fetches from one host would take 40 s at 4 ms each)
LEAF_EXCLUDE = r"/p/(\d*[1-9]|\d*[13579]0)$"
LEAVES_IN_SCOPE = [f"/p/{i}" for i in range(0, MANY_LINKS, 20)]


def crawl_bound_s(links_host_s: float = 0.0) -> float:
    """How long the hostile crawl may take, from the settings alone.

    * Each transfer ends within ``timeout_s`` (connect and low-speed cutoffs are shorter).
    * Hosts are crawled in parallel (concurrency 32 > 21 hosts); within a host one request at a
      time (connections_per_host 1) with ``min_delay_s`` 0 and no adaptive delay.
    * The worst host is a slow one: robots.txt, then its page tried ``retries + 1`` times, with
      at most ``max_retry_delay_s`` between tries (Retry-After 1 s and backoff 0.1 s are below
      it): ``(retries + 1) * timeout_s + retries * max_retry_delay_s``.
    * The host that never completes a connect: ``robots_attempts`` robots.txt tries, each cut
      at ``connect_timeout_s``, ``robots_retry_s`` apart (far below the slow host).
    * Before any case host starts, www's root page is fetched (its robots.txt and page).
    * The 10,000-link host is bounded by throughput, not timeouts: its robots.txt, its page
      and the 500 in-scope leaves, one at a time.
      That term is the CPU's, not the settings': ``links_host_s``, the time the server saw
      it take, replaces it where longer (a crawl short of CPU, beside others).
    Total: root (2 fast fetches) + max(slow host, links host), plus 1 s for the engine's
    at-most-1-s waits and start-up.
    """
    slow_host = FAST_FETCH_S + (RETRIES + 1) * TIMEOUT_S + RETRIES * MAX_RETRY_DELAY_S
    stalled_host = ROBOTS_ATTEMPTS * CONNECT_TIMEOUT_S + (ROBOTS_ATTEMPTS - 1) * ROBOTS_RETRY_S
    links_host = max((len(LEAVES_IN_SCOPE) + 2) * FAST_FETCH_S, links_host_s)
    return 2 * FAST_FETCH_S + max(slow_host, stalled_host, links_host) + 1.0


def hostile_config(tmp_path: Path, site: HostileSite, seeds: list[str], **fetch: Any) -> Path:
    politeness: dict[str, Any] = {
        "min_delay_s": 0.0,
        "user_agent": "frontier-crawl-test/0.1",
        "robots_attempts": ROBOTS_ATTEMPTS,
        "robots_retry_s": ROBOTS_RETRY_S,
    }
    known = PolitenessSection.__struct_fields__
    politeness.update({k: v for k, v in OPTIONAL_POLITENESS.items() if k in known})
    sections: dict[str, dict[str, Any]] = {
        "crawl": {"seeds": seeds, "output_dir": "out", "max_depth": MAX_DEPTH},
        "scope": {"allow_domains": [DOMAIN], "exclude": [LEAF_EXCLUDE]},
        "politeness": politeness,
        "fetch": {
            "concurrency": 32,
            "connect_timeout_s": CONNECT_TIMEOUT_S,
            "timeout_s": TIMEOUT_S,
            "low_speed_bytes_s": LOW_SPEED_BYTES_S,
            "low_speed_time_s": LOW_SPEED_TIME_S,
            "max_body_bytes": MAX_BODY_BYTES,
            "max_redirects": MAX_REDIRECTS,
            "retries": RETRIES,
            "retry_backoff_s": RETRY_BACKOFF_S,
            "max_retry_delay_s": MAX_RETRY_DELAY_S,
            "resolve": site.resolve_entries(),
            **fetch,
        },
        "frontier": {"checkpoint_interval_s": 1.0},
        "output": {"warc_max_bytes": 8 * MB, "progress_interval_s": 0.0},
    }
    path = tmp_path / "crawl.toml"
    path.write_text(render_toml(sections))
    return path


@dataclass
class Crawl:
    site: HostileSite
    server: RawHttpServer
    report: dict[str, Any]
    lines: list[dict[str, Any]]
    submitted: list[str]
    duration_s: float
    warc: list[dict[str, Any]]
    out: Path

    def hits(self, case: str, path: str | None = None) -> list[Hit]:
        host = self.site.host(case)
        return [
            h for h in self.server.hits() if h.host == host and (path is None or h.path == path)
        ]

    def line(self, url: str) -> dict[str, Any]:
        (found,) = [x for x in self.lines if x["url"] == url]
        return found

    def records(self, url: str, kind: str = "response") -> list[dict[str, Any]]:
        return [r for r in self.warc if r["uri"] == url and r["type"] == kind]


def read_warc(out: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for path in sorted((out / "warc").iterdir()):
        assert not path.name.endswith(".open")
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "warcinfo":
                    continue
                records.append(
                    {
                        "type": rec.rec_type,
                        "uri": rec.rec_headers.get_header("WARC-Target-URI"),
                        "truncated": rec.rec_headers.get_header("WARC-Truncated"),
                        "status": rec.http_headers.get_statuscode() if rec.http_headers else None,
                        "payload": rec.content_stream().read(),
                    }
                )
    return records


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    tmp_path = tmp_path_factory.mktemp("hostile")
    servers = serve(MAX_BODY_BYTES)
    server, site = servers.server, servers.site
    try:
        settings = load(hostile_config(tmp_path, site, [site.seed]))
        fetcher = RecordingFetcher(Fetcher.from_settings(settings.fetch, settings.politeness))
        started = time.monotonic()
        report = Engine(settings, fetcher=fetcher).run()
        duration = time.monotonic() - started
        out = tmp_path / "out"
        lines = [json.loads(x) for x in (out / "crawl.jsonl").read_text().splitlines()]
        yield Crawl(site, server, report, lines, fetcher.submitted, duration, read_warc(out), out)
    finally:
        servers.close()


# -- the whole crawl ------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_crawl_ends_by_itself_within_the_bound(crawl: Crawl) -> None:
    links = crawl.hits("links")
    links_s = max(h.finished or h.started for h in links) - min(h.started for h in links)
    bound = crawl_bound_s(links_s)
    assert crawl.report["complete"] is True
    assert crawl.duration_s < bound, (
        f"{crawl.duration_s:.1f} s > bound {bound:.1f} s (the links host took {links_s:.1f} s)"
    )
    print(f"\nhostile crawl: {crawl.duration_s:.2f} s (bound {bound:.2f} s)")
    table = Counter((x["outcome"], x["error"]) for x in crawl.lines)
    for (outcome, error), n in sorted(table.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        print(f"  {outcome:20} {error or '-':18} {n}")


@pytest.mark.timeout(120)
def test_every_url_is_logged_once_and_the_report_agrees(crawl: Crawl) -> None:
    pages = [x for x in crawl.lines if x["outcome"] != "robots-txt"]
    urls = Counter(x["url"] for x in pages)
    assert [u for u, n in urls.items() if n > 1] == []
    report = crawl.report
    outcomes = Counter(x["outcome"] for x in crawl.lines)
    assert report["fetched"] == outcomes["fetched"]
    assert report["too_many_redirects"] == outcomes["too-many-redirects"]
    assert report["redirects"] == outcomes["redirect"]
    errors = Counter(x["error"] for x in crawl.lines if x["error"])
    assert report["errors_by_kind"] == dict(errors)
    assert report["timeouts"] == errors["timeout"]
    on_disk = json.loads((crawl.out / "report.json").read_text())
    assert on_disk["fetched"] == report["fetched"]


@pytest.mark.timeout(120)
def test_only_http_requests_and_no_local_file(crawl: Crawl) -> None:
    assert crawl.submitted
    assert all(u.startswith(("http://", "https://")) for u in crawl.submitted)
    resolvable = {entry.split(":", 2)[0] + ":" + entry.split(":", 2)[1] for entry in
                  crawl.site.resolve_entries()}  # fmt: skip
    authorities = {u.split("/")[2] for u in crawl.submitted}
    assert authorities <= resolvable  # nothing outside the resolve list: no DNS lookup
    assert all(x["url"].startswith("http") for x in crawl.lines)
    for record in crawl.warc:
        assert b"root:x:0:0" not in record["payload"]
    # '../' beyond the root is just a path on the same server (a 404), never a file
    passwd = crawl.hits("hrefs", "/etc/passwd")
    assert len(passwd) == 1 and passwd[0].status == 404


# -- redirects ------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_redirect_loop_is_stopped_by_dedup(crawl: Crawl) -> None:
    # A -> B -> A: B's target was already seen, so the loop ends after one lap (each URL
    # requested once), sooner than max_redirects would end it.
    assert Counter(h.path for h in crawl.hits("loop")) == {"/robots.txt": 1, "/a": 1, "/b": 1}
    assert crawl.line(crawl.site.url("loop", "/a"))["outcome"] == "redirect"
    assert crawl.line(crawl.site.url("loop", "/b"))["outcome"] == "redirect"


@pytest.mark.timeout(120)
def test_redirect_chain_ends_at_max_redirects(crawl: Crawl) -> None:
    paths = [h.path for h in crawl.hits("chain") if h.path != "/robots.txt"]
    assert paths == [f"/hop/{i}" for i in range(MAX_REDIRECTS + 1)]
    assert MAX_REDIRECTS + 1 < CHAIN_HOPS
    last = crawl.line(crawl.site.url("chain", f"/hop/{MAX_REDIRECTS}"))
    assert (last["outcome"], last["status"]) == ("too-many-redirects", 302)
    for i in range(MAX_REDIRECTS):
        assert crawl.line(crawl.site.url("chain", f"/hop/{i}"))["outcome"] == "redirect"


@pytest.mark.timeout(120)
def test_redirects_to_other_hosts_and_schemes(crawl: Crawl) -> None:
    site = crawl.site
    # in scope: followed through the frontier (robots.txt of the new host first)
    assert [h.path for h in crawl.hits("other")] == ["/robots.txt", "/landing"]
    assert crawl.line(site.url("other", "/landing"))["outcome"] == "fetched"
    # out of scope, file: and gopher: targets are never requested; the hop itself is logged
    for case, path in (
        ("offsite", "/to-outside"),
        ("schemes", "/to-file"),
        ("schemes", "/to-gopher"),
    ):
        assert crawl.line(site.url(case, path))["outcome"] == "redirect"
    assert not any(h.host.startswith("outside") for h in crawl.server.hits())


# -- slow servers ---------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", ["slow-headers", "trickle"])
def test_slow_servers_time_out_and_are_retried(crawl: Crawl, case: str) -> None:
    hits = crawl.hits(case, "/")
    assert len(hits) == RETRIES + 1  # retried per policy
    for hit in hits:  # the server saw each attempt abandoned in time (low-speed cutoff)
        assert hit.finished is not None
        assert hit.finished - hit.started < min(TIMEOUT_S, LOW_SPEED_TIME_S + 1.5)
    line = crawl.line(crawl.site.url(case))
    assert (line["outcome"], line["error"]) == ("failed", "timeout")
    assert line["duration_s"] < min(TIMEOUT_S, LOW_SPEED_TIME_S + 1.5)
    if case == "trickle":
        (record,) = crawl.records(crawl.site.url(case))
        assert record["truncated"] == "time"


@pytest.mark.timeout(120)
def test_slow_body_ends_at_the_total_timeout(crawl: Crawl) -> None:
    # 800 B/s passes the low-speed check; the total timeout ends each try
    hits = crawl.hits("drip", "/")
    assert len(hits) == RETRIES + 1
    for hit in hits:
        assert hit.finished is not None
        assert TIMEOUT_S - 0.3 < hit.finished - hit.started < TIMEOUT_S + 1.0
    line = crawl.line(crawl.site.url("drip"))
    assert (line["outcome"], line["error"]) == ("failed", "timeout")
    assert TIMEOUT_S - 0.1 < line["duration_s"] < TIMEOUT_S + 0.5
    (record,) = crawl.records(crawl.site.url("drip"))
    assert record["truncated"] == "time" and 0 < len(record["payload"]) < 8000


@pytest.mark.timeout(120)
def test_connect_that_never_completes_ends_at_the_connect_timeout(crawl: Crawl) -> None:
    url = crawl.site.connect_stall_url
    robots = [x for x in crawl.lines if x["url"] == url + "robots.txt"]
    assert len(robots) == ROBOTS_ATTEMPTS  # robots.txt retried per its policy
    for line in robots:
        assert (line["outcome"], line["error"], line["status"]) == (
            "robots-txt", "connect-error", 0
        )  # fmt: skip
        # cut by the connect timeout: not before it (the connect hung, it was not refused),
        # and sooner than the transfer timeout could have; the loop may notice the timer late
        # on a loaded machine (1.74 s was seen against the 1.5 s this allowed before), but a
        # cut by timeout_s is 4 s at the earliest
        assert CONNECT_TIMEOUT_S - 0.05 <= line["duration_s"] < CONNECT_BOUND_S, line
    # its page is never requested and still gets its line: the host was given up on
    assert crawl.line(url)["outcome"] in ("robots-unavailable", "host-unreachable")
    assert url not in crawl.submitted


# -- broken bodies --------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("case", "received"),
    [("reset", 1000), ("short", 100), ("cut-chunked", 100)],
)
def test_truncated_bodies_are_recorded_and_archived_as_truncated(
    crawl: Crawl, case: str, received: int
) -> None:
    url = crawl.site.url(case)
    line = crawl.line(url)
    assert line["outcome"] == "failed"
    assert line["error"] in ("truncated", "protocol-error")
    if line["error"] == "truncated":
        assert len(crawl.hits(case, "/")) == RETRIES + 1  # transient: retried
    (record,) = crawl.records(url)  # only the final attempt is archived
    assert record["status"] == "200"
    assert record["truncated"] == "disconnect" if line["error"] == "truncated" else "unspecified"
    assert len(record["payload"]) == received


@pytest.mark.timeout(120)
def test_size_caps_hold(crawl: Crawl) -> None:
    site = crawl.site
    for url in (site.url("bomb"), site.url("big", "/chunked"), site.url("big", "/announced")):
        line = crawl.line(url)
        assert (line["outcome"], line["error"], line["bytes"]) == ("failed", "too-large", 0), url
        (record,) = crawl.records(url)
        assert record["truncated"] == "length"
        assert record["payload"] == b""
    assert len(crawl.hits("bomb", "/")) == 1  # too-large is not retried


@pytest.mark.timeout(60)
def test_gzip_bomb_never_allocates_past_the_cap(tmp_path: Path) -> None:
    servers = serve(MAX_BODY_BYTES)
    site = servers.site
    try:
        settings = load(hostile_config(tmp_path, site, [site.url("bomb")]))
        engine = Engine(settings)
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            report = engine.run()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        servers.close()
    assert report["errors_by_kind"] == {"too-large": 1}
    # decoded bytes never exceed the cap (+ one 64 KiB step); everything else is small change
    assert peak < 3 * MAX_BODY_BYTES, (
        f"peak {peak / MB:.1f} MiB for a {MAX_BODY_BYTES / MB} MiB cap"
    )


# -- pages that are fine but large, odd or endless ------------------------------------------


@pytest.mark.timeout(120)
def test_ten_thousand_links_each_fetched_once(crawl: Crawl) -> None:
    # every in-scope link of the 10,000 (spread over the whole page, the last near its end)
    # was admitted and fetched exactly once; none of the excluded ones
    leaves = Counter(h.path for h in crawl.hits("links") if h.path.startswith("/p/"))
    assert sorted(leaves) == sorted(LEAVES_IN_SCOPE)
    assert set(leaves.values()) == {1}
    fetched = [x for x in crawl.lines if x["url"].startswith(crawl.site.url("links", "/p/"))]
    assert len(fetched) == len(LEAVES_IN_SCOPE)
    assert {x["outcome"] for x in fetched} == {"fetched"}


def _calendar_pages(depth: int) -> set[str]:
    """Months reachable from 2024-01 (depth 1) within ``depth`` (the site's link rule)."""
    frontier, seen = {(2024, 1)}, {(2024, 1)}
    for _ in range(depth - 1):
        nxt = set()
        for y, m in frontier:
            nxt |= {(y + m // 12, m % 12 + 1), (y - (m == 1), (m - 2) % 12 + 1), (y + 1, m)}
        frontier = nxt - seen
        seen |= frontier
    return {f"/cal/{y}-{m:02d}" for y, m in seen}


@pytest.mark.timeout(120)
def test_calendar_trap_stops_at_max_depth(crawl: Crawl) -> None:
    paths = Counter(h.path for h in crawl.hits("calendar") if h.path != "/robots.txt")
    assert set(paths) == _calendar_pages(MAX_DEPTH)
    assert set(paths.values()) == {1}
    fetched = [x for x in crawl.lines if "calendar" in x["url"] and x["outcome"] == "fetched"]
    assert len(fetched) == len(paths)
    assert max(x["depth"] for x in fetched) == MAX_DEPTH


@pytest.mark.timeout(120)
def test_error_statuses_are_retried_per_policy(crawl: Crawl) -> None:
    site = crawl.site
    for path in ("/500", "/503", "/429"):
        hits = crawl.hits("errors", path)
        assert len(hits) == RETRIES + 1, path
        line = crawl.line(site.url("errors", path))
        assert (line["outcome"], line["status"]) == ("http-error", int(path[1:]))
        (record,) = crawl.records(site.url("errors", path))  # the final answer is archived
        assert record["status"] == path[1:] and record["truncated"] is None
    for path in ("/503", "/429"):  # Retry-After: 1 honoured
        first, second = crawl.hits("errors", path)
        assert first.finished is not None and second.started - first.finished >= 0.9


@pytest.mark.timeout(120)
def test_non_html_is_archived_not_parsed(crawl: Crawl) -> None:
    site = crawl.site
    for path, ctype in (("/doc.pdf", "application/pdf"), ("/img.png", "image/png")):
        line = crawl.line(site.url("media", path))
        assert (line["outcome"], line["content_type"]) == ("fetched", ctype)
        (record,) = crawl.records(site.url("media", path))
        assert b"/from-media" in record["payload"]
    assert crawl.hits("media", "/from-media") == []


@pytest.mark.timeout(120)
def test_odd_pages(crawl: Crawl) -> None:
    site = crawl.site
    # invalid UTF-8 under a utf-8 charset header: still parsed, its link followed
    assert crawl.line(site.url("charset"))["outcome"] == "fetched"
    assert len(crawl.hits("charset", "/after-bad-bytes")) == 1
    # an empty 200 is a fetched page with no bytes, archived
    empty = crawl.line(site.url("empty"))
    assert (empty["outcome"], empty["status"], empty["bytes"]) == ("fetched", 200, 0)
    (record,) = crawl.records(site.url("empty"))
    assert record["payload"] == b""
    # <base href> decides where relative links go
    assert {h.path for h in crawl.hits("base")} == {
        "/robots.txt",
        "/",
        "/sub/dir/relative",
        "/sub/up",
    }
    # of the odd hrefs only the plain link and the dot-dot one became requests
    assert {h.path for h in crawl.hits("hrefs")} == {"/robots.txt", "/", "/fine", "/etc/passwd"}


@pytest.mark.timeout(120)
def test_warc_records_match_the_log(crawl: Crawl) -> None:
    responses = Counter(r["uri"] for r in crawl.warc if r["type"] == "response")
    assert set(responses.values()) == {1}
    archived = {x["url"] for x in crawl.lines if x["status"] > 0}
    assert set(responses) == archived
    for record in crawl.warc:
        if (
            record["type"] == "response"
            and record["truncated"] is None
            and record["status"] == "200"
        ):
            line = crawl.line(record["uri"])
            if line["outcome"] != "robots-txt":
                assert line["outcome"] == "fetched"


def test_bomb_stream_is_a_real_bomb() -> None:
    from tests.hostile.site import gzip_bomb_stream

    small = b"".join(gzip_bomb_stream(4 * MB))
    assert gzip.decompress(small) == bytes(4 * MB)
    big = sum(len(part) for part in gzip_bomb_stream())
    assert big < 2 * MB  # > 1 GB decoded from about 1 MB
