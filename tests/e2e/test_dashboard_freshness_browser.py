"""The dashboard's freshness panel in a real headless Chromium (as test_dashboard_browser.py
drives it), against a real ControlServer on 127.0.0.1 whose ``/api/status`` is the status JSON
with a continuous crawl's ``freshness`` (docs/continuous.md's dict), then without it: the panel
shows the figures, is hidden when ``enabled`` is false, and the page's CSP stays unbroken."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selectolax.lexbor import LexborHTMLParser

from frontier_crawl.control.server import ControlServer
from frontier_crawl.control.status import empty_status
from tests.control_client import read_api_files
from tests.e2e.test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, playwright_sync
from tests.unit.test_freshness_display import FRESHNESS
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(90)


class Status:
    """The status the server answers: swapped by the test, read by the server's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._freshness: dict[str, Any] = {"enabled": False}
        self.asked = 0

    def set(self, freshness: dict[str, Any]) -> None:
        with self._lock:
            self._freshness = copy.deepcopy(freshness)

    def __call__(self) -> dict[str, Any]:
        status = empty_status("running")
        with self._lock:
            status["freshness"] = copy.deepcopy(self._freshness)
            self.asked += 1
        return status


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Status, str]]:
    status = Status()
    control = ControlServer("127.0.0.1:0", tmp_path, status, lambda: b"")
    try:
        address, token = read_api_files(tmp_path)
        yield status, f"http://{address}/?token={token}"
    finally:
        control.close()


def _text(page: Any, element_id: str) -> str:
    dom = LexborHTMLParser(page.content())
    node = dom.css_first(f"#{element_id}")
    assert node is not None, element_id
    return node.text(deep=True, separator=" ", strip=True)


def cells(page: Any, table_id: str) -> list[list[str]]:
    """The text of each row's cells (the bar's cell is empty)."""
    return [[td.text_content() for td in tr.query_selector_all("td") if td.text_content()]
            for tr in page.query_selector_all(f"#{table_id} tr")]  # fmt: skip


def _drawn_after(page: Any, since_ms: float) -> bool:
    updated = page.get_attribute("body", "data-updated")
    return updated is not None and int(updated) > since_ms


def test_freshness_panel(served: tuple[Status, str]) -> None:
    status, url = served
    status.set(FRESHNESS)
    with playwright_sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            problems: list[str] = []
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("console", lambda m: problems.append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)  # fmt: skip
            page.goto(url)
            wait_until("the first status drawn",
                       lambda: page.get_attribute("body", "data-updated"), 15)  # fmt: skip
            assert page.is_visible("#freshness-panel")
            shown = {key: _text(page, f"fresh-{key}") for key in
                     ("scheduled", "due", "next", "p50", "p99", "changes", "revisits", "new")}
            assert shown == {"scheduled": "12,345", "due": "12", "next": "4.2 s", "p50": "1.2 s",
                             "p99": "8.0 s", "changes": "400", "revisits": "5900",
                             "new": "1000"}  # fmt: skip
            assert cells(page, "fresh-visits") == [
                ["new", "100"], ["changed", "40"], ["unchanged", "300"],
                ["not-modified", "250"], ["gone", "2"], ["failed", "1"],
            ]  # fmt: skip
            assert cells(page, "fresh-intervals") == [
                ["\u2264 1 min", "5"], ["\u2264 5 min", "0"], ["\u2264 15 min", "40"],
                ["\u2264 1 h", "300"], ["\u2264 6 h", "2,000"], ["\u2264 1 d", "6,000"],
                ["\u2264 7 d", "3,000"], ["\u2264 30 d", "1,000"], ["> 30 d", "0"],
            ]  # fmt: skip
            # the bars are sized through the CSSOM (the CSP forbids style attributes' markup)
            widths = [bar.evaluate("b => b.style.width") for bar in
                      page.query_selector_all("#fresh-intervals .bar")]  # fmt: skip
            assert widths[5] == "100%" and widths[4] == "33.3%"  # 2,000 of the top 6,000

            # between visits: nothing due, nobody late; then recrawl off: the panel goes
            status.set({**FRESHNESS, "next_due_s": None, "overdue_p50_s": None,
                        "overdue_p99_s": None, "due_now": 0})  # fmt: skip
            since = time.time() * 1000
            wait_until("a later status drawn", lambda: _drawn_after(page, since), 15)
            wait_until("the quiet figures", lambda: _text(page, "fresh-next") == "none", 15)
            assert _text(page, "fresh-p99") == "none" and _text(page, "fresh-due") == "0"
            status.set({"enabled": False})
            wait_until("the panel hidden", lambda: not page.is_visible("#freshness-panel"), 15)
            assert problems == []
        finally:
            browser.close()
