"""Link batches over Redis are capped (``cluster.max_batch_bytes``): the links one commit finds
for one partition are split, so a commit's links never make a write larger than Redis's
``maxmemory`` allows (a real redis-server at 5 MB, noeviction).

The site is served by a small threaded server of the test's own: node 0 owns ``near``, whose
pages each link to thousands of long URLs on ``far`` (owned by node 1) under a path far's
robots.txt disallows, so node 1 records them (robots-denied) without fetching them; a few
allowed ones are fetched. Before the cap one page's links were one batch of about 5 MB, which
Redis refused for memory while holding about 1 MB, and both nodes gave up.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from frontier_crawl.frontier.mailbox import owner_of
from frontier_crawl.frontier.urls import origin
from tests.conftest import render_toml
from tests.e2e.test_cluster import Node, assert_no_secret
from tests.redis_server import RedisServer, crawl_prefix

LINKS_PER_PAGE = 1200
PAGES = 2  #: near's pages besides "/", each with LINKS_PER_PAGE denied links
ALLOWED = 20  #: far's pages that are fetched
MAXMEMORY = 5_000_000


def _long(i: int) -> str:
    return f"/deny/{i:05d}/" + "x" * 1900  # ~1.9 KB a URL (max_url_length 2048)


class _Handler(BaseHTTPRequestHandler):
    server: _Site

    def do_GET(self) -> None:
        host = (self.headers.get("Host") or "").split(":")[0]
        site = self.server
        with site.lock:
            site.served.append((host, self.path))
        body = site.body(host, self.path)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = body.encode()
        self.send_response(200)
        ctype = "text/plain" if self.path == "/robots.txt" else "text/html"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Site(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.port = self.server_address[1]
        self.lock = threading.Lock()
        self.served: list[tuple[str, str]] = []
        names = [f"h{i}.test" for i in range(64)]
        owner = {n: owner_of(origin(f"http://{n}:{self.port}/"), 2) for n in names}
        self.near = next(n for n in names if owner[n] == 0)
        self.far = next(n for n in names if owner[n] == 1)

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"

    def body(self, host: str, path: str) -> str | None:
        if path == "/robots.txt":
            return "User-agent: *\nDisallow: /deny/\n" if host == self.far else ""
        if host == self.near:
            if path == "/":
                links = [f"/page/{p}" for p in range(PAGES)]
                links += [self.url(self.far, f"/ok/{i}") for i in range(ALLOWED)]
            elif path.startswith("/page/"):
                p = int(path.rsplit("/", 1)[1])
                links = [self.url(self.far, _long(p * LINKS_PER_PAGE + i))
                         for i in range(LINKS_PER_PAGE)]  # fmt: skip
            else:
                return None
        elif host == self.far and (path == "/" or path.startswith("/ok/")):
            links = []
        else:
            return None
        return "<html><body>" + "".join(f'<a href="{u}">l</a>\n' for u in links) + "</body></html>"


@pytest.fixture
def big_links() -> Iterator[_Site]:
    site = _Site()
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.shutdown()
        site.server_close()
        thread.join(10)


def _config(tmp_path: Path, site: _Site, url: str) -> Path:
    sections = {
        "crawl": {"seeds": [site.url(site.near, "/"), site.url(site.far, "/")],
                  "output_dir": "out-{node}"},
        "politeness": {"min_delay_s": 0.0, "delay_factor": 0.0,
                       "user_agent": "frontier-crawl-test/0.1"},
        "fetch": {"resolve": [f"{h}:{site.port}:127.0.0.1" for h in (site.near, site.far)]},
        "output": {"progress_interval_s": 0.0},
        # the fault would take 300 s by default to end the nodes: 8 s
        "cluster": {"redis_url": url, "nodes": 2, "unreachable_timeout_s": 8.0},
    }  # fmt: skip
    path = tmp_path / "crawl.toml"
    path.write_text(render_toml(sections))
    return path


def _outcomes(out: Path) -> dict[str, str]:
    """URL -> outcome, from every crawl log of a node's output directory."""
    got: dict[str, str] = {}
    for log in out.rglob("*.jsonl"):
        for line in log.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and "url" in rec and "outcome" in rec:
                got[rec["url"]] = rec["outcome"]
    return got


@pytest.mark.timeout(120)
def test_a_commit_of_links_larger_than_maxmemory(
    tmp_path: Path, big_links: _Site, redis_server: RedisServer
) -> None:
    """One page's links for node 1 (~2.3 MB each, two pages: ~4.6 MB in one commit) against
    a Redis of 5 MB: sent in batches of at most 1 MiB, each acknowledged on its own; the crawl
    completes (exit 0 on both nodes), every allowed page fetched once and every denied link
    recorded by its owner: nothing lost."""
    site = big_links
    client = redis_server.client()
    client.config_set("maxmemory", MAXMEMORY)
    cfg = _config(tmp_path, site, redis_server.url)
    nodes = [Node(cfg, n).start() for n in range(2)]
    codes = [node.wait(90) for node in nodes]
    logs = [n.output() for n in nodes]
    assert codes == [0, 0], [text[-2500:] for text in logs]
    assert_no_secret(tmp_path)
    fetched = [(h, p) for h, p in site.served if p != "/robots.txt"]
    oks = [p for h, p in fetched if h == site.far and p.startswith("/ok/")]
    assert sorted(oks) == sorted(f"/ok/{i}" for i in range(ALLOWED)), oks
    assert not [p for _h, p in fetched if p.startswith("/deny/")]
    assert len(fetched) == len(set(fetched)), "a page fetched twice"
    denied = {u for u, o in _outcomes(tmp_path / "out-1").items() if o == "robots-denied"}
    want = {site.url(site.far, _long(i)) for i in range(PAGES * LINKS_PER_PAGE)}
    assert want <= denied, f"{len(want - denied)} links lost"
    sent = int(client.hget(f"{crawl_prefix(client)}:counts", "sent") or 0)
    assert sent >= 2 * PAGES, sent  # each page's links: more than one batch
    print(f"{PAGES * LINKS_PER_PAGE} long links in {sent} batches through a {MAXMEMORY} B Redis")

