"""https crawls of local TLS servers whose certificates come from a throwaway CA (trustme).

* verification is on by default: an untrusted certificate is a recorded ``tls-error``;
* ``fetch.ca_bundle`` trusts the test CA;
* ``fetch.verify_tls = false`` works, with a warning in the log and in report.json;
* HTTP/2 is used when ``fetch.http2`` is on and the server offers it over ALPN (hypercorn).

Host names map to 127.0.0.1 through ``fetch.resolve``; nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from warcio.archiveiterator import ArchiveIterator

from frontier_crawl.config import FetchSection, PolitenessSection, load
from frontier_crawl.engine import Engine
from frontier_crawl.fetch import ErrorKind, Fetcher, FetchRequest, FetchResult
from tests.conftest import render_toml
from tests.hostile.server import Exchange, RawHttpServer

pytestmark = pytest.mark.timeout(60)

NAME = "tls.test"
PAGES = {"/": b"<html><a href='/a'>a</a> <a href='/b'>b</a></html>", "/a": b"<html>a</html>",
         "/b": b"<html>b</html>"}  # fmt: skip


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def ca_file(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def serve_pages(ex: Exchange) -> None:
    body = PAGES.get(ex.request.path)
    if body is None:
        ex.reply(404, b"not found\n")
    else:
        ex.reply(200, body)


@pytest.fixture
def tls_server(ca: trustme.CA) -> Iterator[RawHttpServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(NAME).configure_cert(context)
    with RawHttpServer(serve_pages, tls=context) as server:
        yield server


def crawl(tmp_path: Path, port: int, **fetch: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    robots = fetch.pop("obey_robots", True)
    sections = {
        "crawl": {"seeds": [f"https://{NAME}:{port}/"], "output_dir": "out"},
        "politeness": {"min_delay_s": 0.0, "obey_robots": robots},
        "fetch": {
            "connect_timeout_s": 2.0,
            "timeout_s": 5.0,
            "retries": 1,
            "retry_backoff_s": 0.05,
            "resolve": [f"{NAME}:{port}:127.0.0.1"],
            **fetch,
        },
        "output": {"progress_interval_s": 0.0},
    }
    path = tmp_path / "crawl.toml"
    path.write_text(render_toml(sections))
    report = Engine(load(path)).run()
    lines = (tmp_path / "out" / "crawl.jsonl").read_text().splitlines()
    return report, [json.loads(x) for x in lines]


def test_untrusted_certificate_is_a_recorded_tls_error(
    tmp_path: Path, tls_server: RawHttpServer
) -> None:
    report, lines = crawl(tmp_path, tls_server.port, obey_robots=False)
    assert [(x["outcome"], x["error"], x["status"]) for x in lines] == [("failed", "tls-error", 0)]
    assert report["errors_by_kind"] == {"tls-error": 1}
    assert report["complete"] is True
    assert tls_server.connections == 1  # not retried: a certificate does not get better
    assert tls_server.hits() == []  # no request was sent over the unverified connection
    assert report["warnings"] == []


def test_ca_bundle_trusts_the_test_ca(
    tmp_path: Path, tls_server: RawHttpServer, ca_file: str
) -> None:
    report, lines = crawl(tmp_path, tls_server.port, ca_bundle=ca_file)
    fetched = {x["url"] for x in lines if x["outcome"] == "fetched"}
    assert fetched == {f"https://{NAME}:{tls_server.port}{p}" for p in PAGES}
    assert report["fetched"] == 3 and report["errors_by_kind"] == {}
    assert tls_server.tls_failures == 0
    assert {h.path for h in tls_server.hits()} == {"/robots.txt", *PAGES}


def test_verification_off_works_with_a_warning(
    tmp_path: Path, tls_server: RawHttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="frontier_crawl"):
        report, _ = crawl(tmp_path, tls_server.port, verify_tls=False)
    assert report["fetched"] == 3
    assert any("verify_tls" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert len(report["warnings"]) == 1 and "verify_tls" in report["warnings"][0]
    on_disk = json.loads((tmp_path / "out" / "report.json").read_text())
    assert on_disk["warnings"] == report["warnings"]


# -- HTTP/2 ---------------------------------------------------------------------------------


class H2Server:
    """hypercorn (h2 and http/1.1 over TLS, ALPN) in a thread, on a port-0 socket."""

    def __init__(self, ca: trustme.CA, directory: Path) -> None:
        cert = ca.issue_cert(NAME)
        self.cert_file = directory / "cert.pem"
        self.key_file = directory / "key.pem"
        cert.cert_chain_pems[0].write_to_path(str(self.cert_file))
        cert.private_key_pem.write_to_path(str(self.key_file))
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.seen: list[tuple[str, str]] = []  # (http_version, path) as the server saw them
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="hypercorn", daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "hypercorn did not start"

    async def app(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Any],
        send: Callable[[dict[str, Any]], Any],
    ) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                kind = message["type"].replace("lifespan.", "")
                await send({"type": f"lifespan.{kind}.complete"})
                if kind == "shutdown":
                    return
        path = scope["path"]
        self.seen.append((scope["http_version"], path))
        body = PAGES.get(path)
        status = 200 if body is not None else 404
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"text/html")],
            }
        )
        await send({"type": "http.response.body", "body": body or b"not found"})

    def _run(self) -> None:
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"fd://{os.dup(self.sock.fileno())}"]
        config.certfile = str(self.cert_file)
        config.keyfile = str(self.key_file)
        config.alpn_protocols = ["h2", "http/1.1"]

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._ready.set()
            await serve(self.app, config, shutdown_trigger=self._stop.wait)  # type: ignore[arg-type]

        asyncio.run(main())

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self.sock.close()


@pytest.fixture
def h2_server(ca: trustme.CA, tmp_path: Path) -> Iterator[H2Server]:
    server = H2Server(ca, tmp_path)
    yield server
    server.close()


def fetch_one(fetcher: Fetcher, url: str) -> FetchResult:
    fetcher.submit(FetchRequest(url))
    for _ in range(50):
        results = fetcher.poll(0.2)
        if results:
            return results[0]
    raise AssertionError("no result")


@pytest.mark.parametrize(("http2", "version"), [(True, "2"), (False, "1.1")])
def test_http2_when_enabled_and_offered(
    h2_server: H2Server, ca_file: str, http2: bool, version: str
) -> None:
    fetch = FetchSection(
        http2=http2, ca_bundle=ca_file, resolve=(f"{NAME}:{h2_server.port}:127.0.0.1",)
    )
    with Fetcher.from_settings(fetch, PolitenessSection()) as fetcher:
        result = fetch_one(fetcher, f"https://{NAME}:{h2_server.port}/a")
    assert (result.status, result.error, result.body) == (200, None, PAGES["/a"])
    assert result.http_version == version
    assert h2_server.seen == [(version, "/a")]


def test_crawl_over_http2_is_archived(tmp_path: Path, h2_server: H2Server, ca_file: str) -> None:
    report, lines = crawl(tmp_path, h2_server.port, ca_bundle=ca_file, http2=True)
    assert report["fetched"] == 3 and report["errors_by_kind"] == {}
    assert {v for v, _ in h2_server.seen} == {"2"}
    statuses = {}
    for path in (tmp_path / "out" / "warc").iterdir():
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response":
                    uri = rec.rec_headers.get_header("WARC-Target-URI")
                    statuses[uri] = (rec.http_headers.protocol, rec.http_headers.get_statuscode())
                    if uri.endswith("/a"):
                        assert rec.content_stream().read() == PAGES["/a"]
    assert set(statuses.values()) <= {("HTTP/2", "200"), ("HTTP/2", "404")}
    assert len(lines) == 4  # robots.txt and three pages


def test_tls_error_kind_is_not_transient() -> None:
    assert not ErrorKind.TLS.transient
