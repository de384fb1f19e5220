"""frontier/control.py and frontier/spacing.py on their own: host queues built by hand, the
operator's holds written to and read back from a real LMDB environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from frontier_crawl.frontier.completion import Failure
from frontier_crawl.frontier.control import BLOCKED_KEY, HOST_DELAYS_KEY, Control
from frontier_crawl.frontier.hosts import HostQueue, HostQueues, HostState, Ticket
from frontier_crawl.frontier.politeness import DelayPolicy
from frontier_crawl.frontier.robots import Rules
from frontier_crawl.frontier.spacing import Spacing
from frontier_crawl.frontier.store import QueueEntry
from frontier_crawl.frontier.txn import Transactions

POLICY = DelayPolicy(min_delay_s=1.0, max_delay_s=30.0, backoff_s=5.0, max_backoff_s=60.0)


def nothing() -> None:
    return None


def parts(env: lmdb.Environment, path: Path) -> tuple[HostQueues, Spacing, Control]:
    queues = HostQueues(1)
    spacing = Spacing(POLICY, 3, queues)
    tx = Transactions(env, path, flush=lambda _t: None, aborted=nothing, committed=nothing)
    return queues, spacing, Control(queues, spacing, tx.write, env.open_db(b"blobs"))


def queued(queues: HostQueues, origin: str, n: int = 2) -> HostQueue:
    host = queues.add(HostQueue(origin))
    host.hot = [(b"k%d" % i, QueueEntry(f"{origin}/{i}", 0)) for i in range(n)]
    queues.settle(host, 0.0)
    return host


@pytest.fixture
def env(tmp_path: Path) -> Iterator[lmdb.Environment]:
    env = lmdb.open(str(tmp_path / "env"), map_size=1 << 24, max_dbs=4)
    yield env
    env.close()


def test_a_block_parks_every_origin_of_the_name_and_survives_a_restart(
    env: lmdb.Environment, tmp_path: Path
) -> None:
    queues, _spacing, control = parts(env, tmp_path)
    plain, tls, other = (queued(queues, o) for o in ("http://a.test", "https://a.test:8443",
                                                       "http://b.test"))  # fmt: skip
    assert control.block("a.test", 0.0) == 4
    assert (plain.state, tls.state, other.state) == (HostState.BLOCKED,) * 2 + (HostState.READY,)
    assert control.blocked_hosts == ["a.test"] and control.blocked_queues == 2
    assert control.held_by_blocks == 4
    queues2, _s2, control2 = parts(env, tmp_path)  # a new run reads what the first wrote
    with env.begin() as txn:
        control2.load(txn)
    assert queues2.blocked == {"a.test"}
    assert control.unblock("a.test", 0.0) == 4 and control.unblock("a.test", 0.0) == 0
    assert plain.state is HostState.READY and control.blocked_hosts == []


def test_a_host_delay_respaces_the_host_and_is_read_back(
    env: lmdb.Environment, tmp_path: Path
) -> None:
    queues, spacing, control = parts(env, tmp_path)
    host = queued(queues, "http://a.test")
    host.next_at, host.delay_s = 11.0, 1.0  # started at 10.0 with the configured 1 s
    assert control.set_host_delay("a.test", 4.0, 10.0) == 1
    assert host.next_at == 14.0 and host.state is HostState.SNOOZED
    assert spacing.start_gap(host) == 4.0 and control.host_delays == {"a.test": 4.0}
    _q2, spacing2, control2 = parts(env, tmp_path)
    with env.begin() as txn:
        control2.load(txn)
    assert spacing2.host_delays["a.test"] == (4.0, spacing2.own(4.0))
    control.set_host_delay("a.test", None, 10.0)
    assert host.next_at == 11.0 and control.host_delays == {}


def test_unreadable_control_blobs_are_ignored(env: lmdb.Environment, tmp_path: Path) -> None:
    queues, spacing, control = parts(env, tmp_path)
    with env.begin(write=True, db=env.open_db(b"blobs")) as txn:
        txn.put(BLOCKED_KEY, b"{not json")
        txn.put(HOST_DELAYS_KEY, b'{"a.test": 2}')
    with env.begin() as txn:
        control.load(txn)
    assert queues.blocked == set() and spacing.host_delays == {}


def test_spacing_never_goes_below_the_crawl_delay_and_backs_off_on_host_wide_signals() -> None:
    queues = HostQueues(1)
    spacing = Spacing(POLICY, 2, queues)
    host = queued(queues, "http://a.test")
    assert spacing.start_gap(host) == 1.0
    host.rules = Rules("frontier-crawl", b"User-agent: *\nCrawl-delay: 3\n")
    spacing.host_delays["a.test"] = (0.5, spacing.own(0.5))
    assert spacing.start_gap(host) == 3.0  # the operator's delay never undercuts Crawl-delay
    ticket = Ticket(b"k0", host.origin, host.origin + "/0", 0)
    assert spacing.after(host, ticket, 0.0, Failure.URL) == (3.0, 0.0)  # one URL: no backoff
    other = Ticket(b"k1", host.origin, host.origin + "/1", 0)
    assert spacing.after(host, other, 0.0, Failure.URL) == (3.0, 5.0)  # 2 distinct URLs
    assert spacing.after(host, ticket, 0.0, Failure.CONNECTION)[1] == 10.0
    assert host.conn_errors == 1
    assert spacing.after(host, ticket, 0.0, Failure.NONE) == (3.0, 0.0)
    assert host.errors == host.conn_errors == 0 and host.failing is None
