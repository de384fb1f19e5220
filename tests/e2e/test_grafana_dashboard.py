"""contrib/grafana/frontier-crawl.json asks only for metrics the crawler exports: every metric
name in its PromQL (panel targets and template queries) is a sample name that a real crawl's
``GET /metrics`` serves. The crawl is a one-node cluster over a real redis-server with
continuous crawling on, so the cluster and revisit families are served too."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site
from tests.conftest import crawl_config
from tests.control_client import Api
from tests.redis_server import RedisServer
from tests.waiting import wait_until

DASHBOARD = Path(__file__).resolve().parents[2] / "contrib" / "grafana" / "frontier-crawl.json"

#: PromQL words that are not metric names where they stand outside label lists
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "inf", "nan",
}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (Grafana's ``$variables`` aside)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors ([5m], [$__rate_interval])
    # label lists: sum by (le), on (node), group_left (x)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\$\{?\w+\}?", "", expr)  # $__rate_interval, ${datasource}
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?", expr):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in KEYWORDS or re.fullmatch(r"\d\w*", word):
            continue  # a function (rate, sum, histogram_quantile, label_values...)
        names.add(word)
    return names


def test_metric_names_parser() -> None:
    assert metric_names(
        'histogram_quantile(0.99, sum by (le) (rate(a_bucket{instance=~"$instance"}'
        "[$__rate_interval]))) / on (x) group_left (y) b_total offset 5m"
    ) == {"a_bucket", "b_total"}
    assert metric_names("max by (name) (c{x=\"a(b)\"}) == 1") == {"c"}
    assert metric_names("label_values(d, instance)") == {"d", "instance"}


def dashboard_queries() -> list[str]:
    """Every PromQL expression of the dashboard: panel targets, and template variable queries
    (``label_values(metric, label)``: the label is checked as a name too, see below)."""
    board: dict[str, Any] = json.loads(DASHBOARD.read_text())
    exprs: list[str] = []

    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for p in items:
            yield p
            yield from panels(p.get("panels", []))

    for panel in panels(board["panels"]):
        exprs += [t["expr"] for t in panel.get("targets", [])]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def exported(text: str) -> tuple[set[str], set[str]]:
    """(sample names, label names) of a Prometheus text page."""
    names: set[str] = set()
    labels: set[str] = set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][\w:]*)(\{[^}]*\})?", line)
        assert m, line
        names.add(m.group(1))
        labels.update(re.findall(r'(\w+)="', m.group(2) or ""))
    return names, labels


def test_dashboard_is_grafana_json() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert board["uid"] == "frontier-crawl" and board["panels"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    assert all(t["refId"] for p in board["panels"] for t in p.get("targets", []))
    assert len(dashboard_queries()) >= 30


@pytest.mark.timeout(180)
def test_dashboard_names_only_exported_metrics(
    tmp_path: Path, e2e_site: tuple[Site, DemoServer]
) -> None:
    site, server = e2e_site
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    try:
        cfg = crawl_config(
            tmp_path, site, server.port,
            workers={"processes": 1},
            control={"listen": "127.0.0.1:0"},
            cluster={"redis_url": redis.url, "nodes": 1},
            # revisits within seconds: the schedule's lateness and next-due figures exist
            recrawl={"enabled": True, "initial_interval_s": 1.0, "min_interval_s": 1.0,
                     "max_interval_s": 5.0},
        )  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg), "--node", "0"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            api = Api(tmp_path / "out")
            wanted: set[str] = set()
            for expr in dashboard_queries():
                wanted |= metric_names(expr)
            # label_values(metric, label): the label is Prometheus's (instance), not a metric
            wanted -= {"instance"}
            assert len(wanted) >= 30
            seen: dict[str, set[str]] = {}

            def missing() -> set[str]:
                reply = api.raw("GET", "/metrics")
                assert reply.status == 200
                body = reply.body if isinstance(reply.body, str) else reply.body.decode()
                names, labels = exported(body)
                seen["names"], seen["labels"] = names, labels
                return wanted - names

            wait_until(
                "every metric the dashboard names exported", lambda: not missing(), 90,
                every_s=0.5, alive=proc, detail=lambda: sorted(wanted - seen.get("names", set())),
            )  # fmt: skip
            # the labels the dashboard groups by are exported too
            used = set()
            for expr in dashboard_queries():
                for group in re.findall(r"\bby\s*\(([^)]*)\)", expr):
                    used |= {g.strip() for g in group.split(",")}
            assert used - {"le"} <= seen["labels"], used - seen["labels"]
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=60)
    finally:
        redis.stop()
