"""``[[extract]]`` rules: config errors name the key before any request; items from selectors."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from selectolax.lexbor import LexborHTMLParser

from frontier_crawl.config import ConfigError, load, parse, to_toml
from frontier_crawl.config.settings import check_selector
from frontier_crawl.spider.extract import compile_rules

GOOD = """
[crawl]
seeds = ["http://example.test/"]
output_dir = "out"
"""

RULES = """
[[extract]]
url = '/item/[0-9]+[.]html$'
required = ["name"]
[extract.fields]
name = "h1.name"
price = { css = "span.price", attr = "data-value", type = "float" }
sku = { css = "span.sku", re = 'SKU-([0-9]+)', type = "int" }
tags = { css = "ul.tags li", all = true }
raw = { css = "pre", strip = false }
link = { css = "a.more", attr = "href" }

[[extract]]
url = '/list/'
each = "li.product"
url_field = "page"
required = ["title"]
[extract.fields]
title = "a"
href = { css = "a", attr = "href" }
"""

ITEM_PAGE = """<!DOCTYPE html><html><head><title>t</title></head><body>
<h1 class="name">
   Caf&eacute; &amp; Cr&egrave;me   <small>deluxe</small>
</h1>
<span class="price" data-value="12.50">&euro; 12.50</span>
<span class="sku">SKU-000123</span>
<ul class="tags"><li> hot </li><li>
  fresh</li><li>   </li></ul>
<pre>  a
  b</pre>
</body></html>"""

LIST_PAGE = """<html><body><ul>
<li class="product"><a href="/item/1.html"> One </a></li>
<li class="product"><a href="/item/2.html">Two</a></li>
<li class="product"><span>no link</span></li>
</ul></body></html>"""


def _rules(text: str = RULES) -> Any:
    return compile_rules(parse(tomllib.loads(GOOD + text)).extract)


def test_fields_text_attr_all_re_type_and_strip() -> None:
    rules = _rules()
    items = rules.items("http://example.test/item/7.html", LexborHTMLParser(ITEM_PAGE))
    assert items == [
        {
            "url": "http://example.test/item/7.html",
            "name": "Café & Crème deluxe",  # entities decoded, descendants' text, whitespace
            "price": 12.5,
            "sku": 123,
            "tags": ["hot", "fresh", ""],  # every match, in order; a blank one stays ""
            "raw": "  a\n  b",
            "link": None,  # matches nothing
        }
    ]


def test_each_gives_one_item_per_node_and_required_drops_the_rest() -> None:
    rules = _rules()
    items = rules.items("http://example.test/list/", LexborHTMLParser(LIST_PAGE))
    assert items == [
        {"page": "http://example.test/list/", "title": "One", "href": "/item/1.html"},
        {"page": "http://example.test/list/", "title": "Two", "href": "/item/2.html"},
    ]


def test_no_rule_matches_no_items_and_required_field_missing_no_item() -> None:
    rules = _rules()
    assert not rules.matches("http://example.test/about.html")
    assert rules.items("http://example.test/about.html", LexborHTMLParser(ITEM_PAGE)) == []
    assert rules.matches("http://example.test/item/1.html")
    empty = LexborHTMLParser("<html><body><p>gone</p></body></html>")
    assert rules.items("http://example.test/item/1.html", empty) == []  # no h1.name


def test_every_matching_rule_contributes_in_order() -> None:
    text = """
[[extract]]
url = 'example'
[extract.fields]
h = "h1"
[[extract]]
url = 'item'
url_field = ""
[extract.fields]
s = { css = "span.sku", re = '[0-9]+' }
"""
    items = _rules(text).items("http://example.test/item/1.html", LexborHTMLParser(ITEM_PAGE))
    assert [list(i) for i in items] == [["url", "h"], ["s"]]
    assert items[1] == {"s": "000123"}  # no group: the whole match; type str keeps zeros


def test_conversion_failures_are_null_or_left_out() -> None:
    text = """
[[extract]]
url = '.'
[extract.fields]
n = { css = "span.price", type = "int" }
f = { css = "li", all = true, type = "float" }
nan = { css = "b", type = "float" }
"""
    page = LexborHTMLParser("<span class=price>12 EUR</span><li>1.5</li><li>x</li><b>nan</b>")
    assert _rules(text).items("http://e.test/", page) == [
        {"url": "http://e.test/", "n": None, "f": [1.5], "nan": None}
    ]


def test_hostile_html_never_raises() -> None:
    rules = _rules()
    pages = [
        "",
        "<h1 class=name>" * 5000,
        "<h1 class='name'>\x00\ufffd<span class=price data-value>1</span>",
        "<li class=product><a href>x</a>" + "<div>" * 10_000,
    ]
    for html in pages:
        for url in ("http://e.test/item/1.html", "http://e.test/list/"):
            for item in rules.items(url, LexborHTMLParser(html)):
                assert isinstance(item, dict)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("url = '('\n[extract.fields]\na = 'p'", "extract[1].url: invalid regular expression '('"),
        (
            "url = 'x'\n[extract.fields]\nprice = 'span..price'",
            "extract[1].fields.price: invalid CSS selector 'span..price'",
        ),
        (
            "url = 'x'\n[extract.fields]\nprice = { css = 'a[' }",
            "extract[1].fields.price.css: invalid CSS selector 'a['",
        ),
        ("url = 'x'\n[extract.fields]\nprice = ''", "extract[1].fields.price: empty CSS selector"),
        (
            "url = 'x'\n[extract.fields]\nprice = { css = 'p', re = '[' }",
            "extract[1].fields.price.re: invalid regular expression",
        ),
        ("url = 'x'\neach = 'li >'\n[extract.fields]\na = 'p'", "extract[1].each: invalid CSS"),
        ("url = 'x'\n[extract.fields]", "extract[1].fields: at least one field is required"),
        (
            "url = 'x'\nrequired = ['b']\n[extract.fields]\na = 'p'",
            "extract[1].required: 'b' is not a field",
        ),
        (
            "url = 'x'\n[extract.fields]\nprice = { css = 'p', atr = 'href' }",
            "extract[1].fields.price.atr: unknown key (did you mean 'attr'?)",
        ),
        (
            "url = 'x'\n[extract.fields]\nprice = { css = 'p', type = 'date' }",
            'extract[1].fields.price.type: must be one of "float", "int", "str", got "date"',
        ),
        (
            "url = 'x'\n[extract.fields]\nprice = 5",
            "extract[1].fields.price: must be a CSS selector string or a table",
        ),
        (
            "url = 'x'\n[extract.fields]\nprice = { attr = 'href' }",
            "extract[1].fields.price: Object missing required field `css`",
        ),
        ("[extract.fields]\na = 'p'", "extract[1]: Object missing required field `url`"),
        ("url = 'x'\nfield = 1\n[extract.fields]\na = 'p'", "extract[1].field: unknown key"),
    ],
)
def test_bad_rule_is_a_config_error_naming_the_key(rule: str, expected: str) -> None:
    text = GOOD + "[[extract]]\nurl = 'ok'\n[extract.fields]\na = 'h1'\n\n[[extract]]\n" + rule
    with pytest.raises(ConfigError) as err:
        parse(tomllib.loads(text))
    assert str(err.value).startswith(expected), str(err.value)


def test_compile_rules_checks_too() -> None:
    from frontier_crawl.config.settings import ExtractRule

    with pytest.raises(ConfigError, match=r"^extract\[0\]\.fields\.p: invalid CSS selector"):
        compile_rules([ExtractRule(url="x", fields={"p": "p::text"})])  # Scrapy syntax
    assert len(compile_rules([ExtractRule(url="x", fields={"p": "p"})])) == 1


def test_check_selector_is_lexbor() -> None:
    assert check_selector("a:nth-child(2n+1), h1.title > span[data-x='1']") is None
    assert check_selector("p:lexbor-contains('x')") is None
    for bad in ("span..price", "a[", "", "   ", "##", "p::text", "123"):
        assert check_selector(bad) is not None, bad


def test_cli_check_exits_2_before_any_request(tmp_path: Path) -> None:
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(GOOD + "[[extract]]\nurl = 'x'\n[extract.fields]\nprice = 'span..price'\n")
    for extra in (["--check"], []):
        proc = subprocess.run(
            [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg), *extra],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert "extract[0].fields.price: invalid CSS selector 'span..price'" in proc.stderr
        assert not (tmp_path / "out").exists()  # nothing was started


def test_rules_round_trip_through_check_output(tmp_path: Path) -> None:
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(GOOD + RULES)
    settings = load(cfg)
    assert len(settings.extract) == 2
    again = tmp_path / "again.toml"
    again.write_text(to_toml(settings))
    assert load(again) == settings
