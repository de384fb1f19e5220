"""Scrapy's idioms on frontier-crawl (issue 21): selectors give what parsel gives on the same
(20 KB+) page, Response's Scrapy methods, Request's Scrapy arguments, pipelines the Scrapy way
(DropItem, None, from_crawler, process_item(item, spider)), items JSON cannot hold exactly,
custom_settings / allowed_domains / start_urls adopted into the settings, errbacks, and the
start-up check of renamed callbacks."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import msgspec
import parsel
import pytest

from frontier_crawl.config import ConfigError, CrawlSettings
from frontier_crawl.exceptions import DownloadError, DropItem, HttpError
from frontier_crawl.spider import Response, SpiderHost
from frontier_crawl.spider.adopt import adopt
from frontier_crawl.spider.api import pack_envelope, request_headers
from frontier_crawl.spider.select import SelectorError, SelectorList
from tests.quotes_site import author_page, quote_page
from tests.unit.spider_helpers import host_for, isolated_imports, page, settings, write

pytestmark = pytest.mark.usefixtures("isolated_imports")
__all__ = ["isolated_imports"]

HEAD = "import frontier_crawl as scrapy\nfrom frontier_crawl.exceptions import DropItem\n"

QUERIES = [
    "title::text", "span.text::text", "small.author::text", "a::attr(href)",
    "div.tags a.tag::text", "li.next a::attr(href)", ".author + a::attr(href)",
    "div.quote ::text", "div.tags::text", "meta.keywords::attr(content)",
    "a.tag::text, small.author::text", "div.quote span", "h3.author-title::text",
    ".author-born-date::text", ".author-description::text", "a[href^='/author/']::attr(href)",
    "div.col-md-4 a.side::text", "footer::text", "::text", "p ::text",
]  # fmt: skip


@pytest.mark.parametrize("html", [quote_page(1), author_page("author-3")], ids=["quotes", "author"])
def test_css_gives_what_parsel_gives(html: str) -> None:
    assert len(html.encode()) > 20_000
    r = Response(page(body=html.encode()))
    p = parsel.Selector(text=html)
    for query in QUERIES:
        assert r.css(query).getall() == p.css(query).getall(), query
        assert r.css(query).get() == p.css(query).get(), query
    assert r.css("div.quote").re(r"number (\d+)") == p.css("div.quote").re(r"number (\d+)")
    assert r.css("span.text::text").re_first(r"\d+") == p.css("span.text::text").re_first(r"\d+")
    assert r.css("nothing::text").re_first(r"x", default="-") == "-"
    mine, theirs = r.css("div.quote"), p.css("div.quote")
    for a, b in zip(mine, theirs, strict=True):  # chained css, attrib, xpath in a node
        assert a.css("span.text::text").get() == b.css("span.text::text").get()
        assert a.css("a.tag::text").getall() == b.css("a.tag::text").getall()
        assert a.attrib == b.attrib
        assert a.xpath("./span/small/text()").get() == b.xpath("./span/small/text()").get()
        assert a.xpath(".//a/@href").getall() == b.xpath(".//a/@href").getall()
    assert mine.attrib == theirs.attrib and r.css("nothing").attrib == {}
    assert mine.css("small.author::text").getall() == theirs.css("small.author::text").getall()
    assert r.css("title::text").extract_first() == "Quotes to Scrape" or "author" in html
    assert r.css("a.tag::text").extract() == p.css("a.tag::text").extract()
    links = r.css("a")
    assert isinstance(links[1:3], SelectorList) and len(links[1:3]) == 2
    assert r.css("nothing").get() is None and r.css("nothing").get(default="") == ""


def test_selectors_keep_the_node_api() -> None:
    r = Response(page(body=b"<p class=x id=a>one <b>two</b></p><input disabled>"))
    first = r.css("p.x")[0]
    assert first.text() == "one two" and first.attributes["id"] == "a"
    assert first.css_first("b").text() == "two" and first.tag == "p"
    assert r.css("p.x")[0].get() == '<p class="x" id="a">one <b>two</b></p>'
    assert r.css("input")[0].attrib == {"disabled": ""}


def test_bad_selector_names_it() -> None:
    r = Response(page(body=b"<p>x</p>"))
    for query in ("a[", "p::text, a[", "p::nope"):
        with pytest.raises(SelectorError, match="invalid CSS selector") as info:
            r.css(query)
        assert repr(query) in str(info.value)
    assert issubclass(SelectorError, ValueError)


def test_xpath_and_selector_built_only_when_asked() -> None:
    r = Response(page(body=quote_page(2).encode()))
    _ = r.css("span.text::text").getall()
    assert r._selector is None  # css never builds the lxml tree
    assert r.xpath("//small[@class='author']/text()").getall() == parsel.Selector(
        text=quote_page(2)
    ).xpath("//small[@class='author']/text()").getall()
    assert r.selector is r.selector and isinstance(r.selector, parsel.Selector)
    assert r.selector.css("li.next a::attr(href)").get() == "/page/3/"


def test_urljoin_follow_follow_all() -> None:
    r = Response(page(url="http://q.test/page/1/", body=quote_page(1).encode()))
    assert r.urljoin("/author/x/") == "http://q.test/author/x/"
    assert r.urljoin("../2/") == "http://q.test/page/2/"
    a = r.css("li.next a")[0]
    assert r.follow(a).url == "http://q.test/page/2/"
    assert r.follow(r.css("li.next a::attr(href)")[0], "parse_x").callback == "parse_x"
    assert r.follow(r.xpath("//li[@class='next']/a")[0]).url == "http://q.test/page/2/"
    assert r.follow("x", meta={"a": 1}, priority=2, cb_kwargs={"k": 1}).meta == {"a": 1}
    authors = [req.url for req in r.follow_all(css=".author + a")]
    assert authors[:2] == ["http://q.test/author/author-0/", "http://q.test/author/author-1/"]
    assert [q.url for q in r.follow_all(xpath="//li[@class='next']/a/@href")] == [
        "http://q.test/page/2/"
    ]
    assert [q.url for q in r.follow_all(["a", "/b"], callback="cb")] == [
        "http://q.test/page/1/a", "http://q.test/b"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="Only <a> and <link>"):
        r.follow(r.css("div.quote")[0])
    with pytest.raises(ValueError, match="exactly one"):
        list(r.follow_all())


def test_json_and_headers() -> None:
    headers = (("content-type", "application/json"), ("set-cookie", "a=1"), ("set-cookie", "b=2"))
    r = Response(page(headers=headers, body=b'{"a": [1, 2.5, null]}'))
    assert r.json() == {"a": [1, 2.5, None]} and r.json() is r.json()
    assert r.headers["Content-Type"] == "application/json"
    assert r.headers.get("CONTENT-TYPE") == "application/json" and "Set-Cookie" in r.headers
    assert r.headers.get("missing", "-") == "-"
    assert r.headers.getlist("Set-Cookie") == ["a=1", "b=2"]
    assert r.headers == {"content-type": "application/json", "set-cookie": "a=1, b=2"}


def test_request_arguments_reach_the_callback(tmp_path: Path) -> None:
    host = host_for(tmp_path, HEAD + """
class S(scrapy.Spider):
    name = "s"
    def parse(self, response):
        self.logger.info("parsing %s", response.url)
        yield scrapy.Request("http://a.test/x", callback=self.parse_x, cb_kwargs={"n": 3},
                             meta={"m": 1}, headers={"Accept": "text/csv", b"X-B": [b"1", "2"]},
                             errback="on_error", priority=4)
    def parse_x(self, response, n):
        yield {"n": n, "meta": response.meta, "kw": response.cb_kwargs}
    def on_error(self, failure):
        yield {"failed": failure.request.url, "kind": type(failure.value).__name__,
               "is_http": bool(failure.check(HttpError)), "kw": failure.request.cb_kwargs}
from frontier_crawl.exceptions import HttpError
""")
    y = host.run(page())
    assert y.problems == [] and len(y.requests) == 1
    req = y.requests[0]
    assert (req.callback, req.priority) == ("parse_x", 4)
    assert request_headers(req.meta, req.url) == (
        ("Accept", "text/csv"), ("X-B", "1"), ("X-B", "2")
    )  # fmt: skip
    y2 = host.run(page(url=req.url, callback=req.callback, meta=req.meta))
    assert y2.problems == []
    assert y2.items == [{"n": 3, "meta": {"m": 1}, "kw": {"n": 3}}]
    timeout = host.run(page(url=req.url, callback=req.callback, meta=req.meta, status=0),
                       "timeout")  # fmt: skip
    assert timeout.items == [{"failed": req.url, "kind": "DownloadError", "is_http": False,
                              "kw": {"n": 3}}]  # fmt: skip
    http = host.run(page(url=req.url, callback=req.callback, meta=req.meta, status=500), "http")
    assert http.items[0]["kind"] == "HttpError" and http.items[0]["is_http"] is True
    # no errback: a failure gives nothing
    assert host.run(page(meta=pack_envelope({}, {"n": 1}, [], "")), "timeout").items == []
    assert issubclass(DownloadError, Exception) and issubclass(HttpError, Exception)


def test_bad_request_arguments_are_problems(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    host = host_for(tmp_path, HEAD + """
class S(scrapy.Spider):
    def parse(self, response):
        yield scrapy.Request("http://a.test/1", headers={"Host": "evil.test"})   # HOST
        yield scrapy.Request("http://a.test/2", headers={"X": "a\\r\\nB: c"})      # CRLF
        yield scrapy.Request("http://a.test/3", cb_kwargs=[1])                  # KWARGS
        yield scrapy.Request("http://a.test/4", errback="nope")                 # ERRBACK
        yield scrapy.Request("http://a.test/5", dont_filter=True)
        yield scrapy.Request("http://a.test/6", dont_filter=True)
""")
    with caplog.at_level(logging.WARNING):
        y = host.run(page())
    assert [p.outcome for p in y.problems] == ["bad-yield", "bad-yield", "bad-meta",
                                               "unknown-callback"]  # fmt: skip
    assert "'Host' cannot be set" in y.problems[0].message
    assert [r.url for r in y.requests] == ["http://a.test/5", "http://a.test/6"]
    warned = [r for r in caplog.records if "dont_filter" in r.getMessage()]
    assert len(warned) == 1  # once per crawl


def test_items_json_cannot_hold(tmp_path: Path) -> None:
    write(tmp_path, "pipes.py", HEAD + """
class Adds:
    def process_item(self, item, spider):
        if item.get("add"):
            item["score"] = float("nan")   # PIPELINE-NAN
        return item
""")
    src = write(tmp_path, "spider.py", HEAD + """
class S(scrapy.Spider):
    def parse(self, response):
        yield {"price": float("nan")}                  # NAN
        yield {"deep": {"x": [1, float("-inf")]}}      # INF
        yield {"tags": {"b", "a", "c"}, "n": 1}        # SET
        yield {"add": True}                            # ADDED
        yield {"ok": 1.5}
""")
    host = SpiderHost.load(settings(tmp_path, {"source": "spider.py",
                                               "pipelines": ["pipes.py:Adds"]}))  # fmt: skip
    assert host is not None
    y = host.run(page())
    lines = src.read_text().splitlines()
    at = lambda m: next(i for i, x in enumerate(lines, 1) if m in x)  # noqa: E731
    got = [(p.outcome, p.where, p.message) for p in y.problems]
    assert got == [
        ("bad-yield", f"spider.py:{at('# NAN')} in S.parse",
         "an item holds price = nan (JSON has no NaN or infinity)"),
        ("bad-yield", f"spider.py:{at('# INF')} in S.parse",
         "an item holds deep.x[1] = -inf (JSON has no NaN or infinity)"),
        ("pipeline-error", f"pipes.py:{lineno_of(tmp_path / 'pipes.py', 'def process_item')} "
         "in Adds.process_item",
         "Adds.process_item put score = nan (JSON has no NaN or infinity) in an item"),
    ]  # fmt: skip
    assert y.items == [{"tags": ["a", "b", "c"], "n": 1}, {"ok": 1.5}]
    assert math.isfinite(y.items[1]["ok"])


def lineno_of(path: Path, marker: str) -> int:
    return next(i for i, x in enumerate(path.read_text().splitlines(), 1) if marker in x)


def test_drop_item_and_none_counted_per_pipeline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, "pipes.py", HEAD + """
class Crawlerish:
    def __init__(self, ua, spider_name):
        self.ua, self.spider_name, self.log = ua, spider_name, []
    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.get("USER_AGENT"), crawler.spider.name)
    def open_spider(self, spider):
        self.log.append("open")
    def process_item(self, item, spider):
        if item["n"] % 3 == 0:
            raise DropItem("multiple of 3")
        item["by"] = f"{self.spider_name}/{spider.name}"
        return item
    def close_spider(self, spider):
        self.log.append("close")

class Nones:
    def process_item(self, item, response):
        return None if item["n"] == 4 else item

class Off:
    def __init__(self):
        from frontier_crawl.exceptions import NotConfigured
        raise NotConfigured("no database configured")
""")
    write(tmp_path, "spider.py", HEAD + """
class S(scrapy.Spider):
    name = "numbers"
    def parse(self, response):
        for n in range(1, 8):
            yield {"n": n}
""")
    host = SpiderHost.load(settings(tmp_path, {
        "source": "spider.py",
        "pipelines": ["pipes.py:Crawlerish", "pipes.py:Nones", "pipes.py:Off"],
    }))  # fmt: skip
    assert host is not None
    host.open()
    with caplog.at_level(logging.DEBUG, logger="frontier_crawl.spider.host"):
        y = host.run(page())
    host.close()
    assert [i["n"] for i in y.items] == [1, 2, 5, 7]
    assert y.items[0]["by"] == "numbers/numbers"
    assert y.problems == []
    assert y.dropped == {"Crawlerish": 2, "Nones (returned None)": 1}
    drops = [r for r in caplog.records if "dropped an item" in r.getMessage()]
    assert len(drops) == 2 and all(r.levelno == logging.DEBUG for r in drops)
    pipe = host._pipelines[0].obj
    assert pipe.log == ["open", "close"] and pipe.ua.startswith("frontier-crawl/")
    assert len(host._pipelines) == 2  # Off is left out
    assert issubclass(DropItem, Exception)


def spider_settings(
    tmp_path: Path, body: str, extra: str = "", seeds: bool = True
) -> CrawlSettings:
    """Settings adopted from a spider written to a directory of its own (a file is imported
    once per process, as a module)."""
    tmp_path = tmp_path / f"s{len(list(tmp_path.iterdir()))}"
    tmp_path.mkdir()
    write(tmp_path, "spider.py", HEAD + body)
    lines = ["[crawl]"] + (['seeds = ["http://a.test/"]'] if seeds else [])
    lines += ["[spider]", 'source = "spider.py"', extra]
    (tmp_path / "crawl.toml").write_text("\n".join(lines) + "\n")
    from frontier_crawl.config import load

    return adopt(load(tmp_path / "crawl.toml"))


def test_custom_settings_mapped(tmp_path: Path) -> None:
    s = spider_settings(tmp_path, """
class S(scrapy.Spider):
    custom_settings = {"DOWNLOAD_DELAY": 0.25, "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
                       "USER_AGENT": "quotesbot (+http://a.test/)", "ROBOTSTXT_OBEY": False,
                       "DEPTH_LIMIT": 3, "DOWNLOAD_TIMEOUT": 12, "RETRY_TIMES": 1,
                       "CONCURRENT_REQUESTS": 8, "CLOSESPIDER_PAGECOUNT": 50}
""")
    assert s.politeness.min_delay_s == 0.25 and s.politeness.connections_per_host == 2
    assert s.politeness.user_agent == "quotesbot (+http://a.test/)"
    assert s.politeness.obey_robots is False and s.crawl.max_depth == 3
    assert (s.fetch.timeout_s, s.fetch.retries, s.fetch.concurrency) == (12.0, 1, 8)
    assert s.crawl.max_pages == 50
    assert adopt(s) == s  # idempotent
    unlimited = spider_settings(tmp_path, """
class S(scrapy.Spider):
    custom_settings = {"DEPTH_LIMIT": 0}
""")
    assert unlimited.crawl.max_depth == 2**62  # Scrapy's 0: none


@pytest.mark.parametrize(
    ("custom", "message"),
    [
        ('{"ITEM_PIPELINES": {}}', "custom_settings['ITEM_PIPELINES']: not supported: list them "
         "in crawl.toml's spider.pipelines"),
        ('{"TELNETCONSOLE_ENABLED": True}', "custom_settings['TELNETCONSOLE_ENABLED']: not "
         "supported: it has no crawl.toml equivalent; the Scrapy settings that map are"),
        ('{"DOWNLOAD_DELAY": "fast"}', "custom_settings['DOWNLOAD_DELAY'] (crawl.toml "
         "politeness.min_delay_s): expected a number, got 'fast'"),
        ('{"ROBOTSTXT_OBEY": 1}', "(crawl.toml politeness.obey_robots): expected True or False"),
        ('{"DOWNLOAD_DELAY": -1}', "spider.class: S:"),
    ],
)
def test_custom_settings_refused(tmp_path: Path, custom: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        spider_settings(tmp_path, f"class S(scrapy.Spider):\n    custom_settings = {custom}\n")
    assert message in str(info.value)
    assert str(info.value).startswith("spider.class: S")


def test_start_urls_become_seeds_and_allowed_domains_narrow_scope(tmp_path: Path) -> None:
    s = spider_settings(tmp_path, """
class S(scrapy.Spider):
    allowed_domains = ["docs.a.test"]
    start_urls = ["http://docs.a.test/", "http://docs.a.test/"]
""", seeds=False)
    assert s.crawl.seeds == ("http://docs.a.test/",)
    assert s.scope.allow_domains == ("docs.a.test",)
    both = spider_settings(tmp_path, """
class S(scrapy.Spider):
    allowed_domains = ["docs.a.test", "b.test"]
""", extra='[scope]\nallow_domains = ["a.test", "c.test"]')
    assert both.scope.allow_domains == ("docs.a.test",)
    wider = spider_settings(tmp_path, "class S(scrapy.Spider):\n    allowed_domains = ['test']\n",
                            extra='[scope]\nallow_domains = ["a.test"]')  # fmt: skip
    assert wider.scope.allow_domains == ("a.test",)
    with pytest.raises(ConfigError, match="no domain in common"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    allowed_domains = ['b.test']\n",
                        extra='[scope]\nallow_domains = ["a.test"]')  # fmt: skip
    with pytest.raises(ConfigError, match="start_urls / start_requests"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    pass\n", seeds=False)


def test_start_requests_with_callbacks(tmp_path: Path) -> None:
    body = """
class S(scrapy.Spider):
    def start_requests(self):
        yield scrapy.Request("http://a.test/login", callback=self.after_login, meta={"k": 1})
        yield scrapy.Request("http://b.test/")
    def after_login(self, response):
        pass
"""
    s = spider_settings(tmp_path, body, seeds=False)
    assert s.crawl.seeds == ("http://a.test/login", "http://b.test/")
    host = SpiderHost.load(s)
    assert host is not None
    starts = host.start_requests()
    assert [(r.url, r.callback) for r in starts] == [
        ("http://a.test/login", "after_login"), ("http://b.test/", "")
    ]  # fmt: skip
    assert msgspec.msgpack.decode(starts[0].meta) == {"k": 1}
    assert host.names_changed  # after_login is saved with the requests naming it
    with pytest.raises(ConfigError, match="start_requests"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    def start_requests(self):\n"
                        "        yield 'http://a.test/'\n", seeds=False)  # fmt: skip


def test_handle_httpstatus_list(tmp_path: Path) -> None:
    source = "class S(scrapy.Spider):\n    handle_httpstatus_list = [404]\n"
    host = host_for(tmp_path, HEAD + source)
    assert host.wants(404, "") and not host.wants(500, "")


def test_renamed_callbacks_check(tmp_path: Path) -> None:
    body = "class S(scrapy.Spider):\n    def parse_new(self, response):\n        pass\n"
    host = host_for(tmp_path, HEAD + body)
    names = msgspec.msgpack.encode(["parse_old", "parse_new"])
    with pytest.raises(ConfigError) as info:
        host.check_stored(names, lambda: {"parse_old": 7, "parse_new": 2, "": 3})
    assert "'parse_old' (7 queued requests)" in str(info.value)
    host.check_stored(names, lambda: {"parse_new": 2})  # none left: nothing to refuse
    mapped = host_for(tmp_path / "m", HEAD + body, )
    mapped._renamed = {"parse_old": "parse_new"}
    mapped.check_stored(names, lambda: {"parse_old": 7})
    assert mapped.run(page(callback="parse_old")).problems == []
    bad = host_for(tmp_path / "b", HEAD + body)
    bad._renamed = {"parse_old": "parse_gone"}
    with pytest.raises(ConfigError, match=r"spider\.renamed_callbacks\.parse_old"):
        bad.check_stored(names, dict)


def test_scrapy_items(tmp_path: Path) -> None:
    host = host_for(tmp_path, HEAD + """
class Quote(scrapy.Item):
    text = scrapy.Field()
    author = scrapy.Field(serializer=str)

class S(scrapy.Spider):
    def parse(self, response):
        q = Quote(text="t")
        q["author"] = "a"
        yield q
        yield Quote(nope=1)        # UNDECLARED
""")
    y = host.run(page())
    assert y.items == [{"text": "t", "author": "a"}]
    assert [(p.outcome, p.message) for p in y.problems] == [
        ("callback-error", "KeyError: 'Quote does not support field: nope'")
    ]


def test_credentials_not_sent_to_another_origin(tmp_path: Path) -> None:
    host = host_for(tmp_path, HEAD + """
class S(scrapy.Spider):
    def parse(self, response):
        yield scrapy.Request("/private", headers={"Authorization": "Basic eDp5",
                                                  "Cookie": "s=1", "Accept": "text/html"})
""")
    (req,) = host.run(page()).requests
    everything = (("Authorization", "Basic eDp5"), ("Cookie", "s=1"), ("Accept", "text/html"))
    assert request_headers(req.meta, "http://a.test/private") == everything
    assert request_headers(req.meta, "http://A.TEST/elsewhere") == everything  # same origin
    # a redirect to another origin keeps the meta, not the credentials
    assert request_headers(req.meta, "http://b.test/private") == (("Accept", "text/html"),)
    assert request_headers(req.meta, "https://a.test/private") == (("Accept", "text/html"),)
