"""The WARC writer alone: CPU per page of each part of its path, and end to end through its
child process. No network: the pages are the loopback crawl's site (``static_site.py``),
read from disk, with the request and response header blocks curl and nginx would give.

    .venv/bin/python bench/warc_writer.py                    # 3,000 pages, 3 reps, every part
    .venv/bin/python bench/warc_writer.py --pages 5000 --reps 5
    .venv/bin/python bench/warc_writer.py --profile          # cProfile of the inline writer
    .venv/bin/python bench/warc_writer.py --baseline DIR --reps 5   # A/B against another tree

Parts (each timed alone over every page, in this process, CPU time, median of the reps):

* ``build``: the WARC record bytes of a page (response and request records: WARC headers,
  both digests, the blocks), uncompressed;
* ``sha1``: of that, the two SHA-1 digests alone (block and payload);
* ``gzip <compressor> <level>``: one gzip member per record (the response and the request);
* ``ipc``: what the loop's process spends handing a page to the writer process (the
  ``WarcWriter.write`` calls of a background writer; CPU of this process only);

End to end (``WarcWriter`` as the crawl uses it, background, default durability): CPU per page
of the loop's process and of the writer process (``RUSAGE_CHILDREN``), pages per second of
wall time, from the first write to the end of ``close()``; and the writer process's start-up
alone (a writer opened and closed, no record: CPU of the child).

``--baseline DIR`` (a tree of the code, e.g. ``git archive main | tar -x -C DIR``): only the
end-to-end figures and the start-up, each rep once with DIR's code and once with this tree's,
alternated, each in a fresh interpreter that imports that tree (``PYTHONPATH``), so both share
the machine's load.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from static_site import build_site

from frontier_crawl.output import warc
from frontier_crawl.output.warc import COMPRESSORS, ArchiveRecord, WarcWriter

PORT = 8080


def pages(n: int, hosts: int) -> list[ArchiveRecord]:
    """``n`` records of the bench site's pages (10-30 KB), with plausible header blocks."""
    with tempfile.TemporaryDirectory(prefix="fc-warcbench-") as tmp:
        site = build_site(Path(tmp), PORT, hosts=hosts, pages=n)
        out: list[ArchiveRecord] = []
        for host, uri in sorted(site.expected):
            rel = "index.html" if uri == "/" else uri.lstrip("/")
            body = (Path(tmp) / host / rel).read_bytes()
            request = (
                f"GET {uri} HTTP/1.1\r\nHost: {host}:{PORT}\r\n"
                "User-Agent: frontier-crawl/0.1 (+https://example.org/bot)\r\n"
                "Accept: */*\r\nAccept-Encoding: gzip, deflate, br\r\n\r\n"
            ).encode()
            head = (
                "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\n"
                "Date: Tue, 01 Dec 2026 23:30:00 GMT\r\nContent-Type: text/html\r\n"
                f"Content-Length: {len(body)}\r\nLast-Modified: Tue, 01 Dec 2026 23:00:00 GMT\r\n"
                'Connection: keep-alive\r\nETag: "6566a1b0-5a3c"\r\nAccept-Ranges: bytes\r\n\r\n'
            ).encode()
            out.append(
                ArchiveRecord(
                    url=f"http://{host}:{PORT}{uri}",
                    ip="127.0.0.1",
                    fetched_at=time.time(),
                    request_bytes=request,
                    header_bytes=head,
                    payload=body,
                )
            )
    return out


def cpu_us_per_page(fn: Callable[[ArchiveRecord], object], recs: list[ArchiveRecord]) -> float:
    t0 = time.process_time()
    for rec in recs:
        fn(rec)
    return (time.process_time() - t0) / len(recs) * 1e6


_SERIALIZER: object = None


def built(rec: ArchiveRecord) -> list[bytes]:
    """The uncompressed records of a page, as the writer builds them (warcio's serialiser
    before the writer built the bytes itself)."""
    if hasattr(warc, "warcfile"):
        return warc.warcfile.record_bytes(rec.capture())
    global _SERIALIZER
    if _SERIALIZER is None:
        _SERIALIZER = warc._Serializer()  # type: ignore[attr-defined]
    ser = _SERIALIZER.serialize  # type: ignore[attr-defined]
    response = warc._response_record(rec)  # type: ignore[attr-defined]
    return [ser(response), ser(warc._request_record(rec, response))]  # type: ignore[attr-defined]


def sha1_only(rec: ArchiveRecord) -> None:
    import hashlib

    head = warc.without_transfer_encoding(warc.last_header_block(rec.header_bytes))
    block = hashlib.sha1(head)
    block.update(rec.payload)
    block.digest()
    hashlib.sha1(rec.payload).digest()


def gzip_member(data: bytes, level: int, compressor: str) -> bytes:
    if hasattr(warc, "warcfile"):
        return warc.warcfile.gzip_member(data, level, compressor)
    return warc._gzip_member(data, level, compressor)  # type: ignore[attr-defined,no-any-return]


def gzip_part(compressor: str, level: int, recs: list[ArchiveRecord]) -> float:
    raw = [built(r) for r in recs]
    t0 = time.process_time()
    for members in raw:
        for m in members:
            gzip_member(m, level, compressor)
    return (time.process_time() - t0) / len(recs) * 1e6


def gzip_size(compressor: str, level: int, recs: list[ArchiveRecord]) -> float:
    raw = [m for r in recs for m in built(r)]
    return sum(len(gzip_member(m, level, compressor)) for m in raw) / sum(map(len, raw))


def end_to_end(recs: list[ArchiveRecord], compressor: str, durable: bool) -> tuple[float, float, float, float]:
    """(loop CPU us/page, writer CPU us/page, pages/s, ipc us/page) through a background writer."""
    with tempfile.TemporaryDirectory(prefix="fc-warcbench-out-") as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        writer = WarcWriter(
            Path(tmp), "bench", 1 << 30, {}, compressor=compressor, durable=durable
        )
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for rec in recs:
            writer.write(rec)
        ipc = time.process_time() - cpu0
        writer.close()
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    n = len(recs)
    return cpu / n * 1e6, child / n * 1e6, n / wall, ipc / n * 1e6


def startup_us(reps: int = 5) -> float:
    """CPU of the writer process for a writer opened and closed with no record (median)."""
    values = []
    for _ in range(reps):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        with tempfile.TemporaryDirectory(prefix="fc-warcbench-out-") as tmp:
            WarcWriter(Path(tmp), "bench", 1 << 30, {}).close()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        values.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e6)
    return statistics.median(values)


#: what --baseline runs in each tree: its own bench/warc_writer.py's pages() and end_to_end()
_AB_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import warc_writer as w
recs = w.pages(int(sys.argv[2]), int(sys.argv[3]))
loop, child, rate, ipc = w.end_to_end(recs, "isal", True)
import resource, statistics, tempfile
from pathlib import Path
starts = []
for _ in range(5):  # the writer process's start-up alone: opened and closed, no record
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as tmp:
        w.WarcWriter(Path(tmp), "bench", 1 << 30, {}).close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    starts.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e6)
start = statistics.median(starts)
print(json.dumps({"loop": loop, "child": child, "rate": rate, "ipc": ipc, "start": start,
                  "code": w.warc.__file__}))
"""


def ab(baseline: Path, pages_n: int, hosts: int, reps: int) -> None:
    """End to end (isal, power-loss) with ``baseline``'s code and this tree's, alternated."""
    here = Path(__file__).resolve().parents[1]
    trees = {"baseline": baseline.resolve(), "this tree": here}
    got: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(reps):
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree)}
            out = subprocess.run(
                [sys.executable, "-c", _AB_CHILD, str(tree / "bench"), str(pages_n), str(hosts)],
                env=env, capture_output=True, text=True, check=True, cwd=tree,
            )  # fmt: skip
            result = json.loads(out.stdout.strip().splitlines()[-1])
            assert Path(result.pop("code")).is_relative_to(tree), (name, result)
            got[name].append(result)
    print(f"\n| end to end, isal, power-loss, us per page (median of {reps}, runs) | "
          + " | ".join(trees) + " |\n|---|" + "---|" * len(trees))  # fmt: skip
    for key, label in (("loop", "loop's process"), ("child", "writer process"),
                       ("rate", "pages/s"), ("start", "writer start-up alone (us, once)")):  # fmt: skip
        cells = []
        for name in trees:
            values = [r[key] for r in got[name]]
            runs = ", ".join(f"{v:.0f}" for v in values)
            cells.append(f"{statistics.median(values):.0f} ({runs})")
        print(f"| {label} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile the inline writer")
    ap.add_argument("--baseline", type=Path, help="a tree of the code to A/B against (end to end)")
    args = ap.parse_args()
    if args.baseline is not None:
        with open("/proc/loadavg") as f:
            print("load average at start:", " ".join(f.read().split()[:3]))
        ab(args.baseline, args.pages, args.hosts, args.reps)
        with open("/proc/loadavg") as f:
            print("load average at end:", " ".join(f.read().split()[:3]))
        return
    recs = pages(args.pages, args.hosts)
    size = statistics.mean(len(r.payload) for r in recs)
    print(f"{len(recs)} pages, mean payload {size / 1024:.1f} KiB")
    with open("/proc/loadavg") as f:
        print("load average at start:", " ".join(f.read().split()[:3]))
    if args.profile:
        with tempfile.TemporaryDirectory() as tmp:
            w = WarcWriter(Path(tmp), "bench", 1 << 30, {}, background=False)
            prof = cProfile.Profile()
            prof.enable()
            for rec in recs:
                w.write(rec)
            w.close()
            prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
        print(s.getvalue())
        return
    parts: dict[str, list[float]] = {}
    levels = [(c, lvl) for c in COMPRESSORS for lvl in sorted({1, COMPRESSORS[c][0]})]
    for _ in range(args.reps):  # alternated: each part once per rep
        parts.setdefault("build (records, digests)", []).append(cpu_us_per_page(built, recs))
        parts.setdefault("  of which sha1 x2", []).append(cpu_us_per_page(sha1_only, recs))
        for c, lvl in levels:
            parts.setdefault(f"gzip {c} {lvl}", []).append(gzip_part(c, lvl, recs))
        for c in COMPRESSORS:
            for durable in (True, False):
                loop, child, rate, ipc = end_to_end(recs, c, durable)
                key = f"{c}, {'power-loss' if durable else 'process-crash'}"
                parts.setdefault(f"e2e {key}: loop", []).append(loop)
                parts.setdefault(f"e2e {key}:   of which write() (ipc)", []).append(ipc)
                parts.setdefault(f"e2e {key}: writer process", []).append(child)
                parts.setdefault(f"e2e {key}: pages/s", []).append(rate)
        parts.setdefault("writer start-up alone (us, once)", []).append(startup_us())
    print(f"\n| part | CPU us per page, median of {args.reps} (runs) |\n|---|---|")
    for name, values in parts.items():
        runs = ", ".join(f"{v:.0f}" for v in values)
        print(f"| {name} | {statistics.median(values):.0f} ({runs}) |")
    print("\n| compressor level | compressed / raw |\n|---|---|")
    for c, lvl in levels:
        print(f"| {c} {lvl} | {gzip_size(c, lvl, recs):.3f} |")
    with open("/proc/loadavg") as f:
        print("load average at end:", " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
