"""Continuous crawling as the operator sees it: the bottleneck's sentences, the freshness rates
(engine/observe.py), the workers' freshness merged (workers/merge.py), and the items' fetch time
(spider/host.py ``item_time_field``)."""

from __future__ import annotations

import pytest

from frontier_crawl.control.status import Signals, classify
from frontier_crawl.engine.observe import FRESHNESS_WINDOW_S, FreshnessRates
from frontier_crawl.spider import Spider, SpiderHost
from frontier_crawl.workers.merge import merge_freshness, merge_status
from tests.unit.spider_helpers import page


def test_nothing_due_nothing_queued_says_when_the_next_url_is_due() -> None:
    sig = Signals(concurrency=4, next_due_s=42.4)
    # issue 31 item 3: not "idle" (the README's word for a finished crawl), and no bare
    # "loading"
    assert classify(sig).as_dict() == {
        "name": "schedule",
        "detail": "next URL due in 42 s (a continuous crawl waiting for its next revisit)",
    }
    due = Signals(concurrency=4, revisits_due=2, next_due_s=0.0)  # due, not yet in a host
    assert classify(due).as_dict() == {
        "name": "schedule",
        "detail": "revisits due: 2 URLs, being read from the schedule into their hosts' queues",
    }
    # without a schedule (recrawl off): as before
    assert classify(Signals(concurrency=4)).detail == "nothing queued and nothing in flight"


def test_revisits_waiting_on_politeness_say_so() -> None:
    sig = Signals(concurrency=4, queued=3, hosts_total=2, hosts_waiting=2, revisits_due=3,
                  next_due_s=0.0)  # fmt: skip
    got = classify(sig)
    assert got.name == "politeness"
    assert got.detail == "revisits due: 3 URLs, 2 hosts waiting on their delay"


def test_freshness_rates_per_hour_over_the_window() -> None:
    rates = FreshnessRates()
    visits = {"new": 10, "changed": 0, "unchanged": 0, "not_modified": 0, "gone": 0}
    assert rates.rates(100.0, visits) == {"changes": 0.0, "revisits": 0.0, "new_pages": 0.0}
    later = {"new": 20, "changed": 5, "unchanged": 10, "not_modified": 4, "gone": 1}
    # 36 s later: 10 new pages, 5 changes, 20 revisits -> x100 per hour
    assert rates.rates(136.0, later) == {"changes": 500.0, "revisits": 2000.0,
                                         "new_pages": 1000.0}  # fmt: skip
    # more than the window later: the rate is over the last hour only
    t = 136.0
    for _ in range(int(FRESHNESS_WINDOW_S / 10) + 20):
        t += 10.0
        got = rates.rates(t, later)
    assert got == {"changes": 0.0, "revisits": 0.0, "new_pages": 0.0}


def _fresh(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "enabled": True, "scheduled": 10, "due_now": 1, "due_now_capped": False,
        "next_due_s": 5.0, "overdue_p50_s": 1.0, "overdue_p99_s": 2.0,
        "visits": {"new": 10, "changed": 2}, "per_hour": {"changes": 7.0},
        "intervals": {"le_s": [60, None], "counts": [4, 6]},
    }  # fmt: skip
    return {**base, **kw}


def test_workers_freshness_merged() -> None:
    got = merge_freshness([_fresh(), _fresh(next_due_s=2.0, overdue_p99_s=None, due_now=0)])
    assert got["scheduled"] == 20 and got["due_now"] == 1
    assert got["next_due_s"] == 2.0 and got["overdue_p99_s"] == 2.0
    assert got["visits"] == {"new": 20, "changed": 4} and got["per_hour"] == {"changes": 14.0}
    assert got["intervals"] == {"le_s": [60, None], "counts": [8, 12]}
    assert merge_freshness([_fresh(), {"enabled": False}]) == {"enabled": False}
    status = merge_status([{"freshness": _fresh()}, {"freshness": _fresh()}])
    assert status["freshness"]["intervals"]["counts"] == [8, 12]


class Items(Spider):
    def parse(self, response):  # type: ignore[no-untyped-def]
        yield {"n": 1}
        yield {"n": 2, "fetched_at": "kept?"}


@pytest.mark.parametrize("field", ["fetched_at", "seen", ""])
def test_items_carry_their_pages_fetch_time(field: str) -> None:
    host = SpiderHost(Items(), item_time_field=field)
    got = host.run(page(fetched_at=1_714_564_800.1239)).items
    if not field:
        assert got == [{"n": 1}, {"n": 2, "fetched_at": "kept?"}]
        return
    stamp = "2024-05-01T12:00:00.123Z"
    assert [item[field] for item in got] == [stamp, stamp]  # the page's, for every item
    assert got[0]["n"] == 1
    # a page without a fetch time (0.0) adds nothing
    assert host.run(page()).items[0] == {"n": 1}
