"""Healthy pages and every kind of bad URL on one host: the bad ones never stall the good ones.

Real sites put their broken endpoints next to their good pages. One raw-socket server answers
three host names; each root links to 30 healthy pages of 24 KB (linking to each other) and,
among them, to URLs that hang before the headers, trickle 1 B/s, reset mid-body, end short,
answer 500 or 503 forever, or 503 with ``Retry-After: 3600``. Everything is checked from the
server's own log.

Settings: the defaults, except these, shortened only so the test takes a minute rather than
an hour, with their ratios to each other kept as in the defaults:

* ``politeness.min_delay_s`` 1.0 -> 0.25 and ``backoff_s`` 5.0 -> 1.25 (5 x min_delay_s, as
  the defaults): about 60 requests one at a time to one host;
* ``fetch.timeout_s`` 30 -> 2, ``connect_timeout_s`` 10 -> 2, ``low_speed_time_s`` 15 -> 2 (the
  least allowed): the hanging and trickling URLs take that long per attempt;
* ``fetch.retry_backoff_s`` 2.0 -> 0.5 and ``max_retry_delay_s`` 300 -> 5 (the cap a Retry-After
  holds the host for; the 3600 s one is past it and must be given up after one hold).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frontier_crawl.config import parse
from frontier_crawl.engine import Engine
from tests.hostile.server import Exchange, Hit, RawHttpServer

HOSTS = ["shop.test", "docs.test", "blog.test"]
HEALTHY = [f"/doc/{i}" for i in range(30)]
BAD = {
    "/hang": "no header before the total timeout",
    "/trickle": "1 byte a second: the low-speed cutoff",
    "/reset": "a TCP reset in the middle of the body",
    "/short": "the connection closed before Content-Length",
    "/500": "500 every time",
    "/503": "503 every time, no Retry-After",
    "/503-long": "503 with Retry-After: 3600, past the cap",
}
PAGE_FILL = b"<p>" + b"lorem ipsum dolor sit amet " * 900 + b"</p>\n"  # ~24 KB per page


def _page(links: list[str]) -> bytes:
    anchors = "".join(f'<a href="{u}">{u}</a>\n' for u in links)
    return b"<!doctype html><html><body>" + anchors.encode() + PAGE_FILL + b"</body></html>"


def handler(ex: Exchange) -> None:
    path = ex.request.path
    if path == "/robots.txt":
        ex.reply(200, b"User-agent: *\nAllow: /\n", content_type="text/plain")
    elif path == "/":  # the bad URLs among the good ones, as on a real site
        mixed = [u for i, bad in enumerate(BAD) for u in (bad, *HEALTHY[4 * i : 4 * i + 4])]
        ex.reply(200, _page(mixed + HEALTHY[4 * len(BAD) :]))
    elif path in HEALTHY:
        i = HEALTHY.index(path)
        ex.reply(200, _page([HEALTHY[(i + 1) % len(HEALTHY)], HEALTHY[(i + 7) % len(HEALTHY)]]))
    elif path == "/hang":
        ex.keep_alive = False
        ex.wait_closed(30)
    elif path == "/trickle":
        ex.keep_alive = False
        ex.head(200, [("Content-Type", "text/html"), ("Content-Length", "100")])
        for _ in range(100):
            ex.send(b"x")
            if ex.wait_closed(1.0):
                return
    elif path == "/reset":
        ex.head(200, [("Content-Type", "text/html"), ("Content-Length", "30000")])
        ex.send(b"<html>" + b"r" * 9994)
        ex.wait(0.05)
        ex.reset()
    elif path == "/short":
        ex.keep_alive = False
        ex.head(200, [("Content-Type", "text/html"), ("Content-Length", "30000")])
        ex.send(b"<html>" + b"s" * 994)
    elif path == "/500":
        ex.reply(500, b"oops\n")
    elif path == "/503":
        ex.reply(503, b"later\n")
    elif path == "/503-long":
        ex.reply(503, b"much later\n", [("Retry-After", "3600")])
    else:
        ex.reply(404, b"")


@pytest.mark.timeout(300)
def test_bad_urls_never_stall_the_good_ones_on_their_host(tmp_path: Path) -> None:
    with RawHttpServer(handler) as srv:
        s = parse(
            {
                "crawl": {
                    "seeds": [srv.url(host, "/") for host in HOSTS],
                    "output_dir": str(tmp_path / "out"),
                },
                "politeness": {"min_delay_s": 0.25, "backoff_s": 1.25},
                "fetch": {
                    "resolve": srv.resolve(*HOSTS),
                    "timeout_s": 2.0,
                    "connect_timeout_s": 2.0,
                    "low_speed_time_s": 2,
                    "retry_backoff_s": 0.5,
                    "max_retry_delay_s": 5.0,
                },
                "output": {"progress_interval_s": 0.0},
            }
        )
        f, p = s.fetch, s.politeness
        attempts = f.retries + 1
        # one connection: a request takes at most the timeout, then the host waits the delay
        # (the adaptive one follows complete responses only) or a backoff / Retry-After hold
        # (each at most the cap here); the bad URLs' own retry delays overlap other requests
        slow = 2 * attempts * (f.timeout_s + p.min_delay_s)
        quick = (2 + len(HEALTHY) + (len(BAD) - 2) * attempts) * (p.min_delay_s + 0.5)
        holds = (attempts + 1) * f.max_retry_delay_s  # the 503 answers
        bound = slow + quick + holds
        report = Engine(s).run()
        hits = sorted(srv.hits(), key=lambda h: h.started)
    elapsed = report["elapsed_s"]
    assert report["complete"] is True
    assert isinstance(elapsed, float) and elapsed < bound, (elapsed, bound)

    lines = [json.loads(x) for x in (tmp_path / "out" / "crawl.jsonl").read_text().splitlines()]
    for host in HOSTS:
        check_host(host, [h for h in hits if h.host == host], attempts)
        long = next(x for x in lines if x["url"] == srv.url(host, "/503-long"))
        # the crawl log and the report name the URL that held the host, and for how long
        assert long["outcome"] == "http-error" and long["status"] == 503
        assert long["held_s"] == pytest.approx(f.max_retry_delay_s - p.min_delay_s, abs=0.5)
        held = {h["url"]: h["held_s"] for h in report["held_by"]}
        assert held[srv.url(host, "/503-long")] == pytest.approx(long["held_s"], abs=0.01)
        fetched = {x["url"] for x in lines if x["outcome"] == "fetched"}
        assert {srv.url(host, path) for path in HEALTHY} <= fetched
    assert report["fetched"] == len(HOSTS) * (len(HEALTHY) + 1)


def check_host(host: str, hits: list[Hit], attempts: int) -> None:
    """From one host's part of the server log: every healthy page once, each bad URL at most
    ``attempts`` times, and healthy pages fetched between the attempts of each retried URL."""
    by_path: dict[str, list[Hit]] = {}
    for h in hits:
        by_path.setdefault(h.path, []).append(h)
    assert all(len(by_path.get(path, [])) == 1 for path in HEALTHY), {
        path: len(by_path.get(path, [])) for path in HEALTHY
    }
    for path in BAD:
        assert 1 <= len(by_path[path]) <= attempts, (host, path, len(by_path[path]))
    assert len(by_path["/503-long"]) == 1  # given up after one hold, not retried cap after cap
    # a failing URL waits for its retry behind the host's other URLs (none of them sat at the
    # queue's head, holding the healthy ones back)
    healthy_times = sorted(by_path[path][0].started for path in HEALTHY)
    for path in ("/hang", "/trickle", "/reset", "/short", "/500"):
        tries = by_path[path]
        assert len(tries) == attempts, (host, path, len(tries))
        first, second = tries[0].started, tries[1].started
        if first < healthy_times[-1]:
            assert any(first < t < second for t in healthy_times), (host, path, first, second)
