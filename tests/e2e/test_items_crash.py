"""Items exactly once across kill -9: a two-callback spider with meta crawls a demo web of 1,600
pages of 20 KB or more on five hosts into a JSON Lines and a CSV feed; the crawl is SIGKILLed at
random moments (when its feed passes random sizes) and restarted with the same command, and at
the end each feed, read back with ``json`` and ``csv``, holds every page's item exactly once,
each with the fields its request's meta carried. With 1 and with 2 worker processes."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import crawl_config, spread_server
from tests.waiting import wait_until

HOSTS = 5
SPEC = SiteSpec(hosts=HOSTS, pages=1600, crawl_delay_s=None, seed=23, page_bytes=20_000,
                page_bytes_max=40_000)  # fmt: skip
KILLS = 3
FIELDS = ["url", "kind", "level", "tag", "parent"]

#: the spider under test: the seeds' callback (parse) and one for every other level
#: (parse_page), each request carrying meta: its level, the page that found it, and a tag of
#: its own URL computed by that page (so the item proves the meta came with the right URL)
SPIDER = '''
import hashlib
from frontier_crawl import Request, Spider


def tag(url):
    return hashlib.blake2b(url.encode(), digest_size=6).hexdigest()


class LevelSpider(Spider):
    def parse(self, response):
        yield {"url": response.url, "kind": "home", "level": 0, "tag": tag(response.url),
               "parent": None}
        yield from self.follow(response, 1)

    def parse_page(self, response):
        meta = response.meta
        yield {"url": response.url, "kind": "page", "level": meta["level"], "tag": meta["tag"],
               "parent": meta["from"]}
        yield from self.follow(response, meta["level"] + 1)

    def follow(self, response, level):
        for url in response.links:
            yield Request(url, callback="parse_page",
                          meta={"level": level, "tag": tag(url), "from": response.url})
'''


def tag(url: str) -> str:
    return hashlib.blake2b(url.encode(), digest_size=6).hexdigest()


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    """On a port that gives both workers hosts (else one's feeds are empty: no CSV header)."""
    yield from spread_server(Site(SPEC), 2)


def config(tmp_path: Path, site: Site, port: int, processes: int) -> Path:
    (tmp_path / "level_spider.py").write_text(SPIDER)
    # Every key has its default except those crawl_config names (with their reasons) and:
    cfg = crawl_config(
        tmp_path, site, port,
        spider={"source": "level_spider.py"},
        # processes 1 (the default) or 2: the guarantee holds per worker's feed
        workers={"processes": processes},
    )  # fmt: skip
    feeds = (
        '\n[[output.feeds]]\npath = "items.jsonl"\nformat = "jsonl"\n'
        f'\n[[output.feeds]]\npath = "items.csv"\nformat = "csv"\nfields = {json.dumps(FIELDS)}\n'
    )
    cfg.write_text(cfg.read_text() + feeds)
    return cfg


def out_dirs(out: Path, processes: int) -> list[Path]:
    return [out] if processes == 1 else [out / f"worker-{i}" for i in range(processes)]


def feed_bytes(dirs: list[Path]) -> int:
    size = 0
    for d in dirs:
        with contextlib.suppress(OSError):
            size += (d / "items.jsonl").stat().st_size
    return size


def cli(cfg: Path) -> list[str]:
    return [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)]


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def kill_when_feed_passes(cfg: Path, dirs: list[Path], target: int) -> None:
    """Start the crawl; SIGKILL its process group (the crawl, its workers and WARC writers)
    once its JSON Lines feeds pass ``target`` bytes."""
    proc = subprocess.Popen(cli(cfg), start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip
    wait_until(f"the feeds past {target} bytes (or the crawl ended)",
               lambda: feed_bytes(dirs) >= target or proc.poll() is not None, 60,
               every_s=0.005)  # fmt: skip
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"ended before the kill: {err.decode()[-3000:]}"
    wait_until("the group's last members (WARC writers) gone", lambda: not group_alive(proc.pid),
               5)  # fmt: skip


def read_jsonl(dirs: list[Path]) -> list[dict[str, Any]]:
    items = []
    for d in dirs:
        with (d / "items.jsonl").open(encoding="utf-8") as fh:
            items += [json.loads(line) for line in fh]
    return items


def read_csv(dirs: list[Path]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for d in dirs:
        with (d / "items.csv").open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            assert reader.fieldnames == FIELDS
            rows += list(reader)
    return rows


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.timeout(170)
def test_items_exactly_once_across_kill_9(
    tmp_path: Path, site_server: tuple[Site, DemoServer], processes: int
) -> None:
    site, server = site_server
    cfg = config(tmp_path, site, server.port, processes)
    dirs = out_dirs(tmp_path / "out", processes)
    expected = site.expected_pages(server.port)
    assert len(expected) >= 1500
    # an item line is 140 to 160 bytes: kill at random sizes in the first 70% of the feed
    rng = random.Random(f"items-{processes}-{os.getpid()}")
    targets = sorted(rng.uniform(0.05, 0.8) * 130 * len(expected) for _ in range(KILLS))
    for target in targets:
        kill_when_feed_passes(cfg, dirs, int(target))
    done = subprocess.run(cli(cfg), capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]

    items = read_jsonl(dirs)
    counts = Counter(item["url"] for item in items)
    assert set(counts) == expected, (
        f"missing {sorted(expected - set(counts))[:5]}, extra {sorted(set(counts) - expected)[:5]}"
    )
    twice = [url for url, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} items twice, e.g. {twice[:5]}"
    by_url = {item["url"]: item for item in items}
    seeds = set(site.seeds(server.port))
    for url, item in by_url.items():
        assert item["tag"] == tag(url), item  # the meta came with its own URL
        if url in seeds:
            assert (item["kind"], item["level"], item["parent"]) == ("home", 0, None)
        else:
            parent = by_url[item["parent"]]  # found on a page that is itself in the feed,
            assert item["kind"] == "page"  # by the second callback,
            assert item["level"] == parent["level"] + 1  # one level below it

    rows = read_csv(dirs)
    assert Counter(row["url"] for row in rows) == counts  # the CSV feed: the same, once each
    for row in rows:
        item = by_url[row["url"]]
        assert row["tag"] == item["tag"] and row["level"] == str(item["level"])
        assert row["parent"] == (item["parent"] or "")

    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["complete"] is True
    assert report["spider"]["items"] == len(expected)  # counted with the commits: exact
    assert report["spider"]["problems"] == 0
    assert report["spider"]["callback"]["pages"] >= len(expected)
