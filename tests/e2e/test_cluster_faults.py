"""Cluster faults as service managers and operators cause them (issue 17): a node restarted at
once after kill -9 while its old process is still a zombie; a membership whose holder cannot
be proved ended; a Redis that stays full (``maxmemory``, ``noeviction``).

Fixtures and helpers are those of ``test_cluster.py`` (a real redis-server, the demo web on
loopback, nodes as separate process trees)."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from frontier_crawl.cluster import ClusterNode, ClusterRefused, Keys, Redis, add_batches
from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site
from frontier_crawl.frontier.mailbox import owner_of
from frontier_crawl.frontier.urls import origin
from tests.conftest import served_pages
from tests.control_client import Api
from tests.e2e.test_cluster import (
    Node,
    assert_no_secret,
    check_crawl,
    cluster_config,
    node_cmd,
    site_server,
)
from tests.redis_server import RedisServer, crawl_prefix
from tests.waiting import wait_until

__all__ = ["site_server"]  # the module-scoped fixture, shared with test_cluster.py

#: a parent that starts the node in its own session, prints its PID and reaps it only once its
#: stdin closes: the node killed with -9 stays a zombie until then (a slow supervisor)
SLOW_REAPER = """
import subprocess, sys
out = open(sys.argv[1], "ab")
child = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT,
                         start_new_session=True)
print(child.pid, flush=True)
sys.stdin.read()
child.wait()
"""


def stop_all(*nodes: Node) -> None:
    """kill -9 of the nodes still running (a failed test leaves none behind)."""
    for node in nodes:
        if node.proc is not None and node.proc.poll() is None:
            os.killpg(node.proc.pid, signal.SIGKILL)
            node.proc.wait(timeout=10)


def proc_state(pid: int) -> str:
    """The state letter of /proc/<pid>/stat ("" once the process is reaped)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return ""
    return text[text.rindex(")") + 2]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
@pytest.mark.timeout(120)
def test_restart_at_once_while_the_killed_node_is_a_zombie(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    """kill -9 of node 1 whose parent reaps it only later (its process a zombie), started
    again within 100 ms (systemd's Restart=): it takes over its membership (a zombie has
    ended), joins, and the crawl completes exactly, checked from the server's log."""
    site, server = site_server
    since = len(server.log())
    cfg = cluster_config(
        tmp_path, site, server.port, redis_server.url, 2, politeness={"min_delay_s": 0.05}
    )
    first = Node(cfg, 0).start()
    log_1 = tmp_path / "node-1.log"
    reaper = subprocess.Popen(
        [sys.executable, "-c", SLOW_REAPER, str(log_1), *node_cmd(cfg, "--node", "1")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert reaper.stdout is not None and reaper.stdin is not None
    pid = int(reaper.stdout.readline())
    expected = site.expected_pages(server.port)
    of_1 = {u for u in expected if owner_of(origin(u), 2) == 1}
    wait_until("node 1 part-way through its hosts",
               lambda: 0 < len(set(served_pages(server, since, wait_s=0.0)) & of_1)
               < len(of_1) // 2, 40, detail=lambda: log_1.read_text()[-2000:])  # fmt: skip
    os.killpg(pid, signal.SIGKILL)  # the node and its workers (its process group)
    wait_until("the killed node a zombie", lambda: proc_state(pid) == "Z", 10, every_s=0.005,
               detail=lambda: proc_state(pid))  # fmt: skip
    killed_at = time.monotonic()
    second = Node(cfg, 1).start()
    assert time.monotonic() - killed_at < 0.1  # as Restart= does it (RestartSec=100ms)
    try:
        code = second.wait(90)
        assert code == 0, second.output()[-2000:]
        assert first.wait(90) == 0, first.output()[-2000:]
        assert proc_state(pid) == "Z"  # still not reaped when the new node joined
    finally:
        reaper.stdin.close()
        reaper.wait(timeout=10)
        stop_all(first, second)
    assert "taking over from process" in second.output()
    hosts_1 = {origin(u) for u in of_1}
    check_crawl(site, server, since, tmp_path, 2, refetch_bound=3 * len(hosts_1))
    assert_no_secret(tmp_path)


def _node(
    tmp_path: Path,
    url: str,
    ttl_s: float = 3.0,
    nodes: int = 2,
    node: int = 1,
    timeout_s: float = 10.0,
) -> ClusterNode:
    return ClusterNode(
        Redis(url, timeout_s), Keys("t"), nodes=nodes, node=node, processes=1,
        heartbeat_ttl_s=ttl_s,
        ledger_path=tmp_path / "ledger", map_size=1 << 20, run_id=b"r" * 8,
    )  # fmt: skip


def _held(client: object, holder: dict[str, object], ttl_ms: int) -> None:
    import redis

    assert isinstance(client, redis.Redis)
    # the crawl the node joins (crawl id c0), and a membership of it held by ``holder``
    client.set("t:identity", json.dumps({"identity": 1, "crawl": "c0"}), nx=True)
    client.set("t:c0:member:1", json.dumps({"token": "old", **holder}), px=ttl_ms)


@pytest.mark.timeout(30)
def test_a_membership_that_cannot_be_proved_ended_is_waited_for(
    tmp_path: Path, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Held by a process of another machine and not renewed: the node says so on one line,
    waits for the membership to lapse (1.5 s here) and joins."""
    client = redis_server.client()
    _held(client, {"host": "elsewhere.example", "pid": 4242}, 1500)
    node = _node(tmp_path, redis_server.url)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="frontier_crawl.cluster"):
        node.join({"identity": 1})
    took = time.monotonic() - started
    node.leave()
    assert 1.0 <= took < 5.0, took
    waits = [r.getMessage() for r in caplog.records if "waiting up to" in r.getMessage()]
    assert len(waits) == 1, caplog.text
    assert "process 4242 on elsewhere.example" in waits[0], waits


@pytest.mark.timeout(30)
def test_a_membership_renewed_while_waiting_is_refused(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Held by a process of another machine that renews it (its heartbeat): alive, refused
    (exit 2 from the command line) once the renewal is seen, before the TTL would lapse."""
    client = redis_server.client()
    _held(client, {"host": "elsewhere.example", "pid": 4242}, 3000)
    stop = threading.Event()

    def heartbeat() -> None:  # as node.py's heartbeat: every third of the TTL
        while not stop.wait(1.0):
            client.pexpire("t:c0:member:1", 3000)

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    node = _node(tmp_path, redis_server.url)
    started = time.monotonic()
    try:
        with pytest.raises(ClusterRefused, match="renewed its membership"):
            node.join({"identity": 1})
    finally:
        stop.set()
        beat.join(timeout=5)
    assert time.monotonic() - started < 3.0


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
@pytest.mark.timeout(30)
def test_a_membership_of_this_machine_live_or_pid_reused(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """This machine's holder: a live process (the same PID and start time) is refused at once;
    a PID now used by a later process (another start time) has ended: taken over at once."""
    client = redis_server.client()
    me, host = os.getpid(), socket.gethostname()
    stat = Path(f"/proc/{me}/stat").read_text()
    start = int(stat[stat.rindex(")") + 2 :].split()[19])  # field 22: the start time
    _held(client, {"host": host, "pid": me, "start": start}, 10_000)
    started = time.monotonic()
    with pytest.raises(ClusterRefused, match=f"node 1 is already running \\(process {me} on"):
        _node(tmp_path / "a", redis_server.url).join({"identity": 1})
    _held(client, {"host": host, "pid": me, "start": start - 1}, 10_000)
    node = _node(tmp_path / "b", redis_server.url)
    node.join({"identity": 1})
    assert time.monotonic() - started < 2.0  # neither waited for the 10 s TTL
    assert json.loads(client.get("t:c0:member:1") or b"{}")["token"] != "old"
    node.leave()


@pytest.mark.timeout(30)
def test_a_cluster_started_by_an_older_layout_goes_on_after_the_upgrade(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Every node upgraded (a new frontier layout, which each node's own state upgrades from):
    the identity the first node stored at the old layout still admits them; any other
    difference, or a layout this version cannot upgrade from, is still refused."""
    from frontier_crawl.frontier.identity import LAYOUT_VERSION, UPGRADABLE_LAYOUTS
    from frontier_crawl.workers.partition import CLUSTER_UPGRADABLE

    older = max(UPGRADABLE_LAYOUTS)
    client = redis_server.client()
    try:
        client.set(Keys("t").identity, json.dumps({"layout_version": older, "seeds": ["a"]}))
        with pytest.raises(ClusterRefused, match="seeds"):  # another configuration: refused
            _node(tmp_path / "a", redis_server.url).join(
                {"layout_version": LAYOUT_VERSION, "seeds": ["b"]}, CLUSTER_UPGRADABLE
            )
        with pytest.raises(ClusterRefused, match="layout_version"):  # no upgrade path given
            _node(tmp_path / "b", redis_server.url).join({"layout_version": LAYOUT_VERSION,
                                                         "seeds": ["a"]})  # fmt: skip
        # a node of that crawl (its state: the ledger; no crawl id, as that version kept)
        (tmp_path / "c" / "ledger").mkdir(parents=True)
        node = _node(tmp_path / "c", redis_server.url)
        node.join({"layout_version": LAYOUT_VERSION, "seeds": ["a"]}, CLUSTER_UPGRADABLE)
        node.leave()
        client.set(Keys("t").identity, json.dumps({"layout_version": min(UPGRADABLE_LAYOUTS) - 1,
                                                   "seeds": ["a"]}))  # fmt: skip
        with pytest.raises(ClusterRefused, match="layout_version"):  # too old to upgrade from
            _node(tmp_path / "d", redis_server.url).join(
                {"layout_version": LAYOUT_VERSION, "seeds": ["a"]}, CLUSTER_UPGRADABLE
            )
    finally:  # the module's other tests store their own identity
        client.delete(Keys("t").identity)


def test_the_owner_drains_a_full_redis(tmp_path: Path, redis_server: RedisServer) -> None:
    """At maxmemory (noeviction) the owner still reads, delivers, acknowledges and deletes its
    batches, which is what frees the memory (inside MULTI Redis refuses every command when
    full, XACK and XDEL included)."""
    node = _node(tmp_path, redis_server.url, nodes=1, node=0, timeout_s=2.0)
    node.join({"identity": 1})
    add_batches(node.redis, node.keys, {0: [b"one", b"two", b"three"]})
    client = redis_server.client()
    client.config_set("maxmemory", 1)  # below what Redis uses: every denyoom write refused
    got: list[bytes] = []
    try:
        # (the first call reads this node's pending entries: none)
        assert sum(node.pump(lambda _p, batch: got.append(batch)) for _ in range(2)) == 3
        assert client.xlen(node.keys.stream(0)) == 0
        assert client.xpending(node.keys.stream(0), "owner")["pending"] == 0
    finally:
        client.config_set("maxmemory", 0)
        node.leave()
    assert got == [b"one", b"two", b"three"]


@pytest.mark.timeout(30)
def test_a_read_whose_reply_was_lost_is_read_again(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Redis ran an XREADGROUP of the owner's and the reply never came back (Redis killed, or
    the connection cut, after it ran; redis-py may even send the command again, which reads
    new entries only): the entries it read are pending for the owner, delivered to no one.
    The owner reads its pending entries again once it finds nothing new, so they are
    delivered, acknowledged and deleted; before, they stayed in the stream and the crawl
    could never end (test_kill_9_of_redis: node 0 did not end, although it had reconnected)."""
    node = _node(tmp_path, redis_server.url, nodes=1, node=0)
    node.join({"identity": 1})
    got: list[bytes] = []
    try:
        assert node.pump(lambda _p, batch: got.append(batch)) == 0  # its pending ones: none
        add_batches(node.redis, node.keys, {0: [b"lost reply"]})
        client = redis_server.client()
        # what Redis did for the owner's read whose reply was lost
        assert client.xreadgroup("owner", "owner", {node.keys.stream(0): ">"})
        wait_until("the entry read again and delivered",
                   lambda: node.pump(lambda _p, batch: got.append(batch)) or got, 10,
                   every_s=0.05)  # fmt: skip
        assert client.xlen(node.keys.stream(0)) == 0
        assert client.xpending(node.keys.stream(0), "owner")["pending"] == 0
    finally:
        node.leave()
    assert got == [b"lost reply"]


def gave_up_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "gave up after" in line]


@pytest.mark.timeout(150)
def test_redis_full_for_good(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    """maxmemory reached (noeviction) mid-crawl and never freed: bounded like any other Redis
    fault. Meanwhile the status's bottleneck names it; each node stops within
    cluster.unreachable_timeout_s (6 s here, default 300 s: the test's time) plus its stop,
    exit 1, one message naming the full Redis, no traceback; with room again the same
    command resumes and completes the crawl, nothing lost."""
    site, server = site_server
    since = len(server.log())
    cfg = cluster_config(
        tmp_path, site, server.port, redis_server.url, 2,
        politeness={"min_delay_s": 0.05}, cluster={"unreachable_timeout_s": 6.0},
        control={"listen": "127.0.0.1:0"},
    )  # fmt: skip
    nodes = [Node(cfg, n).start() for n in range(2)]
    try:
        api = Api(tmp_path / "out-0")
        expected = site.expected_pages(server.port)
        wait_until("a quarter of the site served",
                   lambda: len(served_pages(server, since, wait_s=0.0)) >= len(expected) // 4,
                   40, alive=[n.proc for n in nodes if n.proc])  # fmt: skip
        client = redis_server.client()
        client.config_set("maxmemory", 1)  # below what Redis uses: every denyoom write refused
        full_at = time.monotonic()
        seen: list[dict[str, str]] = []

        def said_or_stopping() -> bool:
            """Whether node 0's status names the bottleneck redis-full, or the node stops."""
            if nodes[0].proc is None or nodes[0].proc.poll() is not None:
                return True
            try:
                seen.append(api.status()["bottleneck"])
            except OSError:
                return True  # the node is stopping
            return seen[-1]["name"] == "redis-full"

        wait_until("node 0's status to say redis-full", said_or_stopping, 30, every_s=0.1,
                   detail=lambda: seen[-5:])  # fmt: skip
        codes = [node.wait(40) for node in nodes]
        took = time.monotonic() - full_at
    finally:
        stop_all(*nodes)
    logs = [n.output() for n in nodes]
    assert codes == [1, 1], [text[-2000:] for text in logs]
    assert seen and seen[-1]["name"] == "redis-full", seen[-5:]
    detail = seen[-1]["detail"]
    assert "out of memory (maxmemory)" in detail and "waiting, giving up in" in detail, detail
    assert took < 6.0 + 15.0, took  # the timeout, then the stop (drain, commit, report)
    print(f"Redis full for good: both nodes stopped {took:.1f} s after (timeout 6 s)")
    for text in logs:
        assert "Traceback" not in text, text[-3000:]
        gave_up = gave_up_lines(text)
        assert len(gave_up) == 1, gave_up
        assert "is out of memory (maxmemory reached" in gave_up[0], gave_up
    client.config_set("maxmemory", 0)
    nodes = [Node(cfg, n).start() for n in range(2)]
    codes = [node.wait(90) for node in nodes]
    assert codes == [0, 0], [n.output()[-2000:] for n in nodes]
    check_crawl(site, server, since, tmp_path, 2, refetch_bound=2 * 8)
    assert_no_secret(tmp_path)


@pytest.mark.timeout(120)
def test_redis_full_once_every_node_is_quiet(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    """Only node 1's hosts in scope (no batch ever crosses), Redis full mid-crawl: once
    every page is fetched no node can answer the termination probe (a write). Bounded: both
    nodes stop after cluster.unreachable_timeout_s (3 s here) with exit 1 and the message;
    with room again the same command ends the crawl, nothing fetched twice."""
    site, server = site_server
    since = len(server.log())
    expected = site.expected_pages(server.port)
    of_1 = {u for u in expected if owner_of(origin(u), 2) == 1}
    hosts_1 = sorted({u.split("/")[2].split(":")[0] for u in of_1})
    cfg = cluster_config(
        tmp_path, site, server.port, redis_server.url, 2,
        politeness={"min_delay_s": 0.05}, cluster={"unreachable_timeout_s": 3.0},
        scope={"allow_domains": hosts_1},
        crawl={"seeds": [u for u in site.seeds(server.port) if owner_of(origin(u), 2) == 1]},
    )  # fmt: skip
    nodes = [Node(cfg, n).start() for n in range(2)]
    client = redis_server.client()
    try:
        wait_until("a page served", lambda: served_pages(server, since, wait_s=0.0), 40)
        client.config_set("maxmemory", 1)  # below what Redis uses: every denyoom write refused
        wait_until("every page of node 1 served",
                   lambda: set(served_pages(server, since, wait_s=0.0)) == of_1, 60)  # fmt: skip
        done_at = time.monotonic()
        codes = [node.wait(30) for node in nodes]
        took = time.monotonic() - done_at
    finally:
        stop_all(*nodes)
    assert codes == [1, 1], [n.output()[-2000:] for n in nodes]
    assert took < 3.0 + 10.0, took
    print(f"Redis full, every node quiet: both stopped {took:.1f} s after the last page")
    for node in nodes:
        text = node.output()
        assert "Traceback" not in text, text[-3000:]
        gave_up = gave_up_lines(text)
        assert len(gave_up) == 1 and "is out of memory" in gave_up[0], text[-2000:]
    assert client.get(f"{crawl_prefix(client)}:done") is None
    client.config_set("maxmemory", 0)
    nodes = [Node(cfg, n).start() for n in range(2)]
    assert [node.wait(60) for node in nodes] == [0, 0], [n.output()[-2000:] for n in nodes]
    fetched = served_pages(server, since)
    assert set(fetched) == of_1 and max(fetched.values()) == 1, fetched.most_common(3)
