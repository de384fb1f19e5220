"""SpiderHost.run: callbacks, what they yield, pipelines, recorded problems, timing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import msgspec
import pytest

from frontier_crawl.spider import NewRequest, Spider, SpiderHost
from frontier_crawl.spider.host import MAX_YIELDS_PER_PAGE
from tests.unit.spider_helpers import host_for, isolated_imports, page, settings, write

pytestmark = pytest.mark.usefixtures("isolated_imports")
__all__ = ["isolated_imports"]

HEAD = "from frontier_crawl import Request, Spider\n"


def lineno(path: Path, marker: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if marker in line:
            return i
    raise AssertionError(marker)


def test_default_spider_follows_every_link() -> None:
    y = SpiderHost(Spider()).run(page(links=["http://a.test/1", "http://b.test/2"]))
    assert y.requests == [
        NewRequest("http://a.test/1", "", b"", 0),
        NewRequest("http://b.test/2", "", b"", 0),
    ]
    assert y.items == [] and y.problems == [] and y.callback_s >= 0 and y.pipeline_s == 0


def test_spider_doing_what_the_default_does_gives_the_same(tmp_path: Path) -> None:
    host = host_for(
        tmp_path,
        HEAD + "class S(Spider):\n    def parse(self, response):\n"
        "        for url in response.links:\n            yield Request(url)\n",
    )
    p = page(links=[f"http://a.test/{i}" for i in range(20)])
    assert host.run(p).requests == SpiderHost(Spider()).run(p).requests


@pytest.mark.parametrize(
    "body",
    [
        "        yield {'n': 1}\n        yield Request('http://a.test/x')\n",  # generator
        "        return [{'n': 1}, Request('http://a.test/x')]\n",  # list
        "        return ({'n': 1}, Request('http://a.test/x'))\n",  # tuple
        "        return iter([{'n': 1}, Request('http://a.test/x')])\n",  # iterator
    ],
)
def test_generator_list_tuple_iterator(tmp_path: Path, body: str) -> None:
    host = host_for(tmp_path, HEAD + "class S(Spider):\n    def parse(self, response):\n" + body)
    y = host.run(page())
    assert y.items == [{"n": 1}]
    assert y.requests == [NewRequest("http://a.test/x", "", b"", 0)]
    assert y.problems == []


def test_none_single_item_single_request(tmp_path: Path) -> None:
    host = host_for(
        tmp_path,
        HEAD
        + """
class S(Spider):
    def parse(self, response):
        return None
    def one_item(self, response):
        return {"only": True}
    def one_request(self, response):
        return Request("/next")
""",
    )
    y = host.run(page())
    assert (y.requests, y.items, y.problems) == ([], [], [])
    assert host.run(page(callback="one_item")).items == [{"only": True}]
    assert host.run(page(callback="one_request")).requests == [
        NewRequest("http://a.test/next", "", b"", 0)
    ]


def test_item_kinds_become_builtins(tmp_path: Path) -> None:
    host = host_for(
        tmp_path,
        HEAD
        + """
import dataclasses, datetime, msgspec

@dataclasses.dataclass
class Product:
    name: str
    price: float
    tags: tuple[str, ...] = ()

class Review(msgspec.Struct):
    stars: int
    when: datetime.date

class S(Spider):
    def parse(self, response):
        yield Product("pen", 1.5, ("blue",))
        yield Review(4, datetime.date(2026, 1, 2))
        yield {"nested": {"a": [1, 2]}, 3: b"\\x00"}
        yield {"flat": "x", "n": 1, "f": 0.5, "b": True, "none": None}
""",
    )
    y = host.run(page())
    assert y.problems == []
    assert y.items == [
        {"name": "pen", "price": 1.5, "tags": ("blue",)},  # to_builtins keeps tuples
        {"stars": 4, "when": "2026-01-02"},
        {"nested": {"a": [1, 2]}, "3": "AA=="},
        {"flat": "x", "n": 1, "f": 0.5, "b": True, "none": None},
    ]
    assert all(type(i) is dict for i in y.items)


def test_relative_urls_resolve_against_the_page(tmp_path: Path) -> None:
    host = host_for(
        tmp_path,
        HEAD
        + """
class S(Spider):
    def parse(self, response):
        for href in ["sib.html", "../up.html", "/root", "?q=1", "//other.test/p",
                     "HTTP://UPPER.test/A", "https://a.test/abs#frag", " spaced.html "]:
            yield Request(href)
""",
    )
    y = host.run(page(url="http://a.test/dir/index.html"))
    assert y.problems == []
    assert [r.url for r in y.requests] == [
        "http://a.test/dir/sib.html",
        "http://a.test/up.html",
        "http://a.test/root",
        "http://a.test/dir/index.html?q=1",
        "http://other.test/p",
        "http://upper.test/A",
        "https://a.test/abs#frag",  # the frontier canonicalises (drops the fragment)
        "http://a.test/dir/spaced.html",
    ]


def test_callback_names_and_meta_round_trip(tmp_path: Path) -> None:
    host = host_for(
        tmp_path,
        HEAD
        + """
import datetime
class S(Spider):
    def parse(self, response):
        yield Request("http://a.test/p", callback="parse_page",
                      meta={"from": response.url, "n": 3, "path": ("a", "b"),
                            "when": datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc)},
                      priority=5)
        yield Request("http://a.test/q", callback=self.parse_page)
        yield Request("http://a.test/r", callback="parse")
    def parse_page(self, response):
        yield {"meta": response.meta}
""",
    )
    y = host.run(page())
    assert y.problems == []
    first, second, third = y.requests
    assert (first.callback, first.priority) == ("parse_page", 5)
    assert (second.callback, second.meta) == ("parse_page", b"")
    assert (third.callback, third.meta) == ("", b"")
    meta = msgspec.msgpack.decode(first.meta)
    assert meta["from"] == "http://a.test/dir/index.html"
    y2 = host.run(page(url=first.url, callback=first.callback, meta=first.meta))
    assert y2.problems == []
    got = y2.items[0]["meta"]
    assert got["path"] == ["a", "b"] and got["n"] == 3  # a tuple comes back as a list
    assert got["when"] == "2026-01-02T00:00:00Z"  # the datetime survived msgpack, then JSON-able
    assert host.run(page(callback="parse_page")).items == [{"meta": {}}]


def test_every_yield_problem(tmp_path: Path) -> None:
    src = write(
        tmp_path,
        "spider.py",
        HEAD
        + """
class Other(Spider):
    def elsewhere(self, response):
        pass

class S(Spider):
    def parse(self, response):
        yield 42                                         # BAD-YIELD
        yield Request("mailto:a@b.test")                 # BAD-URL-MAILTO
        yield Request(b"http://a.test/bytes")            # BAD-URL-BYTES
        yield Request("javascript:void(0)")              # BAD-URL-JS
        yield Request("http://a.test/x", callback="nope")      # UNKNOWN
        yield Request("http://a.test/x", callback="_private")  # PRIVATE
        yield Request("http://a.test/x", callback="close")  # HOOK
        yield Request("http://a.test/x", callback=Other().elsewhere)  # FOREIGN
        yield Request("http://a.test/x", meta={"f": object()})  # BAD-META-OBJ
        yield Request("http://a.test/x", meta=["not", "a", "dict"])  # BAD-META-LIST
        yield Request("http://a.test/x", priority="high")  # BAD-PRIORITY
        yield {"bad": object()}                          # BAD-ITEM
        yield Request("http://a.test/fine")
    def _private(self, response):
        pass
""",
    )
    host = SpiderHost.load(settings(tmp_path, {"source": "spider.py", "class": "S"}))
    assert host is not None
    y = host.run(page())
    got = [(p.outcome, p.where) for p in y.problems]
    at = lambda m: f"spider.py:{lineno(src, m)} in S.parse"  # noqa: E731
    assert got == [
        ("bad-yield", at("BAD-YIELD")),
        ("bad-url", at("BAD-URL-MAILTO")),
        ("bad-url", at("BAD-URL-BYTES")),
        ("bad-url", at("BAD-URL-JS")),
        ("unknown-callback", at("UNKNOWN")),
        ("unknown-callback", at("PRIVATE")),
        ("unknown-callback", at("HOOK")),
        ("unknown-callback", at("FOREIGN")),
        ("bad-meta", at("BAD-META-OBJ")),
        ("bad-meta", at("BAD-META-LIST")),
        ("bad-yield", at("BAD-PRIORITY")),
        ("bad-yield", at("BAD-ITEM")),  # the line that yielded it (issue 21)
    ]
    messages = [p.message for p in y.problems]
    assert "yielded int 42" in messages[0]
    assert "'nope'" in messages[4]
    assert "msgpack" in messages[8] and "object" in messages[8]
    assert "must be a dict, got list" in messages[9]
    assert "priority must be an int" in messages[10]
    assert "does not convert" in messages[11]
    assert all(p.traceback is None for p in y.problems)
    assert y.requests == [NewRequest("http://a.test/fine", "", b"", 0)]


def test_page_with_a_callback_the_spider_lost(tmp_path: Path) -> None:
    host = host_for(tmp_path, HEAD + "class S(Spider):\n    pass\n")
    y = host.run(page(callback="parse_old"))
    assert [(p.outcome, p.where) for p in y.problems] == [("unknown-callback", "S.parse_old")]
    assert y.requests == [] and y.items == []


def test_callback_error_keeps_what_was_yielded_before(tmp_path: Path) -> None:
    src = write(
        tmp_path,
        "spider.py",
        HEAD
        + """
import json
class S(Spider):
    def parse(self, response):
        yield {"before": 1}
        yield Request("/a")
        if response.url.endswith("json"):
            json.loads("{not json")                     # JSON-LINE
        raise KeyError("from")                          # RAISE-LINE
        yield {"after": 2}
""",
    )
    host = SpiderHost.load(settings(tmp_path, {"source": "spider.py"}))
    assert host is not None
    y = host.run(page())
    assert y.items == [{"before": 1}]
    assert [r.url for r in y.requests] == ["http://a.test/a"]
    (problem,) = y.problems
    assert problem.outcome == "callback-error"
    assert problem.where == f"spider.py:{lineno(src, 'RAISE-LINE')} in S.parse"
    assert problem.message == "KeyError: 'from'"
    assert problem.traceback is not None and "KeyError: 'from'" in problem.traceback
    assert "RAISE-LINE" in problem.traceback
    # the same location again: no traceback; the crawl log carries it once
    again = host.run(page(url="http://a.test/other"))
    assert again.problems[0].where == problem.where and again.problems[0].traceback is None
    # an exception raised inside the standard library is placed at the user's line
    j = host.run(page(url="http://a.test/x.json")).problems[0]
    assert j.where == f"spider.py:{lineno(src, 'JSON-LINE')} in S.parse"
    assert j.message.startswith("JSONDecodeError: ") and j.traceback is not None


def test_callback_with_a_wrong_signature(tmp_path: Path) -> None:
    src = write(
        tmp_path, "spider.py", HEAD + "class S(Spider):\n    def parse(self):\n        pass\n"
    )
    host = SpiderHost.load(settings(tmp_path, {"source": "spider.py"}))
    assert host is not None
    (problem,) = host.run(page()).problems
    assert problem.outcome == "callback-error" and problem.message.startswith("TypeError: ")
    assert problem.where == f"spider.py:{lineno(src, 'def parse')} in S.parse"


def test_endless_generator_is_cut(tmp_path: Path) -> None:
    host = host_for(
        tmp_path,
        HEAD + "class S(Spider):\n    def parse(self, response):\n"
        "        while True:\n            yield Request('http://a.test/same')\n",
    )
    y = host.run(page())
    assert len(y.requests) == MAX_YIELDS_PER_PAGE
    assert [p.outcome for p in y.problems] == ["bad-yield"]
    assert "more than" in y.problems[0].message


PIPELINE_SPIDER = (
    HEAD
    + """
class S(Spider):
    def parse(self, response):
        for n in range(5):
            yield {"n": n}
"""
)

PIPELINES = """
SEEN = []

class Record:
    def process_item(self, item, response):
        SEEN.append((item["n"], response.url))
        return item

class DropOdd:
    def process_item(self, item, response):
        return None if item["n"] % 2 else item

class Double:
    def process_item(self, item, response):
        return {**item, "double": item["n"] * 2}

class FailOnFour:
    def process_item(self, item, response):
        if item["n"] == 4:
            raise ValueError("four is unlucky")      # PIPE-RAISE
        return item

class ReturnsList:
    def process_item(self, item, response):
        return [item]

class Slow:
    def process_item(self, item, response):
        import time
        time.sleep(0.01)
        return item
"""


def test_pipelines_drop_change_raise_in_order(tmp_path: Path) -> None:
    pipes = write(tmp_path, "pipes.py", PIPELINES)
    names = ["Record", "DropOdd", "FailOnFour", "Double", "Record"]
    host = host_for(tmp_path, PIPELINE_SPIDER, pipelines=[f"pipes.py:{n}" for n in names])
    y = host.run(page())
    assert y.items == [{"n": 0, "double": 0}, {"n": 2, "double": 4}]
    (problem,) = y.problems
    assert problem.outcome == "pipeline-error"
    assert problem.where == f"pipes.py:{lineno(pipes, 'PIPE-RAISE')} in FailOnFour.process_item"
    assert problem.message == "ValueError: four is unlucky" and problem.traceback is not None
    seen = host._pipelines[0].obj.__class__.__module__
    import sys

    url = "http://a.test/dir/index.html"
    # each item goes through the pipelines in order before the next: the first Record sees all
    # five, the last only the two that came through
    assert [(n, url) for n in (0, 0, 1, 2, 2, 3, 4)] == sys.modules[seen].SEEN


def test_pipeline_returning_a_non_item(tmp_path: Path) -> None:
    write(tmp_path, "pipes.py", PIPELINES)
    host = host_for(tmp_path, PIPELINE_SPIDER, pipelines=["pipes.py:ReturnsList"])
    y = host.run(page())
    assert y.items == []
    assert {p.outcome for p in y.problems} == {"pipeline-error"} and len(y.problems) == 5
    assert "ReturnsList.process_item returned list" in y.problems[0].message


def test_time_in_callback_and_pipelines_is_separate(tmp_path: Path) -> None:
    write(tmp_path, "pipes.py", PIPELINES)
    host = host_for(
        tmp_path,
        HEAD + "import time\nclass S(Spider):\n    def parse(self, response):\n"
        "        time.sleep(0.05)\n        yield {'n': 0}\n",
        pipelines=["pipes.py:Slow"],
    )
    y = host.run(page())
    assert 0.05 <= y.callback_s < 1.0
    assert 0.01 <= y.pipeline_s < y.callback_s


@pytest.mark.parametrize(
    "attr, status, wanted",
    [
        (None, 200, True), (None, 204, True), (None, 404, False), (None, 500, False),
        ("[404, 410]", 404, True), ("[404, 410]", 500, False),
        ("range(400, 500)", 451, True), ("range(400, 500)", 503, False),
        ('"all"', 503, True),
    ],
)  # fmt: skip
def test_handle_status(tmp_path: Path, attr: str | None, status: int, wanted: bool) -> None:
    body = f"    handle_status = {attr}\n" if attr else "    pass\n"
    host = host_for(tmp_path, HEAD + "class S(Spider):\n" + body)
    assert host.wants(status, "") is wanted
    assert host.wants(status, "parse") is wanted


def test_close_never_raises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(
        tmp_path,
        "pipes.py",
        "class P:\n    def process_item(self, item, response):\n        return item\n"
        "    def close(self, spider):\n        raise RuntimeError('flush failed')\n",
    )
    host = host_for(
        tmp_path,
        HEAD + "class S(Spider):\n    def close(self):\n        raise OSError('gone')\n",
        pipelines=["pipes.py:P"],
    )
    host.close()
    err = capsys.readouterr().err
    assert "RuntimeError: flush failed" in err and "OSError: gone" in err
    host.close()  # a second close does nothing
    assert capsys.readouterr().err == ""


def test_rules_without_spider_use_the_default_spider(tmp_path: Path) -> None:
    # Until [[extract]] exists in the settings, a host with only pipelines is the default spider.
    write(tmp_path, "pipes.py", PIPELINES)
    host = SpiderHost.load(settings(tmp_path, {"pipelines": ["pipes.py:Record"]}))
    assert host is not None and type(host.spider) is Spider
    assert len(host.run(page()).requests) == 2


def test_datetime_meta_and_date_item(tmp_path: Path) -> None:
    host = host_for(
        tmp_path,
        HEAD + "import datetime\nclass S(Spider):\n    def parse(self, response):\n"
        "        yield {'d': datetime.date(2026, 12, 1)}\n",
    )
    assert host.run(page()).items == [{"d": dt.date(2026, 12, 1).isoformat()}]


RULES = """
[[extract]]
url = '/item/[0-9]+[.]html$'
[extract.fields]
name = "h1"
"""

ITEM_PAGE = b"<html><body><h1> Blue pen </h1><a href='/x'>x</a></body></html>"


def test_rules_without_a_spider_follow_every_link_and_add_items(tmp_path: Path) -> None:
    host = SpiderHost.load(settings(tmp_path, extra=RULES))
    assert host is not None and type(host.spider) is Spider
    y = host.run(page(url="http://a.test/item/7.html", body=ITEM_PAGE, links=["http://a.test/x"]))
    assert y.items == [{"url": "http://a.test/item/7.html", "name": "Blue pen"}]
    assert y.requests == [NewRequest("http://a.test/x", "", b"", 0)] and y.problems == []
    other = host.run(page(url="http://a.test/list.html", body=ITEM_PAGE))
    assert other.items == [] and len(other.requests) == 2


def test_rules_and_spider_combined_through_pipelines(tmp_path: Path) -> None:
    write(
        tmp_path,
        "pipes.py",
        """
PARSED = []
class Tag:
    def process_item(self, item, response):
        PARSED.append(response._tree is not None)
        return {**item, "tagged": True}
""",
    )
    write(
        tmp_path,
        "spider.py",
        HEAD
        + "class S(Spider):\n    def parse(self, response):\n        yield {'from': 'spider'}\n",
    )
    s = settings(tmp_path, {"source": "spider.py", "pipelines": ["pipes.py:Tag"]}, extra=RULES)
    host = SpiderHost.load(s)
    assert host is not None
    y = host.run(page(url="http://a.test/item/7.html", body=ITEM_PAGE))
    assert y.items == [
        {"from": "spider", "tagged": True},  # the callback's items first, then the rules'
        {"url": "http://a.test/item/7.html", "name": "Blue pen", "tagged": True},
    ]
    assert y.requests == []  # the spider yields no requests: none are followed
    # no rule matches: the rules do not parse the page
    assert host.run(page(url="http://a.test/about.html")).items == [
        {"from": "spider", "tagged": True}
    ]
    # a non-2xx page the spider asked for gets no rule items
    assert host.run(page(url="http://a.test/item/8.html", status=404, body=ITEM_PAGE)).items == [
        {"from": "spider", "tagged": True}
    ]
    import sys

    assert sys.modules[type(host._pipelines[0].obj).__module__].PARSED == [True, True, False, False]


def test_bad_rule_is_a_config_error(tmp_path: Path) -> None:
    from frontier_crawl.config import ConfigError

    with pytest.raises(ConfigError, match=r"^extract\[0\]\.fields\.name"):
        SpiderHost.load(settings(tmp_path, extra=RULES.replace('"h1"', '"h1[["')))


def test_handle_status_per_callback(tmp_path: Path) -> None:
    host = host_for(
        tmp_path,
        HEAD
        + """
class S(Spider):
    handle_status = [500]
    def parse_gone(self, response):
        yield {"gone": response.status}
    parse_gone.handle_status = [404, 410]
    def parse_any(self, response):
        pass
    parse_any.handle_status = "all"
""",
    )
    assert host.wants(404, "parse_gone") and host.wants(410, "parse_gone")
    assert not host.wants(500, "parse_gone")  # the callback's own list replaces the class's
    assert host.wants(500, "") and not host.wants(404, "")  # parse: the class's
    assert host.wants(503, "parse_any") and host.wants(200, "parse_gone")
    y = host.run(page(status=410, callback="parse_gone"))
    assert y.items == [{"gone": 410}]


def test_bad_handle_status_on_a_callback(tmp_path: Path) -> None:
    from frontier_crawl.config import ConfigError

    write(
        tmp_path,
        "spider.py",
        HEAD + "class S(Spider):\n    def parse_x(self, r):\n        pass\n"
        "    parse_x.handle_status = 'some'\n",
    )
    with pytest.raises(ConfigError, match=r"^spider\.class: S\.parse_x\.handle_status must be"):
        SpiderHost.load(settings(tmp_path, {"source": "spider.py"}))


def test_returns_that_are_not_iterables(tmp_path: Path) -> None:
    src = write(
        tmp_path,
        "spider.py",
        HEAD
        + """
class S(Spider):
    def parse(self, response):                     # RETURNS-STR
        return "http://a.test/not-a-request"
    def parse_int(self, response):                 # RETURNS-INT
        return 3
""",
    )
    host = SpiderHost.load(settings(tmp_path, {"source": "spider.py"}))
    assert host is not None
    (p,) = host.run(page()).problems
    assert (p.outcome, p.where) == (
        "bad-yield",
        f"spider.py:{lineno(src, 'RETURNS-STR')} in S.parse",
    )
    assert "returned str" in p.message
    (p,) = host.run(page(callback="parse_int")).problems
    assert (p.outcome, p.where) == (
        "bad-yield",
        f"spider.py:{lineno(src, 'RETURNS-INT')} in S.parse_int",
    )


# A generator that ignores GeneratorExit is still suspended after close() fails; Python calls
# close() again when it is collected and prints that error (an "unraisable" warning here).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_generator_is_closed_and_one_that_will_not_close_is_recorded(tmp_path: Path) -> None:
    host = host_for(
        tmp_path,
        HEAD
        + """
CLOSED = []
class S(Spider):
    def parse(self, response):
        try:
            for n in range(10 ** 6):
                yield {"n": n}
                if n == 1:
                    raise ValueError("stop")
        finally:
            CLOSED.append(True)
    def parse_stubborn(self, response):
        while True:
            try:
                yield Request("http://a.test/x")
            except GeneratorExit:
                pass
""",
    )
    y = host.run(page())
    assert y.items == [{"n": 0}, {"n": 1}] and [p.outcome for p in y.problems] == ["callback-error"]
    import sys

    assert sys.modules[type(host.spider).__module__].CLOSED == [True]
    y = host.run(page(callback="parse_stubborn"))  # cut at MAX_YIELDS_PER_PAGE, then closed
    assert len(y.requests) == MAX_YIELDS_PER_PAGE
    assert [p.outcome for p in y.problems] == ["bad-yield", "callback-error"]
    assert y.problems[1].message == "RuntimeError: generator ignored GeneratorExit"


def test_thousands_of_realistic_pages(tmp_path: Path) -> None:
    """2,000 pages of 20+ KB (half of them windows-1251), 20 links each, through a two-level
    spider and a pipeline: every item and request accounted for."""
    write(
        tmp_path,
        "pipes.py",
        "class Count:\n    def process_item(self, item, response):\n"
        "        return {**item, 'bytes': len(response.body)}\n",
    )
    host = host_for(
        tmp_path,
        HEAD
        + """
class S(Spider):
    def parse(self, response):
        yield {"url": response.url, "title": response.css_first("title").text(),
               "anchors": len(response.css("a"))}
        for i, url in enumerate(response.links):
            yield Request(url, callback="parse_page", meta={"from": response.url, "i": i})
    def parse_page(self, response):
        pass
""",
        pipelines=["pipes.py:Count"],
    )
    filler = "<p>" + "Съешь же ещё этих мягких французских булок " * 12 + "</p>"
    items, requests = [], []
    for n in range(2000):
        links = [f"http://h{n % 50}.test/p/{n}/{i}.html" for i in range(20)]
        html = (
            f"<html><head><title>Страница {n}</title></head><body>"
            + "".join(f'<a href="{u}">{i}</a>' for i, u in enumerate(links))
            + filler * 40
            + "</body></html>"
        )
        charset = "cp1251" if n % 2 else None
        body = html.encode(charset or "utf-8")
        assert len(body) >= 20_000
        y = host.run(
            page(url=f"http://h{n % 50}.test/p/{n}", body=body, charset=charset, links=links)
        )
        assert y.problems == []
        items += y.items
        requests += y.requests
    assert len(items) == 2000 and len(requests) == 40_000
    assert [i["title"] for i in items] == [f"Страница {n}" for n in range(2000)]
    assert {i["anchors"] for i in items} == {20}
    assert all(i["bytes"] >= 20_000 for i in items)
    last = msgspec.msgpack.decode(requests[-1].meta)
    assert last == {"from": "http://h49.test/p/1999", "i": 19}
    assert {r.callback for r in requests} == {"parse_page"}


def test_requests_come_in_runs_of_the_same_callback_meta_and_priority(tmp_path: Path) -> None:
    """Consecutive requests sharing callback, meta and priority are one run (one Frontier.add),
    in yield order; a bound method of the spider is stored by name, as its name is, whether it
    takes the inline path or the checked one (cb_kwargs)."""
    host = host_for(
        tmp_path,
        HEAD
        + """
class S(Spider):
    def parse(self, response):
        yield Request("http://a.test/1")
        yield Request("http://a.test/2", callback="parse")
        yield Request("http://a.test/3", callback=self.item)
        yield Request("http://a.test/4", callback="item")
        yield Request("/5", callback=self.item)
        yield Request("http://a.test/6", meta={"k": 1})
        yield Request("http://a.test/7", meta={"k": 1})
        yield Request("http://a.test/8", priority=2)
        yield Request("http://a.test/9", callback=self.item, cb_kwargs={"x": 1})
        yield Request("http://a.test/10", callback=self.item)
        yield Request("http://a.test/11")
    def item(self, response, x=0):
        return None
""",
    )
    meta = msgspec.msgpack.encode({"k": 1})
    for _ in range(2):  # the second time, every callback is one seen before
        y = host.run(page(links=[]))
        assert y.problems == []
        assert [(cb, m, p, urls) for cb, m, p, urls in y.runs[:4]] == [
            ("", b"", 0, ["http://a.test/1", "http://a.test/2"]),
            ("item", b"", 0, ["http://a.test/3", "http://a.test/4", "http://a.test/5"]),
            ("", meta, 0, ["http://a.test/6", "http://a.test/7"]),
            ("", b"", 2, ["http://a.test/8"]),
        ]
        assert [urls for *_, urls in y.runs[4:]] == [
            ["http://a.test/9"], ["http://a.test/10"], ["http://a.test/11"]
        ]
        assert y.runs[4][0] == "item" and y.runs[4][1][:1] == b"\xc1"  # cb_kwargs: envelope
        assert y.runs[5][:3] == ("item", b"", 0) and y.runs[6][:3] == ("", b"", 0)
        assert [r.url for r in y.requests] == [f"http://a.test/{i}" for i in range(1, 12)]


def test_a_bound_method_of_another_spider_is_not_a_callback(tmp_path: Path) -> None:
    host = host_for(
        tmp_path,
        HEAD
        + """
class S(Spider):
    def parse(self, response):
        yield Request("http://a.test/ok", callback=self.item)
        yield Request("http://a.test/other", callback=S().item)
    def item(self, response):
        return None
""",
    )
    for _ in range(2):
        y = host.run(page(links=[]))
        assert y.requests == [NewRequest("http://a.test/ok", "item", b"", 0)]
        assert [p.outcome for p in y.problems] == ["unknown-callback"]


def test_follows_links_only_for_the_default_parse_without_rules(tmp_path: Path) -> None:
    assert SpiderHost(Spider()).follows_links("") and SpiderHost(Spider()).follows_links("parse")
    assert not SpiderHost(Spider()).follows_links("other")
    renamed = SpiderHost(Spider(), renamed={"old_parse": "parse", "parse": "gone"})
    assert renamed.follows_links("old_parse") and not renamed.follows_links("")
    own = host_for(tmp_path / "own", HEAD + "class S(Spider):\n    def parse(self, response):\n"
                   "        return None\n")  # fmt: skip
    assert not own.follows_links("")
    rule = '[[extract]]\nurl = ".*"\n[extract.fields]\nt = "title"\n'
    rules = SpiderHost.load(settings(tmp_path / "rules", extra=rule))
    assert rules is not None and not rules.follows_links("")


def test_a_meta_that_contains_itself_is_bad_meta_and_the_rest_is_kept(tmp_path: Path) -> None:
    """Issue 34 point 8: a self-referencing meta (or cb_kwargs, or item) raised RecursionError
    out of msgpack: recorded as callback-error, and everything the callback yielded after it
    was dropped. Now each is that request's (or item's) problem, and the rest is kept."""
    src = write(
        tmp_path,
        "spider.py",
        HEAD
        + """
class S(Spider):
    def parse(self, response):
        loop = {"k": 1}
        loop["self"] = loop
        yield Request("http://a.test/before")
        yield Request("http://a.test/x", meta=loop)              # SELF-META
        yield Request("http://a.test/y", cb_kwargs={"a": loop})  # SELF-KWARGS
        yield {"item": loop}                                     # SELF-ITEM
        yield Request("http://a.test/after", meta={"n": 1})
        yield {"fine": True}
""",
    )
    host = SpiderHost.load(settings(tmp_path, {"source": "spider.py", "class": "S"}))
    assert host is not None
    y = host.run(page())
    at = lambda m: f"spider.py:{lineno(src, m)} in S.parse"  # noqa: E731
    assert [(p.outcome, p.where) for p in y.problems] == [
        ("bad-meta", at("SELF-META")),
        ("bad-meta", at("SELF-KWARGS")),
        ("bad-yield", at("SELF-ITEM")),
    ]
    assert "recursion" in y.problems[0].message
    assert [r.url for r in y.requests] == ["http://a.test/before", "http://a.test/after"]
    assert y.items == [{"fine": True}]
