"""CPU cost of extract_links per page (``time.process_time``: the machine is shared and loaded,
and CPU time is what another process's load disturbs least; medians of ``--rounds`` rounds).

    .venv/bin/python bench/micro_links.py [--rounds 15]

Cases, each over a set of pages parsed in turn:

* ``mixed``: a ~23 KB page with 20 links of every common shape (root-relative, absolute,
  ``../`` with a fragment, another host), the same page each time;
* ``null``:  the pages of ``engine_null.py`` (20 absolute links each, to 50 hosts, 400 pages
  a host), 400 different pages, Content-Type without a charset;
* ``site``:  pages of one site that share 30 navigation links (relative and root-relative) and
  add 10 links of their own, 400 pages;

and ``lexbor parse only`` of the ``mixed`` page, the floor.

Run it against another tree of the code for before/after in one session:
``PYTHONPATH=DIR .venv/bin/python bench/micro_links.py`` (run from outside the work tree, so
that ``DIR`` is imported rather than the editable install), alternated with this tree's runs.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from selectolax.lexbor import LexborHTMLParser

from frontier_crawl.parse import extract_links

rnd = random.Random(1)
WORDS = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed",
         "do", "eiusmod", "tempor"]  # fmt: skip
FILLER = b"<p>" + b"lorem ipsum dolor sit amet " * 40 + b"</p>\n"  # as engine_null.py


def para(n: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def mixed_page() -> bytes:
    hrefs = (
        [f"/section/{i}/page.html" for i in range(8)]
        + [f"http://example.com/abs/{i}?q={i}" for i in range(6)]
        + [f"../rel/{i}.html#frag" for i in range(3)]
        + [f"https://other.example.org/x/{i}" for i in range(3)]
    )
    head = (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title>'
        f'<meta name="description" content="{para(20)}">'
        f"<style>{'body{margin:0} .x{color:red}' * 60}</style>"
        f"<script>{'var a = 1; function f(x){return x*2;}' * 120}</script></head><body>"
    )
    body = "".join(
        f'<p class="c">{para(60)} <a href="{h}" title="t">{para(2)}</a> {para(40)}</p>'
        for h in hrefs
    )
    imgs = "".join(
        f'<div><span>{para(10)}</span><img src="/i{i}.png" alt="x"></div>' for i in range(30)
    )
    return (head + body + imgs + "</body></html>").encode()


def null_page(per_host: int = 400) -> bytes:
    links = b"".join(
        b'<a href="http://h%d.bench/p/%d.html">x</a>\n'
        % (rnd.randrange(50), rnd.randrange(per_host))
        for _ in range(20)
    )
    return b"<!DOCTYPE html><html><body>" + FILLER * 8 + links + b"</body></html>"


NAV = "".join(
    f'<li><a href="/topics/{i}/">topic {i}</a></li>' if i % 2 else
    f'<li><a href="../section-{i}/index.html" class="nav">section {i}</a></li>'
    for i in range(30)
)  # fmt: skip


def site_page(n: int) -> bytes:
    own = "".join(
        f'<p>{para(30)} <a href="item-{rnd.randrange(4000)}.html">{para(2)}</a></p>'
        for _ in range(10)
    )
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title></head><body>'
        f"<nav><ul>{NAV}</ul></nav><main>{own}{FILLER.decode() * 4}</main></body></html>"
    ).encode()


def cpu_us(fn: Callable[[], object], number: int) -> float:
    start = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - start) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    mixed = mixed_page()
    url, ctype = "http://example.com/dir/page.html", "text/html; charset=utf-8"
    assert len(extract_links(mixed, url, ctype).links) == 20
    nulls = [null_page() for _ in range(400)]
    sites = [site_page(n) for n in range(400)]
    site_urls = [f"http://www.site.test/area/{n % 7}/page-{n}.html" for n in range(400)]

    def run_null() -> None:
        for i, body in enumerate(nulls):
            extract_links(body, f"http://h{i % 50}.bench/p/{i}.html", "text/html")

    def run_site() -> None:
        for body, page_url in zip(sites, site_urls, strict=True):
            extract_links(body, page_url, "text/html; charset=utf-8")

    cases: dict[str, tuple[Callable[[], object], int, int]] = {  # fn, calls, pages per call
        "lexbor parse only (mixed)": (lambda: LexborHTMLParser(mixed), 200, 1),
        "extract_links mixed": (lambda: extract_links(mixed, url, ctype), 200, 1),
        "extract_links null": (run_null, 1, len(nulls)),
        "extract_links site": (run_site, 1, len(sites)),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, (fn, number, per_call) in cases.items():
            samples[name].append(cpu_us(fn, number) / per_call)
    print(f"CPU us per page, median of {args.rounds} rounds (mixed page {len(mixed)} bytes)")
    for name, values in samples.items():
        print(f"{name:28s} {statistics.median(values):7.1f} us")


if __name__ == "__main__":
    main()
