"""A spider request's callback, meta and priority stored with its URL: block codec, memory
buffer, LMDB spill, retries, restarts, worker link batches, and the layout upgrade."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from frontier_crawl.frontier import Frontier, StateMismatch
from frontier_crawl.frontier.frontier import LAYOUT_VERSION
from frontier_crawl.frontier.mailbox import decode_links, encode_links
from frontier_crawl.frontier.options import FrontierOptions
from frontier_crawl.frontier.politeness import DelayPolicy
from frontier_crawl.frontier.store import QueueEntry, decode_block, encode_block
from frontier_crawl.frontier.traps import Limits

A = "http://a.test"


def make(
    tmp_path: Path, memory_urls: int = 1000, min_delay_s: float = 1.0
) -> tuple[Frontier, None]:
    policy = DelayPolicy(min_delay_s=min_delay_s, max_delay_s=30.0, delay_factor=0.0,
                         max_crawl_delay_s=0.0, backoff_s=0.0, max_backoff_s=600.0)  # fmt: skip
    f = Frontier(tmp_path / "state", FrontierOptions(
        allow_domains=["a.test", "b.test"],
        exclude=[], limits=Limits(max_depth=5), max_pages=0, policy=policy, max_host_errors=3,
        connections_per_host=1, obey_robots=False, user_agent="testbot", robots_ttl_s=3600.0,
        robots_retry_s=10.0, robots_attempts=2, memory_urls=memory_urls,
        map_size=1 << 26,
    ))  # fmt: skip
    return f, None


META = msgspec.msgpack.encode({"from": "http://a.test/", "level": 2})


def test_block_round_trip_with_and_without_requests() -> None:
    entries = [
        QueueEntry("http://a.test/1", 1),
        QueueEntry("http://a.test/2", 2, 1, 0, "http://a.test/", "parse_page", META, 3),
        QueueEntry("http://b.test/x", 1, 0, 2, None, "parse_detail", b"", 0),
        QueueEntry("http://a.test/3", 1, 0, 0, "http://a.test/1", "", META, 0),
    ]
    value = encode_block("http://a.test", entries, ref_host=lambda origin: -1)
    decoded, mask = decode_block("http://a.test", value)
    assert decoded == entries and mask == 0


def test_a_plain_entry_costs_what_it_did() -> None:
    """No callback, meta or priority: the stored item is the same msgpack array as before
    they existed (two items for a URL with no referrer, hops or attempt)."""
    plain = encode_block("http://a.test", [QueueEntry("http://a.test/1", 1)])
    assert plain == bytes((1, 0, 0)) + msgspec.msgpack.encode([[b"/1", 1]])


def test_callback_and_meta_survive_memory_spill_retry_and_restart(tmp_path: Path) -> None:
    f, _ = make(tmp_path, memory_urls=2, min_delay_s=0.0)
    with f.batch():
        f.add([f"{A}/plain"], depth=0)
        f.add([f"{A}/p{i}" for i in range(5)], depth=1, referrer=f"{A}/", now=0.0,
              callback="parse_page", meta=META, priority=-2)  # fmt: skip
    assert f.view.spilled > 0  # some of them live only in LMDB (priority -2: after /plain)
    tickets = f.next_ready(1.0, 10)
    assert [(t.url, t.callback, t.meta, t.priority) for t in tickets] == [
        (f"{A}/plain", "", b"", 0)
    ]
    f.finish(tickets[0], 1.0)
    t = f.next_ready(2.0, 10)[0]
    assert (t.callback, t.meta, t.priority) == ("parse_page", META, -2)
    f.retry(t, 2.0, 0.0)  # a retry keeps them
    f.close()
    f, _ = make(tmp_path, memory_urls=2, min_delay_s=0.0)  # a restart reads them back
    seen = {}
    now = 3.0
    while f.pending:
        for ticket in f.next_ready(now, 10):
            seen[ticket.url] = (ticket.callback, ticket.meta, ticket.priority, ticket.attempt)
            f.finish(ticket, now)
        now += 1.0
    assert set(seen) == {f"{A}/p{i}" for i in range(5)}
    assert all(v[:3] == ("parse_page", META, -2) for v in seen.values())
    f.close()


def test_link_batches_carry_requests_and_plain_links_stay_four_items() -> None:
    plain = ("http://a.test/1", 1, None, 0, "", b"", 0)
    spider = ("http://a.test/2", 2, "http://a.test/", 1, "parse_page", META, 5)
    data = encode_links([plain, spider])
    assert msgspec.msgpack.decode(data)[0] == ["http://a.test/1", 1, None, 0]
    assert decode_links(data) == [plain, spider]


def test_layout_4_is_continued_and_a_newer_one_refused(tmp_path: Path) -> None:
    f, _ = make(tmp_path)
    f.add([f"{A}/1"], depth=0)
    f.close()
    identity = tmp_path / "state" / "identity.json"
    mine = json.loads(identity.read_text())
    identity.write_text(json.dumps({**mine, "layout_version": 4}))
    f, _ = make(tmp_path)
    assert f.pending == 1  # the old crawl's URL is still queued
    f.close()
    assert json.loads(identity.read_text())["layout_version"] == LAYOUT_VERSION
    identity.write_text(json.dumps({**mine, "layout_version": LAYOUT_VERSION + 1}))
    with pytest.raises(StateMismatch, match="newer version"):
        make(tmp_path)
    identity.write_text(json.dumps({**mine, "layout_version": 3}))
    with pytest.raises(StateMismatch, match="layout version 3"):
        make(tmp_path)


def test_in_scope_links_canonical_deduplicated_and_admitting_nothing(tmp_path: Path) -> None:
    f, _ = make(tmp_path)
    links = [f"{A}/b", "HTTP://A.TEST:80/b#x", "http://c.test/out-of-scope", "mailto:x@y",
             "http://b.test/1", f"{A}/b"]  # fmt: skip
    for _ in range(2):  # the second time from the remembered answers
        assert f.in_scope_links(links) == [f"{A}/b", "http://b.test/1"]
    assert f.pending == 0  # nothing admitted
    assert f.add([f"{A}/b"], depth=1) == 1  # nor marked seen
    f.close()
