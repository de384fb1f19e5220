"""The dashboard page's source: self-contained, and crawl strings never parsed as markup (the
browser test, tests/e2e/test_dashboard_browser.py, checks what it shows)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from frontier_crawl.control.dashboard import POLL_MS, dashboard_html


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.scripts: list[dict[str, str | None]] = []
        self.meta: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("src", "href", "srcset", "action", "data", "poster"):
                self.refs.append((tag, key, value or ""))
        if tag == "script":
            self.scripts.append(dict(attrs))
        if tag == "meta":
            self.meta.append(dict(attrs))


def test_the_page_loads_nothing_from_outside() -> None:
    page = dashboard_html()
    tags = _Tags()
    tags.feed(page)
    assert tags.refs == []  # no src/href anywhere: no script, style sheet, font or image file
    assert tags.scripts == [{}]  # one inline script
    csp = next(m["content"] for m in tags.meta if m.get("http-equiv") == "Content-Security-Policy")
    assert csp is not None
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    # the only absolute URL is the SVG namespace name, which is never fetched
    assert set(re.findall(r"https?://[^\s\"')]+", page)) == {"http://www.w3.org/2000/svg"}
    assert not re.search(r"@import|url\(|@font-face", page)


def test_crawl_strings_are_only_ever_written_as_text() -> None:
    script = dashboard_html().split("<script>")[1]
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function", "setAttribute(\"on", "srcdoc"):  # fmt: skip
        assert sink not in script, sink
    assert "textContent" in script


def test_the_token_leaves_the_address_bar_and_travels_as_a_bearer_header() -> None:
    script = dashboard_html().split("<script>")[1]
    assert 'searchParams.get("token")' in script and "history.replaceState" in script
    assert '"Authorization": "Bearer " + token' in script
    assert 'credentials: "omit"' in script
    assert f"const POLL_MS = {POLL_MS};" in script and 1000 <= POLL_MS <= 2000
