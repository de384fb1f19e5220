"""Host queues (frontier/hosts.py): the one transition, and counts that always equal a recount."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_crawl.frontier import Failure, HostState
from frontier_crawl.frontier.hosts import HostQueue, HostQueues
from frontier_crawl.frontier.store import QueueEntry
from tests.unit.test_frontier import make


def queued(origin: str, n: int = 1) -> HostQueue:
    host = HostQueue(origin)
    host.hot = [(b"k%d" % i, QueueEntry(f"{origin}/{i}", 0)) for i in range(n)]
    return host


def test_settle_places_a_host_by_its_facts() -> None:
    q = HostQueues(connections_per_host=1)
    host = q.add(queued("http://a.test"))
    q.settle(host, now=0.0)
    assert host.state is HostState.READY and list(q.ready) == [host]
    assert q.take_ready() is host and host.state is HostState.BUSY
    assert q.take_ready() is None
    host.next_at = 5.0
    q.settle(host, now=1.0)
    assert host.state is HostState.SNOOZED and host.wake_at == 5.0
    assert q.first_snoozed() is host
    host.in_flight = 1
    q.settle(host, now=1.0)
    assert host.state is HostState.BUSY and q.first_snoozed() is None  # its heap entry stale
    host.in_flight, host.hot = 0, None
    q.settle(host, now=9.0)
    assert host.state is HostState.EMPTY
    assert q.recount() == {s: q.count(s) for s in HostState}


def test_ready_to_ready_keeps_one_fifo_entry_and_stale_entries_are_skipped() -> None:
    q = HostQueues(connections_per_host=1)
    a, b = q.add(queued("http://a.test")), q.add(queued("http://b.test"))
    for host in (a, a, b, a):
        q.settle(host, now=0.0)
    assert list(q.ready) == [a, b]
    q.move(a, HostState.BLOCKED)  # a's FIFO entry is stale now
    assert q.take_ready() is b and q.take_ready() is None
    assert q.parked == {a.origin: a}


def test_blocked_names_park_hosts_and_leaving_unparks() -> None:
    q = HostQueues(connections_per_host=1)
    host = q.add(queued("http://a.test:8080"))
    q.blocked.add("a.test")
    q.settle(host, now=0.0)
    assert host.state is HostState.BLOCKED and q.parked == {host.origin: host}
    q.blocked.clear()
    q.settle(host, now=0.0)
    assert host.state is HostState.READY and not q.parked


def test_retired_is_final_and_unparks() -> None:
    q = HostQueues(connections_per_host=1)
    host = q.add(queued("http://a.test"))
    q.blocked.add("a.test")
    q.settle(host, now=0.0)
    q.move(host, HostState.RETIRED)
    assert not q.parked and q.count(HostState.RETIRED) == 1 and q.count(HostState.BLOCKED) == 0
    for state in HostState:
        q.move(host, state)
        assert host.state is HostState.RETIRED
    q.settle(host, now=0.0)
    assert host.state is HostState.RETIRED
    assert q.recount() == {s: q.count(s) for s in HostState}


def test_wake_settles_due_hosts_only() -> None:
    q = HostQueues(connections_per_host=1)
    hosts = [q.add(queued(f"http://h{i}.test")) for i in range(3)]
    for i, host in enumerate(hosts):
        host.next_at = float(i + 1)
        q.settle(host, now=0.0)
    q.wake(2.0)
    assert [h.state for h in hosts] == [HostState.READY, HostState.READY, HostState.SNOOZED]
    assert q.first_snoozed() is hosts[2]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 7), st.integers(0, 4)), max_size=60))
def test_counts_equal_a_recount_after_any_moves(ops: list[tuple[int, int, int]]) -> None:
    q = HostQueues(connections_per_host=2)
    hosts = [q.add(HostQueue(f"http://h{i}.test")) for i in range(4)]
    states = list(HostState)
    now = 0.0
    for which, op, arg in ops:
        host = hosts[which]
        now += 0.5
        if op < len(states) and op != 0:
            q.move(host, states[op], wake=now + arg)
        elif op == 0:  # new facts, then placed by them
            host.in_flight = arg % 3
            host.hot = [(b"k", QueueEntry("u", 0))] * arg or None
            host.next_at = now + arg - 2
            q.settle(host, now)
        else:
            q.take_ready()
            q.wake(now)
        assert q.recount() == {s: q.count(s) for s in HostState}
        assert set(q.parked.values()) == {h for h in hosts if h.state is HostState.BLOCKED}


@pytest.mark.parametrize("seed", range(4))
def test_frontier_counts_equal_a_recount_through_a_crawl(seed: int) -> None:
    """Every frontier path that moves hosts (admit, hand out, complete, retry, Retry-After
    holds, block/unblock, host delays, retirement, robots) keeps the counts exact."""
    rng = random.Random(seed)
    origins = [f"http://{h}.test" for h in ("a", "b", "sub.a", "x.b")]
    with tempfile.TemporaryDirectory() as tmp:
        f, _rejected = make(Path(tmp), min_delay_s=0.5, backoff_s=1.0, max_depth=50,
                            connections_per_host=rng.choice((1, 2)))  # fmt: skip
        queues = f._queues  # the frontier's own host queues: recounted against its counts
        now, out, n = 0.0, [], 0
        try:
            for _step in range(300):
                now += rng.choice((0.0, 0.1, 0.7, 2.0))
                op = rng.randrange(10)
                if op < 3:
                    n += 1
                    f.add([f"{rng.choice(origins)}/{n}/{i}" for i in range(3)], depth=1, now=now)
                elif op < 6:
                    out.extend(f.next_ready(now, rng.randrange(1, 4)))
                elif op < 8 and out:
                    t = out.pop(rng.randrange(len(out)))
                    if t.robots:
                        f.robots_done(t, now, 404, b"")
                    elif rng.random() < 0.3:
                        f.retry(t, now, 1.0, 0.1, rng.choice(list(Failure)))
                    else:
                        f.finish(t, now, 0.1, rng.choice(list(Failure)),
                                   hold_s=rng.choice((0.0, 3.0)))  # fmt: skip
                elif op == 8:
                    name = rng.choice(("a.test", "b.test"))
                    if rng.random() < 0.5:
                        f.holds.block(name, now)
                    else:
                        f.holds.unblock(name, now)
                else:
                    name = rng.choice(("sub.a.test", "x.b.test"))
                    if rng.random() < 0.7:
                        f.holds.set_host_delay(name, rng.choice((None, 0.2, 3.0)), now)
                    else:
                        f.retire(f"http://{name}", "host-unreachable")
                assert queues.recount() == {s: queues.count(s) for s in HostState}
                sig = f.view.host_signals(now)
                assert sig.retired == queues.recount()[HostState.RETIRED]
        finally:
            f.close()


def _placed(q: HostQueues) -> tuple[object, ...]:
    """Where every host is: its state and facts, the counts, the FIFO, the heap, the parked."""
    hosts = [(h.origin, h.hid, h.state, h.unloaded, h.next_at, h.in_flight) for h in q]
    return (hosts, q.recount(), {s: q.count(s) for s in HostState},
            [h.origin for h in q.ready], list(q.snoozed), sorted(q.parked))  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=30),
    st.sets(st.integers(0, 5), max_size=3),
)
def test_restore_places_hosts_as_add_and_settle_at_time_0(
    rows: list[tuple[int, int]], blocked: set[int]
) -> None:
    """``HostQueues.restore`` (a restart's hosts, built in one pass) leaves the queues exactly
    as ``add`` then ``settle(host, 0.0)`` host by host: the states, counts, the FIFO's order,
    the heap, the parked set; blocked names are parked and hosts without URLs EMPTY."""
    table = [(hid, f"http://h{name}.test:{hid}", count)
             for hid, (name, count) in enumerate(rows)]  # fmt: skip
    names = {f"h{name}.test" for name in blocked}
    want, got = HostQueues(1), HostQueues(1)
    want.blocked, got.blocked = set(names), set(names)
    for hid, origin, count in table:
        host = want.add(HostQueue(origin, hid))
        host.unloaded = count
        want.settle(host, 0.0)
    built = got.restore(iter(table))
    assert [h.origin for h in built] == [origin for _, origin, _ in table]
    assert _placed(got) == _placed(want)


def test_restore_refuses_a_damaged_table_and_leaves_the_collector_as_it_was() -> None:
    """A row without an origin (a queue block of an unknown host id) or an origin under two
    ids: ``StateMismatch``; the garbage collector is enabled again after, even then, and left
    disabled if it was."""
    import gc

    from frontier_crawl.frontier import StateMismatch

    assert gc.isenabled()
    with pytest.raises(StateMismatch, match="unknown host id 7"):
        HostQueues(1).restore([(1, "http://a.test", 2), (7, None, 1)])
    assert gc.isenabled()
    with pytest.raises(StateMismatch, match="two host ids"):
        HostQueues(1).restore([(1, "http://a.test", 2), (2, "http://a.test", 1)])
    assert gc.isenabled()
    gc.disable()
    try:
        q = HostQueues(1)
        assert len(q.restore([(1, "http://a.test", 2)])) == 1 and not gc.isenabled()
    finally:
        gc.enable()
    assert q.count(HostState.READY) == 1 and list(q.ready) == [q.hosts["http://a.test"]]


def test_hosts_resumed_with_per_ip_join_their_known_group(tmp_path: Path) -> None:
    """A restart's hosts (``HostQueues.restore``) join the IP group of their known address, as
    hosts made by an add do: two hosts of one IP share one connection after the reopen."""
    ips = {"a.test": "10.0.0.1", "b.test": "10.0.0.1"}
    f, _ = make(tmp_path, min_delay_s=1.0, per_ip=True, known_ips=ips)
    f.add(["http://a.test/1", "http://a.test/2", "http://b.test/1"], depth=0)
    f.close()
    g, _ = make(tmp_path, min_delay_s=1.0, per_ip=True, known_ips=ips)
    assert g.pending == 3 and g.view.host_state("http://a.test") is HostState.READY
    first = g.next_ready(0.0, 5)
    assert len(first) == 1  # one connection for the shared IP
    g.finish(first[0], 0.5)
    assert g.next_ready(1.0, 5) == []  # the IP's delay runs from the end of that response
    assert len(g.next_ready(1.5, 5)) == 1
    g.close()


def test_a_reopen_refuses_queued_urls_of_a_host_without_an_origin(tmp_path: Path) -> None:
    """A count whose host id has no origin stored (a damaged ``b"hosts"``): the reopen raises
    ``StateMismatch`` while its rows are read, reported as ``DamagedState`` (its files closed),
    as before ``restore``; the state is unchanged, and the frontier reopens once the origin is
    back (the garbage collector enabled again in between)."""
    import gc

    import lmdb

    from frontier_crawl.frontier import DamagedState

    f, _ = make(tmp_path)
    f.add(["http://a.test/1", "http://b.test/1", "http://b.test/2"], depth=0)
    f.close()
    env = lmdb.open(str(tmp_path / "state" / "frontier.lmdb"), max_dbs=32, map_size=1 << 26)
    with env.begin(write=True) as txn:
        hosts = env.open_db(b"hosts", txn=txn)
        (key,) = [
            bytes(k) for k, v in txn.cursor(db=hosts) if k[:1] == b"i" and v == b"http://b.test"
        ]
        origin = txn.pop(key, db=hosts)
    env.close()
    with pytest.raises(DamagedState, match="unknown host id"):
        make(tmp_path)
    assert gc.isenabled()
    env = lmdb.open(str(tmp_path / "state" / "frontier.lmdb"), max_dbs=32, map_size=1 << 26)
    with env.begin(write=True) as txn:
        txn.put(key, origin, db=env.open_db(b"hosts", txn=txn))
    env.close()
    g, _ = make(tmp_path)
    assert g.pending == 3 and g.view.host_state("http://b.test") is HostState.READY
    g.close()
