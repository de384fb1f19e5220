"""Request(priority=...) through the engine on a real loopback server: with one connection per
host, the server's own request log shows the host's URLs in priority order (higher first,
FIFO among equals, beyond the clamp as its end), including requests yielded while others are
queued; a redirect's target keeps its request's priority."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from frontier_crawl.engine import Engine
from tests.scripted_server import NOT_FOUND, Answer, ScriptedServer, page
from tests.scripted_server import crawl_settings as settings

SPIDER = '''
from frontier_crawl import Request, Spider

#: what the start page yields, in this order: (path, priority)
FIRST = [("/a0", 0), ("/a1", 0), ("/b0", 5), ("/c0", -1), ("/b1", 5), ("/top", 10**6),
         ("/a2", 0), ("/redir", 3), ("/c1", -1), ("/b2", 5)]
#: what /top yields once fetched, while the rest of FIRST is still queued
LATER = [("/late-top", 2 * 10**6), ("/late-four", 4), ("/late-zero", 0)]


class PrioritySpider(Spider):
    def parse(self, response):
        for path, priority in FIRST:
            yield Request(response.urljoin(path), callback="parse_page", priority=priority)

    def parse_page(self, response):
        yield {"url": response.url}
        if response.url.endswith("/top"):
            for path, priority in LATER:
                yield Request(response.urljoin(path), callback="parse_page", priority=priority)
'''


def script(host: str, path: str, nth: int) -> Answer:
    if path == "/robots.txt":
        return Answer(200, b"User-agent: *\nAllow: /\n", (("Content-Type", "text/plain"),))
    if path == "/":
        return page()
    if path == "/redir":
        return Answer(301, b"", (("Location", "/redir-target"),))
    if path.startswith(("/a", "/b", "/c", "/top", "/late", "/redir-target")):
        return page()
    return NOT_FOUND


@pytest.mark.timeout(60)
def test_a_hosts_requests_are_fetched_in_priority_order(tmp_path: Path) -> None:
    (tmp_path / "priority_spider.py").write_text(SPIDER)
    with ScriptedServer(script) as server:
        s = settings(
            tmp_path, [server.url("p.test", "/")], server.resolve("p.test"),
            politeness={"connections_per_host": 1},
            spider={"source": str(tmp_path / "priority_spider.py")},
        )  # fmt: skip
        report = Engine(s).run()
        log = server.log()
    assert report["complete"] is True
    paths = [e.path for e in log if e.host == "p.test"]
    assert paths == [
        "/robots.txt", "/",
        "/top",  # 10**6, clamped to 65535: first of the start page's requests
        "/late-top",  # yielded by /top: 2*10**6, clamped to the same, FIFO after /top
        "/b0", "/b1", "/b2",  # 5, in the order yielded
        "/late-four",  # 4: ahead of what the start page queued at lower priorities
        "/redir",  # 3
        "/redir-target",  # the redirect's target keeps priority 3: ahead of the 0s
        "/a0", "/a1", "/a2", "/late-zero",  # 0, FIFO (the late one was admitted last)
        "/c0", "/c1",  # -1
    ]  # fmt: skip
    # one connection: each request arrived after the previous one was being answered
    spans = sorted((e.started, e.responding) for e in log)
    assert all(nxt[0] >= prev[1] for prev, nxt in pairwise(spans))
    lines = (tmp_path / "out" / "items.jsonl").read_text().splitlines()
    items = [json.loads(x)["url"] for x in lines]
    assert len(items) == 13 and len(set(items)) == 13
