"""Scrapy parity, part two (issue 33): start(), requests beyond GET, cookies, selectors built
from text, spider attributes, project imports, and loud refusals of what is not there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import parsel
import pytest

from frontier_crawl.config import ConfigError, CrawlSettings
from frontier_crawl.spider import Request, Response, SpiderHost
from frontier_crawl.spider.adopt import adopt
from frontier_crawl.spider.cookies import CookieJars
from tests.unit.spider_helpers import isolated_imports, write

pytestmark = pytest.mark.usefixtures("isolated_imports")
__all__ = ["isolated_imports"]

HEAD = "import frontier_crawl as scrapy\n"


def spider_settings(
    tmp_path: Path, body: str, extra: str = "", seeds: bool = False
) -> CrawlSettings:
    """Settings adopted from a spider written to a directory of its own."""
    tmp_path = tmp_path / f"s{len(list(tmp_path.iterdir()))}"
    tmp_path.mkdir()
    write(tmp_path, "spider.py", HEAD + body)
    lines = ["[crawl]"] + (['seeds = ["http://a.test/"]'] if seeds else [])
    lines += ["[spider]", 'source = "spider.py"', extra]
    (tmp_path / "crawl.toml").write_text("\n".join(lines) + "\n")
    from frontier_crawl.config import load

    return adopt(load(tmp_path / "crawl.toml"))


def starts(tmp_path: Path, body: str) -> list[tuple[str, str]]:
    s = spider_settings(tmp_path, body)
    host = SpiderHost.load(s)
    assert host is not None
    return [(r.url, r.callback) for r in host.start_requests()]


# -- start() ------------------------------------------------------------------------------


def test_async_start_as_in_scrapys_tutorial(tmp_path: Path) -> None:
    body = """
import asyncio

class S(scrapy.Spider):
    name = "quotes"

    async def start(self):
        urls = ["http://a.test/page/1/", "http://a.test/page/2/"]
        for url in urls:
            await asyncio.sleep(0)
            yield scrapy.Request(url=url, callback=self.parse_page)

    def parse_page(self, response):
        pass
"""
    s = spider_settings(tmp_path, body)
    assert s.crawl.seeds == ("http://a.test/page/1/", "http://a.test/page/2/")
    assert starts(tmp_path, body) == [
        ("http://a.test/page/1/", "parse_page"), ("http://a.test/page/2/", "parse_page")
    ]  # fmt: skip


def test_sync_start_and_start_requests_order(tmp_path: Path) -> None:
    sync = """
class S(scrapy.Spider):
    def start(self):
        return [scrapy.Request("http://a.test/sync")]
"""
    assert starts(tmp_path, sync) == [("http://a.test/sync", "")]
    both = """
class S(scrapy.Spider):
    async def start(self):
        yield scrapy.Request("http://a.test/start")

    def start_requests(self):
        yield scrapy.Request("http://a.test/old")
"""
    assert starts(tmp_path, both) == [("http://a.test/start", "")]  # start() wins
    chained = """
class S(scrapy.Spider):
    async def start(self):
        async for request in super().start():
            yield request
        yield scrapy.Request("http://a.test/more")

    def start_requests(self):
        yield scrapy.Request("http://a.test/old")
"""
    assert starts(tmp_path, chained) == [("http://a.test/old", ""), ("http://a.test/more", "")]
    old = """
class S(scrapy.Spider):
    start_urls = ["http://a.test/ignored"]
    def start_requests(self):
        yield scrapy.Request("http://a.test/old")
"""
    assert starts(tmp_path, old) == [("http://a.test/old", "")]


def test_bad_start_fails_at_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"start\(\) yielded an item"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    async def start(self):\n"
                        "        yield {'a': 1}\n")  # fmt: skip
    with pytest.raises(ConfigError, match="coroutine without yield"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    async def start(self):\n"
                        "        return [scrapy.Request('http://a.test/')]\n")  # fmt: skip
    with pytest.raises(ConfigError, match=r"start\(\) failed: KeyError"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    async def start(self):\n"
                        "        yield {}['x']\n")  # fmt: skip
    with pytest.raises(ConfigError, match="did you miss an 's'"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    start_url = 'http://a.test/'\n")


# -- cookies ------------------------------------------------------------------------------


def _envelope_of(host: SpiderHost, req: Request) -> bytes:
    new = host._request(_run(), req, None)
    assert new is not None, "the request was refused"
    return new.meta


def _run() -> Any:
    from frontier_crawl.spider.host import _Run
    from tests.unit.spider_helpers import page

    return _Run(page(), None)


def test_cookie_jar_rules() -> None:
    jars = CookieJars()
    assert jars.request_headers("http://a.test/", b"") == ()
    jars.response("http://a.test/dir/page", (
        ("set-cookie", "sid=1; Path=/"), ("set-cookie", "dir=2"),  # default path: /dir
        ("set-cookie", "wide=3; Domain=a.test; Path=/"), ("set-cookie", "sec=4; Secure; Path=/"),
        ("set-cookie", "old=5; Expires=Thu, 01 Jan 1970 00:00:00 GMT"),
        ("set-cookie", "bad=6; Domain=other.test"),  # another domain: refused
    ), b"")  # fmt: skip
    assert jars.changed
    assert _names(jars, "http://a.test/dir/x") == {"sid", "dir", "wide"}
    assert _names(jars, "http://a.test/elsewhere") == {"sid", "wide"}
    assert _names(jars, "http://sub.a.test/") == {"wide"}  # Domain= includes subdomains
    assert _names(jars, "https://a.test/") == {"sid", "wide", "sec"}  # Secure: https only
    assert _names(jars, "http://other.test/") == set()


def _names(jars: CookieJars, url: str, meta: bytes = b"") -> set[str]:
    header = dict(jars.request_headers(url, meta)).get("Cookie", "")
    return {part.split("=")[0] for part in header.split("; ") if part}


def test_cookie_meta_keys_and_request_cookies(tmp_path: Path) -> None:
    host = SpiderHost.load(spider_settings(tmp_path, "class S(scrapy.Spider):\n    pass\n",
                                           seeds=True))  # fmt: skip
    assert host is not None and isinstance(host.cookies, CookieJars)
    jars = host.cookies
    given = _envelope_of(host, Request("http://a.test/", cookies={"lang": "en"}))
    assert _names(jars, "http://a.test/", given) == {"lang"}  # sent, and kept in the jar:
    assert _names(jars, "http://a.test/page") == {"lang"}
    listed = _envelope_of(host, Request("http://a.test/", cookies=[
        {"name": "k", "value": "v", "domain": "a.test", "path": "/p"}]))  # fmt: skip
    assert _names(jars, "http://a.test/p/x", listed) == {"lang", "k"}
    dont = _envelope_of(host, Request("http://a.test/", meta={"dont_merge_cookies": True},
                                      cookies={"x": "1"}))  # fmt: skip
    assert jars.request_headers("http://a.test/", dont) == ()
    jars.response("http://a.test/", (("set-cookie", "y=1"),), dont)
    assert _names(jars, "http://a.test/") == {"lang"}  # neither sent nor kept
    second = _envelope_of(host, Request("http://a.test/", meta={"cookiejar": 2}))
    assert jars.request_headers("http://a.test/", second) == ()  # another session
    jars.response("http://a.test/", (("set-cookie", "s=two"),), second)
    assert _names(jars, "http://a.test/", second) == {"s"}
    assert _names(jars, "http://a.test/") == {"lang"}
    saved = jars.dump()
    assert not jars.changed
    again = CookieJars()
    again.load(saved)  # a resumed crawl: the same sessions, session cookies included
    assert _names(again, "http://a.test/", second) == {"s"}
    assert _names(again, "http://a.test/p/") == {"lang", "k"}
    broken = CookieJars()
    broken.load(b"\xc1nonsense")
    assert broken.request_headers("http://a.test/", b"") == ()


def test_cookies_off_without_a_spider_or_when_asked(tmp_path: Path) -> None:
    from tests.unit.spider_helpers import settings

    rules = settings(tmp_path / "rules", None, '[[extract]]\nurl = "."\nfields = {t = "title"}\n')
    host = SpiderHost.load(rules)
    assert host is not None and not isinstance(host.cookies, CookieJars)
    off = spider_settings(tmp_path, "class S(scrapy.Spider):\n    custom_settings = "
                          "{'COOKIES_ENABLED': False}\n", seeds=True)  # fmt: skip
    assert off.spider.cookies is False
    host = SpiderHost.load(off)
    assert host is not None and not isinstance(host.cookies, CookieJars)
    with pytest.raises(ConfigError, match="never logged"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    custom_settings = "
                        "{'COOKIES_DEBUG': True}\n", seeds=True)  # fmt: skip


def test_bad_requests_are_bad_yields(tmp_path: Path) -> None:
    host = SpiderHost.load(spider_settings(tmp_path, "class S(scrapy.Spider):\n    pass\n",
                                           seeds=True))  # fmt: skip
    assert host is not None
    for req, message in [
        (Request("http://a.test/", method="GE T"), "HTTP method"),
        (Request("http://a.test/", body=12), "body must be bytes or str"),  # type: ignore[arg-type]
        (Request("http://a.test/", cookies="a=1"), "cookies must be"),  # type: ignore[arg-type]
        (Request("http://a.test/", cookies={"a;b": "1"}), "cookie"),
    ]:
        state = _run()
        assert host._request(state, req, None) is None
        assert message in state.problems[-1].message


# -- selectors ------------------------------------------------------------------------------


def test_selector_from_text_and_root_is_parsels() -> None:
    import lxml.html
    import parsel

    import frontier_crawl as scrapy

    sel = scrapy.Selector(text="<div><p class=a>one</p></div>")
    assert isinstance(sel, parsel.Selector) and sel.css("p.a::text").get() == "one"
    root = lxml.html.fromstring("<div><p>two</p></div>")
    assert scrapy.Selector(root=root).xpath("//p/text()").get() == "two"
    assert scrapy.SelectorList is parsel.SelectorList


def test_xpath_after_css_sees_the_whole_document(caplog: pytest.LogCaptureFixture) -> None:
    from tests.quotes_site import quote_page
    from tests.unit.spider_helpers import page

    html = quote_page(1)
    r = Response(page(body=html.encode()))
    p = parsel.Selector(text=html)
    for mine, theirs in zip(r.css("small.author"), p.css("small.author"), strict=True):
        for query in ("../following-sibling::div/a/text()", "ancestor::div[@class='quote']/@class",
                      "..//a/@href", "//title/text()", "following::a[1]/@href", "./text()"):
            assert mine.xpath(query).getall() == theirs.xpath(query).getall(), query
    first = r.css("div.quote")[2]
    assert first.css("span.text")[0].xpath("../span[2]/small/text()").get() == p.css(
        "div.quote")[2].xpath("./span[2]/small/text()").get()  # fmt: skip
    # a page the two parsers repair differently (lexbor adds <tbody>, lxml does not): the
    # query sees the element's own HTML, and a warning says so
    odd = Response(page(body=b"<table><tr><td>c</td></tr></table><p>after</p>"))
    with caplog.at_level("WARNING"):
        assert odd.css("tbody")[0].xpath(".//td/text()").get() == "c"
    assert "different numbers of <tbody>" in caplog.text


# -- spider attributes -------------------------------------------------------------------------


def test_spider_attributes_mapped_or_refused(tmp_path: Path) -> None:
    s = spider_settings(tmp_path, """
class S(scrapy.Spider):
    download_delay = 2.5
    download_timeout = 7
    download_maxsize = 0
    user_agent = "my-bot/1.0"
    custom_settings = {"DOWNLOAD_DELAY": 1.0}
""", seeds=True)  # fmt: skip
    assert s.politeness.min_delay_s == 2.5  # the attribute wins, as in Scrapy
    assert s.fetch.timeout_s == 7 and s.fetch.max_body_bytes == 2**62
    assert s.politeness.user_agent == "my-bot/1.0"
    with pytest.raises(ConfigError, match=r"download_delay \(crawl.toml politeness.min_delay_s"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    download_delay = 'x'\n", seeds=True)
    for attr, hint in [("http_user = 'u'", "Authorization"), ("rules = ()", "follow_all"),
                       ("sitemap_urls = ['x']", r"\[sitemaps\]")]:  # fmt: skip
        with pytest.raises(ConfigError, match=hint):
            spider_settings(tmp_path, f"class S(scrapy.Spider):\n    {attr}\n", seeds=True)
    with pytest.raises(ConfigError, match="from_crawler is not supported"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    @classmethod\n"
                        "    def from_crawler(cls, crawler):\n        return cls()\n",
                        seeds=True)  # fmt: skip


def test_spider_settings_and_closed(tmp_path: Path) -> None:
    s = spider_settings(tmp_path, """
class S(scrapy.Spider):
    download_delay = 0.5
    reasons = []
    def closed(self, reason):
        self.reasons.append(reason)
""", seeds=True)  # fmt: skip
    host = SpiderHost.load(s)
    assert host is not None
    spider: Any = host.spider
    assert spider.settings.getfloat("DOWNLOAD_DELAY") == 0.5
    assert spider.crawler.spider is spider
    host.open()
    host.close()
    assert spider.reasons == ["finished"]


# -- a Scrapy project ------------------------------------------------------------------------


def test_startproject_layout_imports(tmp_path: Path) -> None:
    """``scrapy startproject myproject``'s layout, crawl.toml outside it: the project's own
    imports work, absolute and relative, and the spider's directory's files too."""
    proj = tmp_path / "proj"
    write(proj, "scrapy.cfg", "[settings]\ndefault = myproject.settings\n")
    write(proj, "myproject/__init__.py", "")
    write(proj, "myproject/settings.py", "BOT_NAME = 'myproject'\n")
    write(proj, "myproject/items.py", HEAD + "class QuoteItem(scrapy.Item):\n"
          "    text = scrapy.Field()\n")  # fmt: skip
    write(proj, "myproject/pipelines.py", "class Keep:\n"
          "    def process_item(self, item, spider):\n        return item\n")  # fmt: skip
    write(proj, "myproject/spiders/__init__.py", "")
    write(proj, "myproject/spiders/helpers.py", "PREFIX = 'q'\n")
    write(proj, "myproject/spiders/quotes.py", HEAD + """
from myproject.items import QuoteItem
from ..items import QuoteItem as Same
from .helpers import PREFIX

class QuotesSpider(scrapy.Spider):
    name = PREFIX
    start_urls = ["http://a.test/"]
    def parse(self, response):
        assert QuoteItem is Same
        yield QuoteItem(text=response.url)
""")
    (tmp_path / "crawl.toml").write_text(
        '[spider]\nsource = "proj/myproject/spiders/quotes.py"\n'
        'pipelines = ["myproject.pipelines:Keep"]\n'
    )
    from frontier_crawl.config import load
    from tests.unit.spider_helpers import page

    host = SpiderHost.load(adopt(load(tmp_path / "crawl.toml")))
    assert host is not None and host.spider.name == "q"
    host.open()
    out = host.run(page())
    assert out.problems == [] and out.items == [{"text": "http://a.test/dir/index.html"}]


def test_envelopes_stored_before_methods_still_read() -> None:
    import msgspec

    from frontier_crawl.spider.api import (
        ENVELOPE,
        may_retry,
        pack_envelope,
        redirected,
        request_headers,
        request_method,
        request_variant,
        unpack_envelope,
    )

    old = ENVELOPE + msgspec.msgpack.encode([{"k": 1}, {"n": 2}, [["Accept", "x"]], "eb", ""])
    assert unpack_envelope(old) == ({"k": 1}, {"n": 2}, [("Accept", "x")], "eb")
    assert request_method(old) == ("GET", b"") and request_variant(old) == ""
    assert request_headers(old, "http://a.test/") == (("Accept", "x"),)
    post = pack_envelope({}, None, [("Content-Type", "t")], "", "", "POST", b"a=1")
    other = pack_envelope({}, None, [], "", "", "POST", b"a=2")
    assert request_variant(post) != request_variant(other) != ""
    assert request_variant(pack_envelope({"x": 1}, None, [], "")) == ""  # a GET's key: its URL
    assert not may_retry(post, "timeout") and may_retry(post, "connect-error")
    assert not may_retry(post, None)  # a 5xx
    assert may_retry(pack_envelope({"dont_retry": False}, None, [], "", "", "POST", b""), None)
    assert not may_retry(msgspec.msgpack.encode({"dont_retry": True}), "dns-error")
    assert may_retry(b"", "timeout")
    assert request_method(redirected(post, 303)) == ("GET", b"")
    assert request_headers(redirected(post, 302), "http://a.test/") == ()
    assert request_method(redirected(post, 307)) == ("POST", b"a=1")
