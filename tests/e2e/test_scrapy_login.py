"""A login and a stateful search form through the command line (issue 33), as Scrapy's docs
write them: FormRequest.from_response fills in the login form (its CSRF token in a hidden
field, tied to the session cookie the form page set), the session cookie reaches the pages
behind the login; the ASP.NET-style search posts __VIEWSTATE back step by step. The items
are what the site holds. A crawl stopped after the login resumes with its session. The
session cookie appears in no crawl log, report or status line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.quotes_site import AUTHORS, FAVOURITES, PAGES, QuotesSite, quotes, search_results
from tests.waiting import wait_until

SPIDER = '''
import frontier_crawl as scrapy


class LoginSpider(scrapy.Spider):
    name = "login"
    base = "http://quotes.test:{port}"

    async def start(self):
        yield scrapy.Request(self.base + "/login", callback=self.login)
        yield scrapy.Request(self.base + "/search.aspx", callback=self.parse_search)

    def login(self, response):
        return scrapy.FormRequest.from_response(
            response, formdata={{"username": "john", "password": "secret"}},
            callback=self.after_login,
        )

    def after_login(self, response):
        user = response.css("span.user::text").get()
        for fav in response.css("li.fav"):
            yield {{"kind": "favourite", "n": int(fav.attrib["data-n"]), "user": user,
                   "text": fav.css("span.text::text").get()}}
        next_page = response.css("li.next a::attr(href)").get()
        if next_page is not None:
            yield response.follow(next_page, self.after_login)

    def parse_search(self, response):
        for author in response.css("select#author > option ::attr(value)").getall():
            yield scrapy.FormRequest.from_response(
                response, formdata={{"author": author}}, callback=self.parse_tags
            )

    def parse_tags(self, response):
        for tag in response.css("select#tag > option ::attr(value)").getall():
            yield scrapy.FormRequest.from_response(
                response, formdata={{"tag": tag}}, callback=self.parse_results
            )

    def parse_results(self, response):
        for quote in response.css("div.quote"):
            yield {{"kind": "found", "text": quote.css("span.content ::text").get(),
                   "author": quote.css("span.author ::text").get(),
                   "tag": quote.css("span.tag ::text").get()}}
'''


def _config(tmp_path: Path, port: int, delay: float) -> Path:
    (tmp_path / "spider.py").write_text(SPIDER.format(port=port))
    config = tmp_path / "crawl.toml"
    config.write_text(f"""
[crawl]
output_dir = "out"
[politeness]
min_delay_s = {delay}
[fetch]
resolve = ["quotes.test:{port}:127.0.0.1"]
allow_addresses = ["loopback"]
[frontier]
commit_interval_s = 0.05
[output]
progress_interval_s = 0
[spider]
source = "spider.py"
""")
    return config


def _crawl(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(config)],
        capture_output=True, text=True, timeout=80, cwd=config.parent,
    )  # fmt: skip


def _items(tmp_path: Path) -> list[dict[str, object]]:
    feed = tmp_path / "out" / "items.jsonl"
    return [json.loads(x) for x in feed.read_text().splitlines()]


def _favourites(user: str) -> list[dict[str, object]]:
    every = [q for n in range(1, PAGES + 1) for q in quotes(n)]
    return [{"kind": "favourite", "n": n, "user": user, "text": every[n]["text"]}
            for n in FAVOURITES[user]]  # fmt: skip


def _found() -> list[dict[str, object]]:
    out = []
    for name, _, _ in AUTHORS.values():
        tags = {t for n in range(1, PAGES + 1) for q in quotes(n) if q["author"] == name
                for t in q["tags"]}  # fmt: skip
        for tag in tags:
            out += [{"kind": "found", "text": q["text"], "author": name, "tag": tag}
                    for q in search_results(name, tag)]  # fmt: skip
    return out


def _key(item: dict[str, object]) -> str:
    return json.dumps(item, sort_keys=True)


@pytest.mark.timeout(90)
def test_login_and_search_form(tmp_path: Path) -> None:
    with QuotesSite() as site:
        proc = _crawl(_config(tmp_path, site.port, 0.01))
        sessions = list(site.sessions)
    assert proc.returncode == 0, proc.stderr[-3000:]
    items = _items(tmp_path)
    favourites = [i for i in items if i["kind"] == "favourite"]
    assert sorted(favourites, key=_key) == sorted(_favourites("john"), key=_key)
    found = [i for i in items if i["kind"] == "found"]
    assert len(found) > len(AUTHORS)
    assert sorted(found, key=_key) == sorted(_found(), key=_key)
    logins = [(m, b) for m, p, b, _ in site.requests if p == "/login"]
    assert [m for m, _ in logins] == ["GET", "POST"]  # one login: the form, then its POST
    assert b"csrf_token=" in logins[1][1] and b"username=john" in logins[1][1]
    fav = site.headers["/favourites/2/"]
    assert fav["cookie"] == f"session={sessions[0]}"  # the session the login page set
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["spider"]["problems"] == 0
    out = tmp_path / "out"
    for path in (out / "crawl.jsonl", out / "report.json"):
        assert sessions[0] not in path.read_text()  # a cookie is a secret
    assert sessions[0] not in proc.stderr + proc.stdout


@pytest.mark.timeout(120)
def test_a_resumed_crawl_keeps_its_session(tmp_path: Path) -> None:
    with QuotesSite() as site:
        config = _config(tmp_path, site.port, 1.0)  # a second between two requests: the
        proc = subprocess.Popen(  # stop lands after the first page behind the login
            [sys.executable, "-m", "frontier_crawl.cli", "--config", str(config)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
            start_new_session=True,
        )  # fmt: skip
        try:
            wait_until("the first page behind the login", lambda: "/favourites/" in site.paths,
                       60, alive=proc)  # fmt: skip
            os.kill(proc.pid, signal.SIGTERM)
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, stderr[-3000:]
        assert "/favourites/2/" not in site.paths
        first = len(_items(tmp_path))
        again = _crawl(_config(tmp_path, site.port, 0.01))
        assert again.returncode == 0, again.stderr[-3000:]
    assert "/favourites/2/" in site.paths
    assert site.headers["/favourites/2/"].get("cookie", "").startswith("session=")
    assert site.paths.count("/login") == 2  # GET and POST, in the first run only
    favourites = [i for i in _items(tmp_path) if i["kind"] == "favourite"]
    assert sorted(favourites, key=_key) == sorted(_favourites("john"), key=_key)
    assert first < len(_items(tmp_path))
