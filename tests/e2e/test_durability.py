"""Power-loss durability, checked from the system calls a real crawl makes (strace).

A power cut cannot be pulled in a test, so this checks it two ways, with
``output.durability = "power-loss"``:

* by content (``test_a_power_cut_loses_no_pages_line``): a crawl traced under strace is killed
  mid-crawl; from the trace, the crawl log's durable length (the bytes whose write returned
  before an fdatasync of the file began, that fdatasync returned before the kill, whichever
  thread made the calls) is computed and the file cut back to it, the worst a power cut can do
  to an append-only file (LMDB keeps what it committed, more than a power cut might: the worst
  case for this check). The crawl resumed to its end, every URL the server answered has its
  line and the report is complete. With ``"process-crash"`` (nothing fdatasynced) the same
  simulation must find pages without their line: the check can fail.
* by order, keyed by file (any thread or process that wrote it): the crawler never
  ``fdatasync``s its LMDB file (an LMDB commit) while bytes written to ``crawl.jsonl`` are not
  yet ``fdatasync``ed, and the crawl log has no unsynced byte when the crawl ends; the WARC
  writer child never reports progress (a write on its socket to the crawler, which marks the
  pages done in its next commit) while bytes written to a WARC file are not yet
  ``fdatasync``ed (or the file fsynced at its close). With ``"process-crash"`` the same
  checker must find both orders broken (so it can fail), and both crawls are complete.

What it does not show: that the storage stack honours fdatasync.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import crawl_config
from tests.waiting import wait_until

#: ``<pid>  <call>(<fd><<path>>, ...`` as strace -f -yy prints a call's start
_CALL = re.compile(r"^(\d+)\s+(write|writev|pwrite64|fdatasync|fsync)\((\d+)<([^>]*)>")


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    site = Site(SiteSpec(hosts=3, pages=90, page_bytes=20_000, crawl_delay_s=None, seed=5))
    with DemoServer(site) as server:
        yield site, server


def _violations(trace: str) -> dict[str, int]:
    """Count the orders broken (module docstring), and the events they are made of; unsynced
    bytes are kept by file, whichever thread or process wrote them."""
    dirty: dict[str, bool] = {}  # path -> unsynced bytes written to it
    archivers: set[int] = set()  # the threads that wrote a WARC file: their socket writes report
    counts = dict.fromkeys(
        ("commits", "log_syncs", "warc_syncs", "reports", "log_unsynced", "warc_unsynced"), 0
    )
    for line in trace.splitlines():
        m = _CALL.match(line)
        if m is None:
            continue
        tid, call, path = int(m[1]), m[2], m[4]
        kind = "log" if path.endswith("crawl.jsonl") else "warc" if ".warc.gz" in path else ""
        writes = call in ("write", "writev", "pwrite64")
        if kind and writes:
            dirty[path] = True
            if kind == "warc":
                archivers.add(tid)
        elif kind:  # fdatasync / fsync
            dirty[path] = False
            counts[f"{kind}_syncs"] += 1
        elif call == "fdatasync" and path.endswith("data.mdb"):
            counts["commits"] += 1
            counts["log_unsynced"] += any(v for p, v in dirty.items() if p.endswith("crawl.jsonl"))
        elif writes and path.startswith("UNIX-STREAM") and tid in archivers:
            counts["reports"] += 1
            counts["warc_unsynced"] += any(v for p, v in dirty.items() if ".warc.gz" in p)
    counts["log_unsynced_at_end"] = any(v for p, v in dirty.items() if p.endswith("crawl.jsonl"))
    return counts


def _traced_crawl(tmp_path: Path, site: Site, port: int, durability: str) -> dict[str, int]:
    work = tmp_path / durability
    work.mkdir()
    cfg = crawl_config(
        work,
        site,
        port,
        # shortened for time: 3 hosts at the default 1 s delay would need minutes of pages
        politeness={"min_delay_s": 0.02, "delay_factor": 0.0},
        output={"durability": durability, "min_free_bytes": 0},
    )
    trace = work / "trace.txt"
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-yy", "-s", "0", "-o", str(trace),
         "-e", "trace=write,writev,pwrite64,fdatasync,fsync", "-e", "signal=none",
         sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    if proc.returncode != 0 and "ptrace" in proc.stderr:
        pytest.skip(f"strace cannot trace here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((work / "out" / "report.json").read_text())
    assert report["complete"] is True
    assert report["fetched"] == len(site.expected_pages(port))
    return _violations(trace.read_text())


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (apt-get install strace)")
@pytest.mark.timeout(240)
def test_outputs_are_fdatasynced_before_each_commit(
    tmp_path: Path, site_server: tuple[Site, DemoServer]
) -> None:
    site, server = site_server
    durable = _traced_crawl(tmp_path, site, server.port, "power-loss")
    assert durable["commits"] > 5 and durable["reports"] > 5, durable
    assert durable["log_syncs"] > 0 and durable["warc_syncs"] > 0, durable
    assert durable["log_unsynced"] == 0, durable
    assert durable["log_unsynced_at_end"] == 0, durable
    assert durable["warc_unsynced"] == 0, durable
    # the checker does see the difference: without fdatasync both orders are broken
    fast = _traced_crawl(tmp_path, site, server.port, "process-crash")
    assert fast["commits"] > 5 and fast["reports"] > 5, fast
    assert fast["log_unsynced"] > 0 and fast["warc_unsynced"] > 0, fast
    assert fast["log_unsynced_at_end"] == 1, fast


#: a call that strace prints whole, or its start (``<unfinished ...>``), or its end (resumed)
_WHOLE = re.compile(r"^(\d+)\s+(\w+)\(\d+<([^>]*)>.*?(?:= (-?\d+|\?).*|<unfinished \.\.\.>)$")
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. (\w+) resumed>.*= (-?\d+|\?)")


def _durable_length(trace: str, name: str) -> tuple[int, int]:
    """From a ``strace -f -yy`` trace: how many bytes of the file ending in ``name`` are
    durable (written by calls that returned before an fdatasync or fsync of it began, that
    fdatasync having returned), whichever thread made the calls; and how many were written."""
    written = durable = 0
    started: dict[int, tuple[str, str, int]] = {}  # tid -> (call, path, bytes written then)
    for line in trace.splitlines():
        whole = _WHOLE.match(line)
        if whole is not None:
            tid, call, path, result = int(whole[1]), whole[2], whole[3], whole[4]
            if result is None:  # started, not yet returned: its end is a resumed line
                started[tid] = (call, path, written)
                continue
            begun = written
        else:
            resumed = _RESUMED.match(line)
            if resumed is None or int(resumed[1]) not in started:
                continue
            tid, result = int(resumed[1]), resumed[3]
            call, path, begun = started.pop(tid)
        if not path.endswith(name) or result == "?" or int(result) < 0:
            continue  # another file, or the call did not return (the kill), or it failed
        if call in ("write", "writev", "pwrite64"):
            written += int(result)
        elif call in ("fdatasync", "fsync"):
            durable = max(durable, begun)
    return durable, written


def _grown(path: Path, than: int) -> bool:
    return path.stat().st_size > than


def _crawler(strace: int) -> int:
    """The crawler strace started (its child running the cli, not a probe strace forks at
    its start), or 0 while there is none yet (from /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rpartition(")")[2].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):  # (it ended)
            continue
        if ppid == strace and b"frontier_crawl.cli" in cmdline:
            return int(stat.parent.name)
    return 0


@pytest.fixture(scope="module")
def long_site_server() -> Iterator[tuple[Site, DemoServer]]:
    """Pages of 20 KB, enough of them that a crawl is still running seconds after its 20th
    page, when it is killed (150 pages a second at most)."""
    site = Site(SiteSpec(hosts=3, pages=900, page_bytes=20_000, crawl_delay_s=None, seed=5))
    with DemoServer(site) as server:
        yield site, server


def _power_cut(tmp_path: Path, site: Site, server: DemoServer, durability: str) -> set[str]:
    """A crawl under strace, killed once it has committed pages whose lines are in the file;
    the crawl log cut back to its durable length; the crawl resumed to its end. Returns the
    URLs the server answered that have no line in the final crawl log."""
    work = tmp_path / durability
    work.mkdir()
    since = len(server.log())
    cfg = crawl_config(
        work,
        site,
        server.port,
        # shortened for time: 3 hosts at the default 1 s delay would need minutes of pages
        politeness={"min_delay_s": 0.02, "delay_factor": 0.0},
        # WARC off: a page waits for its crawl-log line only (with WARC on its records'
        # settling could hide a line marked done too early); commit_interval_s: the default
        output={"durability": durability, "min_free_bytes": 0, "warc": False},
    )
    log = work / "out" / "crawl.jsonl"
    trace = work / "trace.txt"
    strace = subprocess.Popen(
        ["strace", "-f", "-qq", "-yy", "-s", "0", "-o", str(trace),
         "-e", "trace=write,writev,pwrite64,fdatasync,fsync", "-e", "signal=none",
         sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    crawler = 0
    failed: AssertionError | None = None
    try:
        crawler = wait_until("the crawler started under strace", lambda: _crawler(strace.pid),
                             alive=strace)  # fmt: skip
        # 20 pages' lines in the file, then the file grown twice more, and the kill at once:
        # the lines are handed to the file at a commit (their thread's or the loop's), so the
        # commit that marks the 20 pages done (or has them wait for their lines) has ended,
        # and the last growth's bytes are likely not yet fdatasynced (the cut takes them)
        wait_until("20 pages' lines in the crawl log",
                   lambda: log.exists() and log.read_bytes().count(b'"outcome":"fetched"') >= 20,
                   alive=strace, every_s=0.002)  # fmt: skip
        for what in ("the crawl log grown", "the crawl log grown again"):
            size = log.stat().st_size
            wait_until(what, partial(_grown, log, size), alive=strace, every_s=0.001)
    except AssertionError as exc:  # (raised below, unless strace could not trace at all)
        failed = exc
    finally:
        if crawler:
            with contextlib.suppress(ProcessLookupError):  # (ended: the report says so below)
                os.kill(crawler, signal.SIGKILL)
        else:
            strace.kill()
        _, err = strace.communicate(timeout=30)
    if not crawler and "ptrace" in err.decode(errors="replace"):
        pytest.skip(f"strace cannot trace here: {err.decode()[:200]}")
    if failed is not None:
        raise failed
    report = work / "out" / "report.json"
    assert not report.exists() or not json.loads(report.read_text())["complete"]  # mid-crawl
    durable, written = _durable_length(trace.read_text(), "crawl.jsonl")
    size = log.stat().st_size
    # (a write the kill caught in its return is in the file but not in ``written``)
    assert durable <= written <= size, (durable, written, size)
    with log.open("r+b") as f:  # the power cut: what was not fdatasynced is gone
        f.truncate(durable)
    done = subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    final = json.loads(report.read_text())
    assert final["complete"] is True
    assert final["fetched"] == len(site.expected_pages(server.port))
    port = server.port
    answered = {f"http://{e.host}:{port}{e.path}" for e in server.log()[since:]}
    lines = {json.loads(x)["url"] for x in log.read_text(encoding="utf-8").splitlines()}
    return answered - lines


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (apt-get install strace)")
@pytest.mark.timeout(300)
def test_a_power_cut_loses_no_pages_line(
    tmp_path: Path, long_site_server: tuple[Site, DemoServer]
) -> None:
    """Module docstring (by content): after the simulated power cut and a resume, every URL
    the server answered (pages, robots.txt) has its crawl-log line; without fdatasync
    (``"process-crash"``) the committed pages' lines are gone with the cut and never
    rewritten (those pages are done)."""
    site, server = long_site_server
    assert _power_cut(tmp_path, site, server, "power-loss") == set()
    lost = _power_cut(tmp_path, site, server, "process-crash")
    assert len(lost) >= 20, sorted(lost)
