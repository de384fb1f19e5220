"""Nothing lost on kill -9 or SIGTERM: a crawl subprocess is killed and restarted with the same
command, and the server's own log proves every reachable page was fetched."""

from __future__ import annotations

import json
import math
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import crawl_config, served_pages, warc_response_uris

HOSTS = 3
COMMIT_S = 0.05


def refetch_bound(kills: int, min_delay_s: float) -> int:
    """Work a kill can make us redo: per host, the request in flight plus the pages completed
    since the last group commit (at most one commit interval of them, one per delay)."""
    per_host = 1 + math.ceil(COMMIT_S / min_delay_s) + 1
    return kills * HOSTS * per_host


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    site = Site(SiteSpec(hosts=HOSTS, pages=240, crawl_delay_s=None, seed=11))
    with DemoServer(site) as server:
        yield site, server


def start(cfg: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def children_of(pid: int) -> set[int]:
    """PIDs of a live process's children (Linux /proc)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found.update(int(x) for x in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that is not dead (a zombie is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def finish(cfg: Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    report: dict[str, object] = json.loads((cfg.parent / "out" / "report.json").read_text())
    return report


def check_complete(site: Site, server: DemoServer, since: int, out: Path, extra: int) -> None:
    """Every page fetched; refetches at most ``extra``; outputs readable and complete."""
    expected = site.expected_pages(server.port)
    fetched = served_pages(server, since)
    assert set(fetched) == expected
    refetched = sum(n - 1 for n in fetched.values())
    assert refetched <= extra, f"{refetched} pages fetched twice, bound {extra}"
    warcs = sorted((out / "warc").iterdir())
    assert not [p for p in warcs if not p.name.endswith(".warc.gz")], warcs
    archived = set(warc_response_uris(warcs))  # every record readable to its end
    assert expected <= archived
    lines = [json.loads(x) for x in (out / "crawl.jsonl").read_text().splitlines()]
    assert expected <= {x["url"] for x in lines if x["outcome"] == "fetched"}
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] is True
    assert report["fetched"] == len(expected)  # counters live in LMDB: exact across restarts


@pytest.mark.timeout(240)
def test_kill_9_three_times_then_finish(
    tmp_path: Path, site_server: tuple[Site, DemoServer]
) -> None:
    site, server = site_server
    since = len(server.log())
    cfg = crawl_config(
        tmp_path,
        site,
        server.port,
        politeness={"min_delay_s": 0.03, "delay_factor": 0.0},
        output={"warc_max_bytes": 65_536},
        frontier={"checkpoint_interval_s": 0.5, "memory_urls": 50, "commit_interval_s": COMMIT_S},
    )
    moments = []
    for _ in range(3):
        proc = start(cfg)
        moment = random.uniform(0.4, 1.6)
        moments.append(round(moment, 3))
        time.sleep(moment)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL, f"ended before the kill at {moments}"
    finish(cfg)
    check_complete(site, server, since, tmp_path / "out", extra=refetch_bound(3, 0.03))


@pytest.mark.timeout(240)
def test_sigterm_stops_gracefully_and_resume_completes(
    tmp_path: Path, site_server: tuple[Site, DemoServer]
) -> None:
    site, server = site_server
    since = len(server.log())
    cfg = crawl_config(
        tmp_path,
        site,
        server.port,
        crawl={"stop_timeout_s": 3.0},
        politeness={"min_delay_s": 0.05, "delay_factor": 0.0},
        frontier={"commit_interval_s": COMMIT_S},
    )
    proc = start(cfg)
    time.sleep(1.0)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert time.monotonic() - t0 < 3.0 + 2.0  # within the deadline (plus process teardown)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["stopped_by_signal"] is True and report["complete"] is False
    assert 0 < report["fetched"] < len(site.expected_pages(server.port))
    # a second signal exits at once; the crawl is still resumable
    proc = start(cfg)
    time.sleep(1.5)
    children = children_of(proc.pid)
    assert children, "the WARC writer process should be running by now"
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    # 143: the handler's immediate exit; -15: still starting up, before handlers were installed
    assert proc.returncode in (128 + signal.SIGTERM, -signal.SIGTERM), err.decode()[-2000:]
    # the WARC writer dies with the crawler, so none is left writing beside the next run
    deadline = time.monotonic() + 5
    while any(running(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(c) for c in children), "a child outlived the crawler"
    finish(cfg)
    check_complete(site, server, since, tmp_path / "out", extra=refetch_bound(1, 0.05))


@pytest.mark.timeout(60)
def test_changed_identity_is_refused(tmp_path: Path, site_server: tuple[Site, DemoServer]) -> None:
    site, server = site_server
    cfg = crawl_config(tmp_path, site, server.port, crawl={"max_pages": 5})
    finish(cfg)
    crawl_config(
        tmp_path, site, server.port, crawl={"max_pages": 5}, frontier={"seen_capacity": 12345}
    )
    proc = subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "seen_capacity: 100000 in the existing crawl, 12345 now" in proc.stderr
    assert "frontier.seen_capacity" in proc.stderr
