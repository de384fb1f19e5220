"""Scope by port (issue 34 point 12): two services on two ports of one host (127.0.0.1, as in
the review: no ``fetch.resolve`` entry names either). A sitemap and a page of the seed's
service link to the other one; by default only the seed's port (and 80, 443, and ports that
``fetch.resolve`` names) is crawled, so the other service sees no request at all, not even for
robots.txt; ``scope.any_port = true`` crawls both, as every port of an allowed host was
before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frontier_crawl.config import parse
from frontier_crawl.engine import Engine
from frontier_crawl.frontier.scope import scope_ports
from tests.scripted_server import NOT_FOUND, Answer, ScriptedServer, crawl_settings, page

XML = (("Content-Type", "application/xml"),)
TEXT = (("Content-Type", "text/plain"),)


def crawl(tmp_path: Path, any_port: bool) -> tuple[set[str], set[str], dict[str, str]]:
    """Crawl the first service: (paths it served, paths the second served, outcome by URL)."""

    def first(_host: str, path: str, _nth: int) -> Answer:
        if path == "/robots.txt":
            return Answer(200, f"Sitemap: {base}/sitemap.xml\n".encode(), TEXT)
        if path == "/sitemap.xml":
            locs = "".join(f"<url><loc>{u}</loc></url>" for u in (f"{base}/a", f"{other}/b"))
            return Answer(200, f"<urlset>{locs}</urlset>".encode(), XML)
        if path == "/":
            return page(f"{base}/c", f"{other}/", f"{other}/d")
        return page() if path in ("/a", "/c") else NOT_FOUND

    def second(_host: str, path: str, _nth: int) -> Answer:
        if path == "/robots.txt":
            return Answer(200, f"Sitemap: {other}/sitemap.xml\n".encode(), TEXT)
        if path == "/sitemap.xml":
            return Answer(200, f"<urlset><url><loc>{other}/e</loc></url></urlset>".encode(), XML)
        return page()

    with ScriptedServer(first) as one, ScriptedServer(second) as two:
        base, other = f"http://127.0.0.1:{one.port}", f"http://127.0.0.1:{two.port}"
        settings = crawl_settings(
            tmp_path, [f"{base}/"], [], sitemaps={"enabled": True, "paths": []},
            scope={"any_port": any_port},
        )  # fmt: skip
        report = Engine(settings).run()
        served = ({e.path for e in one.log()}, {e.path for e in two.log()})
    assert report["complete"] is True
    lines = [json.loads(x) for x in (tmp_path / "out" / "crawl.jsonl").read_text().splitlines()]
    return served[0], served[1], {x["url"]: x["outcome"] for x in lines}


@pytest.mark.timeout(60)
def test_another_port_of_the_seed_host_is_out_of_scope(tmp_path: Path) -> None:
    """Before: the sitemap and the page led the crawler to the second service (its robots.txt,
    its pages, its own sitemap). Now it sees nothing, and the crawl log holds the first
    service's URLs alone (a link out of scope is not queued, so it has no line)."""
    mine, theirs, outcomes = crawl(tmp_path, any_port=False)
    assert mine == {"/robots.txt", "/sitemap.xml", "/", "/a", "/c"}
    assert theirs == set()
    assert len({url.split("/")[2] for url in outcomes}) == 1, outcomes


@pytest.mark.timeout(60)
def test_any_port_crawls_every_port_of_an_allowed_host(tmp_path: Path) -> None:
    mine, theirs, _ = crawl(tmp_path, any_port=True)
    assert mine == {"/robots.txt", "/sitemap.xml", "/", "/a", "/c"}
    assert theirs == {"/robots.txt", "/sitemap.xml", "/", "/b", "/d", "/e"}


@pytest.mark.parametrize(
    ("seeds", "url", "allowed"),
    [
        (["http://a.test/"], "https://a.test/x", True),  # http -> https on one host
        (["https://a.test/"], "http://a.test/x", True),
        (["http://a.test/"], "http://a.test:443/x", True),
        (["http://a.test/"], "http://a.test:8080/x", False),  # another service
        (["http://a.test/"], "http://sub.a.test/x", True),  # (the domain rule decides)
        (["http://a.test:8080/"], "http://a.test:8080/x", True),
        (["http://a.test:8080/"], "https://sub.a.test:8080/x", True),  # the seed's port
        (["http://a.test:8080/"], "http://a.test/x", True),  # the default port
        (["http://a.test:8080/"], "http://a.test:8081/x", False),
        (["http://a.test/"], "http://b.test:9000/x", True),  # a fetch.resolve entry's port
        (["http://a.test/"], "http://a.test:9000/x", False),  # (on its host only)
        (["http://[::1]:8080/"], "http://[::1]:8081/x", False),
        (["http://[::1]:8080/"], "http://[::1]:8080/x", True),
    ],
)
def test_ports_in_scope(seeds: list[str], url: str, allowed: bool) -> None:
    resolve = ["B.test:9000:127.0.0.1"]
    settings = parse({"crawl": {"seeds": seeds}, "fetch": {"resolve": resolve}})
    assert scope_ports(settings).allows(url) is allowed
    anywhere = parse({"crawl": {"seeds": seeds}, "scope": {"any_port": True}})
    assert scope_ports(anywhere).allows(url) is True
