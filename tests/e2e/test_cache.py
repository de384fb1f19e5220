"""The HTTP cache on disk makes a recrawl conditional; a 304 reuses the stored response.

Three crawls of one small site, each with its own output_dir and config file but the same
``fetch.cache_dir`` (the default ``httpcache``, relative to the config files' directory). The
server honours If-None-Match / If-Modified-Since and logs what it was asked.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import pytest
from warcio.archiveiterator import ArchiveIterator

from frontier_crawl.config import FetchSection, PolitenessSection, load
from frontier_crawl.engine import Engine
from frontier_crawl.fetch import Fetcher, FetchRequest
from frontier_crawl.output.warc import SERVER_NOT_MODIFIED
from tests.conftest import render_toml
from tests.hostile.server import Exchange, Hit, RawHttpServer

pytestmark = pytest.mark.timeout(60)

NAME = "cache.test"
LAST_MODIFIED = "Wed, 01 May 2024 12:00:00 GMT"
ROOT = (
    b"<html>"
    + b"".join(
        b"<a href='/%s'>x</a>" % p for p in (b"etag", b"lastmod", b"plain", b"nostore", b"changing")
    )
    + b"</html>"
)


class Site:
    """Validators per path; ``generation`` changes the ETag of /changing between crawls."""

    def __init__(self) -> None:
        self.generation = 1

    def validators(self, path: str) -> dict[str, str]:
        return {
            "/": {"ETag": '"root-v1"'},
            "/etag": {"ETag": '"e1"'},
            "/lastmod": {"Last-Modified": LAST_MODIFIED},
            "/nostore": {"ETag": '"ns"', "Cache-Control": "private, no-store"},
            "/changing": {"ETag": f'"c{self.generation}"'},
        }.get(path, {})

    def __call__(self, ex: Exchange) -> None:
        path = ex.request.path
        if path == "/robots.txt" or (path != "/" and path[1:] not in ROOT.decode()):
            ex.reply(404, b"")
            return
        v = self.validators(path)
        etag, inm = v.get("ETag"), ex.request.header("if-none-match")
        ims = ex.request.header("if-modified-since")
        if (inm is not None and inm == etag) or (
            inm is None and ims and ims == v.get("Last-Modified")
        ):
            ex.head(304, [(k, val) for k, val in v.items() if k != "Cache-Control"])
            return
        if path == "/":  # stored gzip-encoded: the cache must decode it again on a hit
            ex.reply(200, gzip.compress(ROOT), [*v.items(), ("Content-Encoding", "gzip")])
        else:
            ex.reply(200, f"<html>{path} {self.generation}</html>".encode(), list(v.items()))


@pytest.fixture
def site() -> Iterator[tuple[Site, RawHttpServer]]:
    content = Site()
    with RawHttpServer(content) as server:
        yield content, server


def run(tmp_path: Path, n: int, port: int) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    sections = {
        "crawl": {"seeds": [f"http://{NAME}:{port}/"], "output_dir": f"out{n}"},
        "politeness": {"min_delay_s": 0.0},
        "fetch": {"cache": True, "resolve": [f"{NAME}:{port}:127.0.0.1"], "timeout_s": 5.0},
        "output": {"progress_interval_s": 0.0},
    }
    path = tmp_path / f"crawl{n}.toml"
    path.write_text(render_toml(sections))
    report = Engine(load(path)).run()
    lines = [json.loads(x) for x in (tmp_path / f"out{n}" / "crawl.jsonl").read_text().splitlines()]
    return report, {x["url"].split(str(port), 1)[1]: x for x in lines}


def warc(out: Path) -> list[Any]:
    records = []
    for path in sorted((out / "warc").iterdir()):
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type in ("response", "revisit"):
                    rec.payload = rec.content_stream().read()
                    records.append(rec)
    return records


def by_path(records: list[Any], port: int) -> dict[str, Any]:
    return {r.rec_headers.get_header("WARC-Target-URI").split(str(port), 1)[1]: r for r in records}


def conditional(hit: Hit) -> bool:
    return any(hit.request.header(h) for h in ("if-none-match", "if-modified-since"))


def test_recrawl_is_conditional_and_304_reuses_the_stored_response(
    tmp_path: Path, site: tuple[Site, RawHttpServer]
) -> None:
    content, server = site
    port = server.port
    report1, _ = run(tmp_path, 1, port)
    assert report1["fetched"] == 6 and report1["not_modified"] == 0
    assert not any(conditional(h) for h in server.hits())
    assert (tmp_path / "httpcache").is_dir()  # relative to the config file, shared

    since = len(server.hits())
    content.generation = 2
    report2, lines2 = run(tmp_path, 2, port)
    hits = {h.path: h for h in server.hits()[since:]}
    # conditional exactly for stored responses with a validator (not robots.txt, not no-store)
    assert {p for p, h in hits.items() if conditional(h)} == {"/", "/etag", "/lastmod", "/changing"}
    assert hits["/"].request.header("if-none-match") == '"root-v1"'
    assert hits["/lastmod"].request.header("if-modified-since") == LAST_MODIFIED
    # 304s reuse the stored response: outcome not-modified, links of / still followed
    not_modified = {p for p, x in lines2.items() if x["outcome"] == "not-modified"}
    assert not_modified == {"/", "/etag", "/lastmod"}
    assert all(lines2[p]["status"] == 304 and lines2[p]["bytes"] == 0 for p in not_modified)
    assert lines2["/"]["content_type"] == "text/html"
    assert {p for p, x in lines2.items() if x["outcome"] == "fetched"} == {
        "/plain", "/nostore", "/changing"
    }  # fmt: skip
    assert report2["not_modified"] == 3 and report2["fetched"] == 3

    # WARC: revisit records (server-not-modified) pointing at crawl 1's captures
    first = by_path(warc(tmp_path / "out1"), port)
    second = warc(tmp_path / "out2")
    revisits = by_path([r for r in second if r.rec_type == "revisit"], port)
    assert set(revisits) == not_modified
    for path, rec in revisits.items():
        h = rec.rec_headers
        assert h.get_header("WARC-Profile") == SERVER_NOT_MODIFIED
        assert h.get_header("WARC-Refers-To-Target-URI") == f"http://{NAME}:{port}{path}"
        assert h.get_header("WARC-Refers-To-Date") == first[path].rec_headers.get_header(
            "WARC-Date"
        )
        assert rec.http_headers.get_statuscode() == "304"
        assert rec.payload == b""
    responses = by_path([r for r in second if r.rec_type == "response"], port)
    assert responses["/changing"].payload == b"<html>/changing 2</html>"

    # a third crawl still refers to the capture holding the payload (crawl 1's)
    since = len(server.hits())
    report3, _ = run(tmp_path, 3, port)
    assert report3["not_modified"] == 4  # /changing's new version was stored by crawl 2
    third = by_path([r for r in warc(tmp_path / "out3") if r.rec_type == "revisit"], port)
    assert third["/"].rec_headers.get_header("WARC-Refers-To-Date") == first[
        "/"
    ].rec_headers.get_header("WARC-Date")
    assert third["/changing"].rec_headers.get_header("WARC-Refers-To-Date") == responses[
        "/changing"
    ].rec_headers.get_header("WARC-Date")
    assert not any(conditional(h) for h in server.hits()[since:] if h.path == "/robots.txt")


def test_cache_is_off_by_default(tmp_path: Path, site: tuple[Site, RawHttpServer]) -> None:
    _, server = site
    sections = {
        "crawl": {"seeds": [f"http://{NAME}:{server.port}/"], "output_dir": "out"},
        "politeness": {"min_delay_s": 0.0},
        "fetch": {"resolve": [f"{NAME}:{server.port}:127.0.0.1"]},
        "output": {"progress_interval_s": 0.0},
    }
    path = tmp_path / "crawl.toml"
    path.write_text(render_toml(sections))
    for out in ("a", "b"):
        sections["crawl"]["output_dir"] = out
        path.write_text(render_toml(sections))
        report = Engine(load(path)).run()
        assert report["fetched"] == 6 and report["not_modified"] == 0
    assert not any(conditional(h) for h in server.hits())
    assert not (tmp_path / "httpcache").exists()


def test_cache_size_is_bounded(tmp_path: Path) -> None:
    body = b"x" * 200_000

    def big(ex: Exchange) -> None:
        ex.reply(200, body, [("ETag", f'"{ex.request.path}"')])

    cache_dir = tmp_path / "cache"
    with RawHttpServer(big) as server:
        fetch = FetchSection(cache=True, cache_dir=str(cache_dir), cache_max_bytes=1 << 20)
        with Fetcher.from_settings(fetch, PolitenessSection()) as fetcher:
            for i in range(15):
                fetcher.submit(FetchRequest(f"http://127.0.0.1:{server.port}/{i}"))
                results: list[Any] = []
                while not results:
                    results = fetcher.poll(1.0)
                assert results[0].status == 200
    with diskcache.Cache(str(cache_dir)) as cache:
        assert 0 < len(cache) < 15
        assert cache.volume() <= (1 << 20) + 2 * len(body)
