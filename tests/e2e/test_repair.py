"""Start-up repair never raises: a crawl killed with SIGKILL, then one of its files damaged as
disk faults, other programs or people damage them, then the same command again. The crawl goes
on (exit 0, every page of the site fetched, by the server's log), what could not be repaired
is set aside (``<name>.damaged-<UTC time>``) and named in the report's warnings.

One killed crawl is made per module and copied for each damage, so each test runs one crawl.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from frontier_crawl.frontier.identity import LAYOUT_VERSION
from tests.conftest import children_of, crawl_config, running, served_pages, warc_response_uris
from tests.waiting import wait_until

SPEC = SiteSpec(hosts=3, pages=150, crawl_delay_s=None, seed=5, page_bytes=20_000)
KILL_AFTER = 40  #: pages served before the first run is killed (about a quarter of the site)
#: shortened: 1 s per page and host (the default) would make each crawl take ~50 s
POLITENESS = {"min_delay_s": 0.01, "delay_factor": 0.0}
#: the killed run's delay (0.05, shortened too): slow enough that the pages a kill makes the
#: resumed run fetch again are a small part of the KILL_AFTER it served (at 0.01 they were
#: nearly all of them, and over the bound: 34 of about 40 on a loaded machine)
KILLED_POLITENESS = {"min_delay_s": 0.05, "delay_factor": 0.0}
COMMIT_S = 0.05  #: frontier.commit_interval_s, at its default


@dataclass(frozen=True)
class Killed:
    """A crawl killed part-way: its output directory, and what the server served it."""

    site: Site
    server: DemoServer
    out: Path
    served: set[str]  #: pages served to the killed run
    done: int  #: log entries of the server up to the end of the killed run


def _command(cfg: Path) -> list[str]:
    return [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)]


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Killed]:
    site = Site(SPEC)
    with DemoServer(site) as server:
        tmp = tmp_path_factory.mktemp("killed")
        # shortened: checkpoints (LMDB synced) every 0.2 s, so the kill meets some
        cfg = crawl_config(
            tmp, site, server.port, politeness=KILLED_POLITENESS,
            frontier={"checkpoint_interval_s": 0.2},
        )
        proc = subprocess.Popen(_command(cfg), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_until(
                f"{KILL_AFTER} pages served (or the crawl ended)",
                lambda: len(served_pages(server, wait_s=0.0)) >= KILL_AFTER
                or proc.poll() is not None,
                60, every_s=0.005,
            )  # fmt: skip
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=10)
        assert proc.returncode == -signal.SIGKILL, "the crawl ended before the kill"
        log_len = len(server.log())
        yield Killed(site, server, tmp / "out", set(served_pages(server)), log_len)


def resume(killed: Killed, tmp_path: Path, damage: Callable[[Path], None],
           **sections: dict[str, object]) -> tuple[dict[str, object], set[str], int]:  # fmt: skip
    """Copy the killed crawl, ``damage`` its output directory, run the same command again.
    Returns the report, the pages fetched across both runs, and how many the second run
    fetched again that the first had fetched."""
    out = tmp_path / "out"
    shutil.copytree(killed.out, out, symlinks=True)
    damage(out)
    cfg = crawl_config(tmp_path, killed.site, killed.server.port, politeness=POLITENESS, **sections)
    since = len(killed.server.log())
    proc = subprocess.run(_command(cfg), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, object] = json.loads((out / "report.json").read_text())
    assert report["complete"] is True
    again = served_pages(killed.server, since)
    expected = killed.site.expected_pages(killed.server.port)
    assert killed.served | set(again) == expected  # every page, across the two runs
    warcs = [p for p in (out / "warc").iterdir() if p.name.endswith(".warc.gz")]
    assert set(warc_response_uris(warcs)) >= set(again)  # readable to the end, all of them
    return report, killed.served | set(again), len(killed.served & set(again))


def warnings_of(report: dict[str, object]) -> list[str]:
    warnings = report["warnings"]
    assert isinstance(warnings, list)
    return [str(w) for w in warnings]


def the_open_warc(out: Path) -> Path:
    (path,) = (out / "warc").glob("*.open")
    return path


def aside(directory: Path, name: str) -> list[Path]:
    return sorted(directory.glob(f"{name}.damaged-*"))


#: the pages a kill may make a resumed crawl fetch again, per host: the one in flight, and those
#: completed in the last uncommitted group or not yet reported by the WARC writer, counted as
#: five commit intervals (a least spacing, not a deadline: a loaded loop commits later), as in
#: test_crash.py and test_fault_matrix.py. The frontier kept the rest.
REFETCH_BOUND = SPEC.hosts * (1 + math.ceil(5 * COMMIT_S / KILLED_POLITENESS["min_delay_s"]) + 1)


# ----------------------------------------------------------------------------- WARC files


def test_warc_garbage_is_set_aside(killed: Killed, tmp_path: Path) -> None:
    junk = random.Random(1).randbytes(200_000)
    name = ""

    def damage(out: Path) -> None:
        nonlocal name
        path = the_open_warc(out)
        name = path.name
        path.write_bytes(junk)

    report, _, refetched = resume(killed, tmp_path, damage)
    (moved,) = aside(tmp_path / "out" / "warc", name)
    assert moved.read_bytes() == junk
    assert any(name in w and moved.name in w for w in warnings_of(report))
    assert refetched <= REFETCH_BOUND  # the frontier did not lose its place


@pytest.mark.parametrize("where", ["zero", "random", "header"])
def test_warc_cut_anywhere_is_repaired_quietly(killed: Killed, tmp_path: Path, where: str) -> None:
    """What a kill (or a lost tail) leaves: cut back to whole records, nothing set aside."""

    def damage(out: Path) -> None:
        path = the_open_warc(out)
        size = path.stat().st_size
        keep = {"zero": 0, "random": random.Random(2).randint(1, size), "header": 5}[where]
        os.truncate(path, keep)

    report, _, _ = resume(killed, tmp_path, damage)
    assert not list((tmp_path / "out" / "warc").glob("*.damaged-*"))
    assert not [w for w in warnings_of(report) if "warc" in w]


def test_warc_damaged_in_the_middle_keeps_every_byte(killed: Killed, tmp_path: Path) -> None:
    """A flipped byte mid-file: the records before it are kept, the rest is copied aside."""
    original = b""

    def damage(out: Path) -> None:
        nonlocal original
        path = the_open_warc(out)
        data = bytearray(path.read_bytes())
        original = bytes(data)
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))

    report, _, _ = resume(killed, tmp_path, damage)
    warc = tmp_path / "out" / "warc"
    (tail,) = warc.glob("*.damaged-*")
    kept = warc / tail.name.split(".open.damaged-")[0]
    assert kept.read_bytes() + tail.read_bytes() != b""
    assert len(kept.read_bytes()) + len(tail.read_bytes()) == len(original)
    assert any(tail.name in w for w in warnings_of(report))


def test_warc_that_is_not_a_file_is_set_aside(killed: Killed, tmp_path: Path) -> None:
    """Unreadable: a directory (or a dangling link) where the .open file was."""
    names: list[str] = []

    def damage(out: Path) -> None:
        path = the_open_warc(out)
        names.append(path.name)
        path.unlink()
        path.mkdir()
        (out / "warc" / "other.warc.gz.open").symlink_to(out / "nowhere")

    report, _, _ = resume(killed, tmp_path, damage)
    warc = tmp_path / "out" / "warc"
    assert aside(warc, names[0]) and aside(warc, "other.warc.gz.open")
    assert len([w for w in warnings_of(report) if "set aside" in w]) == 2


# ----------------------------------------------------------------------------- crawl log


def test_crawl_log_of_binary_garbage_is_set_aside(killed: Killed, tmp_path: Path) -> None:
    junk = random.Random(3).randbytes(5000) + b"\n" + random.Random(4).randbytes(300) + b"\n"

    def damage(out: Path) -> None:
        with (out / "crawl.jsonl").open("ab") as fh:
            fh.write(junk)

    report, _, _ = resume(killed, tmp_path, damage)
    out = tmp_path / "out"
    (moved,) = aside(out, "crawl.jsonl")
    assert moved.read_bytes().endswith(junk)
    assert any("crawl.jsonl" in w and moved.name in w for w in warnings_of(report))
    for line in (out / "crawl.jsonl").read_text().splitlines():  # the new log: all JSON
        json.loads(line)


def test_crawl_log_partial_last_line_is_cut(killed: Killed, tmp_path: Path) -> None:
    def damage(out: Path) -> None:
        with (out / "crawl.jsonl").open("ab") as fh:
            fh.write(b'{"time": "2026-01-01T00:00:00Z", "url": "http://a')

    report, _, _ = resume(killed, tmp_path, damage)
    assert not aside(tmp_path / "out", "crawl.jsonl")
    assert not warnings_of(report)
    for line in (tmp_path / "out" / "crawl.jsonl").read_text().splitlines():
        json.loads(line)


# ----------------------------------------------------------------------------- state


@pytest.mark.parametrize("name", ["seen.bloom", "seen.bloom.tmp"])
def test_an_older_versions_bloom_snapshot_is_removed(
    killed: Killed, tmp_path: Path, name: str
) -> None:
    """The seen-set's Bloom filter snapshot older versions wrote (any content: it is
    never read) is removed; the exact seen-set in LMDB goes on."""

    def damage(out: Path) -> None:
        (out / "state" / name).write_bytes(random.Random(5).randbytes(4096))

    report, _, refetched = resume(killed, tmp_path, damage)
    assert not (tmp_path / "out" / "state" / name).exists()
    assert not warnings_of(report)
    assert refetched <= REFETCH_BOUND  # the seen-set still knows the pages done before


@pytest.mark.parametrize("how", ["garbage", "truncated", "zero"])
def test_damaged_frontier_is_set_aside_and_the_crawl_starts_afresh(
    killed: Killed, tmp_path: Path, how: str
) -> None:
    def damage(out: Path) -> None:
        path = out / "state" / "frontier.lmdb" / "data.mdb"
        size = path.stat().st_size
        if how == "garbage":
            path.write_bytes(random.Random(6).randbytes(size))
        elif how == "truncated":
            os.truncate(path, size // 2)
        else:
            os.truncate(path, 0)

    report, _, refetched = resume(killed, tmp_path, damage)
    state = tmp_path / "out" / "state"
    (moved,) = aside(state, "frontier.lmdb")
    assert (moved / "data.mdb").exists()
    (warning,) = [w for w in warnings_of(report) if "frontier.lmdb" in w]
    assert moved.name in warning and "fetched again" in warning
    assert refetched == len(killed.served)  # afresh from the seeds: every page again


def test_truncated_identity_is_written_again(killed: Killed, tmp_path: Path) -> None:
    def damage(out: Path) -> None:
        path = out / "state" / "identity.json"
        path.write_bytes(path.read_bytes()[:7])

    report, _, refetched = resume(killed, tmp_path, damage)
    state = tmp_path / "out" / "state"
    assert aside(state, "identity.json")
    assert json.loads((state / "identity.json").read_text()) == {"layout_version": LAYOUT_VERSION}
    assert any("identity.json" in w for w in warnings_of(report))
    assert refetched <= REFETCH_BOUND  # the frontier itself was kept


def test_damaged_robots_cache_is_set_aside(killed: Killed, tmp_path: Path) -> None:
    def damage(out: Path) -> None:
        db = out / "state" / "robots" / "cache.db"
        db.write_bytes(b"SQLite format 3\x00" + random.Random(7).randbytes(db.stat().st_size))

    report, _, refetched = resume(killed, tmp_path, damage)
    assert aside(tmp_path / "out" / "state", "robots")
    assert any("robots" in w and "set aside" in w for w in warnings_of(report))
    assert refetched <= REFETCH_BOUND


def test_damaged_http_cache_is_set_aside(killed: Killed, tmp_path: Path) -> None:
    cache = tmp_path / "httpcache"
    cache.mkdir()
    (cache / "cache.db").write_bytes(random.Random(8).randbytes(50_000))
    report, _, _ = resume(
        killed, tmp_path, lambda out: None, fetch={"cache": True, "cache_dir": str(cache)}
    )
    assert aside(tmp_path, "httpcache")
    assert any("httpcache" in w and "set aside" in w for w in warnings_of(report))


@pytest.mark.timeout(90)
def test_damaged_worker_inbox_is_set_aside(killed: Killed, tmp_path: Path) -> None:
    """With two workers: one's inbox (which the other writes into) is damaged after a kill."""
    site, server = killed.site, killed.server
    cfg = crawl_config(tmp_path, site, server.port, politeness=POLITENESS,
                       workers={"processes": 2})  # fmt: skip
    since = len(server.log())
    inbox = tmp_path / "out" / "worker-1" / "state" / "inbox.lmdb"
    proc = subprocess.Popen(_command(cfg), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(f"{KILL_AFTER} pages served (or the crawl ended)",
                   lambda: len(served_pages(server, since, wait_s=0.0)) >= KILL_AFTER
                   or proc.poll() is not None, 60, every_s=0.005)  # fmt: skip
    finally:  # the whole crawl killed at once: the coordinator and its workers, by PID
        workers = children_of(proc.pid)
        proc.send_signal(signal.SIGKILL)
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    wait_until("the workers gone after the kill", lambda: not any(running(p) for p in workers), 10)
    first = set(served_pages(server, since))
    data = inbox / "data.mdb"
    data.write_bytes(random.Random(9).randbytes(data.stat().st_size))
    since = len(server.log())
    done = subprocess.run(_command(cfg), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    (moved,) = aside(inbox.parent, "inbox.lmdb")
    assert any(moved.name in w and "lost" in w for w in warnings_of(report))
    expected = site.expected_pages(server.port)
    # links that sat in the damaged inbox are lost (the warning says so); the rest is crawled
    again = set(served_pages(server, since))
    assert again and (first | again) <= expected
    assert report["complete"] is True
