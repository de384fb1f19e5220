"""State is data, never code (issue 18, item 3): what an attacker plants in ``output_dir``.

Each test plants something before a real crawl of a small loopback site: a pickle written the
way diskcache writes one (a plain ``diskcache.Cache`` on the crawl's own cache directory),
whose ``__reduce__`` would create a marker file; or a symbolic link, where the crawl creates a
file, pointing at a file outside ``output_dir``. The crawl must still work, the marker must
not exist and the outside file must be as it was.
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import pytest
from rich.console import Console

from frontier_crawl.config import load
from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from frontier_crawl.engine import Engine
from frontier_crawl.frontier.urls import origin
from frontier_crawl.runner import crawl as run_crawl
from tests.conftest import crawl_config

pytestmark = pytest.mark.timeout(60)

PAGES = 30
#: an operator's file outside output_dir; JSON lines, so a crawl log's start-up repair would
#: keep it and append to it
OUTSIDE = b'{"precious": "an operator file outside output_dir"}\n'


class Planted:
    """A pickle that creates ``marker`` when it is unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def small_site() -> Iterator[tuple[Site, DemoServer]]:
    site = Site(SiteSpec(hosts=1, pages=PAGES, crawl_delay_s=None, disallow=False, seed=3))
    with DemoServer(site) as server:
        yield site, server


def crawl(tmp_path: Path, small_site: tuple[Site, DemoServer], **sections: Any) -> dict[str, Any]:
    site, server = small_site
    return Engine(load(crawl_config(tmp_path, site, server.port, **sections))).run()


def assert_crawled(report: dict[str, Any]) -> None:
    assert report["fetched"] >= PAGES, report
    assert not report.get("write_error"), report


def outside_file(tmp_path: Path, content: bytes = OUTSIDE) -> Path:
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    target.write_bytes(content)
    return target


# ----------------------------------------------------------------------------- pickles


def test_pickle_planted_in_the_robots_cache_is_not_run(
    tmp_path: Path, small_site: tuple[Site, DemoServer]
) -> None:
    site, server = small_site
    marker = tmp_path / "pwned-robots"
    planted = diskcache.Cache(str(tmp_path / "out" / "state" / "robots"))
    for seed in site.seeds(server.port):  # the key the frontier asks for, and its value
        planted.set(origin(seed), Planted(marker))
    planted.close()
    report = crawl(tmp_path, small_site)
    assert not marker.exists(), "a planted pickle ran as the crawler's user"
    assert_crawled(report)  # the planted entry was a miss: robots.txt fetched afresh


def test_pickle_planted_in_the_http_cache_is_not_run(
    tmp_path: Path, small_site: tuple[Site, DemoServer]
) -> None:
    site, server = small_site
    marker = tmp_path / "pwned-http"
    cache_dir = tmp_path / "httpcache"
    planted = diskcache.Cache(str(cache_dir))
    for seed in site.seeds(server.port):
        planted.set(seed, Planted(marker))
    planted.close()
    report = crawl(tmp_path, small_site, fetch={"cache": True, "cache_dir": str(cache_dir)})
    assert not marker.exists(), "a planted pickle ran as the crawler's user"
    assert_crawled(report)


# ----------------------------------------------------------------------------- symlinks


@pytest.mark.parametrize(
    "name",
    [
        "state/seen.bloom",  # older versions' Bloom snapshot: removed at the start
        "state/seen.bloom.tmp",  # and its temporary file
        "state/identity.json.tmp",  # the crawl identity's temporary file (identity.tmp before)
        "crawl.jsonl",  # appended to
        "report.json",  # replaced atomically
        "report.html",
    ],
)
def test_symlink_planted_where_the_crawl_writes_is_not_followed(
    tmp_path: Path, small_site: tuple[Site, DemoServer], name: str
) -> None:
    target = outside_file(tmp_path)
    link = tmp_path / "out" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    report = crawl(tmp_path, small_site)
    assert target.read_bytes() == OUTSIDE, f"written through the symlink at {name}"
    assert_crawled(report)


@pytest.mark.parametrize(
    "name",
    ["state/frontier.lmdb/data.mdb", "state/frontier.lmdb/lock.mdb", "state/robots/cache.db"],
)
def test_symlink_planted_in_a_state_store_is_set_aside(
    tmp_path: Path, small_site: tuple[Site, DemoServer], name: str
) -> None:
    """LMDB and SQLite open their files following symbolic links: a store holding one is
    set aside as damaged (the link renamed with it), and a fresh one begins; a link at
    LMDB's lock.mdb, which holds no data, is removed."""
    target = outside_file(tmp_path)
    link = tmp_path / "out" / name
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    report = crawl(tmp_path, small_site)
    assert target.read_bytes() == OUTSIDE
    store = link.parent.name
    aside = [w for w in report["warnings"] if store in w and "symbolic link" in w]
    if link.name == "lock.mdb":  # no data in it: the link is removed, the frontier kept
        assert not aside and not link.is_symlink(), report["warnings"]
    else:
        assert aside, report["warnings"]
    assert_crawled(report)


def test_symlink_planted_as_an_open_warc_is_not_truncated(
    tmp_path: Path, small_site: tuple[Site, DemoServer]
) -> None:
    """Start-up repair cuts a ``.warc.gz.open`` file back to its last complete record: one
    that is a symlink is set aside (the link renamed), never cut through. The target is a
    gzip file with bytes after its last member, which repair would cut."""
    content = gzip.compress(b"an operator's archive") + b"and what follows it"
    target = outside_file(tmp_path, content)
    link = tmp_path / "out" / "warc" / "x-20240101000000-00000-1.warc.gz.open"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    report = crawl(tmp_path, small_site)
    assert target.read_bytes() == content
    assert not link.exists() and not link.is_symlink()
    assert any("x-20240101000000" in w for w in report["warnings"]), report["warnings"]
    assert_crawled(report)


def test_symlink_planted_as_a_feed_is_not_written_through(
    tmp_path: Path, small_site: tuple[Site, DemoServer]
) -> None:
    target = outside_file(tmp_path, b"")  # empty: a new feed, which the crawl would append to
    link = tmp_path / "out" / "items.jsonl"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    site, server = small_site
    cfg = crawl_config(tmp_path, site, server.port)
    cfg.write_text(cfg.read_text() + '\n[[extract]]\nurl = "."\nfields = { title = "title" }\n'
                   '\n[[output.feeds]]\npath = "items.jsonl"\nformat = "jsonl"\n')  # fmt: skip
    report = Engine(load(cfg)).run()
    assert target.read_bytes() == b""
    assert_crawled(report)
    assert not link.is_symlink()
    assert len(link.read_text().splitlines()) >= PAGES


def test_symlinked_workers_pin_is_not_written_through(
    tmp_path: Path, small_site: tuple[Site, DemoServer]
) -> None:
    """A dangling link at workers.json: the pin written through it would create a file
    wherever the link points."""
    target = tmp_path / "elsewhere" / "created.json"
    target.parent.mkdir()
    link = tmp_path / "out" / "workers.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    site, server = small_site
    cfg = crawl_config(tmp_path, site, server.port, workers={"processes": 2})
    with open(os.devnull, "w") as devnull:
        report = run_crawl(load(cfg), Console(file=devnull))
    assert not target.exists()
    assert_crawled(report)
    assert not link.is_symlink() and json.loads(link.read_text())["processes"] == 2


# ----------------------------------------------------------------------------- who may write


def test_output_dir_writable_by_others_is_refused_at_start_with_exit_2(
    tmp_path: Path, small_site: tuple[Site, DemoServer]
) -> None:
    site, server = small_site
    cfg = crawl_config(tmp_path, site, server.port)
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    before = len(server.log())
    command = [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2, done.stderr
    assert "crawl.output_dir" in done.stderr and "writable by group and others" in done.stderr
    assert "chmod go-w" in done.stderr and "Traceback" not in done.stderr
    assert list(out.iterdir()) == []  # refused before anything was read or written
    assert len(server.log()) == before  # not one request
    out.chmod(0o755)
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((out / "state").stat().st_mode) == 0o700
    assert stat.S_IMODE((out / "warc").stat().st_mode) & 0o022 == 0


@pytest.mark.timeout(30)
def test_fifos_planted_as_state_files_do_not_hang_the_start(
    tmp_path: Path, small_site: tuple[Site, DemoServer]
) -> None:
    """Opening a FIFO for reading blocks until someone writes to it: the identity is read as a
    regular file only (a FIFO is damage: set aside, written again), and an older version's
    Bloom snapshot is removed without being opened."""
    assert_crawled(crawl(tmp_path, small_site))
    state = tmp_path / "out" / "state"
    (state / "identity.json").unlink()
    for name in ("seen.bloom", "identity.json"):
        os.mkfifo(state / name)
    report = crawl(tmp_path, small_site)  # resumes: reads the identity
    assert not report.get("write_error"), report
    assert any("identity.json" in w for w in report["warnings"]), report["warnings"]
    assert stat.S_ISREG((state / "identity.json").lstat().st_mode)
    assert not (state / "seen.bloom").exists()


def test_an_unreadable_workers_pin_is_refused_with_what_to_do(
    tmp_path: Path, small_site: tuple[Site, DemoServer]
) -> None:
    site, server = small_site
    cfg = crawl_config(tmp_path, site, server.port, workers={"processes": 2})
    (tmp_path / "out").mkdir()
    os.mkfifo(tmp_path / "out" / "workers.json")
    command = [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2, done.stderr
    assert "workers.json cannot be read" in done.stderr and "Traceback" not in done.stderr
