"""The control API against real crawls of the demo web (a crawl subprocess, its API on a free
loopback port): every rule of the seam and every command, observed in the server's own log.

Settings that differ from the defaults, beyond conftest.crawl_config's (and why):
* ``control.listen = "127.0.0.1:0"``: the API is off by default; port 0 so tests never collide;
* ``min_delay_s`` 0.02 -> 0.05 in most tests: a crawl of a few hundred pages lasts long enough
  (several seconds) to be steered while it runs, yet each test stays well under a minute.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer, RequestLogEntry
from frontier_crawl.demo.site import Site, SiteSpec
from frontier_crawl.engine import Engine
from tests.conftest import crawl_config, served_pages
from tests.control_client import Api, ctl, finish, pages_of, start_crawl
from tests.scripted_server import NOT_FOUND, Answer, ScriptedServer, crawl_settings, page
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

DELAY_S = 0.05
LISTEN = {"listen": "127.0.0.1:0"}
#: a request the crawler submitted just before a command took effect may reach the server a
#: little later (loopback, but a loaded 2-core machine): requests starting this soon after the
#: reply are not counted against the command
SLACK_S = 0.25


@pytest.fixture(scope="module")
def web() -> Iterator[tuple[Site, DemoServer]]:
    """3 hosts, 360 pages (>= 20 KB each: realistic sizes), no Crawl-delay."""
    site = Site(SiteSpec(hosts=3, pages=360, crawl_delay_s=None, seed=13, page_bytes=20_000))
    with DemoServer(site) as server:
        yield site, server


def config(tmp_path: Path, site: Site, server: DemoServer, **sections: dict[str, object]) -> Path:
    politeness = {"min_delay_s": DELAY_S, "user_agent": "frontier-crawl-test/0.1"}
    politeness.update(sections.pop("politeness", {}))
    return crawl_config(tmp_path, site, server.port, control=LISTEN, politeness=politeness,
                        **sections)  # fmt: skip


def test_api_rules(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """Token (missing, wrong: 401 and logged, with a count), Host check, methods, paths,
    bodies, no CORS (a preflight without the token is 405 too), token file mode 0600."""
    site, server = web
    cfg = config(tmp_path, site, server, politeness={"min_delay_s": 0.2})
    out = cfg.parent / "out"
    proc = start_crawl(cfg)
    try:
        api = Api(out)
        mode = stat.S_IMODE(os.stat(out / "control.token").st_mode)
        assert mode == 0o600, oct(mode)
        assert api.raw("GET", "/api/status", headers={"Authorization": None}).status == 401
        wrong = api.raw("GET", "/api/status", headers={"Authorization": "Bearer nope"})
        assert wrong.status == 401 and "error" in wrong.body
        assert api.raw("POST", "/api/pause", b"{}", {"Authorization": None}).status == 401
        # the token as a query parameter counts on GET / only
        assert api.raw("GET", f"/api/status?token={api.token}",
                       headers={"Authorization": None}).status == 401  # fmt: skip
        assert api.raw("GET", f"/?token={api.token}", headers={"Authorization": None}).status == 200
        # DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends its own Host
        assert api.raw("GET", "/api/status", headers={"Host": f"evil.example:{api.port}"}
                       ).status == 421  # fmt: skip
        assert api.raw("GET", "/api/status", headers={"Host": "127.0.0.1:1"}).status == 421
        assert api.raw("GET", "/api/status", headers={"Host": f"localhost:{api.port}"}
                       ).status == 200  # fmt: skip
        # methods and paths
        assert api.raw("GET", "/api/pause").status == 405  # GET never mutates
        assert api.raw("POST", "/api/status", b"{}").status == 405
        assert api.raw("DELETE", "/api/block").status == 405
        assert api.raw("GET", "/api/nothing").status == 404
        preflight = api.raw("OPTIONS", "/api/pause", headers={"Origin": "http://evil.example"})
        assert preflight.status == 405
        assert not [h for h in preflight.headers if h.startswith("access-control")]
        preflight = api.raw("OPTIONS", "/api/pause", headers={
            "Origin": "http://evil.example", "Access-Control-Request-Method": "POST",
            "Authorization": None})  # fmt: skip
        assert preflight.status == 405 and preflight.headers["allow"] == "POST"
        assert not [h for h in preflight.headers if h.startswith("access-control")]
        status = api.raw("GET", "/api/status", headers={"Origin": "http://evil.example"})
        assert status.status == 200
        assert not [h for h in status.headers if h.startswith("access-control")]
        assert status.body["paused"] is False  # the GETs above changed nothing
        # bodies
        for path, body in [("/api/block", b"{}"), ("/api/block", b'{"host": "a b"}'),
                           ("/api/block", b"not json"), ("/api/seeds", b'{"urls": "x"}'),
                           ("/api/host-delay", b'{"host": "x.org", "delay_s": -1}'),
                           ("/api/concurrency", b'{"value": 0}'), ("/api/pause", b"[1]")]:
            bad = api.raw("POST", path, body)
            assert bad.status == 400 and bad.body["error"], (path, body, bad)
        # announced over 1 MiB: refused before a byte of it is read
        huge = api.raw("POST", "/api/seeds", b"", {"Content-Length": str((1 << 20) + 1)})
        assert huge.status == 413
        assert api.post("/api/stop")["result"] == "applied"
        err = finish(proc)
    finally:
        proc.kill()
        proc.wait()
    # one line at the first 401, the next ones counted (one line per client per minute at most)
    assert err.count("refused: no token") == 1, err[-2000:]
    assert re.search(r"3 more request\(s\) from 127\.0\.0\.1 refused in the last \d+ s "
                     r"\(no token 2, wrong token 1\)", err), err[-2000:]  # fmt: skip
    assert not (out / "control.addr").exists() and not (out / "control.token").exists()
    report = json.loads((out / "report.json").read_text())
    assert report["stopped_by_signal"] is True and report["complete"] is False


def test_pause_resume(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """Pause: no request starts while paused (in-flight ones finish), the status says so and
    the clock goes on; resume: the crawl completes."""
    site, server = web
    cfg = config(tmp_path, site, server)
    out = cfg.parent / "out"
    since = len(server.log(wait_s=0.0))
    proc = start_crawl(cfg)
    try:
        api = Api(out)
        wait_until("some pages", lambda: api.status()["pages"] >= 20)
        reply = api.post("/api/pause")
        paused_at = time.monotonic()
        assert reply["result"] == "applied" and reply["paused"] is True
        status = wait_until("paused state", lambda: (s := api.status())["state"] == "paused" and s)
        assert status["paused"] is True
        time.sleep(2.0)
        resumed_at = time.monotonic()
        later = api.status()
        assert later["elapsed_s"] > status["elapsed_s"] + 1.0  # time keeps going
        during = [e for h in site.hosts
                  for e in pages_of(server, h, paused_at + SLACK_S, resumed_at)]  # fmt: skip
        assert during == [], f"{len(during)} requests started while paused"
        assert later["pages"] == api.status()["pages"]
        assert api.post("/api/resume")["paused"] is False
        finish(proc)
    finally:
        proc.kill()
        proc.wait()
    fetched = served_pages(server, since)
    assert set(fetched) == site.expected_pages(server.port)


def host_pages(site: Site, server: DemoServer, host: str) -> set[str]:
    return {u for u in site.expected_pages(server.port) if f"//{host}:" in u}


def commits(api: Api) -> float:
    """Group commits the crawl has made, from its ``/metrics``."""
    text = api.get("/metrics").decode()
    found = re.search(r"^frontier_crawl_commits_total\{[^}]*\} (\S+)$", text, re.M)
    assert found, text
    return float(found[1])


def gaps(entries: list[RequestLogEntry]) -> list[float]:
    """Seconds between consecutive request starts, as the server saw them."""
    return [b - a for a, b in itertools.pairwise(sorted(e.started for e in entries))]


def spacings(
    server: DemoServer, *wanted: tuple[str, int], since: float
) -> list[list[float]] | None:
    """For each (host, n): the spacings of its requests started since ``since``, once every
    host has at least n of them; None before."""
    found = [gaps(pages_of(server, host, since)) for host, _ in wanted]
    return found if all(len(g) >= n for g, (_, n) in zip(found, wanted, strict=True)) else None


def test_block_unblock(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """Block: no request to the host while it is blocked, its URLs kept (the crawl waits for an
    unblock rather than end); unblock: they are fetched, and the crawl completes."""
    site, server = web
    cfg = config(tmp_path, site, server)
    out = cfg.parent / "out"
    since = len(server.log(wait_s=0.0))
    host, others = site.hosts[1], [h for h in site.hosts if h != site.hosts[1]]
    proc = start_crawl(cfg)
    try:
        api = Api(out)
        wait_until("some pages", lambda: api.status()["pages"] >= 10)
        reply = api.post("/api/block", {"host": f"HTTP://{host.upper()}:{server.port}/x"})
        blocked_at = time.monotonic()
        assert reply["result"] == "applied" and reply["host"] == host and reply["held"] > 0
        rest = set().union(*(host_pages(site, server, h) for h in others))
        wait_until("the other hosts crawled",
                   lambda: rest <= set(served_pages(server, since)), timeout_s=60)  # fmt: skip
        time.sleep(1.0)
        assert pages_of(server, host, blocked_at + SLACK_S) == []
        status = api.status()
        assert status["blocked_hosts"] == [host] and status["queued"] > 0
        assert proc.poll() is None  # it waits for an unblock: the API is on
        assert not host_pages(site, server, host) <= set(served_pages(server, since))
        released = api.post("/api/unblock", {"host": host})
        assert released["released"] > 0
        finish(proc)
    finally:
        proc.kill()
        proc.wait()
    assert set(served_pages(server, since)) == site.expected_pages(server.port)


def test_host_delay(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """One host's delay, set and then cleared (with ctl): the spacing in the server's log
    follows at once; the other hosts keep theirs."""
    site, server = web
    cfg = config(tmp_path, site, server)
    out = cfg.parent / "out"
    slow, other = site.hosts[0], site.hosts[2]
    proc = start_crawl(cfg)
    try:
        api = Api(out)
        wait_until("some pages", lambda: api.status()["pages"] >= 10)
        reply = api.post("/api/host-delay", {"host": slow, "delay_s": 0.4})
        assert reply["delay_s"] == 0.4 and reply["origins"] == 1
        set_at = time.monotonic()
        assert api.status()["host_delays"] == {slow: 0.4}
        # the spacings a 3 s window holds on an idle machine (6 at 0.4 s, 20 and more at
        # 0.05 s), waited for: a crawl short of CPU makes fewer requests in a fixed window,
        # and a median of two is no median (a fast host's [2.03, 0.08] seen at -n 4)
        spaced, fast = wait_until(
            "6 spacings of the slow host and 20 of another",
            lambda: spacings(server, (slow, 6), (other, 20), since=set_at + 0.5), alive=proc
        )
        assert min(spaced) >= 0.4 * 0.9, spaced
        assert sorted(fast)[len(fast) // 2] < 0.2, fast
        done = ctl(cfg, "delay", slow, "off")
        assert done.returncode == 0 and "back to the config" in done.stdout, done
        cleared_at = time.monotonic()
        (again,) = wait_until("10 spacings of the slow host cleared",
                              lambda: spacings(server, (slow, 10), since=cleared_at + 0.5),
                              alive=proc)  # fmt: skip
        assert sorted(again)[len(again) // 2] < 0.2, again
        assert api.status()["host_delays"] == {}
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"# two new, one known\nhttp://{other}:{server.port}/added-by-ctl\n\n"
                         f"http://{other}:{server.port}/added-by-ctl-2\n"
                         f"http://{other}:{server.port}/\n")  # fmt: skip
        added = ctl(cfg, "add-seeds", str(seeds))
        assert added.returncode == 0 and "2 of 3 URL(s) admitted" in added.stdout, added
        wait_until("the added seeds fetched", lambda: {"/added-by-ctl", "/added-by-ctl-2"}
                   <= {e.path for e in pages_of(server, other, cleared_at)})  # fmt: skip
        assert ctl(cfg, "stop").returncode == 0
        finish(proc)
    finally:
        proc.kill()
        proc.wait()


def test_reload(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """ctl reload applies a delay change at once; a changed identity key is refused, naming
    it, and the running config stays; a broken file (by SIGHUP) is reported and changes
    nothing; SIGHUP with a good file applies it."""
    site, server = web
    cfg = config(tmp_path, site, server)
    out = cfg.parent / "out"
    proc = start_crawl(cfg)
    try:
        api = Api(out)
        wait_until("some pages", lambda: api.status()["pages"] >= 10)
        config(tmp_path, site, server, politeness={"min_delay_s": 0.4})
        done = ctl(cfg, "reload")
        assert done.returncode == 0 and "politeness.min_delay_s" in done.stdout, done
        reloaded_at = time.monotonic()
        # spacings of every host, waited for (a fixed window assumed the CPU to make them)
        each = wait_until("4 spacings of each host",
                          lambda: spacings(server, *((h, 4) for h in site.hosts),
                                           since=reloaded_at + 0.5), alive=proc)  # fmt: skip
        slow = [g for host in each for g in host]
        assert min(slow) >= 0.4 * 0.9, slow
        # an identity key: refused, nothing applied (the delay change beside it neither)
        config(tmp_path, site, server, workers={"partition_by": "registered-domain"})
        refused = ctl(cfg, "reload")
        assert refused.returncode == 1 and "workers.partition_by" in refused.stderr, refused
        assert "identity" in refused.stderr
        refused_at = time.monotonic()
        # a file with an error, by SIGHUP: reported in the log, the running config stays
        cfg.write_text(cfg.read_text().replace("[politeness]", "[politeness]\nmin_delay_s = -1"))
        proc.send_signal(signal.SIGHUP)
        time.sleep(2.0)
        still = [g for h in site.hosts for g in gaps(pages_of(server, h, refused_at + 0.5))]
        assert len(still) >= 2 and min(still) >= 0.4 * 0.9, still
        assert proc.poll() is None
        config(tmp_path, site, server)  # back to 0.05
        proc.send_signal(signal.SIGHUP)
        wait_until("fast again", lambda: len(pages_of(server, site.hosts[0],
                                                      time.monotonic() - 0.5)) >= 3)  # fmt: skip
        assert ctl(cfg, "stop").returncode == 0
        err = finish(proc)
    finally:
        proc.kill()
        proc.wait()
    assert "config not reloaded" in err and "min_delay_s" in err, err[-2000:]
    assert "config reloaded: politeness.min_delay_s" in err


def test_commands_survive_kill9(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """A block, a host delay and an added seed, then kill -9: the restarted crawl (a new
    token) still blocks the host, still spaces the other, and fetches the added seed once the
    host is unblocked."""
    site, server = web
    cfg = config(tmp_path, site, server)
    out = cfg.parent / "out"
    since = len(server.log(wait_s=0.0))
    blocked, slow = site.hosts[1], site.hosts[0]
    added = f"http://{blocked}:{server.port}/added-by-the-operator"
    proc = start_crawl(cfg)
    try:
        api = Api(out)
        wait_until("some pages", lambda: api.status()["pages"] >= 10)
        api.post("/api/block", {"host": blocked})
        api.post("/api/host-delay", {"host": slow, "delay_s": 0.3})
        assert api.post("/api/seeds", {"urls": [added, added, "ftp://x/"]})["admitted"] == 1
        # durable with the next group commit after the replies (the snapshot read first is
        # from the replies or later, so one more commit than it shows holds the commands)
        replied = commits(api)
        wait_until("a group commit after the commands", lambda: commits(api) > replied)
        proc.kill()
        proc.wait()
        first_token = api.token
        (out / "control.addr").unlink()  # left by the kill (ctl would say: not running)
        proc = start_crawl(cfg)
        api = Api(out)
        assert api.token != first_token  # a new token at every start
        restarted_at = time.monotonic()
        status = api.status()
        assert status["blocked_hosts"] == [blocked]
        assert status["host_delays"] == {slow: 0.3}
        # the window is the slow host's next 7 requests (2.1 s at 0.3 s; a fixed 2.5 s one
        # assumed the CPU to make them): none to the blocked host meanwhile
        (spaced,) = wait_until("7 spacings of the slow host",
                               lambda: spacings(server, (slow, 7), since=restarted_at),
                               alive=proc)  # fmt: skip
        assert pages_of(server, blocked, restarted_at) == []
        assert min(spaced) >= 0.3 * 0.9, spaced
        api.post("/api/unblock", {"host": blocked})
        api.post("/api/host-delay", {"host": slow, "delay_s": None})
        finish(proc)
    finally:
        proc.kill()
        proc.wait()
    fetched = served_pages(server, since)
    assert site.expected_pages(server.port) <= set(fetched)
    assert [e for e in server.log() if e.path == "/added-by-the-operator"]


def test_ctl_when_not_running(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """ctl says why it cannot reach a crawl: API off (exit 3), not running (exit 3), a stale
    address file (exit 3); bad usage is 2."""
    site, server = web
    (tmp_path / "off").mkdir()
    off = crawl_config(tmp_path / "off", site, server.port)
    done = ctl(off, "status")
    assert done.returncode == 3 and "control API is off" in done.stderr, done
    cfg = config(tmp_path, site, server)
    done = ctl(cfg, "pause")
    assert done.returncode == 3 and "not running" in done.stderr, done
    out = cfg.parent / "out"
    out.mkdir()
    (out / "control.addr").write_text("127.0.0.1:1\n")  # as a kill -9 leaves it
    (out / "control.token").write_text("x\n")
    done = ctl(cfg, "status")
    assert done.returncode == 3 and "not running" in done.stderr, done
    assert ctl(cfg, "delay", "a.example").returncode == 2
    assert ctl(cfg, "frobnicate").returncode == 2
    # an address file that is not an address (cut short, or planted): said, no traceback
    for text in ("", "127.0.0.1:", "127.0.0.1:99999", "evil\x00:80\n", "127.0.0.1:1 2\n"):
        (out / "control.addr").write_text(text)
        done = ctl(cfg, "status")
        assert done.returncode == 3 and "control.addr" in done.stderr, (text, done)
        assert "Traceback" not in done.stderr, done.stderr


def test_operator_scenario(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """The issue's "done when", with ctl against one running crawl: open the dashboard, read
    why it is slow, pause, block a host, change a delay, reload the file, resume; all without
    a restart, each seen in the server's log; then unblock, and the crawl completes."""
    site, server = web
    # min_delay_s 0.3: a politeness-bound crawl, so the status has a reason to give
    cfg = config(tmp_path, site, server, politeness={"min_delay_s": 0.3})
    out = cfg.parent / "out"
    since = len(server.log(wait_s=0.0))
    blocked, slowed = site.hosts[2], site.hosts[0]
    proc = start_crawl(cfg)
    try:
        api = Api(out)
        wait_until("some pages", lambda: api.status()["pages"] >= 5)
        url = ctl(cfg, "dashboard").stdout.strip()
        assert url == f"http://{api.address}/?token={api.token}"
        page = api.raw("GET", url.split(api.address, 1)[1], headers={"Authorization": None})
        assert page.status == 200 and page.headers["content-type"].startswith("text/html")
        said = ctl(cfg, "status")
        assert said.returncode == 0 and "bottleneck" in said.stdout, said
        status = json.loads(ctl(cfg, "status", "--json").stdout)
        assert status["state"] == "running" and status["bottleneck"]["name"]
        assert ctl(cfg, "pause").returncode == 0
        paused_at = time.monotonic()
        assert "blocked" in ctl(cfg, "block", blocked).stdout
        assert "0.8 s" in ctl(cfg, "delay", slowed, "0.8").stdout
        config(tmp_path, site, server, politeness={"min_delay_s": 0.05})
        assert "politeness.min_delay_s" in ctl(cfg, "reload").stdout
        assert json.loads(ctl(cfg, "status", "--json").stdout)["state"] == "paused"
        time.sleep(1.0)
        resumed_at = time.monotonic()  # before: ctl's reply comes after the loop resumed
        assert ctl(cfg, "resume").returncode == 0
        during = [e for h in site.hosts
                  for e in pages_of(server, h, paused_at + SLACK_S, resumed_at)]  # fmt: skip
        assert during == []
        time.sleep(3.0)
        assert pages_of(server, blocked, paused_at + SLACK_S) == []
        spaced = gaps(pages_of(server, slowed, resumed_at))
        assert len(spaced) >= 2 and min(spaced) >= 0.8 * 0.9, spaced
        fast = gaps(pages_of(server, site.hosts[1], resumed_at + 0.5))
        assert fast and sorted(fast)[len(fast) // 2] < 0.2, fast  # the reloaded delay
        assert ctl(cfg, "unblock", blocked).returncode == 0
        assert ctl(cfg, "delay", slowed, "off").returncode == 0
        finish(proc)
    finally:
        proc.kill()
        proc.wait()
    assert set(served_pages(server, since)) == site.expected_pages(server.port)


def test_worker_processes(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """With two worker processes the coordinator serves one API: the status lists both
    workers, a block reaches the host's owner, pause and resume reach both, and a seed goes
    to its host's owner."""
    site, server = web
    cfg = config(tmp_path, site, server, workers={"processes": 2})
    out = cfg.parent / "out"
    since = len(server.log(wait_s=0.0))
    blocked = site.hosts[1]
    added = f"http://{site.hosts[0]}:{server.port}/added-to-a-worker"
    proc = start_crawl(cfg)
    try:
        api = Api(out)
        status = wait_until("both workers", lambda: (s := api.status())["pages"] >= 10
                            and len(s["workers"]) == 2 and s)  # fmt: skip
        assert {w["worker"] for w in status["workers"]} == {0, 1}
        assert api.post("/api/block", {"host": blocked})["result"] == "applied"
        assert api.post("/api/seeds", {"urls": [added]})["admitted"] == 1
        api.post("/api/pause")
        paused_at = time.monotonic()
        assert wait_until("paused", lambda: api.status()["state"] == "paused")
        time.sleep(1.5)
        resumed_at = time.monotonic()
        during = [e for h in site.hosts
                  for e in pages_of(server, h, paused_at + SLACK_S, resumed_at)]  # fmt: skip
        assert during == []
        api.post("/api/resume")
        config(tmp_path, site, server, workers={"processes": 2}, politeness={"min_delay_s": 0.02})
        done = ctl(cfg, "reload")  # every worker reads it: one reply
        assert done.returncode == 0 and done.stdout.strip() == "reloaded: politeness.min_delay_s"
        config(tmp_path, site, server, workers={"processes": 3})
        refused = ctl(cfg, "reload")
        assert refused.returncode == 1 and "workers.processes" in refused.stderr, refused
        time.sleep(1.0)
        assert pages_of(server, blocked, paused_at) == []
        assert api.status()["blocked_hosts"] == [blocked]
        api.post("/api/unblock", {"host": blocked})
        finish(proc)
    finally:
        proc.kill()
        proc.wait()
    assert site.expected_pages(server.port) <= set(served_pages(server, since))
    assert [e for e in server.log() if e.path == "/added-to-a-worker"]


def most_open(entries: list[RequestLogEntry]) -> int:
    """The most requests the server had open at once, each from its arrival (the kernel's
    stamp) to the instant before its first response byte (``responding``). Not to
    ``finished``: that is stamped by a server thread after its write returns, which on a
    loaded machine can be after the crawler has read the whole answer and sent its next
    request (seen: 2 open at concurrency 1). The crawler cannot finish a response, and so
    free its one slot, before that response has begun."""
    edges = sorted([(e.started, 1) for e in entries] + [(e.responding, -1) for e in entries])
    most = now = 0
    for _t, step in edges:
        now += step
        most = max(most, now)
    return most


def test_concurrency(tmp_path: Path) -> None:
    """Concurrency lowered to 1: the scripted server (slow answers, four hosts) never has two
    requests open at once; raised again, it has."""
    hosts = [f"h{i}.test" for i in range(4)]

    def script(host: str, path: str, nth: int) -> Answer:
        if path == "/robots.txt":
            return NOT_FOUND
        n = int(path.strip("/") or 0)
        return Answer(200, page(f"/{n + 1}").body, delay_s=0.15) if n < 40 else NOT_FOUND

    with ScriptedServer(script) as srv:
        seeds = [srv.url(h, "/") for h in hosts]
        # min_delay_s 0.01 (crawl_settings): each host is limited by its slow answers alone
        settings = crawl_settings(tmp_path, seeds, srv.resolve(*hosts), control=LISTEN)
        engine = Engine(settings)
        reports: list[dict[str, object]] = []
        crawl = threading.Thread(target=lambda: reports.append(engine.run()), daemon=True)
        crawl.start()
        try:
            api = Api(Path(settings.crawl.output_dir))
            wait_until("requests", lambda: len(srv.log()) >= 12)
            assert most_open(srv.log()) >= 3
            assert api.post("/api/concurrency", {"value": 1})["concurrency"] == 1
            lowered_at = time.monotonic()
            assert api.status()["concurrency"] == 1
            time.sleep(2.0)
            one = [e for e in srv.log() if e.started > lowered_at + 0.5]  # in flight drained
            assert len(one) >= 5 and most_open(one) == 1
            api.post("/api/concurrency", {"value": 4})
            raised_at = time.monotonic()
            time.sleep(1.0)
            assert most_open([e for e in srv.log() if e.started > raised_at]) >= 3
            api.post("/api/stop")
            crawl.join(30)
        finally:
            engine.request_stop()  # as a SIGTERM, should an assertion fail
            crawl.join(30)
    assert reports and reports[0]["stopped_by_signal"] is True


def test_listen_address_taken(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    """A listen address that cannot be bound is a config error naming the key (exit 2),
    before any request."""
    site, server = web
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = crawl_config(tmp_path, site, server.port, control={"listen": f"127.0.0.1:{port}"})
        since = len(server.log(wait_s=0.0))
        proc = subprocess.run([sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert f"control.listen: cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert len(server.log(wait_s=0.0)) == since
