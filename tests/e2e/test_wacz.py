"""WACZ (issue 32, item 4): a crawl's WARC files packaged as a WACZ that the Webrecorder
project's own validator accepts and that a replay loader can read: every page of pages.jsonl
found through the CDXJ index and read from its WARC file by offset, every revisit record's
original capture inside the package, and packaging in bounded memory whatever the crawl's size.

The crawls are real subprocesses of the command line against real servers on loopback; the
WACZ is read with ``zipfile``, ``warcio`` and the ``wacz`` package's own ``validate``.
Settings that differ from the defaults are named where they are set, with the reason.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import crawl_config, render_toml
from tests.recrawl_site import RecrawlSite
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

WACZ_NAME = "frontier-crawl.wacz"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "frontier_crawl.cli", *args],
                          capture_output=True, text=True, timeout=180)  # fmt: skip


def validate(path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "wacz", "validate", "-f", str(path)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation succeeded" in done.stdout


def index_lines(z: zipfile.ZipFile) -> list[tuple[str, str, dict[str, Any]]]:
    """Every CDXJ line of the WACZ's compressed index: (SURT key, timestamp, fields), read
    through ``index.idx`` as a loader does (each idx line names a gzip block of the cdx)."""
    cdx = z.read("indexes/index.cdx.gz")
    out = []
    for line in z.read("indexes/index.idx").decode().splitlines():
        if not line or line.startswith("!"):
            continue
        _key, _ts, raw = line.split(" ", 2)
        block = json.loads(raw)
        data = gzip.decompress(cdx[block["offset"] : block["offset"] + block["length"]])
        for entry in data.decode().splitlines():
            key, ts, fields = entry.split(" ", 2)
            out.append((key, ts, json.loads(fields)))
    return out


def record_at(z: zipfile.ZipFile, fields: dict[str, Any]) -> Any:
    """The WARC record an index line points at, read from the archive/ member by offset."""
    with z.open(f"archive/{fields['filename']}") as member:
        data = member.read()
    chunk = data[int(fields["offset"]) : int(fields["offset"]) + int(fields["length"])]
    record = next(iter(ArchiveIterator(io.BytesIO(chunk))))
    record.payload = record.content_stream().read()
    return record


def test_a_completed_crawl_is_packaged_and_every_page_replays(tmp_path: Path) -> None:
    site = Site(SiteSpec(hosts=3, pages=240, crawl_delay_s=None, seed=11, page_bytes=22_000))
    with DemoServer(site) as server:
        # warc_max_bytes 1 GiB -> 1 MB (conftest): several WARC files to package
        cfg = crawl_config(tmp_path, site, server.port, output={"wacz": True})
        done = cli("--config", str(cfg))
        assert done.returncode == 0, done.stderr[-3000:]
    out = cfg.parent / "out"
    wacz = out / WACZ_NAME
    assert f"WACZ: {wacz}" in done.stdout, done.stdout[-2000:]
    validate(wacz)
    warcs = sorted(p.name for p in (out / "warc").glob("*.warc.gz"))
    assert len(warcs) > 1
    with zipfile.ZipFile(wacz) as z:
        names = z.namelist()
        assert sorted(n.removeprefix("archive/") for n in names if n.startswith("archive/")) \
            == warcs  # fmt: skip
        package = json.loads(z.read("datapackage.json"))
        assert {r["path"] for r in package["resources"]} >= {"pages/pages.jsonl",
                                                              "indexes/index.cdx.gz"}
        lines = z.read("pages/pages.jsonl").decode().splitlines()
        assert json.loads(lines[0])["format"] == "json-pages-1.0"
        pages = [json.loads(x) for x in lines[1:]]
        index = index_lines(z)
        by_url = {f["url"]: f for _k, _t, f in index if f.get("mime") == "text/html"}
        # every HTML page the server holds, each once, with the title the server gave it
        crawl_log = [json.loads(x) for x in (out / "crawl.jsonl").read_text().splitlines()]
        fetched = {x["url"] for x in crawl_log if x.get("status") == 200
                   and not x["url"].endswith("/robots.txt")}  # fmt: skip
        assert {p["url"] for p in pages} == {u for u in fetched if u in by_url}
        assert len(pages) == len({p["url"] for p in pages}) > 200
        for page in pages[:40]:
            fields = by_url[page["url"]]
            record = record_at(z, fields)
            assert record.rec_headers.get_header("WARC-Target-URI") == page["url"]
            assert record.rec_type == "response"
            title = page["title"]
            assert title and title != page["url"]
            assert title.encode() in record.payload


def test_a_stopped_continuous_crawl_packages_its_revisits_with_their_originals(
    tmp_path: Path,
) -> None:
    """``frontier-crawl wacz`` on a continuous crawl stopped by SIGTERM: its revisit records
    (304s) are in the index, and each one's original capture is in the package too."""
    with RecrawlSite(hosts=2, fast_period_s=3.0, vanish_after_s=600.0) as site:
        cfg = tmp_path / "crawl.toml"
        cfg.write_text(render_toml({
            "crawl": {"seeds": site.seeds(), "output_dir": "out"},
            "fetch": {"resolve": site.resolve_entries()},
            # intervals of seconds, not hours: revisits within the test's few seconds
            "recrawl": {"enabled": True, "min_interval_s": 1.0, "initial_interval_s": 1.0,
                        "max_interval_s": 2.0},
            # min_delay_s 1 -> 0.1: a few rounds of revisits within seconds
            "politeness": {"min_delay_s": 0.1},
        }))  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        try:
            wait_until("three rounds of revisits",
                       lambda: sum(1 for h in site.hits() if h.status == 304) >= 6, 90,
                       alive=proc)  # fmt: skip
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.communicate(timeout=60)
        assert proc.returncode == 0
    done = cli("wacz", "--config", str(cfg))
    assert done.returncode == 0, done.stdout + done.stderr
    wacz = tmp_path / "out" / WACZ_NAME
    validate(wacz)
    with zipfile.ZipFile(wacz) as z:
        index = index_lines(z)
        responses = {(f["url"], ts) for _k, ts, f in index if f.get("mime") != "warc/revisit"}
        revisits = [(ts, f) for _k, ts, f in index if f.get("mime") == "warc/revisit"]
        assert len(revisits) >= 6
        for _ts, fields in revisits:
            record = record_at(z, fields)
            target = record.rec_headers.get_header("WARC-Refers-To-Target-URI")
            date = record.rec_headers.get_header("WARC-Refers-To-Date")
            stamp = "".join(c for c in date if c.isdigit())[:14]
            assert (target, stamp) in responses, (target, date)


def _warc_of(path: Path, pages: int, page_bytes: int) -> None:
    with path.open("wb") as f:
        writer = WARCWriter(f, gzip=True)
        # random bytes: no compression shrinks the file below what the test means to package
        body = b"<html><head><title>T</title></head><body>" + os.urandom(page_bytes) + b"</body>"
        for i in range(pages):
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")],
                                       protocol="HTTP/1.1")  # fmt: skip
            writer.write_record(writer.create_warc_record(
                f"http://big.test/p{i}", "response", payload=io.BytesIO(body),
                http_headers=headers))  # fmt: skip


def _peak_rss_kb(root: Path) -> int:
    """Peak RSS of one packaging of ``root`` in a process of its own (``wait4``'s rusage)."""
    code = ("import sys; from pathlib import Path; from frontier_crawl.output.wacz import "
            "package_wacz; r = Path(sys.argv[1]); package_wacz(r, r / 'x.wacz')")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", code, str(root)])
    deadline = time.monotonic() + 200
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            assert os.waitstatus_to_exitcode(status) == 0
            return int(usage.ru_maxrss)
        time.sleep(0.05)  # polling a child's end (wait4 with WNOHANG), not synchronisation
    proc.kill()
    raise AssertionError("packaging did not end")


def test_packaging_memory_does_not_grow_with_the_crawl(tmp_path: Path) -> None:
    """Eight times the WARC bytes (8 MiB in one file against 64 MiB in two, 22 KB pages) must
    take no more memory than a fraction of one file: nothing is read whole, everything
    streams (reading one 32 MiB file at once would exceed the bound)."""
    small, large = tmp_path / "small", tmp_path / "large"
    for root, files, pages in ((small, 1, 380), (large, 2, 1520)):
        (root / "warc").mkdir(parents=True)
        for i in range(files):
            _warc_of(root / "warc" / f"frontier-crawl-2026{i:02d}.warc.gz", pages, 22_000)
    assert sum(p.stat().st_size for p in (large / "warc").iterdir()) > 60 * 2**20
    base, grown = _peak_rss_kb(small), _peak_rss_kb(large)
    assert grown - base < 16 * 1024, (base, grown)
    with zipfile.ZipFile(large / "x.wacz") as z:
        assert len(z.read("pages/pages.jsonl").splitlines()) == 1 + 2 * 1520
