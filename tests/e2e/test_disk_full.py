"""A full disk, on a real small tmpfs: the free-space floor pauses fetching and resumes it once
space is back; a write that still fails stops the crawl gracefully (exit 1, one message, no
traceback), and the same command resumes to a complete, exact crawl once the disk has room.

Mounting needs root (or CAP_SYS_ADMIN): where ``mount`` is refused the tests are skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import crawl_config, served_pages, warc_response_uris
from tests.waiting import wait_until

MIB = 1 << 20
#: 3 hosts x 100 pages of ~24 KB: about 7 MB of HTML, 2.3 MB of WARC, 1 MB of state
PAGES = 300


@pytest.fixture(scope="module")
def big_site() -> Iterator[tuple[Site, DemoServer]]:
    site = Site(SiteSpec(hosts=3, pages=PAGES, page_bytes=24_000, crawl_delay_s=None, seed=23))
    with DemoServer(site) as server:
        yield site, server


class Tmpfs:
    """A tmpfs mounted at ``path`` for one test (unmounted at teardown)."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        path.mkdir()
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.strip()}")

    def resize(self, size: int) -> None:
        subprocess.run(
            ["mount", "-o", f"remount,size={size}", str(self.path)], check=True, timeout=10
        )

    def free(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False, timeout=10)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Tmpfs]:
    fs = Tmpfs(tmp_path / "fs", 2 * MIB)
    yield fs
    fs.unmount()


def _config(tmp_path: Path, fs: Tmpfs, site: Site, port: int, **output: Any) -> Path:
    return crawl_config(
        tmp_path,
        site,
        port,
        crawl={"output_dir": str(fs.path / "out")},
        # 3 hosts at 0.02 s: ~150 pages/s, so the 300 pages take seconds, not minutes
        politeness={"min_delay_s": 0.02, "delay_factor": 0.0},
        output={"warc_max_bytes": MIB, **output},
    )


def _crawl(cfg: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _check_complete(
    site: Site, server: DemoServer, since: int, out: Path, *, warc: bool = True
) -> dict[str, Any]:
    """Every page fetched (the server's log), archived in valid WARC files, in the crawl log,
    and counted exactly once in the report."""
    expected = site.expected_pages(server.port)
    assert set(served_pages(server, since)) == expected
    if warc:
        warcs = sorted((out / "warc").iterdir())
        assert warcs and all(p.name.endswith(".warc.gz") for p in warcs), warcs
        assert expected <= set(warc_response_uris(warcs))  # every record readable to its end
    lines = [json.loads(x) for x in (out / "crawl.jsonl").read_text().splitlines()]
    assert expected <= {x["url"] for x in lines if x["outcome"] == "fetched"}
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    assert report["complete"] is True
    assert report["fetched"] == len(expected)  # exact, across the failed run and the resume
    return report


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("size", "warc"),
    [
        (2 * MIB, True),  # the WARC writer fails first (the crawl writes about 2.8 MB)
        (300 << 10, False),  # an LMDB commit fails first (the frontier.lmdb file grows)
    ],
    ids=["warc-2MiB", "lmdb-300KiB"],
)
def test_full_disk_stops_gracefully_then_resumes(
    tmp_path: Path, tmpfs: Tmpfs, big_site: tuple[Site, DemoServer], size: int, warc: bool
) -> None:
    site, server = big_site
    since = len(server.log())
    tmpfs.resize(size)
    # the floor off, so the small tmpfs really fills
    cfg = _config(tmp_path, tmpfs, site, server.port, min_free_bytes=0, warc=warc)
    proc = _crawl(cfg)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert "No space left on device" in errors[0], errors[0]  # whole: pytest cuts the repr
    assert "run the same command" in errors[0], errors[0]
    assert len(served_pages(server, since)) < PAGES  # it did stop before the end
    # room again: the same command finishes the crawl, nothing lost
    tmpfs.resize(64 * MIB)
    proc = _crawl(cfg)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_complete(site, server, since, tmpfs.path / "out", warc=warc)


@pytest.mark.timeout(120)
def test_a_disk_that_fills_mid_crawl_stops_it_then_resumes(
    tmp_path: Path, tmpfs: Tmpfs, big_site: tuple[Site, DemoServer]
) -> None:
    """Another user's file takes the last byte while the crawl runs (no WARC, so the crawl log
    or an LMDB commit meets the full disk first). The log or a commit stops it gracefully; the
    crawl cannot finish on a full disk, and the same command finishes it once space is back.

    (A size chosen so a whole crawl overflows the tmpfs did this before: once the crawl wrote
    less, 800 KiB held all of it, and the crawl ended complete.)"""
    site, server = big_site
    since = len(server.log())
    tmpfs.resize(64 * MIB)
    cfg = _config(tmp_path, tmpfs, site, server.port, min_free_bytes=0, warc=False)
    log = tmpfs.path / "out" / "crawl.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        err = _Lines(proc)
        wait_until("the first pages in the crawl log",
                   lambda: log.exists() and log.stat().st_size > 0, 60, alive=proc)  # fmt: skip
        filler = tmpfs.path / "filler"
        with filler.open("wb", buffering=0) as fh, contextlib.suppress(OSError):
            while True:  # every byte of the disk taken
                fh.write(bytes(1 << 16))
        assert proc.wait(60) == 1, "".join(err.lines)[-3000:]
        err.join()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = "".join(err.lines)
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [line for line in err.lines if " ERROR " in line]
    assert len(errors) == 1, stderr[-3000:]
    assert "No space left on device" in errors[0] and "run the same command" in errors[0]
    assert len(served_pages(server, since)) < PAGES  # it did stop before the end
    filler.unlink()
    proc2 = _crawl(cfg)
    assert proc2.returncode == 0, proc2.stderr[-3000:]
    _check_complete(site, server, since, tmpfs.path / "out", warc=False)


class _Lines:
    """A process's stderr, read line by line in a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        stream = proc.stderr
        self._thread = threading.Thread(target=lambda: self.lines.extend(stream), daemon=True)
        self._thread.start()

    def wait_for(self, text: str, timeout_s: float) -> str:
        found: str = wait_until(
            f"{text!r} on stderr", lambda: next((x for x in list(self.lines) if text in x), ""),
            timeout_s, detail=lambda: self.lines,
        )  # fmt: skip
        return found

    def join(self) -> None:
        self._thread.join(10)


@pytest.mark.timeout(120)
def test_free_space_floor_pauses_then_resumes(
    tmp_path: Path, tmpfs: Tmpfs, big_site: tuple[Site, DemoServer]
) -> None:
    site, server = big_site
    since = len(server.log())
    tmpfs.resize(32 * MIB)
    floor = 24 * MIB
    # a filler file leaves the floor plus 1.5 MiB: the crawl (about 4 MB) crosses the floor
    filler = tmpfs.path / "filler"
    filler.write_bytes(b"\0" * (tmpfs.free() - floor - 3 * MIB // 2))
    cfg = _config(tmp_path, tmpfs, site, server.port, min_free_bytes=floor)
    proc = subprocess.Popen(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg), "-v"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        err = _Lines(proc)
        warning = err.wait_for("fetching paused", 60)
        assert str(tmpfs.path / "out") in warning and "left" in warning, warning
        time.sleep(0.5)  # in-flight transfers finish
        paused_at = len(server.log())
        time.sleep(2.0)  # two space checks: still below the floor, nothing requested
        assert len(server.log()) == paused_at
        assert proc.poll() is None
        fetched = len(served_pages(server, since))
        assert 0 < fetched < PAGES
        filler.unlink()  # space is back: the crawl resumes by itself
        err.wait_for("fetching resumed", 10)
        assert proc.wait(60) == 0, "".join(err.lines)[-3000:]
        err.join()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    warnings = [line for line in err.lines if "fetching paused" in line]
    assert len(warnings) == 1, err.lines
    report = _check_complete(site, server, since, tmpfs.path / "out")
    assert report["disk_space_pauses"] == 1
    assert report["disk_space_paused_s"] >= 2.0


@pytest.mark.timeout(120)
def test_low_space_action_stop_then_resume(
    tmp_path: Path, tmpfs: Tmpfs, big_site: tuple[Site, DemoServer]
) -> None:
    site, server = big_site
    since = len(server.log())
    tmpfs.resize(32 * MIB)
    floor = 24 * MIB
    filler = tmpfs.path / "filler"
    filler.write_bytes(b"\0" * (tmpfs.free() - floor - 3 * MIB // 2))
    cfg = _config(
        tmp_path, tmpfs, site, server.port, min_free_bytes=floor, low_space_action="stop"
    )
    proc = _crawl(cfg)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    stops = [line for line in proc.stderr.splitlines() if "below output.min_free_bytes" in line]
    assert len(stops) == 1 and "stopping" in stops[0], proc.stderr[-3000:]
    report = json.loads((tmpfs.path / "out" / "report.json").read_text())
    assert report["stopped_for_low_space"] is True and report["complete"] is False
    assert 0 < report["fetched"] < PAGES
    filler.unlink()
    proc = _crawl(cfg)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_complete(site, server, since, tmpfs.path / "out")


@pytest.mark.timeout(120)
def test_a_disk_full_at_start_up_sets_nothing_aside(
    tmp_path: Path, tmpfs: Tmpfs, big_site: tuple[Site, DemoServer]
) -> None:
    """A crawl resumed on a disk that is already full: opening its LMDB environments fails
    with no space, which is not damage (the frontier must not be set aside and restarted from
    the seeds): one message, exit 1, and the same command resumes once space is back."""
    site, server = big_site
    since = len(server.log())
    tmpfs.resize(300 << 10)
    cfg = _config(tmp_path, tmpfs, site, server.port, min_free_bytes=0, warc=False)
    assert _crawl(cfg).returncode == 1  # the disk filled mid-crawl: the state is as committed
    tmpfs.resize(400 << 10)
    filler = tmpfs.path / "filler"
    with filler.open("wb", buffering=0) as fh, contextlib.suppress(OSError):
        while True:  # every byte of the disk taken
            fh.write(bytes(4096))
    proc = _crawl(cfg)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    state = tmpfs.path / "out" / "state"
    assert not [p.name for p in state.iterdir() if ".damaged" in p.name]
    filler.unlink()
    tmpfs.resize(64 * MIB)
    proc = _crawl(cfg)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_complete(site, server, since, tmpfs.path / "out", warc=False)


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
    proc = _crawl(cfg, timeout=90)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "below output.min_free_bytes" in lines[0] and "stopping" in lines[0], lines
    assert "the same command resumes" in lines[0], lines
