"""The sitemap parser's worst cases at the default ``[sitemaps]`` limits: wall and CPU time of
``parse_sitemap`` (it runs in the engine loop's thread, so this is how long one sitemap can
hold the loop).

    .venv/bin/python bench/sitemap_parse.py
"""

from __future__ import annotations

import gzip
import time

from frontier_crawl.parse.sitemap import parse_sitemap

ENTRY = (
    b"<url><loc>https://www.example.com/category/product-%d.html</loc>"
    b"<lastmod>2024-01-0%dT10:00:00+01:00</lastmod><changefreq>daily</changefreq>"
    b"<priority>0.5</priority></url>"
)


def measure(name: str, body: bytes) -> None:
    t0, c0 = time.perf_counter(), time.process_time()
    got = parse_sitemap(body)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    problem = got.problem.value if got.problem else "none"
    print(f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU, problem {problem}, "
          f"{len(got.entries)} entries, {got.read_bytes} bytes read")  # fmt: skip


def main() -> None:
    full = b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    full += b"".join(ENTRY % (i, i % 9 + 1) for i in range(50_000)) + b"</urlset>"
    measure(f"50,000 entries ({len(full) / 1e6:.1f} MB)", full)
    measure("the same, gzip", gzip.compress(full))
    measure("gzip bomb, 256 MiB of spaces", gzip.compress(b"<urlset>" + b" " * (256 << 20), 9))
    measure("5M empty elements, gzip", gzip.compress(b"<urlset>" + b"<x/>" * (5 << 20)))
    measure("200,000 empty gzip members", gzip.compress(b"") * 200_000)
    measure("40 MB of blank lines", b"x\n" + b"\n" * (40 << 20))


if __name__ == "__main__":
    main()
