"""The engine's result handling with an in-memory fetcher (no sockets): what reaches the parser
and the crawl log."""

from __future__ import annotations

import json
import time
from pathlib import Path

from frontier_crawl.config import CrawlSettings, parse
from frontier_crawl.engine import Engine
from frontier_crawl.fetch import FetchRequest, FetchResult
from frontier_crawl.parse import PageLinks

SEED = "http://h.test/"


class MemoryFetcher:
    """Answers each request at the next poll from ``pages``: url -> (content type, body)."""

    def __init__(self, pages: dict[str, tuple[str, bytes]]) -> None:
        self._pages = pages
        self._pending: list[FetchRequest] = []
        self.fetched: list[str] = []

    @property
    def free_slots(self) -> int:
        return 8 - len(self._pending)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def submit(self, req: FetchRequest) -> None:
        self._pending.append(req)

    def poll(self, timeout_s: float) -> list[FetchResult]:
        del timeout_s
        done, self._pending = self._pending, []
        out = []
        for req in done:
            self.fetched.append(req.url)
            content_type, body = self._pages.get(req.url, ("text/plain", b"not found"))
            status = 200 if req.url in self._pages else 404
            headers = (("content-type", content_type), ("content-length", str(len(body))))
            out.append(
                FetchResult(
                    request=req,
                    url=req.url,
                    status=status,
                    error=None,
                    error_detail="",
                    header_bytes=b"HTTP/1.1 %d X\r\n\r\n" % status,
                    headers=headers,
                    raw_body=body,
                    body=body,
                    request_bytes=b"GET / HTTP/1.1\r\n\r\n",
                    ip="127.0.0.1",
                    http_version="1.1",
                    started_at=time.time(),
                    finished=time.monotonic(),
                    duration_s=0.0,
                )
            )
        return out

    def close(self) -> None:
        self._pending.clear()


class RecordingParser:
    """A Parser that remembers the content type it was given."""

    def __init__(self) -> None:
        self.content_types: list[str] = []

    def parse(self, url: str, content_type: str, body: bytes) -> PageLinks:
        self.content_types.append(content_type)
        return PageLinks((), False, url)


def settings(tmp_path: Path) -> CrawlSettings:
    return parse(
        {
            "crawl": {"seeds": [SEED], "output_dir": str(tmp_path / "out")},
            "politeness": {"min_delay_s": 0.0, "obey_robots": False},
            "output": {"warc": False, "progress_interval_s": 0.0},
        }
    )


def test_parser_gets_the_raw_content_type_header(tmp_path: Path) -> None:
    parser = RecordingParser()
    pages = {SEED: ("Text/HTML; Charset=windows-1251", b"<a href=/x>x</a>")}
    Engine(settings(tmp_path), fetcher=MemoryFetcher(pages), parser=parser).run()
    assert parser.content_types == ["Text/HTML; Charset=windows-1251"]


def test_header_charset_decodes_links(tmp_path: Path) -> None:
    """A charset named only by the header decides how link bytes are read; the crawl log
    keeps the bare media type."""
    body = '<html><body><a href="/путь">x</a></body></html>'.encode("cp1251")
    pages = {SEED: ("text/html; charset=windows-1251", body)}
    fetcher = MemoryFetcher(pages)
    report = Engine(settings(tmp_path), fetcher=fetcher).run()
    assert fetcher.fetched == [SEED, "http://h.test/%D0%BF%D1%83%D1%82%D1%8C"]
    assert report["fetched"] == 1
    lines = [json.loads(x) for x in (tmp_path / "out" / "crawl.jsonl").read_text().splitlines()]
    assert [(x["url"], x["content_type"]) for x in lines] == [
        (SEED, "text/html"),
        ("http://h.test/%D0%BF%D1%83%D1%82%D1%8C", "text/plain"),
    ]
