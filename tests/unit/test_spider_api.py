"""The user API: Response (lazy text, css, meta, headers), Request, the package re-exports."""

from __future__ import annotations

import msgspec

import frontier_crawl
from frontier_crawl.spider import Request, Response, Spider
from tests.unit.spider_helpers import page


def test_top_level_reexports() -> None:
    from frontier_crawl import Request as R
    from frontier_crawl import Spider as S

    assert R is Request and S is Spider
    assert {"Request", "Response", "Spider"} <= set(frontier_crawl.__all__)


def test_plain_fields() -> None:
    p = page(status=203, depth=4, links=["http://a.test/x"], body=b"<p>x</p>")
    r = Response(p)
    assert (r.url, r.status, r.depth, r.links, r.body) == (
        p.url,
        203,
        4,
        ["http://a.test/x"],
        b"<p>x</p>",
    )
    assert r.content_type == "text/html" and r.charset is None
    assert repr(r) == "<Response 203 http://a.test/dir/index.html>"


def test_headers_dict_and_list() -> None:
    headers = (("content-type", "text/html"), ("set-cookie", "a=1"), ("set-cookie", "b=2"))
    r = Response(page(headers=headers))
    assert r.headers == {"content-type": "text/html", "set-cookie": "a=1, b=2"}
    assert r.header_list == headers
    assert r.headers is r.headers


def test_css_parses_once_and_lazily() -> None:
    r = Response(page(body=b"<html><title>T</title><p class=x>one</p><p class=x>two</p></html>"))
    assert r._tree is None
    _ = (r.links, r.url, r.meta, r.headers)
    assert r._tree is None  # nothing but css()/tree parses
    first = r.css("p.x")
    tree = r.tree
    assert [n.text() for n in first] == ["one", "two"]
    assert r.css("title")[0].text() == "T"
    assert r.tree is tree  # the same parse served both queries
    assert r.css_first("p.x").text() == "one"
    assert r.css_first("h1") is None and r.css_first("h1", default="-") == "-"


def test_text_with_cp1251_charset() -> None:
    body = "<html><p>Привет, мир</p></html>".encode("cp1251")
    r = Response(page(body=body, charset="cp1251"))
    assert r.text == "<html><p>Привет, мир</p></html>"
    assert r.css("p")[0].text() == "Привет, мир"


def test_text_falls_back_to_utf8_with_replacement() -> None:
    assert Response(page(body="é".encode() + b"\xff", charset=None)).text == "é\ufffd"
    assert Response(page(body="é".encode(), charset="no-such-codec")).text == "é"
    r = Response(page(body=b"<p>caf\xc3\xa9 \xff</p>", charset="utf-8"))
    assert r.css("p")[0].text() == "café \ufffd"


def test_meta_unpacked_lazily() -> None:
    packed = msgspec.msgpack.encode({"from": "http://a.test/", "n": [1, 2]})
    r = Response(page(meta=packed))
    assert r._meta is None
    assert r.meta == {"from": "http://a.test/", "n": [1, 2]}
    assert r.meta is r.meta
    assert Response(page(meta=b"")).meta == {}


def test_request_defaults_and_repr() -> None:
    r = Request("http://a.test/")
    assert (r.url, r.callback, r.meta, r.priority) == ("http://a.test/", None, None, 0)
    r2 = Request("x", callback="parse_page", meta={"a": 1}, priority=3, method="post",
                 body=b"password=s3cret", cookies={"session": "s3cret"},
                 headers={"Authorization": "s3cret"})  # fmt: skip
    assert repr(r2) == str(r2) == "<post x>"  # Scrapy's: never a secret


def test_default_parse_requests_every_link() -> None:
    out = Spider().parse(Response(page(links=["http://a.test/1", "http://a.test/2"])))
    assert out is not None
    assert [(r.url, r.callback) for r in out] == [
        ("http://a.test/1", None),
        ("http://a.test/2", None),
    ]


def test_engine_tree_is_used_when_handed_over() -> None:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser("<p>from the engine</p>")
    r = Response(page(body=b"<p>from the body</p>", tree=tree))
    assert r.tree is tree and r.css("p")[0].text() == "from the engine"
