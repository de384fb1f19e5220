"""The cluster seen as one (``cluster/view.py``): any node's ``/api/status``, ``ctl status``,
``/metrics`` and the ``report`` command show every node, checked against the nodes' own
status and reports; missing nodes (never joined, killed with -9) are named with how long.

Real redis-server (AOF, a password), real node process trees on loopback, the demo web.
Settings beyond ``test_cluster.cluster_config``'s, and why:
* ``control.listen = "127.0.0.1:0"``: each node's own API (port 0: no collisions);
* ``cluster.heartbeat_ttl_s = 2``: a killed node's membership lapses in 2 s, not 15;
* ``output.progress_interval_s = 0.5``: progress lines to read the waiting sentence from.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import served_pages
from tests.control_client import Api, wait_until
from tests.e2e.test_cluster import Node, assert_no_secret, cluster_config, node_cmd, spread
from tests.redis_server import PASSWORD, RedisServer, crawl_prefix

NODES = 3


@pytest.fixture(scope="module")
def slow_site() -> Any:
    """8 hosts, 400 pages, fetched 0.1 s apart per host: a crawl of several seconds."""
    yield from spread(SiteSpec(hosts=8, pages=400, crawl_delay_s=None, seed=41))


def config(tmp_path: Path, site: Site, server: DemoServer, url: str) -> Path:
    return cluster_config(
        tmp_path, site, server.port, url, NODES,
        politeness={"min_delay_s": 0.1},
        control={"listen": "127.0.0.1:0"},
        cluster={"heartbeat_ttl_s": 2.0},
        output={"progress_interval_s": 0.5},
    )  # fmt: skip


def report_cmd(cfg: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(node_cmd(cfg, "report"), capture_output=True, text=True, timeout=60)


def rows(status: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(r["node"]): r for r in status["cluster"]["nodes"]}


@pytest.mark.timeout(150)
def test_three_nodes_seen_as_one_during_and_after(
    tmp_path: Path, slow_site: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    site, server = slow_site
    cfg = config(tmp_path, site, server, redis_server.url)
    nodes = [Node(cfg, n).start() for n in range(NODES)]
    apis = [Api(tmp_path / f"out-{n}") for n in range(NODES)]
    # every node sees all three alive, from any node
    wait_until(
        "every node alive in every node's view",
        lambda: all(sorted(a.status()["cluster"]["alive"]) == [0, 1, 2] for a in apis),
        60, every_s=0.2,
    )  # fmt: skip
    wait_until("pages on every node", lambda: all(a.status()["pages"] > 0 for a in apis), 60,
        every_s=0.2)
    # paused, the figures hold still: the view must then equal the nodes' own
    for api in apis:
        api.post("/api/pause")

    def agree() -> dict[int, int] | None:
        own = {n: apis[n].status() for n in range(NODES)}
        if any(s["in_flight"] for s in own.values()):
            return None
        pages = {n: int(s["pages"]) for n, s in own.items()}
        for viewer in apis:
            seen = rows(viewer.status())
            if any(seen[n]["pages"] != pages[n] or seen[n]["state"] != "paused"
                   for n in range(NODES)):  # fmt: skip
                return None
        return pages

    own = wait_until("the view to agree with each node's own status", agree, 30, every_s=0.3)
    view = apis[1].status()["cluster"]
    assert view["totals"]["pages"] == sum(own.values())
    assert view["missing"] == [] and view["waiting"] == "" and view["me"] == 1
    assert all(r["heard_s"] is not None and r["heard_s"] < 3 for r in view["nodes"])
    assert all(r["workers"] == 1 and r["machine"] for r in view["nodes"])
    # ctl status of another node: the same cluster, in words and in JSON
    ctl = subprocess.run(node_cmd(cfg, "ctl", "--node", "2", "status"), capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert ctl.returncode == 0, ctl.stderr
    assert "cluster    3 nodes, 3 alive" in ctl.stdout, ctl.stdout
    for n in range(NODES):
        assert f"node {n}:    paused, {own[n]:,} pages" in ctl.stdout, ctl.stdout
    metrics = apis[2].get("/metrics").decode()
    for n in range(NODES):
        assert f'frontier_crawl_cluster_node_pages{{node="{n}"}} {float(own[n])}' in metrics
        assert f'frontier_crawl_cluster_node_up{{node="{n}"}} 1.0' in metrics
    assert 'frontier_crawl_cluster_nodes{state="paused"} 3.0' in metrics
    # the report command while the crawl runs: live totals, exit 0
    live = report_cmd(cfg)
    assert live.returncode == 0, live.stdout + live.stderr
    assert f"pages {sum(own.values()):,}" in live.stdout, live.stdout
    assert "cluster now" in live.stdout and "not reporting now" not in live.stdout
    assert "no report yet from" in live.stdout  # (reports come at the end of each run)
    for api in apis:
        api.post("/api/resume")
    assert [n.wait(90) for n in nodes] == [0] * NODES, [n.output()[-2000:] for n in nodes]
    # after: each node's last summary holds its report's count; the crawl is over
    reports = [json.loads((tmp_path / f"out-{n}" / "report.json").read_text())
               for n in range(NODES)]  # fmt: skip
    done = report_cmd(cfg)
    assert done.returncode == 0, done.stdout + done.stderr
    client = redis_server.client()
    for n in range(NODES):
        summary = json.loads(client.hget(f"{crawl_prefix(client)}:live:{n}", "s") or b"{}")
        assert summary["state"] == "finished" and summary["pages"] == reports[n]["fetched"]
        assert 0 < client.pttl(f"{crawl_prefix(client)}:live:{n}") <= 86_400_000
        assert len(client.hget(f"{crawl_prefix(client)}:live:{n}", "s") or b"") <= 1024
    total = sum(r["fetched"] for r in reports)
    assert total == len(site.expected_pages(server.port))
    assert f"pages {total:,}" in done.stdout and "cluster (ended)" in done.stdout, done.stdout
    assert PASSWORD not in live.stdout + live.stderr + done.stdout + done.stderr + ctl.stdout
    assert_no_secret(tmp_path)


def _state_of(api: Api, node: int) -> dict[str, Any]:
    return rows(api.status())[node]


@pytest.mark.timeout(150)
def test_a_node_never_joined_and_one_killed_are_named_with_how_long(
    tmp_path: Path, slow_site: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    """Nodes 0 and 1 of 3 run, node 2 never starts; node 1 is then killed with -9. Node 0's
    status, progress line, /metrics and the report command name both, with their durations."""
    site, server = slow_site
    cfg = config(tmp_path, site, server, redis_server.url)
    started = time.monotonic()
    first, second = Node(cfg, 0).start(), Node(cfg, 1).start()
    api = Api(tmp_path / "out-0")
    wait_until("node 1 alive in node 0's view",
               lambda: _state_of(api, 1)["state"] == "running", 60, every_s=0.2)  # fmt: skip
    status = api.status()
    never = rows(status)[2]
    assert never["state"] == "never-joined" and never["missing"] and never["heard_s"] is None
    assert 0 < never["for_s"] <= time.monotonic() - started
    waiting = status["cluster"]["waiting_for"]
    assert [w["node"] for w in waiting] == [2] and waiting[0]["state"] == "never-joined"
    assert status["cluster"]["waiting"].startswith("waiting for node 2 (never joined")
    wait_until("node 0's progress line to say it waits for node 2",
               lambda: "waiting for node 2 (never joined" in first.output(), 30,
                   every_s=0.2)  # fmt: skip
    wait_until("node 1's pages in node 0's view", lambda: _state_of(api, 1)["pages"] > 0, 30,
        every_s=0.2)
    # kill -9 of node 1: silent, for as long as it has been gone
    second.kill_9()
    killed = time.monotonic()
    silent = wait_until("node 1 silent in node 0's view",
                        lambda: (r := _state_of(api, 1))["state"] == "silent" and r, 30,
                            every_s=0.2)
    gone = time.monotonic() - killed
    # its last summary came at most a summary interval (0.67 s) before the kill; the view
    # read at most a second before the status
    assert gone - 2.0 <= silent["for_s"] <= gone + 1.0, (silent, gone)
    assert silent["missing"] and silent["pages"] > 0
    time.sleep(1.5)  # (durations grow: measured again later)
    later = _state_of(api, 1)
    gone = time.monotonic() - killed
    assert later["state"] == "silent" and gone - 2.0 <= later["for_s"] <= gone + 1.0
    status = api.status()
    assert sorted(w["node"] for w in status["cluster"]["waiting_for"]) == [1, 2]
    assert re.search(r"waiting for node 1 \(silent for [\d.]+ s\), node 2 \(never joined",
                     status["cluster"]["waiting"]), status["cluster"]["waiting"]  # fmt: skip
    wait_until("node 0's progress line to say it waits for node 1",
               lambda: "node 1 (silent for" in first.output(), 30, every_s=0.2)  # fmt: skip
    metrics = api.get("/metrics").decode()
    assert 'frontier_crawl_cluster_node_up{node="1"} 0.0' in metrics
    assert 'frontier_crawl_cluster_node_up{node="0"} 1.0' in metrics
    assert 'frontier_crawl_cluster_nodes{state="never-joined"} 1.0' in metrics
    found = re.search(r'frontier_crawl_cluster_node_missing_seconds\{node="1"\} ([\d.]+)', metrics)
    assert found is not None and float(found.group(1)) > 0
    # the report command during the run: exit 0, live totals, the nodes not reporting
    live = report_cmd(cfg)
    assert live.returncode == 0, live.stdout + live.stderr
    assert "cluster now" in live.stdout and "node 0 running" in live.stdout, live.stdout
    assert re.search(r"node 1 \(silent for [\d.]+ s\)", live.stdout), live.stdout
    assert "node 2 (never joined" in live.stdout, live.stdout
    assert PASSWORD not in live.stdout + live.stderr
    # node 0 stops gracefully; it says so (stopped) to the others
    assert first.proc is not None
    first.proc.send_signal(signal.SIGTERM)
    assert first.wait(60) == 0, first.output()[-2000:]
    client = redis_server.client()
    live = client.hget(f"{crawl_prefix(client)}:live:0", "s")
    assert json.loads(live or b"{}")["state"] == "stopped"
    after = report_cmd(cfg)  # no node runs, the crawl is not over: the last figures, exit 1
    assert after.returncode == 1, after.stdout + after.stderr
    assert "node 0 (stopped" in after.stdout, after.stdout
    assert_no_secret(tmp_path)


@pytest.mark.timeout(120)
def test_report_while_the_cluster_runs(
    tmp_path: Path, slow_site: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    """Issue 21: ``report`` during a run printed an all-zero table and exited 1, naming no
    node. Now: exit 0, the live totals, and the node that has not reported."""
    site, server = slow_site
    since = len(server.log())
    cfg = config(tmp_path, site, server, redis_server.url)
    first = Node(cfg, 0).start()
    second = Node(cfg, 1).start()
    try:
        wait_until("pages fetched", lambda: len(served_pages(server, since, wait_s=0)) > 10, 60,
                   every_s=0.2)
        def live_pages(out: str) -> int:
            found = re.search(r"running; pages ([\d,]+)", out)
            return int(found.group(1).replace(",", "")) if found else 0

        # the nodes publish their live summaries every few seconds: a report between a node's
        # start and its first summary shows it running with 0 pages yet (seen under load)
        live = wait_until(
            "a report with both nodes running and their pages counted",
            lambda: (r := report_cmd(cfg)) and "nodes 0, 1 running" in r.stdout
            and live_pages(r.stdout) > 0 and r, 30, every_s=0.5,
        )  # fmt: skip
        assert live.returncode == 0, live.stdout + live.stderr
        assert "node 2 (never joined" in live.stdout, live.stdout
    finally:
        for node in (first, second):
            if node.proc is not None and node.proc.poll() is None:
                node.kill_9()
