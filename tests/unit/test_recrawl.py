"""Continuous crawling, the frontier's side: the policy, the schedule in real LMDB, the pump."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import lmdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

from frontier_crawl.config import ConfigError, parse
from frontier_crawl.frontier import Completion, Frontier, LastCapture, Ticket, changed
from frontier_crawl.frontier.recrawl import (
    DUE_DB,
    DUE_KEY_LEN,
    KINDS,
    VISITS_DB,
    Bounds,
    HostRevisits,
    RecrawlPolicy,
    Visit,
    decode_due_key,
    due_key,
    next_interval,
    plan,
    visit_kind,
)
from frontier_crawl.frontier.urls import url_digest
from tests.unit.test_frontier import A, B, make

BOUNDS = Bounds(100.0, 10.0, 1000.0)
POLICY = RecrawlPolicy(default=BOUNDS, unchanged_factor=1.5, changed_factor=0.5, gone_visits=2)


class Clock:
    """The wall clock the frontier reads (``wall_clock`` hook), moved by the test."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def recrawling(tmp_path: Path, clock: Clock, **overrides: Any) -> Frontier:
    overrides.setdefault("recrawl", POLICY)
    overrides.setdefault("min_delay_s", 0.0)
    f, _ = make(tmp_path, wall_clock=clock, **overrides)
    return f


def ok(now: float, clock: Clock, **facts: Any) -> Completion:
    facts.setdefault("status", 200)
    return Completion(now, fetched_at=clock.now, **facts)


def visit_of(f: Frontier, url: str) -> Visit | None:
    rc = f._files.recrawl
    assert rc is not None
    with f._env.begin() as txn:
        return rc.visit_of(txn, url)


def fetch_all(f: Frontier, now: float, clock: Clock, **facts: Any) -> list[Ticket]:
    """Every ticket ready at ``now`` (one per host per round), completed with ``facts``."""
    out = []
    while tickets := f.next_ready(now, 100):
        for t in tickets:
            f.complete(t, ok(now, clock, **facts))
        out += tickets
        now += 0.001
    return out


# ----------------------------------------------------------------------------- policy


@pytest.mark.parametrize(
    ("kind", "interval", "expected"),
    [
        ("new", 0.0, 100.0),
        ("new", 500.0, 100.0),
        ("unchanged", 100.0, 150.0),
        ("not_modified", 100.0, 150.0),
        ("gone", 100.0, 150.0),
        ("changed", 100.0, 50.0),
        ("failed", 100.0, 100.0),
        ("unchanged", 900.0, 1000.0),  # clamped to max
        ("changed", 12.0, 10.0),  # clamped to min
        ("failed", 5000.0, 1000.0),  # an interval from an older config: clamped too
    ],
)
def test_next_interval(kind: str, interval: float, expected: float) -> None:
    assert next_interval(kind, interval, BOUNDS, 1.5, 0.5) == expected


@given(
    st.sampled_from(KINDS),
    st.floats(0.0, 1e8),
    st.floats(1.0, 10.0),
    st.floats(0.01, 1.0),
)
def test_next_interval_stays_within_the_bounds(
    kind: str, interval: float, up: float, down: float
) -> None:
    got = next_interval(kind, interval, BOUNDS, up, down)
    assert BOUNDS.min_s <= got <= BOUNDS.max_s


def test_changed() -> None:
    last = LastCapture(digest=b"a" * 20, visits=1)
    assert changed(None, 200, b"a" * 20) is None
    assert changed(last, 304, b"") is False
    assert changed(last, 200, b"a" * 20) is False
    assert changed(last, 200, b"b" * 20) is True
    assert changed(last, 404, b"") is True
    assert changed(LastCapture(), 200, b"") is True  # no digest: nothing to compare


def test_visit_kinds() -> None:
    prev = Visit("http://a.test/", digest=b"a" * 20, status=301, location="http://a.test/b")
    assert visit_kind(None, 500, None, b"", "") == "new"
    assert visit_kind(prev, 200, None, b"a" * 20, "") == "unchanged"
    assert visit_kind(prev, 200, None, b"c" * 20, "") == "changed"
    assert visit_kind(prev, 304, None, b"", "") == "not_modified"
    assert visit_kind(prev, 410, None, b"", "") == "gone"
    assert visit_kind(prev, 0, "timeout", b"", "") == "failed"
    assert visit_kind(prev, 503, None, b"", "") == "failed"
    assert visit_kind(prev, 429, None, b"", "") == "failed"
    assert visit_kind(prev, 301, None, b"", "http://a.test/b") == "unchanged"
    assert visit_kind(prev, 301, None, b"", "http://a.test/c") == "changed"
    assert visit_kind(prev, 302, None, b"", "http://a.test/b") == "changed"


def test_rules_first_match_wins_and_initial_defaults_to_the_clamped_global() -> None:
    raw = {
        "crawl": {"seeds": ["http://a.test/"]},
        "recrawl": {
            "enabled": True,
            "initial_interval_s": 7200,
            "rules": [
                {"pattern": "/news/", "min_interval_s": 60, "max_interval_s": 3600},
                {"pattern": "/news/|/blog/", "min_interval_s": 5, "max_interval_s": 50,
                 "initial_interval_s": 20},
            ],
        },
    }  # fmt: skip
    p = RecrawlPolicy.from_settings(parse(raw).recrawl)
    assert p.bounds_for("http://a.test/news/1") == Bounds(3600.0, 60.0, 3600.0)
    assert p.bounds_for("http://a.test/blog/1") == Bounds(20.0, 5.0, 50.0)
    assert p.bounds_for("http://a.test/about") == Bounds(7200.0, 3600.0, 2_592_000.0)


@pytest.mark.parametrize(
    ("recrawl", "expected"),
    [
        ({"min_interval_s": 10, "max_interval_s": 5, "initial_interval_s": 7},
         "recrawl.min_interval_s: 10.0 is more than max_interval_s 5.0"),
        ({"initial_interval_s": 1}, "recrawl.initial_interval_s: 1.0 is outside"),
        ({"changed_factor": 0}, "recrawl.changed_factor: must be > 0.0, got 0"),
        ({"changed_factor": 1.5}, "recrawl.changed_factor: must be <= 1.0, got 1.5"),
        ({"unchanged_factor": 0.5}, "recrawl.unchanged_factor: must be >= 1.0, got 0.5"),
        ({"revisit_share": 2}, "recrawl.revisit_share: must be <= 1.0, got 2"),
        ({"gone_visits": -1}, "recrawl.gone_visits: must be >= 0, got -1"),
        ({"rules": [{"pattern": "("}]}, "recrawl.rules[0].pattern: invalid regular expression"),
        ({"rules": [{"patern": "x"}]}, "recrawl.rules[0].patern: unknown key (did you mean"),
        ({"rules": [{"pattern": "x", "min_interval_s": 9, "max_interval_s": 3}]},
         "recrawl.rules[0].min_interval_s: 9.0 is more than max_interval_s 3.0"),
        ({"rules": [{"pattern": "x", "min_interval_s": 1e7}]},
         "recrawl.rules: rule 0 ('x') has min_interval_s"),
        ({"rules": [{"pattern": "x", "max_interval_s": 10, "initial_interval_s": 20}]},
         "recrawl.rules[0].initial_interval_s: 20.0 is outside"),
    ],
)  # fmt: skip
def test_bad_recrawl_settings_name_the_key(recrawl: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse({"crawl": {"seeds": ["http://a.test/"]}, "recrawl": recrawl})
    assert str(err.value).startswith(expected), str(err.value)


def _ticket(url: str = "http://a.test/p", last: LastCapture | None = None) -> Ticket:
    return Ticket(b"k", "http://a.test", url, 2, referrer="http://a.test/", callback="cb",
                  meta=b"\x80", priority=3, last=last)  # fmt: skip


def test_plan_keeps_the_request_and_the_last_capture() -> None:
    kind, first = plan(None, _ticket(), Completion(0.0, 200, etag='"1"', digest=b"a" * 20,
                       record_id="<r1>", fetched_at=50.0), POLICY, 100.0)  # fmt: skip
    assert kind == "new" and first is not None
    assert (first.depth, first.referrer, first.callback, first.meta, first.priority) == (
        2, "http://a.test/", "cb", b"\x80", 3)  # fmt: skip
    assert (first.etag, first.digest, first.record_id, first.date) == ('"1"', b"a" * 20,
                                                                       "<r1>", 50.0)  # fmt: skip
    assert first.uri == "" and first.last().uri == "http://a.test/p"  # stored once, as url
    assert (first.visits, first.interval_s, first.due) == (1, 100.0, 200.0)
    # a 304 keeps the capture (and takes the validators it sends)
    kind, again = plan(first, _ticket(last=first.last()),
                       Completion(0.0, 304, last_modified="Tue"), POLICY, 300.0)  # fmt: skip
    assert kind == "not_modified" and again is not None
    assert (again.etag, again.last_modified, again.record_id, again.date) == (
        '"1"', "Tue", "<r1>", 50.0)  # fmt: skip
    assert (again.visits, again.interval_s, again.due) == (2, 150.0, 450.0)
    # an unchanged 200 (a revisit record written: no record id) still refers to the first
    kind, same = plan(again, _ticket(last=again.last()),
                      Completion(0.0, 200, digest=b"a" * 20), POLICY, 500.0)  # fmt: skip
    assert kind == "unchanged" and same is not None and same.record_id == "<r1>"
    assert same.etag == ""  # the latest 2xx sent none
    # a changed page is the new capture; its interval shrinks
    kind, new = plan(same, _ticket(last=same.last()), Completion(0.0, 200, digest=b"b" * 20,
                     record_id="<r2>", fetched_at=600.0), POLICY, 600.0)  # fmt: skip
    assert kind == "changed" and new is not None
    assert (new.digest, new.record_id, new.date, new.interval_s) == (b"b" * 20, "<r2>", 600.0,
                                                                     112.5)  # fmt: skip
    # an error after retries: back at the interval it had, the capture untouched
    kind, failed = plan(new, _ticket(last=new.last()), Completion(0.0, 0, "timeout"), POLICY,
                        700.0)  # fmt: skip
    assert kind == "failed" and failed is not None
    assert (failed.interval_s, failed.due, failed.record_id) == (112.5, 812.5, "<r2>")


def test_plan_drops_a_url_gone_visits_in_a_row() -> None:
    kind, v = plan(None, _ticket(), Completion(0.0, 404), POLICY, 0.0)
    assert kind == "new" and v is not None and v.gone == 1
    kind, back = plan(v, _ticket(last=v.last()), Completion(0.0, 200), POLICY, 10.0)
    assert back is not None and back.gone == 0  # an answer in between resets the count
    kind, v1 = plan(back, _ticket(last=back.last()), Completion(0.0, 410), POLICY, 20.0)
    assert kind == "gone" and v1 is not None and v1.gone == 1
    kind, dropped = plan(v1, _ticket(last=v1.last()), Completion(0.0, 404), POLICY, 30.0)
    assert kind == "gone" and dropped is None
    never = RecrawlPolicy(default=BOUNDS, gone_visits=0)
    for _ in range(5):
        kind, v = plan(v, _ticket(), Completion(0.0, 404), never, 0.0)
        assert v is not None


def test_due_keys_sort_by_due_time() -> None:
    d1, d2 = url_digest("http://a.test/1"), url_digest("http://b.test/2")
    keys = [due_key(t, d) for t, d in [(5.0, d1), (1.5, d2), (1.5, d1), (1e9, d1)]]
    assert [decode_due_key(k)[0] for k in sorted(keys)] == [1500, 1500, 5000, 10**12]
    assert all(len(k) == DUE_KEY_LEN for k in keys)
    with pytest.raises(ValueError):
        decode_due_key(b"short")


def test_share_bounds_the_revisits_while_both_kinds_wait() -> None:
    for share, expected in [(0.5, 0.5), (0.25, 0.25), (0.8, 0.8)]:
        rv = HostRevisits()
        turns = [rv.turn(share) for _ in range(1000)]
        assert abs(sum(turns) / 1000 - expected) < 0.01
    assert not any(HostRevisits().turn(0.0) for _ in range(10))
    assert all(HostRevisits().turn(1.0) for _ in range(10))


# ----------------------------------------------------------------------------- the frontier


def test_without_recrawl_nothing_of_it_exists(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=0.0)
    f.add([f"{A}/x"], depth=0)
    (t,) = f.next_ready(0.0, 5)
    f.complete(t, Completion(1.0, 200))
    assert not f.view.continuous and f.view.freshness(0.0) == {"enabled": False}
    assert f.revisits.sitemap_lastmod([(f"{A}/x", 1.0)]) == 0
    assert f.pending == 0
    f.close()
    env = lmdb.open(str(tmp_path / "state" / "frontier.lmdb"), max_dbs=16, readonly=True)
    with env.begin() as txn:
        names = {bytes(k) for k, _ in txn.cursor()}
    env.close()
    assert VISITS_DB not in names and DUE_DB not in names  # a state as before recrawl


def test_a_fetched_url_comes_back_when_due_with_its_last_capture(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    assert f.view.continuous
    f.add([f"{A}/x"], depth=1, referrer=f"{A}/", callback="item", meta=b"\x81", priority=2)
    (t,) = f.next_ready(0.0, 5)
    assert t.last is None
    f.complete(t, ok(1.0, clock, etag='"v1"', last_modified="Mon", digest=b"a" * 20,
                     record_id="<r1>"))  # fmt: skip
    assert f.next_ready(2.0, 5) == []
    fresh = f.view.freshness(clock.now)
    assert fresh["scheduled"] == 1 and fresh["due_now"] == 0 and fresh["next_due_s"] == 100.0
    before = time.monotonic()
    wake = f.next_wake()
    assert wake is not None and before + 99.0 <= wake <= time.monotonic() + 100.0  # sleeps till due
    assert f.view.host_signals(2.0).next_due is None  # no host snoozed: the status does not fail
    clock.now += 99.0
    assert f.next_ready(3.0, 5) == []
    clock.now += 1.0
    (r,) = f.next_ready(4.0, 5)
    assert len(r.key) == DUE_KEY_LEN and r.url == f"{A}/x"
    assert (r.depth, r.referrer, r.callback, r.meta, r.priority) == (1, f"{A}/", "item",
                                                                     b"\x81", 2)  # fmt: skip
    assert r.last == LastCapture('"v1"', "Mon", b"a" * 20, "<r1>", f"{A}/x", clock.now - 100.0,
                                 1, 100.0, clock.now)  # fmt: skip
    f.complete(r, ok(5.0, clock, status=304))
    v = visit_of(f, f"{A}/x")
    assert v is not None and (v.visits, v.interval_s, v.due) == (2, 150.0, clock.now + 150.0)
    fresh = f.view.freshness(clock.now)
    assert fresh["visits"] == {"new": 1, "changed": 0, "unchanged": 0, "not_modified": 1,
                               "gone": 0, "failed": 0}  # fmt: skip
    assert fresh["overdue_p50_s"] == 0.0
    f.close()


def test_revisits_of_a_host_go_out_in_due_order(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    paths = [f"{A}/{i}" for i in range(6)]
    for i, url in enumerate(paths):  # first visits one second apart
        f.add([url], depth=0)
        (t,) = f.next_ready(float(i), 5)
        f.complete(t, ok(float(i), clock))
        clock.now += 1.0
    clock.now += 500.0
    got = [t.url for t in fetch_all(f, 100.0, clock)]
    assert got == paths
    f.close()


def test_the_next_visit_is_written_with_mark_done(tmp_path: Path) -> None:
    """complete(mark_done=False) stages the next visit; mark_done writes it (as the engine's
    group commit does once the WARC record is on its way)."""
    clock = Clock()
    f = recrawling(tmp_path, clock)
    f.add([f"{A}/x"], depth=0)
    (t,) = f.next_ready(0.0, 5)
    f.complete(t, ok(1.0, clock), mark_done=False)
    assert visit_of(f, f"{A}/x") is None
    f.mark_done([t.key])
    assert visit_of(f, f"{A}/x") is not None
    f.close()


def test_a_kill_before_the_commit_repeats_the_visit_and_after_it_keeps_it(
    tmp_path: Path,
) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    f.add([f"{A}/x"], depth=0)
    (t,) = f.next_ready(0.0, 5)
    f.complete(t, ok(1.0, clock, etag='"v1"', digest=b"a" * 20))
    clock.now += 100.0
    (r,) = f.next_ready(2.0, 5)
    # the revisit's completion is in a transaction that never commits (a kill before it)
    with pytest.raises(RuntimeError), f.batch():
        f.complete(r, ok(3.0, clock, etag='"v2"', digest=b"b" * 20))
        raise RuntimeError("killed before the commit")
    f.close(checkpoint=False)
    f = recrawling(tmp_path, clock)
    (again,) = f.next_ready(10.0, 5)  # still due: the visit happens again
    assert again.url == f"{A}/x" and again.last is not None and again.last.etag == '"v1"'
    f.complete(again, ok(11.0, clock, etag='"v2"', digest=b"b" * 20))
    f.close(checkpoint=False)  # committed, no checkpoint: a kill after the commit
    f = recrawling(tmp_path, clock)
    v = visit_of(f, f"{A}/x")
    assert v is not None and (v.etag, v.digest, v.visits) == ('"v2"', b"b" * 20, 2)
    assert v.due == clock.now + 50.0  # changed: 100 x 0.5
    assert f.next_ready(12.0, 5) == []
    assert f.view.freshness(clock.now)["visits"]["changed"] == 1  # the totals survive too
    f.close()


def test_gone_urls_leave_the_schedule(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    f.add([f"{A}/gone"], depth=0)
    (t,) = f.next_ready(0.0, 5)
    f.complete(t, ok(1.0, clock))
    clock.now += 100.0
    (r,) = f.next_ready(2.0, 5)
    f.complete(r, ok(3.0, clock, status=404))
    assert visit_of(f, f"{A}/gone") is not None
    clock.now += 150.0
    (r,) = f.next_ready(4.0, 5)
    f.complete(r, ok(5.0, clock, status=410))
    assert visit_of(f, f"{A}/gone") is None
    fresh = f.view.freshness(clock.now)
    assert fresh["scheduled"] == 0 and fresh["visits"]["gone"] == 2
    assert fresh["intervals"]["counts"] == [0] * 9  # type: ignore[index]
    clock.now += 10_000.0
    assert f.next_ready(6.0, 5) == []
    f.close()


def test_a_revisit_failing_transiently_is_retried_then_back_on_the_schedule(
    tmp_path: Path,
) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    f.add([f"{A}/x"], depth=0)
    (t,) = f.next_ready(0.0, 5)
    f.complete(t, ok(1.0, clock, etag='"v1"'))
    clock.now += 100.0
    now = 10.0
    attempts = []
    while True:
        got = f.next_ready(now, 5)
        if not got:
            wake = f.next_wake()
            assert wake is not None
            now = max(now + 0.5, wake) if wake < now + 10_000 else now + 0.5
            if now > 10_000:
                break
            continue
        (r,) = got
        assert r.last is not None and r.last.etag == '"v1"'
        attempts.append(r.attempt)
        f.complete(r, Completion(now, 0, "timeout", fetched_at=clock.now))
    assert attempts == [0, 1, 2, 3]  # the fetch's retries (3), then back to the schedule
    v = visit_of(f, f"{A}/x")
    assert v is not None and v.interval_s == 100.0 and v.etag == '"v1"'
    assert f.view.freshness(clock.now)["visits"]["failed"] == 1
    f.close()


def _schedule(f: Frontier, clock: Clock, urls: list[str]) -> None:
    """First visits of ``urls`` (one host after another), all due 100 s later."""
    f.add(urls, depth=0)
    fetch_all(f, 0.0, clock)


def test_revisit_share_of_a_busy_host(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    _schedule(f, clock, [f"{A}/old{i}" for i in range(20)])
    clock.now += 100.0
    f.add([f"{A}/new{i}" for i in range(20)], depth=0)
    kinds = [t.last is not None for t in fetch_all(f, 10.0, clock)]
    assert len(kinds) == 40
    assert 9 <= sum(kinds[:20]) <= 11  # half of the requests while both kinds wait
    f.close()
    clock.now += 1e6
    f = recrawling(tmp_path / "zero", clock, recrawl=RecrawlPolicy(default=BOUNDS,
                   revisit_share=0.0))  # fmt: skip
    _schedule(f, clock, [f"{A}/old{i}" for i in range(5)])
    clock.now += 100.0
    f.add([f"{A}/new{i}" for i in range(5)], depth=0)
    kinds = [t.last is not None for t in fetch_all(f, 10.0, clock)]
    assert kinds == [False] * 5 + [True] * 5  # new URLs first, then the revisits
    f.close()


def test_revisits_keep_the_politeness_of_new_urls(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock, min_delay_s=2.0)
    f.add([f"{A}/1", f"{A}/2"], depth=0)
    now = 0.0
    for _ in range(2):
        (t,) = f.next_ready(now, 5)
        f.complete(t, ok(now, clock))
        now += 2.0
    clock.now += 1000.0
    (r,) = f.next_ready(now, 5)
    assert r.last is not None
    assert f.next_ready(now + 0.5, 5) == []  # one connection: the other waits
    f.complete(r, ok(now + 0.5, clock))
    assert f.next_ready(now + 2.0, 5) == []  # min_delay_s from the end of the response
    (r2,) = f.next_ready(now + 2.5, 5)
    assert r2.last is not None
    f.close()


def test_the_pump_keeps_a_bounded_number_in_memory(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock, memory_urls=10_000)
    rc = f._files.recrawl
    assert rc is not None
    rc._memory = 50
    urls = [f"{h}/{i}" for h in (A, B) for i in range(150)]
    _schedule(f, clock, urls)
    clock.now += 1000.0
    seen: list[str] = []
    now = 10.0
    with f.batch():
        while True:
            got = f.next_ready(now, 1000)
            assert len(rc.present) <= 50
            if not got:
                break
            for t in got:
                assert t.last is not None
                seen.append(t.url)
                f.complete(t, ok(now, clock))
            now += 0.001
    assert sorted(seen) == sorted(urls)  # each once
    assert f.view.freshness(clock.now)["due_now"] == 0
    f.close()


def test_a_damaged_visit_record_is_dropped_with_an_error_not_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    _schedule(f, clock, [f"{A}/good", f"{A}/bad", f"{B}/orphan"])
    rc = f._files.recrawl
    assert rc is not None
    with f._env.begin(write=True) as txn:
        txn.put(url_digest(f"{A}/bad"), b"\xc1not msgpack", db=rc._visits)
        txn.delete(url_digest(f"{B}/orphan"), db=rc._visits)  # its due key stays
    clock.now += 100.0
    with caplog.at_level(logging.ERROR):
        got = fetch_all(f, 10.0, clock)
    assert [t.url for t in got] == [f"{A}/good"]
    assert rc.damaged == 2
    assert "unreadable visit record" in caplog.text and "without its visit record" in caplog.text
    assert f.view.freshness(clock.now)["scheduled"] == 1
    f.close()


def test_sitemap_lastmod_makes_an_older_capture_due_now(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    _schedule(f, clock, [f"{A}/a", f"{A}/b"])
    fetched = clock.now
    made = f.revisits.sitemap_lastmod([(f"{A}/a", fetched + 5.0), (f"{A}/b", fetched - 5.0),
                              (f"{A}/unknown", fetched + 5.0), ("not a url", 0.0)])  # fmt: skip
    assert made == 1
    clock.now += 1.0
    got = fetch_all(f, 10.0, clock)
    assert [t.url for t in got] == [f"{A}/a"]
    f.close()


def test_a_host_with_a_backlog_does_not_starve_the_others(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    rc = f._files.recrawl
    assert rc is not None
    rc._memory, rc._per_host_max = 40, 10
    slow = [f"{A}/{i}" for i in range(100)]
    f.add(slow, depth=0)
    for i in range(100):  # all of A due before B's, in this order
        (t,) = f.next_ready(float(i), 5)
        f.complete(t, ok(float(i), clock))
        clock.now += 0.01
    clock.now += 1.0
    _schedule(f, clock, [f"{B}/{i}" for i in range(5)])
    clock.now += 1000.0
    first = f.next_ready(200.0, 100)
    assert {t.origin for t in first} == {A, B}  # B is not behind A's 100
    assert len(rc.present) <= 20
    for t in first:
        f.complete(t, ok(200.0, clock))
    got = [t.url for t in first] + [t.url for t in fetch_all(f, 201.0, clock)]
    assert sorted(got) == sorted(slow + [f"{B}/{i}" for i in range(5)])  # each once
    assert [u for u in got if u.startswith(A)] == slow  # A's in due order
    f.close()


def test_a_host_loaded_by_the_pump_keeps_its_admitted_count(tmp_path: Path) -> None:
    """max_pages_per_host after a restart: a host first seen again through its revisits still
    counts the URLs earlier runs admitted."""
    clock = Clock()
    f = recrawling(tmp_path, clock, limits={"max_pages_per_host": 3})
    _schedule(f, clock, [f"{A}/1", f"{A}/2"])
    f.close()
    f = recrawling(tmp_path, clock, limits={"max_pages_per_host": 3})
    clock.now += 100.0
    assert len(f.next_ready(10.0, 5)) == 1  # a revisit: the pump made the host
    assert f.add([f"{A}/3", f"{A}/4"], depth=0) == 1
    f.close()


def test_a_reload_applies_the_new_policy_and_scope_to_the_next_visits(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    _schedule(f, clock, [f"{A}/keep", f"{A}/drop"])
    s = parse({
        "crawl": {"seeds": [f"{A}/"]},
        "scope": {"allow_domains": ["a.test", "b.test"], "exclude": ["/drop$"]},
        "politeness": {"min_delay_s": 0.0, "obey_robots": False},
        "recrawl": {"enabled": True, "initial_interval_s": 100, "min_interval_s": 10,
                    "max_interval_s": 1000, "rules": [{"pattern": "/keep", "max_interval_s": 20}]},
    })  # fmt: skip
    f.reconfigure(s, 5.0)
    clock.now += 100.0
    got = fetch_all(f, 10.0, clock, status=304)
    assert [t.url for t in got] == [f"{A}/keep"]  # /drop left the schedule when due
    v = visit_of(f, f"{A}/keep")
    assert v is not None and v.interval_s == 20.0  # 150, clamped by the rule's max
    assert visit_of(f, f"{A}/drop") is None
    f.close()


def test_revisits_of_hosts_on_one_ip_share_its_connection(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock, per_ip=True, known_ips={"a.test": "10.0.0.1",
                                                           "b.test": "10.0.0.1"})  # fmt: skip
    _schedule(f, clock, [f"{A}/1", f"{B}/1"])
    clock.now += 100.0
    (first,) = f.next_ready(10.0, 5)  # one connection per IP: B waits for A's
    assert first.last is not None
    assert f.next_ready(10.1, 5) == []
    f.complete(first, ok(10.2, clock))
    (second,) = f.next_ready(10.3, 5)
    assert second.last is not None and second.origin != first.origin
    f.close()


# ----------------------------------------------------------------------------- the clock steps back

DAY_S = 86_400.0


def _visited_a_day_ahead(tmp_path: Path, clock: Clock, urls: list[str]) -> None:
    """A crawl run with the wall clock a day ahead: each URL visited once, due an interval
    (100 s) after that visit, by the clock of then."""
    clock.now += DAY_S
    f = recrawling(tmp_path, clock)
    for url in urls:
        f.add([url], depth=0)
    fetch_all(f, 0.0, clock)
    v = visit_of(f, urls[0])
    assert v is not None and v.due == clock.now + 100.0
    f.close()
    clock.now -= DAY_S  # resumed with the right clock


def test_due_times_do_not_outlive_their_intervals_when_the_clock_steps_back(
    tmp_path: Path,
) -> None:
    """Issue 34 item 4: ``next URL due in 86385 s`` with intervals of seconds."""
    clock = Clock()
    urls = [f"{A}/{i}" for i in range(5)] + [f"{B}/{i}" for i in range(5)]
    _visited_a_day_ahead(tmp_path, clock, urls)
    f = recrawling(tmp_path, clock)
    assert f.next_ready(1.0, 100) == []  # (the pump brings the due times back)
    wake = f.next_wake()
    assert wake is not None and wake <= time.monotonic() + 100.0
    for url in urls:
        v = visit_of(f, url)
        assert v is not None and v.due <= clock.now + 100.0, (url, v.due - clock.now)
    fresh = f.view.freshness(clock.now)
    assert fresh["next_due_s"] is not None and fresh["next_due_s"] <= 100.0
    clock.now += 100.0
    assert sorted(t.url for t in fetch_all(f, 2.0, clock)) == sorted(urls)  # revisited
    f.close()
    f = recrawling(tmp_path, clock)  # and the next open finds nothing to bring back
    rc = f._files.recrawl
    assert rc is not None and rc.reclamped == 0
    f.close()


def test_a_step_back_during_the_run_brings_the_due_times_back(tmp_path: Path) -> None:
    clock = Clock()
    clock.now += DAY_S
    f = recrawling(tmp_path, clock)
    f.add([f"{A}/x", f"{B}/y"], depth=0)
    fetch_all(f, 0.0, clock)
    clock.now -= DAY_S  # NTP corrects the clock mid-run
    assert f.next_ready(1.0, 100) == []
    for url in (f"{A}/x", f"{B}/y"):
        v = visit_of(f, url)
        assert v is not None and v.due == clock.now + 100.0
    clock.now += 100.0
    assert len(fetch_all(f, 2.0, clock)) == 2
    f.close()


def test_a_state_without_the_clock_mark_has_its_impossible_due_times_brought_back(
    tmp_path: Path,
) -> None:
    """A state written before the latest wall time was kept: due keys beyond the longest
    interval any rule allows (1000 s here) are brought back at open."""
    clock = Clock()
    _visited_a_day_ahead(tmp_path, clock, [f"{A}/x"])
    env = lmdb.open(str(tmp_path / "state" / "frontier.lmdb"), max_dbs=32, subdir=True)
    with env.begin(write=True) as txn:
        txn.delete(b"recrawl:clock", db=env.open_db(b"blobs", txn=txn))
    env.close()
    f = recrawling(tmp_path, clock)
    f.next_ready(1.0, 100)
    v = visit_of(f, f"{A}/x")
    assert v is not None and v.due <= clock.now + 1000.0
    f.close()
