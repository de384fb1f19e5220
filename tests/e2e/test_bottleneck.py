"""The bottleneck, named: one real crawl built to be in each state, its status read while it runs.

Each crawl runs in the test's main thread (so SIGTERM reaches the engine's handler); a watcher
thread reads ``engine.status()`` every 0.1 s, as the control API's server thread does, until the
status names the expected bottleneck (or the crawl ends), then stops the crawl with SIGTERM
where the crawl would otherwise run on (a 600 s Crawl-delay). Servers are real, on 127.0.0.1.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.control import status
from frontier_crawl.control.status import BUSY_WINDOW_S
from frontier_crawl.engine import Engine
from frontier_crawl.parse import LinkParser, PageLinks
from tests.scripted_server import NOT_FOUND, Answer, ScriptedServer, page
from tests.scripted_server import crawl_settings as settings

Status = dict[str, Any]


def watch(
    engine: Engine, until: Callable[[Status], bool], *, stop: bool, limit_s: float = 40.0
) -> tuple[dict[str, Any], list[Status], Status | None]:
    """Run the crawl; read its status every 0.1 s from another thread until ``until`` holds,
    then SIGTERM the crawl if ``stop``. Returns (report, every status read, the matching one)."""
    seen: list[Status] = []
    found: list[Status] = []
    done = threading.Event()

    def watcher() -> None:
        deadline = time.monotonic() + limit_s
        while not done.is_set() and time.monotonic() < deadline:
            status = engine.status()
            seen.append(status)
            if status["state"] != "starting" and until(status):
                found.append(status)
                break
            time.sleep(0.1)
        if stop and not done.is_set():
            os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    try:
        report = engine.run()
    finally:
        done.set()
        thread.join(5)
    return report, seen, found[0] if found else None


def named(name: str) -> Callable[[Status], bool]:
    return lambda s: s["bottleneck"]["name"] == name


def trail(seen: list[Status]) -> list[tuple[str, str]]:
    """What the statuses said, without repeats (for the failure message)."""
    out: list[tuple[str, str]] = []
    for s in seen:
        b = (s["bottleneck"]["name"], s["bottleneck"]["detail"])
        if not out or out[-1] != b:
            out.append(b)
    return out


def tree_site(hosts: list[str], pages: int, delay_s: float = 0.0, size: int = 0,
              robots: Answer = NOT_FOUND) -> Callable[[str, str, int], Answer]:  # fmt: skip
    """Every host links its root to /p0 .. /p<pages-1>; each page is ``size`` bytes of HTML
    at least and answered after ``delay_s``."""
    links = [f"/p{i}" for i in range(pages)]
    filler = b"<!-- " + b"x" * size + b" -->" if size else b""

    def script(host: str, path: str, nth: int) -> Answer:
        if host not in hosts:
            return NOT_FOUND
        if path == "/robots.txt":
            return robots
        body = page(*links).body if path == "/" else b"<html><body>leaf</body></html>"
        return Answer(200, body + filler, delay_s=delay_s)

    return script


def test_politeness_few_hosts_with_a_delay_and_many_slots(tmp_path: Path) -> None:
    hosts = ["a.test", "b.test"]
    with ScriptedServer(tree_site(hosts, 50)) as srv:
        # min_delay_s back to its default (1 s): two hosts, 256 slots: politeness limits
        s = settings(tmp_path, [srv.url(h, "/") for h in hosts], srv.resolve(*hosts),
                     politeness={"min_delay_s": 1.0})  # fmt: skip
        engine = Engine(s)
        report, seen, hit = watch(engine, named("politeness"), stop=True)
    assert hit is not None, trail(seen)
    assert hit["hosts"]["waiting"] >= 1 and hit["in_flight"] < hit["concurrency"]
    assert "waiting on their delay" in hit["bottleneck"]["detail"]
    assert report["stopped_by_signal"]


def test_fetch_slow_server_few_slots(tmp_path: Path) -> None:
    hosts = [f"h{i}.test" for i in range(8)]
    with ScriptedServer(tree_site(hosts, 20, delay_s=0.4)) as srv:
        # concurrency 256 -> 2: two slots for eight hosts whose pages take 0.4 s each
        s = settings(tmp_path, [srv.url(h, "/") for h in hosts], srv.resolve(*hosts),
                     fetch={"concurrency": 2})  # fmt: skip
        report, seen, hit = watch(Engine(s), named("fetch"), stop=True)
    assert hit is not None, trail(seen)
    assert hit["in_flight"] == hit["concurrency"] == 2
    assert hit["bottleneck"]["detail"] == "all 2 fetch slots busy"
    assert hit["cpu"]["loop_busy"] < 0.85
    assert report["stopped_by_signal"]


class BusyParser(LinkParser):
    """Link extraction plus 30 ms of CPU per page (a heavy parse, as a spider's may be)."""

    def parse(self, url: str, content_type: str, body: bytes) -> PageLinks:
        end = time.perf_counter() + 0.03
        while time.perf_counter() < end:
            pass
        return super().parse(url, content_type, body)


@pytest.mark.serial  # CPU shares of the loop's time: a CPU-hungry neighbour takes from them
def test_cpu_heavy_parse(tmp_path: Path) -> None:
    hosts = [f"h{i}.test" for i in range(30)]
    with ScriptedServer(tree_site(hosts, 40, size=20_000)) as srv:  # 20 KB pages
        s = settings(tmp_path, [srv.url(h, "/") for h in hosts], srv.resolve(*hosts))
        engine = Engine(s, parser=BusyParser(s.fetch.parse_types))

        first_page: list[float] = []

        def parse_bound(st: Status) -> bool:
            # the CPU shares are over the last BUSY_WINDOW_S: a window that reaches back before
            # the first page holds the start (robots.txt, seeds) and no parsing; read only the
            # windows wholly inside the crawl's parsing, chosen by time, never by their shares
            if st["pages"] and not first_page:
                first_page.append(st["elapsed_s"])
            if not first_page or st["elapsed_s"] < first_page[0] + BUSY_WINDOW_S + 1.0:
                return False
            shares = st["cpu"]["shares"]
            return named("cpu")(st) and max(shares, key=shares.__getitem__) == "parse"

        report, seen, hit = watch(engine, parse_bound, stop=True)
    assert hit is not None, trail(seen)
    assert hit["cpu"]["loop_busy"] >= 0.85
    assert hit["cpu"]["shares"]["parse"] >= 0.5
    assert hit["bottleneck"]["detail"].startswith("the loop is busy")
    assert "parse" in hit["bottleneck"]["detail"]
    assert report["stopped_by_signal"]


def test_backoff_retry_after(tmp_path: Path) -> None:
    hosts = ["a.test", "b.test", "c.test"]
    wait = {"a.test": "60", "b.test": "120", "c.test": "90"}

    def script(host: str, path: str, nth: int) -> Answer:
        if path == "/robots.txt":
            return NOT_FOUND
        if path == "/":
            return page("/1", "/2", "/3")
        return Answer(503, b"busy", (("Retry-After", wait[host]),))

    with ScriptedServer(script) as srv:
        s = settings(tmp_path, [srv.url(h, "/") for h in hosts], srv.resolve(*hosts))
        report, seen, hit = watch(
            Engine(s), lambda st: named("backoff")(st) and st["hosts"]["backoff"] == 3, stop=True
        )
    assert hit is not None, trail(seen)
    detail = hit["bottleneck"]["detail"]
    assert detail.startswith("3 hosts held by Retry-After, the worst http://b.test:"), detail
    held = float(detail.rsplit(" for ", 1)[1].split(" ")[0])
    assert 100 < held <= 120
    failing = {h["host"].split("//")[1].split(":")[0]: h for h in hit["failing_hosts"]}
    assert set(failing) == set(hosts) and failing["b.test"]["held_s"] > 100
    assert report["stopped_by_signal"] and not report["complete"]


def test_robots_slow_robots_txt(tmp_path: Path) -> None:
    hosts = [f"h{i}.test" for i in range(5)]
    slow = Answer(200, b"User-agent: *\nAllow: /\n", (("Content-Type", "text/plain"),), 3.0)
    with ScriptedServer(tree_site(hosts, 5, robots=slow)) as srv:
        s = settings(tmp_path, [srv.url(h, "/") for h in hosts], srv.resolve(*hosts))
        report, seen, hit = watch(Engine(s), named("robots"), stop=False)
    assert hit is not None, trail(seen)
    assert hit["hosts"]["robots"] == 5
    assert hit["bottleneck"]["detail"].startswith("5 hosts waiting for robots.txt")
    assert report["complete"]


def test_draining_named_while_transfers_finish(tmp_path: Path) -> None:
    hosts = [f"h{i}.test" for i in range(4)]
    # 5 s per page: the signal is handled once the loop's poll returns (up to 1 s) and the
    # status is sampled every 0.5 s; with 2 s pages, under load, the four transfers had ended
    # before a draining status was sampled (seen in CI)
    with ScriptedServer(tree_site(hosts, 10, delay_s=5.0)) as srv:
        s = settings(tmp_path, [srv.url(h, "/") for h in hosts], srv.resolve(*hosts))
        engine = Engine(s)
        sent = threading.Event()

        def until(st: Status) -> bool:
            if not sent.is_set() and st["in_flight"] == 4:
                sent.set()
                os.kill(os.getpid(), signal.SIGTERM)
            return sent.is_set() and st["bottleneck"]["name"] == "draining"

        report, seen, hit = watch(engine, until, stop=False)
    assert hit is not None, trail(seen)
    assert hit["state"] == "stopping"
    assert hit["bottleneck"]["detail"].startswith("stop requested: draining ")
    assert report["stopped_by_signal"]
    final = engine.status()
    assert final["state"] == "finished"
    assert final["bottleneck"] == {"name": "idle", "detail": "the crawl is finished"}


def test_stall_explained_crawl_delay_600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # status.STALL_S 10 -> 1: the sentence is the same after 1 s without a request as after
    # 10, and the test waited the 10 s for nothing else
    monkeypatch.setattr(status, "STALL_S", 1.0)
    robots = Answer(200, b"User-agent: *\nCrawl-delay: 600\n", (("Content-Type", "text/plain"),))
    with ScriptedServer(tree_site(["a.test"], 3, robots=robots)) as srv:
        s = settings(tmp_path, [srv.url("a.test", "/")], srv.resolve("a.test"))
        stalled = lambda st: "next request in" in st["bottleneck"]["detail"]  # noqa: E731
        report, seen, hit = watch(Engine(s), stalled, stop=True)
    assert hit is not None, trail(seen)
    name, detail = hit["bottleneck"]["name"], hit["bottleneck"]["detail"]
    assert name == "politeness"
    assert detail.startswith("1 host left, next request in "), detail
    assert detail.endswith(" s: its Crawl-delay"), detail
    due = float(detail.split("next request in ")[1].split(" s")[0])
    assert 560 <= due <= 600
    assert report["stopped_by_signal"] and report["fetched"] == 0  # robots.txt, then 600 s
