"""Politeness policies checked from the server's own request log (gaps measured from the first
byte of one response to the arrival of the next request to the same host or IP)."""

from __future__ import annotations

import itertools
import json
import socket
from pathlib import Path

import pytest

from frontier_crawl.demo.server import CLOCK_TOLERANCE_S, RequestLogEntry
from frontier_crawl.engine import Engine
from frontier_crawl.fetch import Fetcher
from tests.hostile.recording import RecordingFetcher
from tests.scripted_server import NOT_FOUND, Answer, ScriptedServer, page
from tests.scripted_server import crawl_settings as settings

SLOW_S = 0.1
BACKOFF_S = 2.0  # well above any adaptive delay here, even on a loaded machine




def gaps(log: list[RequestLogEntry], host: str) -> list[tuple[str, float]]:
    """(path of the later request, gap to the previous one) for one host, in order."""
    mine = sorted((e for e in log if e.host == host), key=lambda e: e.started)
    return [(b.path, b.started - a.responding) for a, b in itertools.pairwise(mine)]


def outcomes(out: Path) -> dict[str, tuple[str, str | None]]:
    lines = [json.loads(x) for x in (out / "crawl.jsonl").read_text().splitlines()]
    return {x["url"]: (x["outcome"], x["error"]) for x in lines if x["outcome"] != "robots-txt"}


def script(host: str, path: str, nth: int) -> Answer:
    if path == "/robots.txt":
        return Answer(200, b"User-agent: *\nCrawl-delay: 1\n") if host == "e.test" else NOT_FOUND
    if host == "a.test":  # slow pages: the adaptive delay grows with the fetch time
        return page("/p1", "/p2", "/p3") if path == "/" else Answer(200, b"ok", delay_s=SLOW_S)
    if host == "b.test":  # 503 + Retry-After on the first try of /busy
        if path == "/":
            return page("/busy", "/after")
        if path == "/busy" and nth == 1:
            return Answer(503, b"busy", (("Retry-After", "2"),))
        return page()
    if host == "c.test":  # 429 + Retry-After
        if path == "/":
            return page("/limited", "/after")
        if path == "/limited" and nth == 1:
            return Answer(429, b"slow down", (("Retry-After", "1"),))
        return page()
    if host == "d.test":  # one URL's 500s are its own: retried, the host not held
        if path == "/":
            return page("/flaky", "/ok1", "/ok2", "/ok3")
        return Answer(500, b"oops") if path == "/flaky" and nth <= 3 else page()
    if host == "g.test":  # three distinct URLs failing in a row: the host's trouble
        return page("/g1", "/g2", "/g3") if path == "/" else Answer(500, b"oops")
    if host == "e.test":  # robots.txt Crawl-delay: 1
        return page("/1", "/2") if path == "/" else page()
    return NOT_FOUND


@pytest.mark.timeout(60)
def test_policies_from_server_log(tmp_path: Path) -> None:
    hosts = ["a.test", "b.test", "c.test", "d.test", "e.test", "g.test"]
    with ScriptedServer(script) as srv:
        s = settings(
            tmp_path,
            [srv.url(h, "/") for h in hosts],
            srv.resolve(*hosts),
            politeness={"delay_factor": 3.0, "backoff_s": BACKOFF_S, "max_backoff_s": 10.0},
        )
        report = Engine(s).run()
        log = srv.log()
    assert report["complete"] is True
    tol = CLOCK_TOLERANCE_S
    # adaptive: after each slow page, at least 3 x its fetch time
    slow = gaps(log, "a.test")
    after_slow = [g for (p, g), (prev, _) in zip(slow[1:], slow, strict=False) if prev != "/"]
    assert after_slow and all(g >= 3 * SLOW_S - tol for g in after_slow), slow
    # Retry-After on 503 and 429: the whole host waits, then the URL is fetched again
    for host, path, wait in (("b.test", "/busy", 2.0), ("c.test", "/limited", 1.0)):
        seq = [e for e in sorted(log, key=lambda e: e.started) if e.host == host]
        i = next(i for i, e in enumerate(seq) if e.path == path)
        assert seq[i].status in (503, 429)
        assert seq[i + 1].started - seq[i].responding >= wait - tol
        assert sum(e.path == path for e in seq) == 2
    # one URL's 500s: retried after its own delay (retry_backoff_s 0.05, doubling), tried
    # retries + 1 times at most; the 500s of three distinct URLs in a row (host_error_urls)
    # back the whole host off (backoff_s after the third)
    d = sorted((e for e in log if e.host == "d.test"), key=lambda e: e.started)
    assert [e.status for e in d if e.path == "/flaky"] == [500, 500, 500, 200]
    after_failure = [b.started - a.responding for a, b in itertools.pairwise(d) if a.status == 500]
    assert len(after_failure) == 3 and max(after_failure) < BACKOFF_S, d  # never backed off
    # another URL went before each retry (the retry waits behind the host's other URLs)
    first = next(i for i, e in enumerate(d) if e.path == "/flaky")
    assert d[first + 1].path != "/flaky", d
    g = sorted((e for e in log if e.host == "g.test"), key=lambda e: e.started)
    assert all(sum(e.path == f"/g{i}" for e in g) == 4 for i in (1, 2, 3))  # retries + 1
    failed = [i for i, e in enumerate(g) if e.status == 500]
    third = next(i for i in failed if len({g[j].path for j in failed if j <= i}) == 3)
    assert g[third + 1].started - g[third].responding >= BACKOFF_S - tol, g
    assert all(g[i + 1].started - g[i].responding < BACKOFF_S for i in failed if i < third), g
    # Crawl-delay 1 s: every gap on e.test, robots.txt included
    assert all(g >= 1.0 - tol for _, g in gaps(log, "e.test"))
    got = outcomes(tmp_path / "out")
    assert got[srv.url("d.test", "/flaky")] == ("fetched", None)
    assert got[srv.url("b.test", "/busy")] == ("fetched", None)


@pytest.mark.timeout(60)
def test_per_ip_budget_is_shared_by_hosts(tmp_path: Path) -> None:
    hosts = ["p1.test", "p2.test", "p3.test"]

    def per_ip_script(host: str, path: str, nth: int) -> Answer:
        return NOT_FOUND if path == "/robots.txt" else page("/x", "/y") if path == "/" else page()

    with ScriptedServer(per_ip_script) as srv:
        s = settings(
            tmp_path,
            [srv.url(h, "/") for h in hosts],
            srv.resolve(*hosts),
            politeness={"min_delay_s": 0.15, "per_ip": True},
            fetch={"concurrency": 16},
        )
        Engine(s).run()
        log = srv.log()
    assert len(log) == 12  # 3 robots.txt + 3 x 3 pages
    seq = sorted(log, key=lambda e: e.started)
    between = [b.started - a.responding for a, b in itertools.pairwise(seq)]
    assert min(between) >= 0.15 - CLOCK_TOLERANCE_S  # one budget for the one IP


@pytest.mark.timeout(60)
def test_unreachable_host_is_retired_with_its_urls_recorded(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port with nothing listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    urls = [f"http://dead.test:{port}/{i}" for i in range(5)]
    s = settings(
        tmp_path,
        urls,
        [f"dead.test:{port}:127.0.0.1"],
        politeness={"obey_robots": False, "max_host_errors": 2, "backoff_s": 0.05},
        fetch={"retries": 0},
    )
    report = Engine(s).run()
    assert report["complete"] is True
    got = outcomes(tmp_path / "out")
    assert sorted(got) == sorted(urls)
    assert (
        sorted(got.values()) == [("failed", "connect-error")] * 2 + [("host-unreachable", None)] * 3
    )
    assert report["outcomes"]["host-unreachable"] == 3


FILL = b"<p>" + b"politeness is per host " * 1000 + b"</p>"  # pages of ~23 KB


#: how much later in its tick the crawler may hand one request to its fetcher than another:
#: the frontier spaces a host's requests from the tick's clock, read before it takes them, and
#: the stamp is taken after the take and the earlier submits of that tick, which a loaded
#: machine can stretch by several ms (seen: 0.044 s for a 0.05 s delay). A crawler that
#: shortens the delay itself still fails: over a window of requests the shortfall adds up
#: (j - i) times, the allowance once.
TICK_LATENCY_S = 0.02


def rate_violations(starts: list[float], host: str, delay: float, slack: float = 0.0) -> list[str]:
    """Pairs of request starts to ``host`` closer than the delay allows: the j-th start after
    the i-th must come (j - i) x delay later, less ``slack`` (the rate shows over windows, not
    only between neighbours)."""
    starts = sorted(starts)
    bad = []
    for i, a in enumerate(starts):
        for j in range(i + 1, len(starts)):
            if starts[j] - a < (j - i) * delay - slack - CLOCK_TOLERANCE_S:
                bad.append(f"{host}: starts {i} and {j} {starts[j] - a:.3f} s apart")
    return bad


@pytest.mark.timeout(120)
@pytest.mark.parametrize("connections", [1, 4, 16])
@pytest.mark.parametrize("source", ["min_delay_s", "crawl-delay"])
def test_delay_spaces_request_starts_however_many_connections(
    tmp_path: Path, connections: int, source: str
) -> None:
    """Two request starts to one host are never closer than the delay (min_delay_s, or the
    robots.txt Crawl-delay), with 1, 4 or 16 connections per host: each start as the crawler
    makes it (hands the request to its fetcher), and each request reaches the server once,
    after that start (the server's kernel stamps its arrival). With one connection the
    requests' arrivals at the server are spaced so too, and the next request also waits that
    long after the end of the previous response. 4 hosts of 40 pages of ~23 KB, each answered
    in 20 ms (so several connections really overlap). The delay is 0.05 s (default 1 s) so that
    160 pages take seconds, not minutes.

    With several connections the spacing is checked at the crawler's starts, not at the
    server: a request on a new connection takes more turns of the crawler's loop to reach the
    wire (the connect, then the send) than one on an open connection, so on a loaded machine
    two starts 0.05 s apart arrived together (0.000 to 0.015 s apart, stamped by the kernel):
    that is when the OS ran the crawler, not what it chose."""
    delay = 0.05
    hosts = [f"h{i}.test" for i in range(4)]
    pages = [f"/p{i}" for i in range(40)]

    def script(host: str, path: str, nth: int) -> Answer:
        if path == "/robots.txt":
            if source == "crawl-delay":
                return Answer(200, f"User-agent: *\nCrawl-delay: {delay}\n".encode())
            return NOT_FOUND
        body = "".join(f'<a href="{p}">{p}</a>' for p in pages).encode() + FILL
        return Answer(200, b"<html><body>" + body + b"</body></html>", delay_s=0.02)

    with ScriptedServer(script) as srv:
        s = settings(
            tmp_path,
            [srv.url(h, "/") for h in hosts],
            srv.resolve(*hosts),
            politeness={
                "min_delay_s": delay if source == "min_delay_s" else 0.0,
                "connections_per_host": connections,
                "delay_factor": 0.0,
            },
        )
        fetcher = RecordingFetcher(Fetcher.from_settings(s.fetch, s.politeness))
        report = Engine(s, fetcher=fetcher).run()
        log = srv.log()
    assert report["complete"] is True and report["fetched"] == len(hosts) * (len(pages) + 1)
    # every request the crawler started reached the server, after its start, and no other
    # request did (a URL tried twice, as a robots.txt timed out on a loaded machine: in order)
    started: dict[str, list[float]] = {}
    for url, at in zip(fetcher.submitted, fetcher.started, strict=True):
        started.setdefault(url, []).append(at)
    arrived: dict[str, list[float]] = {}
    for e in sorted(log, key=lambda e: e.started):
        arrived.setdefault(srv.url(e.host, e.path), []).append(e.started)
    assert {u: len(t) for u, t in arrived.items()} == {u: len(t) for u, t in started.items()}
    late = [(b - a, u) for u, ts in started.items() for a, b in zip(ts, arrived[u], strict=True)]
    assert min(late)[0] >= -CLOCK_TOLERANCE_S, min(late)
    for host in hosts:
        mine = [u for u in started if f"//{host}:" in u and not u.endswith("/robots.txt")]
        at_start = rate_violations([t for u in mine for t in started[u]], host, delay,
                                   TICK_LATENCY_S)  # fmt: skip
        assert at_start == [], f"{at_start}; latest arrival {max(late)[0]:.3f} s after its start"
        if connections == 1:
            assert rate_violations([t for u in mine for t in arrived[u]], host, delay) == []
            assert all(g >= delay - CLOCK_TOLERANCE_S for _, g in gaps(log, host))
