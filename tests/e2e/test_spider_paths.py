"""A spider's requests through the frontier's paths, on a scripted server: a redirect keeps its
request's callback and meta (the callback sees the final response), a retried 503 keeps them,
a 404 reaches the callback only because the spider asks (handle_status), robots.txt never does;
a callback's exception, a bad yield and a bad URL are crawl-log outcomes (the traceback logged
once per code location), counted in the report, and the crawl goes on."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from frontier_crawl.engine import Engine
from tests.scripted_server import NOT_FOUND, Answer, ScriptedServer, page
from tests.scripted_server import crawl_settings as settings

SPIDER = '''
from frontier_crawl import Request, Spider


class PathSpider(Spider):
    handle_status = [404]

    def parse(self, response):
        yield {"url": response.url, "callback": "parse", "status": response.status}
        for n, url in enumerate(response.links):
            yield Request(url, callback="parse_page", meta={"n": n, "asked": url})
        yield Request("mailto:someone@example.org", callback="parse_page")
        yield 42

    def parse_page(self, response):
        if "/boom" in response.url:
            raise KeyError("boom")
        yield {"url": response.url, "callback": "parse_page", "status": response.status,
               "asked": response.meta["asked"], "n": response.meta["n"]}
'''

LINKS = ("/redir", "/flaky", "/gone", "/boom1", "/boom2")


def script(host: str, path: str, nth: int) -> Answer:
    if path == "/robots.txt":
        return Answer(200, b"User-agent: *\nAllow: /\n", (("Content-Type", "text/plain"),))
    if path == "/":
        return page(*LINKS)
    if path == "/redir":
        return Answer(301, b"", (("Location", "/target"),))
    if path == "/flaky" and nth == 1:
        return Answer(503, b"busy")
    if path == "/gone":
        return Answer(404, b"<html><body>gone</body></html>")
    if path in ("/target", "/flaky", "/boom1", "/boom2"):
        return page()
    return NOT_FOUND


@pytest.mark.timeout(60)
def test_spider_requests_through_redirects_retries_statuses_and_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "path_spider.py").write_text(SPIDER)
    with ScriptedServer(script) as server:
        url = server.url
        s = settings(
            tmp_path, [url("s.test", "/")], server.resolve("s.test"),
            spider={"source": str(tmp_path / "path_spider.py")},
        )  # fmt: skip
        with caplog.at_level(logging.ERROR, logger="frontier_crawl.engine"):
            report = Engine(s).run()
    out = tmp_path / "out"
    items = {i["url"]: i for i in map(json.loads, (out / "items.jsonl").read_text().splitlines())}
    asked = {path: n for n, path in enumerate(LINKS)}
    assert items == {
        url("s.test", "/"): {"url": url("s.test", "/"), "callback": "parse", "status": 200},
        # the redirect's target, with the meta of the request for /redir
        url("s.test", "/target"): {"url": url("s.test", "/target"), "callback": "parse_page",
                                   "status": 200, "asked": url("s.test", "/redir"),
                                   "n": asked["/redir"]},
        # fetched twice (503, then 200): the meta kept through the retry
        url("s.test", "/flaky"): {"url": url("s.test", "/flaky"), "callback": "parse_page",
                                  "status": 200, "asked": url("s.test", "/flaky"),
                                  "n": asked["/flaky"]},
        # a 404 reaches the callback because the spider asks with handle_status
        url("s.test", "/gone"): {"url": url("s.test", "/gone"), "callback": "parse_page",
                                 "status": 404, "asked": url("s.test", "/gone"),
                                 "n": asked["/gone"]},
    }  # fmt: skip
    lines = [json.loads(x) for x in (out / "crawl.jsonl").read_text().splitlines()]
    problems = [x for x in lines if x["outcome"] in ("callback-error", "bad-url", "bad-yield")]
    assert sorted((x["outcome"], x["url"]) for x in problems) == sorted([
        ("bad-url", url("s.test", "/")),
        ("bad-yield", url("s.test", "/")),
        ("callback-error", url("s.test", "/boom1")),
        ("callback-error", url("s.test", "/boom2")),
    ])  # fmt: skip
    errors = [x for x in problems if x["outcome"] == "callback-error"]
    assert {(x["error"], x["message"]) for x in errors} == {("KeyError", "KeyError: 'boom'")}
    assert all(x["where"].startswith("path_spider.py:") for x in errors)
    tracebacks = [r for r in caplog.records if "Traceback" in r.getMessage()]
    assert len(tracebacks) == 1  # once per code location, though two pages failed there
    assert "path_spider.py" in tracebacks[0].getMessage()
    assert report["complete"] is True
    assert report["spider"]["items"] == 4 and report["spider"]["problems"] == 4
    assert report["outcomes"]["callback-error"] == 2
    assert not [i for i in items if i.endswith("/robots.txt")]
