"""A cluster node's dashboard in a real headless Chromium (as ``test_dashboard_browser.py``):
its Cluster panel shows every node, the one that never joined included, as the node's
``/api/status`` says, with no script error and nothing the page's CSP refuses.

Node 0 of a 2-node cluster runs alone (node 1 is never started), with the settings of
``test_cluster_view.config``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from selectolax.lexbor import LexborHTMLParser

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site
from tests.control_client import Api, wait_until
from tests.e2e.test_cluster import Node, cluster_config
from tests.e2e.test_cluster_view import slow_site
from tests.e2e.test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, playwright_sync
from tests.redis_server import RedisServer

__all__ = ["slow_site"]  # the module-scoped fixture, shared with test_cluster_view.py


@pytest.mark.timeout(150)
def test_the_dashboard_shows_the_whole_cluster(
    tmp_path: Path, slow_site: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    site, server = slow_site
    cfg = cluster_config(
        tmp_path, site, server.port, redis_server.url, 2,
        politeness={"min_delay_s": 0.1}, control={"listen": "127.0.0.1:0"},
        cluster={"heartbeat_ttl_s": 2.0},
    )  # fmt: skip
    node = Node(cfg, 0).start()
    try:
        api = Api(tmp_path / "out-0")
        wait_until("node 0 alive in its view",
                   lambda: api.status()["cluster"]["alive"] == [0], 60, every_s=0.2)  # fmt: skip
        with playwright_sync.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                         headless=True)  # fmt: skip
            try:
                _check(browser, api)
            finally:
                browser.close()
    finally:
        if node.proc is not None and node.proc.poll() is None:
            node.kill_9()


def _check(browser: Any, api: Api) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(f"{m.type}: {m.text}")
            if m.type in ("error", "warning") else None)  # fmt: skip
    page.goto(f"http://{api.address}/?token={api.token}")

    def drawn() -> LexborHTMLParser | None:
        dom = LexborHTMLParser(page.content())
        return dom if len(dom.css("#cluster tr[data-node]")) == 2 else None

    dom = wait_until("the cluster panel drawn", drawn, 30, every_s=0.2)
    panel = dom.css_first("#cluster-panel")
    assert panel is not None and "hidden" not in panel.attributes
    rows = {r.attributes["data-node"]: r for r in dom.css("#cluster tr[data-node]")}
    status = api.status()["cluster"]
    assert rows["0"].attributes["data-state"] in ("running", "starting")
    assert rows["1"].attributes["data-state"] == "never-joined"
    assert rows["1"].attributes.get("class") == "missing"
    assert "class" not in rows["0"].attributes
    summary = dom.css_first("#cluster-summary").text()
    assert summary.startswith("2 nodes, 1 alive, 1 missing") and "this is node 0" in summary
    waiting = dom.css_first("#cluster-waiting").text()
    assert waiting.startswith("waiting for node 1 (never joined") and status["waiting"]
    cells = [td.text() for td in rows["1"].css("td")]
    assert cells[0] == "1" and cells[1].startswith("never-joined ") and cells[6] == "never"
    assert errors == [], errors
