"""One crawl over several nodes with a real redis-server as transport (``cluster/``).

Nodes are separate process trees (``frontier-crawl --config crawl.toml --node i``, each in its
own session) on loopback, with separate output directories (``output_dir = "out-{node}"``),
crawling the demo web; exactness and politeness are checked from the demo server's log, host
ownership from the nodes' WARC files. Redis runs with AOF and ``appendfsync always``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer, politeness_violations, robots_first_violations
from frontier_crawl.demo.site import Site, SiteSpec
from frontier_crawl.frontier.mailbox import decode_links, owner_of
from frontier_crawl.frontier.urls import origin
from tests.conftest import crawl_config, served_pages, warc_response_uris
from tests.redis_server import PASSWORD, RedisServer, crawl_prefix, reserved_port
from tests.waiting import wait_until

#: min_delay_s 1.0 -> 0.02 (as conftest.crawl_config: hundreds of pages per host would take
#: minutes at 1 s), delay_factor 0.0 (the adaptive delay off, so the log check knows the delay)
DELAY = 0.02
NODES = 3


def spread(spec: SiteSpec) -> Iterator[tuple[Site, DemoServer]]:
    """The site on a port that gives every partition some hosts, with 3 and with 2 partitions,
    and 3 of 4 some (owners hash the origin, port included: a port that does not is skipped)."""
    site = Site(spec)
    for _ in range(20):
        with DemoServer(site) as server:
            origins = {origin(url) for url in site.expected_pages(server.port)}
            if (
                {owner_of(o, NODES) for o in origins} == set(range(NODES))
                and {owner_of(o, 2) for o in origins} == {0, 1}
                and len({owner_of(o, 4) for o in origins}) >= 3  # 2 nodes x 2 processes
            ):
                yield site, server
                return
    pytest.fail("20 ports in a row left a partition without hosts")


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    """8 hosts, ~400 pages: the fault tests."""
    yield from spread(SiteSpec(hosts=8, pages=400, crawl_delay_s=None, seed=31))


@pytest.fixture(scope="module")
def big_site() -> Iterator[tuple[Site, DemoServer]]:
    """Realistic sizes for the main test: 16 hosts, 2,000 pages of 20 to 60 KB."""
    yield from spread(
        SiteSpec(hosts=16, pages=2000, page_bytes=20_000, page_bytes_max=60_000,
                 crawl_delay_s=None, seed=37)
    )  # fmt: skip


def node_cmd(cfg: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg), *args]


class Node:
    """One node's process tree, its output in files."""

    def __init__(self, cfg: Path, node: int) -> None:
        self.cfg, self.node = cfg, node
        self.log = cfg.parent / f"node-{node}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Node:
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            node_cmd(self.cfg, "--node", str(self.node)),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        return self

    def kill_9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)  # coordinator and its workers at once
        self.proc.wait(timeout=10)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            pytest.fail(f"node {self.node} did not end: {self.log.read_text()[-3000:]}")

    def output(self) -> str:
        return self.log.read_text()


def cluster_config(tmp_path: Path, site: Site, port: int, url: str, nodes: int, **extra: dict
                   ) -> Path:  # fmt: skip
    sections: dict[str, dict[str, object]] = {
        "crawl": {"output_dir": "out-{node}"},
        "politeness": {"min_delay_s": DELAY, "delay_factor": 0.0},
        "cluster": {"redis_url": url, "nodes": nodes},
    }
    for name, values in extra.items():
        sections.setdefault(name, {}).update(values)
    return crawl_config(tmp_path, site, port, **sections)  # type: ignore[arg-type]


def check_crawl(
    site: Site,
    server: DemoServer,
    since: int,
    tmp_path: Path,
    nodes: int,
    refetch_bound: int,
    processes: int = 1,
) -> Counter[str]:
    """Every page once (refetches bounded), robots.txt first, polite, each host in its owner
    partition only; returns the pages served."""
    log = server.log()[since:]
    expected = site.expected_pages(server.port)
    fetched = served_pages(server, since)
    assert set(fetched) == expected
    assert sum(n - 1 for n in fetched.values()) <= refetch_bound, fetched.most_common(5)
    assert robots_first_violations(log) == []
    assert politeness_violations(log, DELAY) == []
    owners: dict[str, set[int]] = {}
    total = nodes * processes
    for p in range(total):
        warc_dir = tmp_path / f"out-{p // processes}" / f"worker-{p}" / "warc"
        for uri in warc_response_uris(list(warc_dir.iterdir()) if warc_dir.exists() else []):
            owners.setdefault(uri.split("/")[2], set()).add(p)
    assert all(ws == {owner_of(origin(f"http://{h}/"), total)} for h, ws in owners.items()), owners
    used = {w for ws in owners.values() for w in ws}
    assert {p // processes for p in used} == set(range(nodes))  # every node had hosts
    return fetched


def quarter_served(server: DemoServer, since: int, expected: set[str], nodes: list[Node]) -> None:
    """Wait until a quarter of the site has been served (every node still running)."""
    wait_until("a quarter of the site served",
               lambda: len(served_pages(server, since, wait_s=0.0)) >= len(expected) // 4, 40,
               alive=[n.proc for n in nodes if n.proc])  # fmt: skip


def assert_no_secret(tmp_path: Path) -> None:
    for path in tmp_path.glob("node-*.log"):
        text = path.read_text()
        assert PASSWORD not in text, path
        assert "Traceback" not in text, text[-3000:]


@pytest.mark.timeout(90)
def test_three_nodes_crawl_exactly_once(
    tmp_path: Path, big_site: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    site, server = big_site
    since = len(server.log())
    cfg = cluster_config(tmp_path, site, server.port, redis_server.url, NODES)
    # a --node out of range is refused before anything is written
    proc = subprocess.run(node_cmd(cfg, "--node", "3"), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "--node 3 is out of range" in proc.stderr, proc.stderr
    started = time.monotonic()
    nodes = [Node(cfg, n).start() for n in range(NODES)]
    codes = [node.wait(75) for node in nodes]
    elapsed = time.monotonic() - started
    assert codes == [0] * NODES, [n.output()[-2000:] for n in nodes]
    check_crawl(site, server, since, tmp_path, NODES, refetch_bound=0)
    assert_no_secret(tmp_path)
    # Redis holds nothing of the crawl but counters once it is over: every batch acknowledged
    client = redis_server.client()
    sent = int(client.hget(f"{crawl_prefix(client)}:counts", "sent") or 0)
    assert sent > 0
    assert all(client.xlen(f"{crawl_prefix(client)}:p:{p}") == 0 for p in range(NODES))
    # the cluster's report, from any node: the sum of the nodes' reports
    proc = subprocess.run(node_cmd(cfg, "report"), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    published = client.hgetall(f"{crawl_prefix(client)}:reports")
    reports = {int(k): json.loads(v) for k, v in published.items()}
    assert sorted(reports) == list(range(NODES))
    total = sum(r["fetched"] for r in reports.values())
    assert total == len(site.expected_pages(server.port))
    assert f"{total:,}" in proc.stdout or str(total) in proc.stdout
    assert PASSWORD not in proc.stdout + proc.stderr
    print(f"3 nodes: {total} pages in {elapsed:.1f} s, {sent} batches over Redis")


@pytest.mark.timeout(90)
def test_before_every_node_joined_and_refusals(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    """Node 0 of 2 alone crawls its own hosts; links for node 1's wait in Redis and the crawl
    does not end. A second node 0, and a node whose identity differs, are refused (exit 2,
    naming why). Node 1 then joins and the crawl completes."""
    site, server = site_server
    since = len(server.log())
    cfg = cluster_config(tmp_path, site, server.port, redis_server.url, 2)
    first = Node(cfg, 0).start()
    client = redis_server.client()
    expected = site.expected_pages(server.port)
    mine = {u for u in expected if owner_of(origin(u), 2) == 0}
    assert first.proc is not None
    wait_until(
        "node 0's hosts crawled and links for node 1 waiting in Redis",
        lambda: set(served_pages(server, since, wait_s=0.0)) == mine
        and client.xlen(f"{crawl_prefix(client)}:p:1") > 0,
        40, alive=first.proc,
        detail=lambda: f"{len(served_pages(server, since))} of {len(mine)}; "
        + first.output()[-2000:],
    )  # fmt: skip
    time.sleep(1.0)  # node 0 idle, node 1 absent: the crawl must not end
    assert first.proc is not None and first.proc.poll() is None
    assert set(served_pages(server, since)) == mine  # nothing of node 1's hosts
    # Redis memory is what waits: measured per pending link
    entries = client.xrange(f"{crawl_prefix(client)}:p:1")
    links = sum(len(decode_links(fields[b"b"])) for _id, fields in entries)
    memory = client.memory_usage(f"{crawl_prefix(client)}:p:1", samples=0)
    assert memory is not None and links > 0
    print(f"{len(entries)} batches, {links} links wait for node 1: {memory} bytes in Redis, "
          f"{memory / links:.0f} bytes per pending link")  # fmt: skip
    # the same node twice: on its output directory, refused by the directory's lock; on
    # another directory, by its membership, while the first is alive
    twice = subprocess.run(node_cmd(cfg, "--node", "0"), capture_output=True, text=True, timeout=30)
    assert twice.returncode == 2 and f"in use by process {first.proc.pid}" in twice.stderr, (
        twice.stderr
    )
    (tmp_path / "elsewhere").mkdir()
    elsewhere = cluster_config(tmp_path / "elsewhere", site, server.port, redis_server.url, 2)
    again = subprocess.run(
        node_cmd(elsewhere, "--node", "0"), capture_output=True, text=True, timeout=30
    )
    assert again.returncode == 2 and "node 0 is already running" in again.stderr, again.stderr
    # another identity: refused, naming the keys
    (tmp_path / "other").mkdir()
    other = cluster_config(
        tmp_path / "other", site, server.port, redis_server.url, 2,
        scope={"exclude": ["/never/"]},
    )  # fmt: skip
    proc = subprocess.run(
        node_cmd(other, "--node", "1"), capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2, proc.stderr
    assert "scope.exclude" in proc.stderr and "differs" in proc.stderr
    assert PASSWORD not in twice.stderr + again.stderr + proc.stderr
    # a batch sent twice (a sender killed between XADD and its outbox delete resends it) is
    # admitted once, by its id; entries that are not batches are dropped and counted
    _, fields = entries[0]
    client.xadd(f"{crawl_prefix(client)}:p:1", fields)
    client.xadd(f"{crawl_prefix(client)}:p:1", {b"i": b"x" * 16, b"b": b"not msgpack \xff"})
    client.xadd(f"{crawl_prefix(client)}:p:1", {b"junk": b"1"})
    client.hincrby(f"{crawl_prefix(client)}:counts", "sent", 3)
    second = Node(cfg, 1).start()
    assert [first.wait(60), second.wait(60)] == [0, 0], second.output()[-2000:]
    check_crawl(site, server, since, tmp_path, 2, refetch_bound=0)
    assert_no_secret(tmp_path)
    report = json.loads((tmp_path / "out-1" / "report.json").read_text())
    assert report["cluster_duplicate_batches"] >= 1 and report["cluster_rejected_batches"] == 2
    assert "are not link batches: dropped" in second.output()


@pytest.mark.timeout(120)
def test_kill_9_of_one_node(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    """kill -9 of node 1's process group mid-crawl: nodes 0 and 2 go on with their hosts; node 1
    started again (at once: its membership names a process that has ended) completes the
    crawl with nothing lost and refetches bounded as on one machine."""
    site, server = site_server
    since = len(server.log())
    cfg = cluster_config(
        tmp_path, site, server.port, redis_server.url, NODES, politeness={"min_delay_s": 0.05}
    )
    nodes = [Node(cfg, n).start() for n in range(NODES)]
    expected = site.expected_pages(server.port)
    of_1 = {u for u in expected if owner_of(origin(u), NODES) == 1}
    wait_until("node 1 part-way through its hosts",
               lambda: 0 < len(set(served_pages(server, since, wait_s=0.0)) & of_1)
               < len(of_1) // 2, 40, alive=[n.proc for n in nodes if n.proc])  # fmt: skip
    nodes[1].kill_9()
    during = len(server.log())
    time.sleep(2.0)
    others = {
        f"http://{e.host}:{server.port}{e.path}" for e in server.log()[during:] if e.status == 200
    }
    assert others and not others & of_1  # the others kept crawling, nobody took node 1's hosts
    assert all(n.proc is not None and n.proc.poll() is None for n in (nodes[0], nodes[2]))
    nodes[1].start()
    codes = [node.wait(90) for node in nodes]
    assert codes == [0] * NODES, [n.output()[-2000:] for n in nodes]
    # per host of node 1: one in flight + what one 0.05 s commit interval completes at 0.05 s
    hosts_1 = {origin(u) for u in of_1}
    check_crawl(site, server, since, tmp_path, NODES, refetch_bound=3 * len(hosts_1))
    assert_no_secret(tmp_path)


@pytest.mark.timeout(120)
def test_kill_9_of_redis(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    """kill -9 of redis-server mid-crawl, 2 s down, restarted on the same directory (AOF,
    appendfsync always): the nodes log it, retry with backoff, resume; nothing is lost."""
    site, server = site_server
    since = len(server.log())
    cfg = cluster_config(
        tmp_path, site, server.port, redis_server.url, NODES, politeness={"min_delay_s": 0.05}
    )
    nodes = [Node(cfg, n).start() for n in range(NODES)]
    expected = site.expected_pages(server.port)
    quarter_served(server, since, expected, nodes)
    redis_server.kill()
    time.sleep(2.0)
    redis_server.start()
    codes = [node.wait(90) for node in nodes]
    assert codes == [0] * NODES, [n.output()[-2000:] for n in nodes]
    check_crawl(site, server, since, tmp_path, NODES, refetch_bound=0)
    logs = "".join(n.output() for n in nodes)
    assert "unreachable" in logs and "retrying in" in logs and "reachable again" in logs
    assert_no_secret(tmp_path)


@pytest.mark.timeout(60)
def test_redis_unreachable_at_start(tmp_path: Path, site_server: tuple[Site, DemoServer]) -> None:
    """Nothing listens on the port: a clear message, retries with backoff, then exit 1 after
    cluster.unreachable_timeout_s (2 s here, default 300 s: the test's time), no traceback,
    the password redacted; no request sent."""
    site, server = site_server
    since = len(server.log())
    with reserved_port() as port:  # nothing listens, and no test beside this one can take it
        url = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"
        cfg = cluster_config(
            tmp_path, site, server.port, url, NODES, cluster={"unreachable_timeout_s": 2.0}
        )
        started = time.monotonic()
        proc = subprocess.run(node_cmd(cfg, "--node", "0"), capture_output=True, text=True,
                              timeout=50)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert time.monotonic() - started >= 2.0
    assert proc.stderr.count("retrying in") >= 3, proc.stderr  # 0.1, 0.2, 0.4 ... s
    assert "unreachable" in proc.stderr and "redis://:***@127.0.0.1" in proc.stderr
    assert PASSWORD not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert len(server.log()) == since


@pytest.mark.timeout(120)
def test_add_seeds_into_an_ended_cluster(tmp_path: Path, redis_server: RedisServer) -> None:
    """Two nodes crawl the seeds' hosts and end; ``add-seeds`` routes the other hosts' roots to
    their owners through Redis and re-opens the crawl; the nodes, started again, crawl them
    and end again. The site's hosts do not link to each other (cross_host_ratio 0, broken
    links 0), so only the added seeds reach the other hosts."""
    site = Site(SiteSpec(hosts=6, pages=120, crawl_delay_s=None, cross_host_ratio=0.0,
                         broken_ratio=0.0, seed=5))  # fmt: skip
    with DemoServer(site) as server:
        port = server.port
        roots = sorted(site.seeds(port))
        first, later = roots[:3], roots[3:]
        cfg = cluster_config(
            tmp_path, site, port, redis_server.url, 2,
            crawl={"seeds": first}, scope={"allow_domains": ["demo"]},
        )  # fmt: skip
        nodes = [Node(cfg, n).start() for n in range(2)]
        assert [n.wait(60) for n in nodes] == [0, 0], nodes[0].output()[-2000:]
        hosts = {origin(u) for u in first}
        expected = site.expected_pages(port)
        assert set(served_pages(server)) == {u for u in expected if origin(u) in hosts}
        urls = tmp_path / "urls.txt"
        urls.write_text("# more hosts\n" + "\n".join(later) + "\nnot a url\n")
        proc = subprocess.run(
            node_cmd(cfg, "add-seeds", str(urls)), capture_output=True, text=True, timeout=30
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"added {len(later)} seed(s)" in proc.stdout and "1 line(s)" in proc.stdout
        nodes = [Node(cfg, n).start() for n in range(2)]
        assert [n.wait(60) for n in nodes] == [0, 0], nodes[0].output()[-2000:]
        fetched = served_pages(server)
        assert set(fetched) == expected and max(fetched.values()) == 1
        assert politeness_violations(server.log(), DELAY) == []
    assert_no_secret(tmp_path)


@pytest.mark.timeout(90)
def test_two_nodes_of_two_processes_over_tls_with_a_password(
    tmp_path: Path, site_server: tuple[Site, DemoServer]
) -> None:
    """2 nodes x 2 processes; rediss:// (redis-server's own TLS, a test CA) and a password: the
    crawl completes, exactly and politely, and neither the password nor a traceback appears
    in any output."""
    site, server = site_server
    since = len(server.log())
    redis_tls = RedisServer(tmp_path / "redis-tls", password=PASSWORD, tls=True)
    redis_tls.start()
    try:
        assert redis_tls.url.startswith("rediss://")
        # 2 processes per node: links between partitions of one node take the LMDB path,
        # between nodes the Redis one
        cfg = cluster_config(
            tmp_path, site, server.port, redis_tls.url, 2, workers={"processes": 2}
        )
        nodes = [Node(cfg, n).start() for n in range(2)]
        assert [n.wait(75) for n in nodes] == [0, 0], nodes[0].output()[-2000:]
        check_crawl(site, server, since, tmp_path, 2, refetch_bound=0, processes=2)
        proc = subprocess.run(node_cmd(cfg, "report"), capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert PASSWORD not in proc.stdout + proc.stderr
    finally:
        redis_tls.stop()
    assert_no_secret(tmp_path)


@pytest.mark.timeout(60)
def test_wrong_password_is_refused_at_once(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    site, server = site_server
    wrong = redis_server.url.replace(PASSWORD, "not-the-password")
    cfg = cluster_config(tmp_path, site, server.port, wrong, 2)
    started = time.monotonic()
    proc = subprocess.run(node_cmd(cfg, "--node", "0"), capture_output=True, text=True, timeout=50)
    assert proc.returncode == 2 and "refused the login" in proc.stderr, proc.stderr
    assert time.monotonic() - started < 20  # not retried as if Redis were down
    assert "not-the-password" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.timeout(120)
def test_redis_full_mid_crawl(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    """maxmemory reached (noeviction) for 2 s mid-crawl: senders wait and retry (logged), the
    owners keep draining; once Redis has room the crawl completes, nothing lost."""
    site, server = site_server
    since = len(server.log())
    cfg = cluster_config(
        tmp_path, site, server.port, redis_server.url, NODES, politeness={"min_delay_s": 0.05}
    )
    nodes = [Node(cfg, n).start() for n in range(NODES)]
    expected = site.expected_pages(server.port)
    quarter_served(server, since, expected, nodes)
    client = redis_server.client()
    client.config_set("maxmemory", 1)  # below what Redis uses: every denyoom write refused
    time.sleep(2.0)
    client.config_set("maxmemory", 0)
    codes = [node.wait(90) for node in nodes]
    assert codes == [0] * NODES, [n.output()[-2000:] for n in nodes]
    check_crawl(site, server, since, tmp_path, NODES, refetch_bound=0)
    logs = "".join(n.output() for n in nodes)
    assert "out of memory (maxmemory" in logs and "has room again" in logs, logs[-3000:]
    assert_no_secret(tmp_path)


@pytest.mark.timeout(120)
def test_sigterm_stops_one_node_gracefully(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    """SIGTERM to node 0 mid-crawl: it drains, writes and publishes its report and exits 0;
    node 1 goes on (its links for node 0 wait in Redis); node 0 started again completes the
    crawl with every page fetched once."""
    site, server = site_server
    since = len(server.log())
    cfg = cluster_config(
        tmp_path, site, server.port, redis_server.url, 2, politeness={"min_delay_s": 0.05}
    )
    nodes = [Node(cfg, n).start() for n in range(2)]
    expected = site.expected_pages(server.port)
    quarter_served(server, since, expected, nodes)
    assert nodes[0].proc is not None
    nodes[0].proc.send_signal(signal.SIGTERM)  # the coordinator forwards it to its workers
    assert nodes[0].wait(30) == 0, nodes[0].output()[-2000:]
    report = json.loads((tmp_path / "out-0" / "report.json").read_text())
    assert report["stopped_by_signal"] is True and report["complete"] is False
    assert nodes[1].proc is not None and nodes[1].proc.poll() is None
    published = redis_server.client().hget(f"{crawl_prefix(redis_server.client())}:reports", "0")
    assert published is not None and json.loads(published)["stopped_by_signal"] is True
    nodes[0].start()
    assert [n.wait(90) for n in nodes] == [0, 0], nodes[0].output()[-2000:]
    check_crawl(site, server, since, tmp_path, 2, refetch_bound=0)
    assert_no_secret(tmp_path)
