"""The dashboard and report.html in a real headless Chromium (Debian's ``chromium``, driven by
Playwright over CDP, no browser downloaded), against a real crawl subprocess of the demo web.

The dashboard is loaded during the crawl: what it shows is checked against ``/api/status``
(within one poll), its Pause button is pressed and the crawl is seen paused both in the status
and in the web server's own request log (no request while paused), then Resume. After the
crawl, ``report.html`` is opened from disk (``file://``) with every request the page makes
recorded and any that is not the file itself refused; the test asserts there was none.

Settings that differ from the defaults, beyond conftest.crawl_config's (and why):
* ``control.listen = "127.0.0.1:0"``: the API is off by default; port 0 so tests never collide;
* ``politeness.min_delay_s`` 0.25: slow enough (about 4 pages/s per host, 12 in all) that the
  crawl is still running through the checks, pause and resume, and a pause of 2 s would miss
  some 24 requests if it did not hold.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selectolax.lexbor import LexborHTMLParser

from frontier_crawl.control.status import BOTTLENECKS
from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import crawl_config
from tests.control_client import read_api_files
from tests.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):  # .ci/run installs it: a CI run without it is broken, not skipped
        pytest.fail(f"{CHROMIUM} is missing: .ci/run should have installed it", pytrace=False)
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)
playwright_sync = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

pytestmark = pytest.mark.timeout(120)

DELAY_S = 0.25
#: a request the crawler had submitted just before the pause took effect may still reach the
#: server a little later (loopback on a loaded 2-core machine)
SLACK_S = 0.3
LEGEND = ("ready", "waiting", "backoff", "robots", "blocked")  #: the hosts chart's states
PAUSED_S = 2.0  #: how long the crawl stays paused while the server's log is watched
#: Chromium as root in a container, headless, and quiet: no sandbox (root), no GPU, none of
#: the background requests a fresh profile makes; and no name resolves (the pages under test
#: are on 127.0.0.1 or disk), so even a request the test did not see could not leave
CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
    "--disable-dev-shm-usage", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]  # fmt: skip


@pytest.fixture(scope="module")
def web() -> Iterator[tuple[Site, DemoServer]]:
    """3 hosts, 600 pages of 20 KB (realistic sizes), no Crawl-delay."""
    site = Site(SiteSpec(hosts=3, pages=600, crawl_delay_s=None, seed=21, page_bytes=20_000))
    with DemoServer(site) as server:
        yield site, server


class Api:
    """The crawl's control API, read from ``output_dir/control.addr`` and ``control.token``."""

    def __init__(self, out: Path, wait_s: float = 30.0) -> None:
        self.address, self.token = read_api_files(out, wait_s)

    def call(self, method: str, path: str) -> dict[str, Any]:
        host, _, port = self.address.rpartition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            body = b"{}" if method == "POST" else None
            conn.request(method, path, body, {"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})  # fmt: skip
            reply = conn.getresponse()
            data = json.loads(reply.read())
            assert reply.status == 200, (path, reply.status, data)
            assert isinstance(data, dict)
            return data
        finally:
            conn.close()

    def status(self) -> dict[str, Any]:
        return self.call("GET", "/api/status")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _text(dom: LexborHTMLParser, element_id: str) -> str:
    """The text content of the element with this id (as the DOM's ``textContent``)."""
    node = dom.css_first(f"#{element_id}")
    assert node is not None, element_id
    return node.text(deep=True, separator="", strip=False)


def test_dashboard_during_a_crawl_then_report_html_from_disk(
    tmp_path: Path, web: tuple[Site, DemoServer]
) -> None:
    site, server = web
    cfg = crawl_config(
        tmp_path, site, server.port, control={"listen": "127.0.0.1:0"},
        politeness={"min_delay_s": DELAY_S, "user_agent": "frontier-crawl-test/0.1"},
    )  # fmt: skip
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        api = Api(out)
        wait_until("pages fetched", lambda: api.status()["pages"] >= 10)
        with playwright_sync.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                         headless=True)  # fmt: skip
            try:
                _check_dashboard(browser, api, server, tmp_path)
                _check_status_html(cfg, out, api)
                api.call("POST", "/api/stop")
                _, err = proc.communicate(timeout=60)
                assert proc.returncode == 0, err.decode()
                _check_report(browser, out, tmp_path)
            finally:
                browser.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _wait_for_a_poll_after(page: Any, replies: list[Any], since: float) -> None:
    """Until the dashboard has drawn a status that it asked for after ``since`` (wall clock,
    the browser's too). Its polls follow each other (draw, wait, ask again), so a draw later
    than such a request's start is of that reply or a later one."""

    def drawn() -> bool:
        started = [r.request.timing["startTime"] for r in replies]
        asked = [t for t in started if t > since * 1000]
        updated = page.get_attribute("body", "data-updated")
        return bool(asked) and updated is not None and int(updated) >= min(asked)

    wait_until("a status polled and drawn after the one read", drawn, 15)


def _chart_points(page: Any) -> int:
    """Points of the dashboard chart's line (0 before it has two)."""
    line = page.query_selector("#chart polyline")
    return len((line.get_attribute("points") or "").split()) if line is not None else 0


def _check_dashboard(browser: Any, api: Api, server: DemoServer, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    requests: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    status_replies: list[Any] = []
    page.on("response", lambda r: status_replies.append(r) if r.url.endswith("/api/status")
            else None)  # fmt: skip
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # a CSP violation (a script or style the policy's hashes do not allow) is a console error
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}")
            if m.type in ("error", "warning") else None)  # fmt: skip
    page.goto(f"http://{api.address}/?token={api.token}")
    # polled from here, not with wait_for_function: the page's CSP forbids the eval it uses
    wait_until("the first status drawn", lambda: page.get_attribute("body", "data-pages"), 15)
    assert "token" not in page.url, page.url  # moved out of the address bar at once

    # what it shows: what /api/status answered it (its own last replies), and numbers within
    # one poll (1 s) of what another client reads before and after
    before = api.status()
    _wait_for_a_poll_after(page, status_replies, time.time())
    # one snapshot of the page: read element by element, a poll could redraw it in between
    dom = LexborHTMLParser(page.content())
    ids = ("pages", "queued", "hosts-total", "state", "bottleneck-name", "bottleneck-detail",
           "busiest", "outcomes", "hosts-legend")  # fmt: skip
    text = {key: _text(dom, key) for key in ids}
    shown = {
        "pages": _int(text["pages"]),
        "queued": _int(text["queued"]),
        "hosts": _int(text["hosts-total"]),
        "state": text["state"],
        "bottleneck": text["bottleneck-name"],
        "detail": text["bottleneck-detail"],
        "busiest": text["busiest"],
        "outcomes": text["outcomes"],
        "legend": text["hosts-legend"],
    }
    after = api.status()
    assert before["pages"] <= shown["pages"] <= after["pages"], (before["pages"], shown, after)
    replies = [r.json() for r in status_replies[-3:]]  # the one drawn is among the last
    drawn = [s for s in replies
             if (s["pages"], s["queued"], s["hosts"]["total"], s["state"],
                 s["bottleneck"]["name"], s["bottleneck"]["detail"])
             == (shown["pages"], shown["queued"], shown["hosts"], shown["state"],
                 shown["bottleneck"], shown["detail"])
             # two polls can agree on those and not on the hosts by state: the legend decides
             and all(f"{state} {s['hosts'][state]:,}" in shown["legend"] for state in LEGEND)]
    assert drawn, (shown, [(s["pages"], s["bottleneck"]) for s in replies])
    status = drawn[-1]
    assert shown["hosts"] == 3 and shown["state"] == "running"
    assert shown["bottleneck"] in BOTTLENECKS
    assert shown["detail"], "the bottleneck line says why"
    assert status["busiest_hosts"]
    for row in status["busiest_hosts"]:
        assert row["host"] in shown["busiest"]
    assert status["outcomes"].get("fetched")
    for name, count in status["outcomes"].items():
        if count:
            assert f"{name}{count:,}" in shown["outcomes"].replace(" ", ""), (name, shown)
    for state in LEGEND:
        assert f"{state} {status['hosts'][state]:,}" in shown["legend"], (state, shown)
    assert "ready" in shown["legend"] and "waiting" in shown["legend"]
    wait_until("the chart's line", lambda: _chart_points(page) >= 2, 15)
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)

    # pause: the status says so, and the web server sees no request while it holds
    page.click("#pause")
    wait_until("the dashboard showing paused", lambda: page.text_content("#state") == "paused", 10)
    paused_at = time.monotonic()
    status = api.status()
    assert status["paused"] is True and status["state"] == "paused"
    assert page.is_disabled("#pause") and page.is_enabled("#resume")
    time.sleep(PAUSED_S)
    during = [e for e in server.log(wait_s=0.0) if paused_at + SLACK_S <= e.started]
    assert during == [], during
    page.screenshot(path=str(tmp_path / "dashboard-paused.png"), full_page=True)

    # resume: requests again
    page.click("#resume")
    wait_until("the dashboard showing running",
             lambda: page.text_content("#state") == "running", 10)
    resumed_at = time.monotonic()
    assert api.status()["paused"] is False
    wait_until("a request after resume",
             lambda: [e for e in server.log(wait_s=0.0) if e.started > resumed_at], 10)
    # every request the page made went to the control listener
    assert requests and all(u.startswith(f"http://{api.address}/") for u in requests), requests
    assert errors == [], errors
    assert console == [], console
    context.close()


def _check_status_html(cfg: Path, out: Path, api: Api) -> None:
    """``ctl status --html`` writes report.html from the running crawl's status."""
    ctl = subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "ctl", "--config", str(cfg), "status",
         "--html"], capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert ctl.returncode == 0, ctl.stderr
    assert Path(ctl.stdout.strip()) == out / "report.html"
    page = (out / "report.html").read_text()
    status = api.status()
    assert "frontier-crawl status" in page and "last 10 minutes" in page
    assert status["busiest_hosts"] and all(r["host"] in page for r in status["busiest_hosts"])


def _check_report(browser: Any, out: Path, tmp_path: Path) -> None:
    report = json.loads((out / "report.json").read_text())
    path = out / "report.html"
    assert path.exists()
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, offline=True)
    requests: list[str] = []
    url = path.as_uri()

    def route(r: Any) -> None:
        requests.append(r.request.url)
        if r.request.url == url:
            r.continue_()
        else:
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.goto(url)
    assert requests == [url], requests  # nothing but the file itself: no font, CSS, script
    text = page.text_content("body") or ""
    assert page.title().startswith("frontier-crawl report")
    assert f"{report['fetched']:,}" in text and "pages fetched" in text
    assert "stopped on request" in text  # ended by POST /api/stop, which acts as SIGTERM
    for name in report["outcomes"]:
        assert name in text
    for row in report["slowest_hosts"]:
        assert row["host"] in text
    assert page.query_selector("svg polyline") is not None  # pages/s over the crawl's life
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    _keep_screenshots(tmp_path)
    context.close()


def _keep_screenshots(tmp_path: Path) -> None:
    """Copy the screenshots to $FRONTIER_CRAWL_KEEP_SCREENSHOTS, if set (to look at them)."""
    if os.environ.get("FRONTIER_CRAWL_KEEP_SCREENSHOTS"):
        keep = Path(os.environ["FRONTIER_CRAWL_KEEP_SCREENSHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        for png in tmp_path.glob("*.png"):
            shutil.copy(png, keep / png.name)


def test_dashboard_of_worker_processes(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """With two worker processes, one dashboard for the crawl: the totals and a row per worker."""
    site, server = web
    cfg = crawl_config(
        tmp_path, site, server.port, control={"listen": "127.0.0.1:0"},
        workers={"processes": 2},
        politeness={"min_delay_s": DELAY_S, "user_agent": "frontier-crawl-test/0.1"},
    )  # fmt: skip
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        api = Api(out)
        wait_until("both workers reporting",
                 lambda: len(api.status()["workers"]) == 2 and api.status()["pages"] >= 10)
        with playwright_sync.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                         headless=True)  # fmt: skip
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                replies: list[Any] = []
                page.on("response", lambda r: replies.append(r)
                        if r.url.endswith("/api/status") else None)  # fmt: skip
                page.goto(f"http://{api.address}/?token={api.token}")
                wait_until("the first status drawn",
                         lambda: page.get_attribute("body", "data-pages"), 15)
                before = api.status()
                _wait_for_a_poll_after(page, replies, time.time())
                shown = _int(page.text_content("#pages") or "")
                rows = page.query_selector_all("#workers tr")
                after = api.status()
                assert before["pages"] <= shown <= after["pages"]
                assert page.is_visible("#workers-panel") and len(rows) == 1 + 2  # head + 2
                assert _int(page.text_content("#hosts-total") or "") == 3
                # the chart: drawn from the page's own polls (the merged status has no history)
                wait_until("the chart's line", lambda: _chart_points(page) >= 2, 15)
                page.screenshot(path=str(tmp_path / "dashboard-workers.png"), full_page=True)
                _keep_screenshots(tmp_path)
            finally:
                browser.close()
        api.call("POST", "/api/stop")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
