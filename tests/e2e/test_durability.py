"""Power-loss durability, checked from the system calls a real crawl makes (strace).

A power cut cannot be pulled in a test, so this checks the order the guarantee rests on, with
``output.durability = "power-loss"``:

* the crawler process never ``fdatasync``s its LMDB file (an LMDB commit) while bytes it wrote
  to ``crawl.jsonl`` are not yet ``fdatasync``ed;
* the WARC writer child never reports progress (a write on its socket to the crawler, which
  marks the pages done in its next commit) while bytes it wrote to a WARC file are not yet
  ``fdatasync``ed (or the file fsynced at its close).

With ``"process-crash"`` the same checker must find both orders broken (so it can fail), and
both crawls are complete. What it does not show: that the storage stack honours fdatasync.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import crawl_config

#: ``<pid>  <call>(<fd><<path>>, ...`` as strace -f -yy prints a call's start
_CALL = re.compile(r"^(\d+)\s+(write|writev|pwrite64|fdatasync|fsync)\((\d+)<([^>]*)>")


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    site = Site(SiteSpec(hosts=3, pages=90, page_bytes=20_000, crawl_delay_s=None, seed=5))
    with DemoServer(site) as server:
        yield site, server


def _violations(trace: str) -> dict[str, int]:
    """Count both orders broken (module docstring), and the events they are made of."""
    dirty: dict[tuple[int, str], bool] = {}  # (pid, "log" | "warc") -> unsynced bytes
    counts = dict.fromkeys(
        ("commits", "log_syncs", "warc_syncs", "reports", "log_unsynced", "warc_unsynced"), 0
    )
    for line in trace.splitlines():
        m = _CALL.match(line)
        if m is None:
            continue
        pid, call, path = int(m[1]), m[2], m[4]
        kind = "log" if path.endswith("crawl.jsonl") else "warc" if ".warc.gz" in path else ""
        writes = call in ("write", "writev", "pwrite64")
        if kind and writes:
            dirty[pid, kind] = True
        elif kind:  # fdatasync / fsync
            dirty[pid, kind] = False
            counts[f"{kind}_syncs"] += 1
        elif call == "fdatasync" and path.endswith("data.mdb"):
            counts["commits"] += 1
            counts["log_unsynced"] += dirty.get((pid, "log"), False)
        elif writes and path.startswith("UNIX-STREAM") and (pid, "warc") in dirty:
            counts["reports"] += 1
            counts["warc_unsynced"] += dirty[pid, "warc"]
    return counts


def _traced_crawl(tmp_path: Path, site: Site, port: int, durability: str) -> dict[str, int]:
    work = tmp_path / durability
    work.mkdir()
    cfg = crawl_config(
        work,
        site,
        port,
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
    assert durable["warc_unsynced"] == 0, durable
    # the checker does see the difference: without fdatasync both orders are broken
    fast = _traced_crawl(tmp_path, site, server.port, "process-crash")
    assert fast["commits"] > 5 and fast["reports"] > 5, fast
    assert fast["log_unsynced"] > 0 and fast["warc_unsynced"] > 0, fast
