"""The fault matrix: each way the world stops or kills a crawl, in each process mode.

Modes: one process; two worker processes; a cluster node of two processes beside another node.
Events: Ctrl-C (SIGINT to the whole process group), SIGTERM to the group (``timeout(1)``,
systemd's ``KillMode=control-group``), SIGTERM to the main PID, kill -9 of the main PID (its
children must not live on), kill -9 of one worker, kill -9 of a WARC writer, a second instance
on the same directory, and a restart within 100 ms of a kill -9 (before the dead process is even
reaped, as systemd's ``Restart=`` does).

Every case is checked from the server's own log and the files: exit codes, no process of the
crawl left behind, no traceback, every page exactly once (refetches bounded by the transfers in
flight and one group commit's pages), every WARC file valid (``warcio check``), the report and the
items exact. The full matrix runs on two processes (the richest mode); the other modes run the
events whose handling differs there.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import render_toml, running, served_pages, warc_response_uris
from tests.e2e.test_crash import warcio_check
from tests.redis_server import RedisServer

HOSTS = 8
#: thousands of pages of 20 KB on several hosts (about 40 MB)
SPEC = SiteSpec(hosts=HOSTS, pages=2000, page_bytes=20_000, crawl_delay_s=None, seed=23)
#: politeness.min_delay_s 1.0 -> 0.02: 250 pages per host would take 4 minutes at 1 s
DELAY = 0.02
COMMIT_S = 0.05  #: frontier.commit_interval_s, at its default
#: a kill redoes, per host, the transfer in flight and the pages not yet committed: those of the
#: open group commit, and those whose WARC records the writer has not yet reported on disk (it
#: reports every half commit interval, so a page can wait for the commit after next)
PER_HOST = 1 + math.ceil(2 * COMMIT_S / DELAY) + 1


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    site = Site(SPEC)
    with DemoServer(site) as server:
        yield site, server


def config(tmp_path: Path, site: Site, port: int, **sections: dict[str, object]) -> Path:
    """crawl.toml at the defaults, except the keys named here, each with its reason."""
    base: dict[str, dict[str, object]] = {
        # max_depth 20 -> 100: the demo site's tree is deeper than 20 links on small hosts
        "crawl": {"seeds": site.seeds(port), "output_dir": "out", "max_depth": 100},
        "politeness": {"min_delay_s": DELAY, "user_agent": "frontier-crawl-test/0.1"},
        "fetch": {"resolve": site.resolve_entries(port)},
        # seen_capacity 10^8 -> 10^5: a 360 MB Bloom filter written at every end and checkpoint
        "frontier": {"seen_capacity": 100_000},
    }
    for name, values in sections.items():
        base.setdefault(name, {}).update(values)
    # one item per page (no code): the items must come out exactly once too
    text = render_toml(base) + '\n[[extract]]\nurl = "."\n\n[extract.fields]\ntitle = "h1"\n'
    path = tmp_path / "crawl.toml"
    path.write_text(text)
    return path


class Crawl:
    """One crawl command (a node's, with ``node``), its own process group, output in a file."""

    def __init__(self, cfg: Path, node: int | None = None, name: str = "run") -> None:
        self.cfg, self.node = cfg, node
        self.log = cfg.parent / f"{name}-{node if node is not None else 'x'}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> Crawl:
        args = ["--node", str(self.node)] if self.node is not None else []
        self.runs += 1
        with self.log.open("ab") as out:
            out.write(f"\n=== run {self.runs}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "frontier_crawl.cli", "--config", str(self.cfg), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a process group of its own, as a terminal gives
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def tree(self) -> set[int]:
        """Every live descendant of the crawl's main process (and the main process itself)."""
        found, todo = set(), [self.pid]
        while todo:
            pid = todo.pop()
            if pid in found or not running(pid):
                continue
            found.add(pid)
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    todo.extend(int(x) for x in (task / "children").read_text().split())
                except OSError:
                    continue
        return found

    def children(self, what: str) -> list[int]:
        """Live processes of the crawl whose command line contains ``what``."""
        found = []
        for pid in self.tree() - {self.pid}:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if what in cmd:
                found.append(pid)
        return sorted(found)

    def wait(self, timeout: float = 90) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for pid in self.tree():
                os.kill(pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            pytest.fail(f"the crawl did not end: {self.output()[-3000:]}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def gone(pids: set[int], timeout: float = 5.0) -> None:
    """Every process of ``pids`` ends within ``timeout`` (a SIGKILL from the kernel is fast)."""
    deadline = time.monotonic() + timeout
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    left = [p for p in pids if running(p)]
    assert not left, f"processes of the crawl outlived it: {left}"


def crawling(crawl: Crawl, server: DemoServer, since: int, site: Site, share: float) -> None:
    """Wait until ``share`` of the site has been served to this crawl."""
    want = int(len(site.expected_pages(server.port)) * share)
    wait_for(
        lambda: len(served_pages(server, since)) >= want or crawl.proc.poll() is not None,  # type: ignore[union-attr]
        f"{want} pages fetched",
    )
    assert crawl.proc is not None and crawl.proc.poll() is None, crawl.output()[-3000:]


# ------------------------------------------------------------------------------------ events
# Each event acts on a crawl that is fetching, and returns the exit statuses it may end with
# and whether it loses work in flight (a kill) or none (a graceful stop).


def ctrl_c_group(crawl: Crawl) -> tuple[set[int], bool]:
    os.killpg(crawl.pid, signal.SIGINT)
    return {0}, False


def sigterm_group(crawl: Crawl) -> tuple[set[int], bool]:
    os.killpg(crawl.pid, signal.SIGTERM)
    return {0}, False


def sigterm_main(crawl: Crawl) -> tuple[set[int], bool]:
    os.kill(crawl.pid, signal.SIGTERM)
    return {0}, False


def second_signal_group(crawl: Crawl) -> tuple[set[int], bool]:
    """Ctrl-C, then (at once: two different signals never merge into one delivery, and a
    graceful stop of fast pages can end before a later one) SIGTERM, to the whole group."""
    tree = crawl.tree()
    os.killpg(crawl.pid, signal.SIGINT)
    os.killpg(crawl.pid, signal.SIGTERM)
    crawl.wait()
    gone(tree)  # the workers are killed with it, and their WARC writers die with them
    return {128 + signal.SIGTERM}, True


def kill_9_main(crawl: Crawl) -> tuple[set[int], bool]:
    tree = crawl.tree()
    os.kill(crawl.pid, signal.SIGKILL)
    gone(tree)
    return {-signal.SIGKILL}, True


def kill_9_worker(crawl: Crawl) -> tuple[set[int], bool]:
    workers = crawl.children("multiprocessing.spawn")
    assert workers, "no worker process found"
    os.kill(workers[0], signal.SIGKILL)
    return {1}, True


def kill_9_warc_writer(crawl: Crawl) -> tuple[set[int], bool]:
    writers = crawl.children("output.warc import child_entry")
    assert writers, "no WARC writer process found"
    os.kill(writers[0], signal.SIGKILL)
    return {1}, True


EVENTS = {
    "ctrl-c-group": ctrl_c_group,
    "sigterm-group": sigterm_group,
    "sigterm-main": sigterm_main,
    "second-signal-group": second_signal_group,
    "kill-9-main": kill_9_main,
    "kill-9-worker": kill_9_worker,
    "kill-9-warc-writer": kill_9_warc_writer,
}


def check(
    site: Site, server: DemoServer, since: int, tmp_path: Path, logs: list[Crawl], kills: int,
    roots: list[Path],
) -> None:  # fmt: skip
    """Every page exactly once (refetches bounded), WARC files valid, reports and items exact,
    no traceback."""
    expected = site.expected_pages(server.port)
    fetched = served_pages(server, since)
    assert set(fetched) == expected
    refetched = sum(n - 1 for n in fetched.values())
    assert refetched <= kills * HOSTS * PER_HOST, (refetched, fetched.most_common(5))
    for crawl in logs:
        assert "Traceback" not in crawl.output(), crawl.output()[-3000:]
    warcs = sorted(p for root in roots for p in root.rglob("warc/*") if p.is_file())
    assert warcs and all(p.name.endswith(".warc.gz") for p in warcs), warcs
    assert expected <= set(warc_response_uris(warcs))
    warcio_check(warcs)
    fetched_total = 0
    items: list[str] = []
    for root in roots:
        report = json.loads((root / "report.json").read_text())
        assert report["complete"] is True, report
        fetched_total += int(report["fetched"])
        mine = [json.loads(line)["url"] for feed in root.rglob("items.jsonl")
                for line in feed.read_text().splitlines()]  # fmt: skip
        assert report["spider"]["items"] == len(mine)
        items += mine
    assert fetched_total == len(expected)  # counters are committed with their pages
    assert sorted(items) == sorted(expected)  # every page's item, once


def run_case(
    tmp_path: Path, site_server: tuple[Site, DemoServer], event: str, workers: int
) -> None:
    site, server = site_server
    since = len(server.log())
    cfg = config(tmp_path, site, server.port, workers={"processes": workers})
    crawl = Crawl(cfg).start()
    crawling(crawl, server, since, site, 0.3)
    tree = crawl.tree()
    codes, lossy = EVENTS[event](crawl)
    code = crawl.wait()
    assert code in codes, crawl.output()[-3000:]
    gone(tree)  # no process of the crawl outlives it
    if not lossy:
        report = json.loads((tmp_path / "out" / "report.json").read_text())
        assert report["stopped_by_signal"] is True and report["complete"] is False
        assert "second signal" not in crawl.output()
    assert crawl.start().wait() == 0, crawl.output()[-3000:]
    check(site, server, since, tmp_path, [crawl], kills=int(lossy), roots=[tmp_path / "out"])
    if not lossy:  # a graceful stop drains and commits: nothing fetched twice
        assert max(served_pages(server, since).values()) == 1


TWO = ["ctrl-c-group", "sigterm-group", "sigterm-main", "second-signal-group", "kill-9-main",
       "kill-9-worker", "kill-9-warc-writer"]  # fmt: skip
#: one process: the group signals (its WARC writer is in the group) and the writer's death;
#: SIGTERM and kill -9 of the main PID are the older tests' cases (test_crash.py), and the
#: restart within 100 ms is a kill -9 of the main PID besides
ONE = ["ctrl-c-group", "sigterm-group", "kill-9-warc-writer"]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("event", TWO)
def test_two_processes(
    tmp_path: Path, site_server: tuple[Site, DemoServer], event: str
) -> None:
    run_case(tmp_path, site_server, event, workers=2)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("event", ONE)
def test_one_process(tmp_path: Path, site_server: tuple[Site, DemoServer], event: str) -> None:
    run_case(tmp_path, site_server, event, workers=1)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("workers", [1, 2])
def test_second_instance_is_refused_at_once(
    tmp_path: Path, site_server: tuple[Site, DemoServer], workers: int
) -> None:
    """A second instance on the same output_dir exits 2 at once, naming the first's PID; the
    first goes on undisturbed and finishes exact."""
    site, server = site_server
    since = len(server.log())
    cfg = config(tmp_path, site, server.port, workers={"processes": workers})
    first = Crawl(cfg, name="first").start()
    crawling(first, server, since, site, 0.2)
    second = Crawl(cfg, name="second").start()
    t0 = time.monotonic()
    assert second.wait(30) == 2, second.output()
    assert time.monotonic() - t0 < 10
    assert f"in use by process {first.pid}" in second.output(), second.output()
    assert "Traceback" not in second.output()
    assert first.wait() == 0, first.output()[-3000:]
    check(site, server, since, tmp_path, [first, second], kills=0, roots=[tmp_path / "out"])
    assert max(served_pages(server, since).values()) == 1


@pytest.mark.timeout(150)
@pytest.mark.parametrize("workers", [1, 2])
def test_restart_within_100_ms_of_kill_9(
    tmp_path: Path, site_server: tuple[Site, DemoServer], workers: int
) -> None:
    """kill -9 of the main PID, and the same command at once, before the dead process is
    reaped: it waits for the old run's children to end (never runs beside them), then resumes
    and finishes exact."""
    site, server = site_server
    since = len(server.log())
    cfg = config(tmp_path, site, server.port, workers={"processes": workers})
    old = Crawl(cfg, name="old").start()
    crawling(old, server, since, site, 0.3)
    tree = old.tree()
    os.kill(old.pid, signal.SIGKILL)
    new = Crawl(cfg, name="new").start()  # the old one not yet reaped: a zombie
    assert new.wait() == 0, new.output()[-3000:]
    assert old.wait() == -signal.SIGKILL
    gone(tree)
    check(site, server, since, tmp_path, [old, new], kills=1, roots=[tmp_path / "out"])


# ---------------------------------------------------------------------------- cluster mode


def cluster_case(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis: RedisServer, event: str
) -> None:
    site, server = site_server
    since = len(server.log())
    cfg = config(
        tmp_path, site, server.port, workers={"processes": 2},
        crawl={"output_dir": "out-{node}"}, cluster={"redis_url": redis.url, "nodes": 2},
    )  # fmt: skip
    nodes = [Crawl(cfg, node=n).start() for n in (0, 1)]
    crawling(nodes[1], server, since, site, 0.3)
    victim = nodes[1]
    tree = victim.tree()
    if event == "restart-100ms":
        os.kill(victim.pid, signal.SIGKILL)
        dead = victim.proc
        victim.start()  # at once; the old process is left unreaped (a zombie) meanwhile
        lossy = True
        dead_tree = tree
    else:
        dead, dead_tree = None, set()
        codes, lossy = EVENTS[event](victim)
        assert victim.wait() in codes, victim.output()[-3000:]
        gone(tree)
        assert "second signal" not in victim.output()
        victim.start()
    assert [n.wait() for n in nodes] == [0, 0], [n.output()[-2000:] for n in nodes]
    if dead is not None:
        assert dead.wait(10) == -signal.SIGKILL
        gone(dead_tree - {dead.pid})
    check(site, server, since, tmp_path, nodes, kills=int(lossy),
          roots=[tmp_path / "out-0", tmp_path / "out-1"])  # fmt: skip


@pytest.mark.timeout(200)
@pytest.mark.parametrize("event", ["ctrl-c-group", "restart-100ms"])
def test_cluster_node(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer, event: str
) -> None:
    cluster_case(tmp_path, site_server, redis_server, event)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("workers", [1, 2])
def test_sighup_to_the_group_is_one_reload_and_piped_progress_shows(
    tmp_path: Path, site_server: tuple[Site, DemoServer], workers: int
) -> None:
    """SIGHUP to the whole group: each crawling process reads crawl.toml again once (the WARC
    writers and workers ignore it: no child dies of it), the crawl goes on to the end. With its
    output going to a file, the progress lines are printed with workers too."""
    site, server = site_server
    since = len(server.log())
    # progress_interval_s 5 -> 0.5: a crawl of a few seconds prints several lines
    cfg = config(tmp_path, site, server.port, workers={"processes": workers},
                 output={"progress_interval_s": 0.5})  # fmt: skip
    crawl = Crawl(cfg).start()
    crawling(crawl, server, since, site, 0.2)
    tree = crawl.tree()
    os.killpg(crawl.pid, signal.SIGHUP)
    assert crawl.wait() == 0, crawl.output()[-3000:]
    gone(tree)
    text = crawl.output()
    assert text.count("read again") == workers, text[-3000:]
    progress = [line for line in text.splitlines() if " pages " in line and "queued" in line]
    assert len(progress) >= 2, text[-3000:]
    check(site, server, since, tmp_path, [crawl], kills=0, roots=[tmp_path / "out"])
