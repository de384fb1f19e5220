"""Free space above the floor but below what the seen-set (Bloom) snapshot needs, on a real
small tmpfs (issue 17): the snapshot cannot be written at any checkpoint, nor at the end. It is
not needed to resume exactly (a restart loads the previous snapshot and the digests logged
since, or rebuilds the filter from LMDB), so the crawl goes on and ends complete, exit 0, with
one warning; the same command run again ends at once, exit 0.

Mounting needs root (or CAP_SYS_ADMIN): where ``mount`` is refused the tests are skipped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site
from tests.e2e.test_disk_full import MIB, Tmpfs, _check_complete, _config, big_site, tmpfs

__all__ = ["big_site", "tmpfs"]  # the fixtures, shared with test_disk_full.py

#: seen_capacity 10^5 (the tests' default) -> 2 x 10^6: a snapshot of about 8.4 MB, more
#: than the free space the test leaves (the default capacity's is 42 MB)
CAPACITY = 2_000_000


def _run(cfg: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=90,
    )


@pytest.mark.timeout(180)
def test_no_room_for_the_seen_snapshot_does_not_fail_the_crawl(
    tmp_path: Path, tmpfs: Tmpfs, big_site: tuple[Site, DemoServer]
) -> None:
    site, server = big_site
    since = len(server.log())
    tmpfs.resize(32 * MIB)
    floor = 1 * MIB
    # the floor plus 7 MiB: room for the crawl (about 4 MB), not for an 8.4 MB snapshot
    filler = tmpfs.path / "filler"
    filler.write_bytes(b"\0" * (tmpfs.free() - floor - 7 * MIB))
    cfg = _config(tmp_path, tmpfs, site, server.port, min_free_bytes=floor)
    text = cfg.read_text().replace("seen_capacity = 100000", f"seen_capacity = {CAPACITY}")
    assert text != cfg.read_text()
    cfg.write_text(text)
    first = _run(cfg)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Traceback" not in first.stderr, first.stderr[-3000:]
    skipped = [line for line in first.stderr.splitlines() if "snapshot" in line]
    assert len(skipped) == 1 and "not written" in skipped[0], first.stderr[-3000:]
    out = tmpfs.path / "out"
    report = _check_complete(site, server, since, out)
    assert not (out / "state" / "seen.bloom").exists()
    assert not list((out / "state").glob("seen.bloom.tmp"))  # no partial copy left
    # the same command again: nothing left to do, and it says so with exit 0
    again = _run(cfg)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((out / "report.json").read_text())["fetched"] == report["fetched"]
    served = [e for e in server.log()[since:] if e.status == 200 and e.path != "/robots.txt"]
    assert len(served) == len({(e.host, e.path) for e in served})  # every page once


@pytest.mark.timeout(120)
def test_a_low_space_stop_says_so_once(
    tmp_path: Path, tmpfs: Tmpfs, big_site: tuple[Site, DemoServer]
) -> None:
    """low_space_action = "stop": one line on stderr says how much is left, of what floor,
    that the crawl stops and how to resume (no second "stop requested: draining" line)."""
    site, server = big_site
    tmpfs.resize(32 * MIB)
    floor = 24 * MIB
    filler = tmpfs.path / "filler"
    filler.write_bytes(b"\0" * (tmpfs.free() - floor - 3 * MIB // 2))
    cfg = _config(tmp_path, tmpfs, site, server.port, min_free_bytes=floor, low_space_action="stop")
    proc = _run(cfg)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "below output.min_free_bytes" in lines[0] and "stopping" in lines[0], lines
    assert "the same command resumes" in lines[0], lines
