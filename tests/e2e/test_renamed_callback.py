"""Resuming with a changed spider: queued requests that name a callback the spider no longer
has are refused at start (exit 2, each callback named with how many requests it holds, nothing
fetched), and ``[spider] renamed_callbacks`` maps them to the new name; nothing is consumed as
unknown-callback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from frontier_crawl.config import load
from frontier_crawl.frontier import Frontier
from frontier_crawl.spider.adopt import adopt
from tests.quotes_site import AUTHORS, QuotesSite

SPIDER = '''
import frontier_crawl as scrapy


class AuthorSpider(scrapy.Spider):
    start_urls = ["http://quotes.test:{port}/page/1/"]

    def parse(self, response):
        yield from response.follow_all(css=".author + a", callback=self.{name})

    def {name}(self, response):
        yield {{"name": response.css("h3.author-title::text").get().strip(), "cb": "{name}"}}
'''

TOML = """
[crawl]
output_dir = "out"
[politeness]
min_delay_s = 0.01
[fetch]
resolve = ["quotes.test:{port}:127.0.0.1"]
allow_addresses = ["loopback"]
[output]
progress_interval_s = 0
[spider]
source = "spider.py"
{extra}
"""


def crawl(
    tmp_path: Path, port: int, name: str, extra: str = ""
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "spider.py").write_text(SPIDER.format(port=port, name=name))
    (tmp_path / "crawl.toml").write_text(TOML.format(port=port, extra=extra))
    return subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(tmp_path / "crawl.toml")],
        capture_output=True, text=True, timeout=80, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.timeout(120)
def test_renamed_callback_refused_then_mapped(tmp_path: Path) -> None:
    with QuotesSite() as site:
        port = site.port
        first = crawl(tmp_path, port, "parse_author")
        assert first.returncode == 0, first.stderr[-2000:]
        # the crawl stopped with three author pages still queued for parse_author (as a stop
        # mid-crawl leaves them): added to its frontier as the callback's requests are
        settings = adopt(load(tmp_path / "crawl.toml"))
        frontier = Frontier.from_settings(settings, tmp_path / "out" / "state")
        late = [f"http://quotes.test:{port}/author/author-{i}/?late" for i in range(3)]
        with frontier.batch():
            assert frontier.add(late, depth=1, callback="parse_author") == 3
        frontier.close()
        before = len(site.paths)

        refused = crawl(tmp_path, port, "parse_person")  # the callback renamed
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert "'parse_author' (3 queued requests)" in refused.stderr
        assert "renamed_callbacks" in refused.stderr
        assert len(site.paths) == before  # nothing fetched

        mapped = crawl(tmp_path, port, "parse_person",
                       'renamed_callbacks = {parse_author = "parse_person"}')  # fmt: skip
        assert mapped.returncode == 0, mapped.stderr[-2000:]
    out = tmp_path / "out"
    items = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert sorted(i["name"] for i in items if i["cb"] == "parse_author") == sorted(
        name for name, _, _ in AUTHORS.values()
    )
    assert sorted(i["name"] for i in items if i["cb"] == "parse_person") == sorted(
        AUTHORS[f"author-{i}"][0] for i in range(3)
    )  # the three queued requests, to the renamed callback
    lines = [json.loads(x) for x in (out / "crawl.jsonl").read_text().splitlines()]
    assert not [x for x in lines if x["outcome"] == "unknown-callback"]
