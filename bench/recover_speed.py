"""Start-up recovery speed: how fast ``complete_gzip_prefix`` checks a whole ``.open`` WARC file,
and how long recovery's ``scan_gzip_tail`` (its last few MiB) takes on the same file.

    .venv/bin/python bench/recover_speed.py [--mib 512] [--level 6]

Writes a file of gzip members like a crawl's (one per record; the demo site's pages, 20 KB to
300 KB each, so many members are past 64 KiB) of about ``--mib`` MiB compressed into a temp
dir, then times the scan (the page cache is warm: the scan's own CPU cost, not the disk's).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from zlib_ng import zlib_ng

from frontier_crawl.output.recover import complete_gzip_prefix, scan_gzip_tail

WORDS = (b"crawl", b"frontier", b"polite", b"queue", b"host", b"robots", b"delay", b"fetch",
         b"link", b"page", b"anchor", b"graph", b"breadth", b"depth", b"seed", b"socket",
         b"header", b"body", b"status", b"redirect", b"canonical", b"<p>", b"</p>\n")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512, help="compressed size of the file")
    ap.add_argument("--level", type=int, default=6, help="gzip level (output.warc_gzip_level)")
    args = ap.parse_args()
    rnd = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.warc.gz.open"
        pages = [b" ".join(rnd.choices(WORDS, k=rnd.randint(20_000, 300_000) // 7))
                 for _ in range(64)]  # fmt: skip
        raw = 0
        with path.open("wb") as fh:
            while fh.tell() < args.mib << 20:
                page = rnd.choice(pages)
                c = zlib_ng.compressobj(args.level, zlib_ng.DEFLATED, 16 + zlib_ng.MAX_WBITS)
                fh.write(c.compress(page) + c.flush())
                raw += len(page)
        size = path.stat().st_size
        path.read_bytes()  # warm the page cache
        t0 = time.perf_counter()
        good = complete_gzip_prefix(path)
        dt = time.perf_counter() - t0
        t1 = time.perf_counter()
        tail_good, _damaged = scan_gzip_tail(path)
        tail_dt = time.perf_counter() - t1
    assert good == tail_good == size, (good, tail_good, size)
    print(f"{size / 2**20:.0f} MiB compressed ({raw / 2**20:.0f} MiB of records) in {dt:.2f} s: "
          f"{size / 2**20 / dt:.0f} MiB/s compressed, {raw / 2**20 / dt:.0f} MiB/s decompressed; "
          f"the tail scan recovery runs: {tail_dt * 1000:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
