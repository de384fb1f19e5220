"""A continuous crawl's ``freshness`` (docs/continuous.md's dict, as ``/api/status`` and report.json
carry it) shown by the Prometheus metrics, the console report and report.html; nothing of it
without recrawl."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from frontier_crawl.control.metrics import render_metrics
from frontier_crawl.control.status import empty_status
from frontier_crawl.ctl import summary
from frontier_crawl.output import render_report, render_report_html, write_status_html
from frontier_crawl.output.report import interval_label

#: the dict's shape exactly (docs/continuous.md), with figures a crawl could have
FRESHNESS: dict[str, Any] = {
    "enabled": True,
    "scheduled": 12345, "due_now": 12, "due_now_capped": False,
    "next_due_s": 4.2, "overdue_p50_s": 1.2, "overdue_p99_s": 8.0,
    "visits": {"new": 100, "changed": 40, "unchanged": 300, "not_modified": 250, "gone": 2,
               "failed": 1},
    "per_hour": {"changes": 400.0, "revisits": 5900.0, "new_pages": 1000.0},
    "intervals": {"le_s": [60, 300, 900, 3600, 21600, 86400, 604800, 2592000, None],
                  "counts": [5, 0, 40, 300, 2000, 6000, 3000, 1000, 0]},
}  # fmt: skip
#: what the frontier says between visits: nothing due, nobody late yet
QUIET: dict[str, Any] = {
    **FRESHNESS, "due_now": 0, "next_due_s": None, "overdue_p50_s": None, "overdue_p99_s": None,
}  # fmt: skip


def snapshot(freshness: dict[str, Any] | None, worker: str = "0") -> dict[str, Any]:
    status = empty_status("running")
    if freshness is not None:
        status["freshness"] = freshness
    return {"worker": worker, "status": status}


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, of the ``recrawl`` families."""
    out = {}
    for fam in text_string_to_metric_families(text.decode()):
        for s in fam.samples:
            if "recrawl" in s.name:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_of_a_continuous_crawl() -> None:
    got = samples(render_metrics([snapshot(FRESHNESS), snapshot(QUIET, "1")]))
    w0 = (("worker", "0"),)
    assert got[("frontier_crawl_recrawl_scheduled_urls", w0)] == 12345
    assert got[("frontier_crawl_recrawl_due_urls", w0)] == 12
    assert got[("frontier_crawl_recrawl_next_due_seconds", w0)] == 4.2
    p50 = ("frontier_crawl_recrawl_overdue_seconds", (("quantile", "0.5"), *w0))
    p99 = ("frontier_crawl_recrawl_overdue_seconds", (("quantile", "0.99"), *w0))
    assert (got[p50], got[p99]) == (1.2, 8.0)
    for result, n in FRESHNESS["visits"].items():
        key = ("frontier_crawl_recrawl_visits_total", (("result", result), *w0))
        assert got[key] == n, result
    buckets = {dict(labels)["le"]: v for (name, labels), v in got.items()
               if name == "frontier_crawl_recrawl_interval_urls" and ("worker", "0") in labels}
    assert buckets == {"60.0": 5, "300.0": 5, "900.0": 45, "3600.0": 345, "21600.0": 2345,
                       "86400.0": 8345, "604800.0": 11345, "2592000.0": 12345, "+Inf": 12345}
    # the quiet worker: no next due time and no overdue figures, the rest as usual
    w1 = (("worker", "1"),)
    assert ("frontier_crawl_recrawl_next_due_seconds", w1) not in got
    assert not [k for k in got if k[0].endswith("overdue_seconds") and ("worker", "1") in k[1]]
    assert got[("frontier_crawl_recrawl_due_urls", w1)] == 0


def test_no_recrawl_metrics_without_recrawl() -> None:
    """Without recrawl (no ``freshness``, or ``{"enabled": false}``) the exposition is as it
    was: no recrawl family at all."""
    for fresh in (None, {"enabled": False}):
        text = render_metrics([snapshot(fresh)])
        assert b"recrawl" not in text
    assert render_metrics([snapshot(None)]) == render_metrics([snapshot({"enabled": False})])


def test_odd_freshness_does_not_break_a_scrape() -> None:
    """A partial or malformed dict (a newer or older crawl) gives what it can, no error."""
    odd = {"enabled": True, "scheduled": "many", "visits": None,
           "intervals": {"le_s": [60, None], "counts": [1]}}  # fmt: skip
    got = samples(render_metrics([snapshot(odd)]))
    assert ("frontier_crawl_recrawl_scheduled_urls", (("worker", "0"),)) not in got
    assert not [k for k in got if k[0] == "frontier_crawl_recrawl_interval_urls"]
    visits = [v for k, v in got.items() if k[0] == "frontier_crawl_recrawl_visits_total"]
    assert visits == [0.0] * 6


def console_text(report: dict[str, Any]) -> str:
    console = Console(record=True, width=160, color_system=None)
    render_report(report, console)
    return " ".join(console.export_text().split())


def test_console_report_shows_freshness() -> None:
    text = console_text({"fetched": 3, "freshness": FRESHNESS})
    assert "revisit schedule 12,345 URLs, 12 due now, next in 4.2 s" in text
    assert "overdue (revisits, last 5 min) p50 1.2 s, p99 8.0 s" in text
    assert "visits (all runs) new 100, changed 40, unchanged 300, not_modified 250" in text
    assert "per hour 400 changes, 5,900 revisits, 1,000 new pages" in text
    assert "<= 1 min 5, <= 15 min 40, <= 1 h 300" in text and "<= 30 d 1,000" in text
    quiet = console_text({"freshness": {**QUIET, "due_now_capped": True, "due_now": 100000}})
    assert "100,000+ due now, none scheduled" in quiet and "no revisit started" in quiet
    for off in ({}, {"freshness": {"enabled": False}}):
        assert "revisit" not in console_text(off)


def test_interval_labels() -> None:
    bounds = FRESHNESS["intervals"]["le_s"]
    labels = [interval_label(b, bounds[i - 1] if i else None) for i, b in enumerate(bounds)]
    assert labels == ["<= 1 min", "<= 5 min", "<= 15 min", "<= 1 h", "<= 6 h", "<= 1 d",
                      "<= 7 d", "<= 30 d", "> 30 d"]  # fmt: skip
    assert interval_label(90) == "<= 90 s" and interval_label(None) == "longer"


def test_report_html_has_a_freshness_section_only_when_enabled() -> None:
    page = render_report_html({"fetched": 3, "freshness": FRESHNESS})
    section = page[page.index("Freshness (continuous crawl)"):]
    for shown in ("12,345", "URLs scheduled", "4.2 s", "1.2 s", "8.0 s", "400", "5,900",
                  "&gt; 30 d", "&lt;= 6 h", "2,000", "not_modified", "Visits by result"):
        assert shown in section, shown
    assert "<td>&lt;= 5 min</td><td class=\"n\">0</td>" in section  # empty buckets shown too
    assert "freshness" not in page[page.index("All figures"):]  # not repeated as a raw dict
    quiet = render_report_html({"freshness": QUIET})
    assert "next due in" in quiet and '<div class="v">none</div>' in quiet
    for off in ({"fetched": 3}, {"fetched": 3, "freshness": {"enabled": False}}):
        assert "Freshness" not in render_report_html(off)


def test_status_html_passes_freshness_through(tmp_path: Path) -> None:
    """``ctl status --html`` draws the running crawl's freshness from its status."""
    status = empty_status("running")
    status["freshness"] = copy.deepcopy(FRESHNESS)
    page = write_status_html(status, tmp_path).read_text()
    assert "Freshness (continuous crawl)" in page and "12,345" in page
    assert "Freshness" not in write_status_html(empty_status("running"), tmp_path).read_text()


def test_ctl_status_prints_freshness() -> None:
    """``frontier-crawl ctl status``: the freshness lines after the counters, only with
    recrawl."""
    status = empty_status("running")
    plain = summary(status)
    assert "freshness" not in plain and "revisit" not in plain
    status["freshness"] = FRESHNESS
    lines = summary(status).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("freshness"))
    assert lines[start] == "freshness  revisit schedule: 12,345 URLs, 12 due now, next in 4.2 s"
    assert lines[start + 1] == "           overdue (revisits, last 5 min): p50 1.2 s, p99 8.0 s"
    assert lines[start + 3].endswith("per hour: 400 changes, 5,900 revisits, 1,000 new pages")
