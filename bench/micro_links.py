"""Cost of extract_links on a ~23 KB page with 20 links (min over interleaved rounds: the
machine is shared and noisy, so the minimum is the figure least disturbed by other load).

    .venv/bin/python bench/micro_links.py
"""

from __future__ import annotations

import random
import timeit
from collections.abc import Callable

from selectolax.lexbor import LexborHTMLParser

from frontier_crawl.parse import extract_links

rnd = random.Random(1)
WORDS = [
    "lorem",
    "ipsum",
    "dolor",
    "sit",
    "amet",
    "consectetur",
    "adipiscing",
    "elit",
    "sed",
    "do",
    "eiusmod",
    "tempor",
]


def para(n: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def make_page() -> bytes:
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


def main() -> None:
    page = make_page()
    url, ctype = "http://example.com/dir/page.html", "text/html; charset=utf-8"
    assert len(extract_links(page, url, ctype).links) == 20
    cases: dict[str, Callable[[], object]] = {
        "lexbor parse only": lambda: LexborHTMLParser(page),
        "extract_links": lambda: extract_links(page, url, ctype),
    }
    best = dict.fromkeys(cases, 1e9)
    for _ in range(30):
        for name, fn in cases.items():
            best[name] = min(best[name], timeit.timeit(fn, number=200) / 200 * 1e6)
    print(f"page {len(page)} bytes, 20 links")
    for name, us in best.items():
        print(f"{name:18s} {us:6.1f} us")


if __name__ == "__main__":
    main()
