"""User code and the crawl's stops (issue 34, items 5 and 6).

* A callback that calls ``sys.exit(3)`` or raises ``KeyboardInterrupt`` fails its page
  (``callback-error`` naming the exception, in the crawl log and the report); the crawl goes
  on, every page is fetched, and it exits 0 as any crawl whose callbacks failed.
* A pipeline that never returns holds no stop past ``crawl.stop_timeout_s``: SIGTERM to the
  crawl's whole process group, and the crawl exits 0 within the deadline and a margin, with its
  report; the page whose pipeline was interrupted is left unfinished and fetched again on
  resume, and every page's item is in the feed exactly once at the end. With 1 and with 2
  worker processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from frontier_crawl.engine.deadline import FORCE_AFTER_S
from tests.conftest import crawl_config, spread_server
from tests.waiting import wait_until

SPEC = SiteSpec(hosts=3, pages=150, crawl_delay_s=None, seed=34)

#: a spider whose callback fails on one page in four with a BaseException that is no
#: Exception, after yielding the page's links and item (kept: what was yielded before counts)
FAILING = '''
import sys
import zlib

from frontier_crawl import Request, Spider


class ExitSpider(Spider):
    def parse(self, response):
        for url in response.links:
            yield Request(url)
        yield {{"url": response.url}}
        if zlib.crc32(response.url.encode()) % 4 == 0:
            {fail}
'''

#: items are written by the feed; this pipeline hangs on the item of the page named by the
#: file ``hang_on`` beside it (written by the test once the crawl runs), once per process
HANGING = '''
import pathlib
import threading

from frontier_crawl import Spider

HERE = pathlib.Path(__file__).parent


class ItemSpider(Spider):
    def parse(self, response):
        yield from response.follow_all(response.links)
        yield {"url": response.url}


class Hang:
    def process_item(self, item, spider):
        flag = HERE / "hang_on"
        if flag.exists():
            (HERE / f"hanging-{threading.get_native_id()}").write_text(item["url"])
            threading.Event().wait()  # forever
        return item
'''

#: a short deadline: the test waits for it to pass (the default, 30 s, would make it slow)
STOP_TIMEOUT_S = 2.0
#: what the exit may take beyond the deadline on a shared, loaded machine (the final commit,
#: the report, interpreter exit)
MARGIN_S = 12.0


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    yield from spread_server(Site(SPEC), 2)


def cli(cfg: Path) -> list[str]:
    return [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)]


def log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.mark.parametrize(
    ("fail", "name"),
    [("sys.exit(3)", "SystemExit"), ("raise KeyboardInterrupt", "KeyboardInterrupt")],
)
@pytest.mark.timeout(90)
def test_base_exceptions_of_a_callback_are_its_failures(
    tmp_path: Path, site_server: tuple[Site, DemoServer], fail: str, name: str
) -> None:
    site, server = site_server
    (tmp_path / "exit_spider.py").write_text(FAILING.format(fail=fail))
    cfg = crawl_config(tmp_path, site, server.port, spider={"source": "exit_spider.py"})
    done = subprocess.run(cli(cfg), capture_output=True, text=True, timeout=80, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr.split("callback-error")[0]  # none before the first
    lines = log_lines(tmp_path / "out" / "crawl.jsonl")
    expected = site.expected_pages(server.port)
    fetched = {e["url"] for e in lines if e["outcome"] == "fetched"}
    assert fetched >= expected, sorted(expected - fetched)[:5]
    errors = [e for e in lines if e["outcome"] == "callback-error"]
    failing = {u for u in fetched if zlib.crc32(u.encode()) % 4 == 0}
    assert failing and {e["url"] for e in errors} == failing
    assert {e["error"] for e in errors} == {name}
    assert all("exit_spider.py" in e["where"] for e in errors)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["complete"] is True
    assert report["spider"]["problems"] == len(failing)
    assert "callback-error in exit_spider.py" in done.stderr  # its traceback, once


def hanging_config(tmp_path: Path, site: Site, port: int, processes: int) -> Path:
    (tmp_path / "hang.py").write_text(HANGING)
    cfg = crawl_config(
        tmp_path, site, port,
        crawl={"stop_timeout_s": STOP_TIMEOUT_S},
        spider={"source": "hang.py", "pipelines": ["hang.py:Hang"]},
        workers={"processes": processes},
    )  # fmt: skip
    return cfg


def feed_urls(out: Path, processes: int) -> list[str]:
    dirs = [out] if processes == 1 else [out / f"worker-{i}" for i in range(processes)]
    urls = []
    for d in dirs:
        path = d / "items.jsonl"
        if path.exists():
            urls += [json.loads(line)["url"] for line in path.read_text().splitlines()]
    return urls


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.timeout(150)
def test_a_hanging_pipeline_holds_no_stop_past_its_deadline(
    tmp_path: Path, site_server: tuple[Site, DemoServer], processes: int
) -> None:
    site, server = site_server
    cfg = hanging_config(tmp_path, site, server.port, processes)
    out = tmp_path / "out"
    proc = subprocess.Popen(cli(cfg), cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_until("some items written", lambda: len(feed_urls(out, processes)) >= 5
                   or proc.poll() is not None, 60)  # fmt: skip
        (tmp_path / "hang_on").write_text("")
        wait_until("a pipeline hanging",
                   lambda: any(tmp_path.glob("hanging-*")) or proc.poll() is not None,
                   30)  # fmt: skip
        assert proc.poll() is None, "the crawl ended before its pipeline hung"
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=STOP_TIMEOUT_S + MARGIN_S + 30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stderr = err.decode()
    assert proc.returncode == 0, stderr[-3000:]
    assert took < STOP_TIMEOUT_S + MARGIN_S, f"took {took:.1f} s"
    assert "leaked semaphore" not in stderr
    report = json.loads((out / "report.json").read_text())
    assert report["stopped_by_signal"] is True
    assert report["complete"] is False
    hung = {p.read_text() for p in tmp_path.glob("hanging-*")}
    before = Counter(feed_urls(out, processes))
    assert not hung & set(before), "an interrupted page's item is in the feed"

    (tmp_path / "hang_on").unlink()
    done = subprocess.run(cli(cfg), capture_output=True, text=True, timeout=80, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = Counter(feed_urls(out, processes))
    expected = site.expected_pages(server.port)
    assert set(counts) == expected, sorted(expected ^ set(counts))[:5]
    assert max(counts.values()) == 1, [u for u, n in counts.items() if n > 1][:5]
    assert hung <= set(counts)  # the abandoned pages: fetched again, their items once
    assert json.loads((out / "report.json").read_text())["complete"] is True


@pytest.mark.parametrize("end", ["double-interrupt", "kill-9"])
@pytest.mark.timeout(120)
def test_an_abrupt_end_of_worker_processes_leaks_no_semaphore(
    tmp_path: Path, site_server: tuple[Site, DemoServer], end: str
) -> None:
    """Issue 34 item 11: a second signal ends the coordinator at once (``os._exit``), or a
    kill -9 of the coordinator alone (its workers die with it); its multiprocessing
    semaphores (shared status, orders) are not left for the resource tracker to find
    leaked."""
    site, server = site_server
    cfg = hanging_config(tmp_path, site, server.port, 2)
    out = tmp_path / "out"
    proc = subprocess.Popen(cli(cfg), cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_until("some items written", lambda: len(feed_urls(out, 2)) >= 5
                   or proc.poll() is not None, 60)  # fmt: skip
        (tmp_path / "hang_on").write_text("")
        wait_until("a pipeline hanging",
                   lambda: any(tmp_path.glob("hanging-*")) or proc.poll() is not None,
                   30)  # fmt: skip
        assert proc.poll() is None, "the crawl ended before its pipeline hung"
        if end == "kill-9":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.2)  # (two signals, not one: the handler counts them as they come)
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)  # (until the resource tracker closes stderr)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stderr = err.decode()
    if end == "kill-9":
        assert proc.returncode == -signal.SIGKILL, stderr[-3000:]
    else:
        assert proc.returncode == 128 + signal.SIGINT, stderr[-3000:]
        assert "second signal" in stderr
    assert "leaked semaphore" not in stderr, stderr[-3000:]


#: a pipeline that swallows every interruption (``except BaseException``) and waits again
STUBBORN = HANGING.replace(
    "            threading.Event().wait()  # forever\n",
    "            while True:\n"
    "                try:\n"
    "                    threading.Event().wait()\n"
    "                except BaseException:\n"
    "                    pass\n",
)


@pytest.mark.timeout(120)
def test_user_code_that_swallows_the_interruption_is_wound_up_around(
    tmp_path: Path, site_server: tuple[Site, DemoServer]
) -> None:
    """The crawl commits what it finished, writes its report and exits (status 1) around a
    pipeline that will not end; the same command resumes, items exactly once."""
    site, server = site_server
    cfg = hanging_config(tmp_path, site, server.port, 1)
    (tmp_path / "hang.py").write_text(STUBBORN)
    out = tmp_path / "out"
    proc = subprocess.Popen(cli(cfg), cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_until("some items written", lambda: len(feed_urls(out, 1)) >= 5
                   or proc.poll() is not None, 60)  # fmt: skip
        (tmp_path / "hang_on").write_text("")
        wait_until("a pipeline hanging",
                   lambda: any(tmp_path.glob("hanging-*")) or proc.poll() is not None,
                   30)  # fmt: skip
        assert proc.poll() is None, "the crawl ended before its pipeline hung"
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=STOP_TIMEOUT_S + MARGIN_S + 30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stderr = err.decode()
    assert proc.returncode == 1, stderr[-3000:]
    assert took < STOP_TIMEOUT_S + FORCE_AFTER_S + MARGIN_S, f"took {took:.1f} s"
    assert "exits around it" in stderr
    report = json.loads((out / "report.json").read_text())
    assert report["stopped_by_signal"] is True and report["complete"] is False
    hung = {p.read_text() for p in tmp_path.glob("hanging-*")}
    assert not hung & set(feed_urls(out, 1))

    (tmp_path / "hang_on").unlink()
    done = subprocess.run(cli(cfg), capture_output=True, text=True, timeout=80, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = Counter(feed_urls(out, 1))
    assert set(counts) == site.expected_pages(server.port)
    assert max(counts.values()) == 1
