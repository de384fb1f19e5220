"""The cluster's view from what Redis holds (``cluster/view.py``'s pure part), and how the
status, metrics, ``ctl status`` and the report show it. No server: the view is built from
the values a read returns."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

from rich.console import Console

from frontier_crawl.cluster import build_view, make_summary, missing_phrase, waiting_sentence
from frontier_crawl.cluster.view import MAX_SUMMARY_BYTES, RateWindow
from frontier_crawl.control.metrics import render_metrics
from frontier_crawl.ctl import cluster_lines
from frontier_crawl.ctl import run as ctl_run
from frontier_crawl.output import render_report

NOW = 1_000_000.0


def summary(node: int, state: str = "running", pages: int = 10, every_s: float = 1.0,
            **extra: Any) -> dict[str, Any]:  # fmt: skip
    raw = make_summary(
        node=node, state=state, pages=pages, pages_per_s=2.5, queued=7, in_flight=1, hosts=3,
        bottleneck={"name": "politeness", "detail": "3 hosts waiting on their delay"},
        workers=2, every_s=every_s, machine="m1", pid=123, **extra,
    )  # fmt: skip
    return dict(json.loads(raw))


def live(node: int, age_s: float, up_s: float = 60.0, **kw: Any) -> dict[str, Any]:
    return {"summary": summary(node, **kw), "at": NOW - age_s, "joined": NOW - up_s}


def view(lives: list[dict[str, Any] | None], members: list[bool] | None = None,
         ended: bool = False, reported: set[int] | None = None,
         waiting: list[int] | None = None) -> dict[str, Any]:  # fmt: skip
    n = len(lives)
    return build_view(
        now=NOW, lives=lives, members_alive=members or [True] * n,
        batches_waiting=waiting or [0] * n, ended=ended, reported=reported or set(),
    )  # fmt: skip


def test_alive_silent_never_joined_and_stopped_with_how_long() -> None:
    v = view(
        [live(0, 0.4, up_s=35.0), live(1, 12.0), None, live(3, 5.0, state="stopped"),
         live(4, 0.5, up_s=20.0)],
        members=[True, True, True, True, False],
        waiting=[0, 4, 9, 0, 1],
    )  # fmt: skip
    by = {r["node"]: r for r in v["nodes"]}
    assert by[0]["state"] == "running" and not by[0]["missing"] and by[0]["for_s"] is None
    assert by[0]["heard_s"] == 0.4 and by[0]["up_s"] == 35.0 and by[0]["pages"] == 10
    assert by[1]["state"] == "silent" and by[1]["for_s"] == 12.0  # older than 3 s
    # no summary, no report: never joined, for as long as the longest-running live node ran
    assert by[2]["state"] == "never-joined" and by[2]["for_s"] == 35.0 and by[2]["heard_s"] is None
    assert by[3]["state"] == "stopped" and by[3]["for_s"] == 5.0 and by[3]["missing"]
    assert by[4]["state"] == "silent"  # its membership lapsed, however recent its summary
    assert v["alive"] == [0]
    assert [m["node"] for m in v["missing"]] == [1, 2, 3, 4]
    assert v["totals"]["pages"] == 40 and v["totals"]["pages_per_s"] == 2.5
    assert v["totals"]["batches_waiting"] == 14 and v["totals"]["in_flight"] == 1


def test_silence_scales_with_the_publishing_interval_and_a_report_means_it_ran() -> None:
    v = view([live(0, 4.0, every_s=2.0), live(1, 7.0, every_s=2.0), None], reported={2})
    states = [r["state"] for r in v["nodes"]]
    assert states == ["running", "silent", "stopped"]  # 3 x 2 s; ran before, no live record


def test_an_ended_crawl_misses_nobody_who_finished() -> None:
    v = view([live(0, 30.0, state="finished"), live(1, 31.0, state="finished")], ended=True)
    assert v["missing"] == [] and [r["state"] for r in v["nodes"]] == ["finished"] * 2
    assert waiting_sentence(v, 0) == ""
    running = view([live(0, 30.0, state="finished"), live(1, 0.2)])  # more seeds came
    assert [m["node"] for m in running["missing"]] == [0]


def test_the_waiting_sentence_names_each_node_and_how_long() -> None:
    v = view([live(0, 0.1, up_s=35.0), live(1, 12.0), None], waiting=[0, 4, 9])
    said = waiting_sentence(v, 0)
    assert said == (
        "waiting for node 1 (silent for 12 s), node 2 (never joined, the cluster has run "
        "35 s without it): the crawl cannot end without them; 13 link batches wait for them "
        "in Redis"
    )
    assert waiting_sentence(v, 1).startswith("waiting for node 2 (never joined")
    assert missing_phrase({"node": 3, "state": "never-joined", "for_s": None}) == (
        "node 3 (never joined)"
    )


def test_a_summary_is_bounded_whatever_the_bottleneck_says() -> None:
    raw = make_summary(
        node=1, state="running", pages=1, pages_per_s=0.0, queued=0, in_flight=0, hosts=0,
        bottleneck={"name": "backoff" * 20, "detail": "\u00e9\u4e2d" * 5000}, workers=1,
        every_s=1.0, machine="x" * 500, pid=1, waiting_for=list(range(100)),
    )  # fmt: skip
    assert len(raw) <= MAX_SUMMARY_BYTES
    parsed = json.loads(raw)
    assert len(parsed["waiting_for"]) == 16 and len(parsed["machine"]) == 64
    assert "redis" not in raw.decode().lower()


def test_a_live_hash_not_written_by_a_node_is_no_node() -> None:
    from frontier_crawl.cluster.view import _decode_live

    assert _decode_live({b"s": b"not json", b"at": b"1"}) is None
    assert _decode_live({b"s": b"[1]", b"at": b"1"}) is None
    assert _decode_live({b"at": b"1"}) is None
    assert _decode_live({}) is None
    good = _decode_live({b"s": b'{"state": "running"}', b"at": b"5.5", b"joined": b"1.0"})
    assert good == {"summary": {"state": "running"}, "at": 5.5, "joined": 1.0}


def test_rate_over_the_window() -> None:
    rate = RateWindow()
    assert rate.add(0.0, 0) == 0.0
    assert rate.add(5.0, 50) == 10.0
    assert rate.add(20.0, 50) == 0.0  # nothing for more than the window


def test_metrics_show_every_node() -> None:
    v = view([live(0, 0.2), live(1, 9.0), None])
    text = render_metrics([], cluster=v).decode()
    assert 'frontier_crawl_cluster_node_up{node="0"} 1.0' in text
    assert 'frontier_crawl_cluster_node_up{node="1"} 0.0' in text
    assert 'frontier_crawl_cluster_node_missing_seconds{node="1"} 9.0' in text
    assert 'frontier_crawl_cluster_node_missing_seconds{node="0"} 0.0' in text
    assert 'frontier_crawl_cluster_nodes{state="never-joined"} 1.0' in text
    assert 'frontier_crawl_cluster_node_pages{node="1"} 10.0' in text
    assert "cluster" not in render_metrics([]).decode()  # one machine: no cluster families


def test_ctl_status_lines() -> None:
    v = {**view([live(0, 0.2), None]), "me": 0, "age_s": 0.3,
         "waiting": "waiting for node 1 (never joined)"}  # fmt: skip
    lines = cluster_lines(v)
    assert lines[0].startswith("cluster    2 nodes, 1 alive, 1 missing; pages 10 (2.5/s)")
    assert lines[1].startswith("node 0:    running, 10 pages (2.5/s), 7 queued, politeness")
    assert lines[2].startswith("node 1:    never-joined for 60 s, 0 pages")
    assert lines[-1] == "waiting    waiting for node 1 (never joined)"
    assert cluster_lines({"count": 3, "nodes": []}) == [
        "cluster    3 nodes: not read from Redis yet"
    ]


def test_the_report_shows_the_live_cluster_and_who_does_not_report() -> None:
    v = view([live(0, 0.2), live(1, 14.0), None])
    report = {
        "fetched": 0, "nodes": 3, "nodes_reported": [], "nodes_missing": [0, 1, 2],
        "live": v, "running": True,
        "nodes_not_reporting": [missing_phrase(m) for m in v["missing"]],
    }  # fmt: skip
    out = io.StringIO()
    render_report(report, Console(file=out, width=200))
    text = out.getvalue()
    assert "cluster now" in text and "node 0 running; pages 20 (2.5/s)" in text
    assert "node 1 (silent for 14 s)" in text and "node 2 (never joined" in text
    assert "no report yet from" in text and "nodes 0, 1, 2" in text
    assert "cluster nodes now" in text and "silent 14 s" in text


def test_ctl_needs_the_node_when_output_dir_names_it(tmp_path: Path) -> None:
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(
        '[crawl]\nseeds = ["http://a.test/"]\noutput_dir = "out-{node}"\n'
        '[control]\nlisten = "127.0.0.1:0"\n'
        '[cluster]\nredis_url = "redis://:pw@127.0.0.1:1/0"\nnodes = 2\n'
    )
    err = io.StringIO()
    with redirect_stderr(err):
        assert ctl_run(cfg, "status", [], out=io.StringIO()) == 2
        assert ctl_run(cfg, "status", [], out=io.StringIO(), node=5) == 2
        # the right node: its directory (not running here: unreachable, 3)
        assert ctl_run(cfg, "status", [], out=io.StringIO(), node=1) == 3
    said = err.getvalue()
    assert "give --node N (0 .. 1)" in said and "--node 5 is out of range" in said
    assert "out-1 is not running" in said and "pw" not in said
