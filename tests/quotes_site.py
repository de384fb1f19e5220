"""A quotes.toscrape.com-like site on 127.0.0.1 (port 0), for Scrapy-tutorial spiders.

Pages ``/page/1/`` .. ``/page/N/`` hold ten quotes each (text, author with an "(about)" link,
tags) and a ``li.next`` link; ``/author/<slug>/`` the author's name, birth date and bio;
``/api/quotes?page=N`` the page's quotes as JSON, echoing the request's Accept header. Every
HTML page is padded past 20 KB (a sidebar of tag links and a footer), as real pages are.
"""

from __future__ import annotations

import html
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

AUTHORS = {
    f"author-{i}": (f"Author Number {i}", f"March {i + 1}, 18{i:02d}", f"Bio of author {i}.")
    for i in range(7)
}
PAGES = 3
TAGS = ["life", "love", "humor", "drop", "books"]


def quotes(page: int) -> list[dict[str, Any]]:
    out = []
    for i in range(10):
        n = (page - 1) * 10 + i
        slug = f"author-{n % len(AUTHORS)}"
        tags = [TAGS[n % len(TAGS)], TAGS[(n + 2) % len(TAGS)]]
        out.append({"text": f"\u201cQuote number {n} & more\u201d", "author": AUTHORS[slug][0],
                    "slug": slug, "tags": tags})  # fmt: skip
    return out


def _padding() -> str:
    links = "".join(f'<a class="side" href="#t{i}">side tag {i}</a>\n' for i in range(400))
    return f'<div class="col-md-4 tags-box">{links}</div><footer>{"x" * 2000}</footer>'


def quote_page(page: int) -> str:
    blocks = []
    for q in quotes(page):
        tags = " ".join(
            f'<a class="tag" href="/tag/{t}/page/1/">{t}</a>' for t in q["tags"]
        )
        blocks.append(f"""
<div class="quote" itemscope itemtype="http://schema.org/CreativeWork">
    <span class="text" itemprop="text">{html.escape(q["text"])}</span>
    <span>by <small class="author" itemprop="author">{q["author"]}</small>
    <a href="/author/{q["slug"]}/">(about)</a>
    </span>
    <div class="tags">
        Tags:
        <meta class="keywords" itemprop="keywords" content="{",".join(q["tags"])}">
        {tags}
    </div>
</div>""")
    nxt = f'<li class="next"><a href="/page/{page + 1}/">Next <span>&rarr;</span></a></li>'
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8"><title>Quotes to Scrape</title></head>
<body><div class="container"><div class="row"><div class="col-md-8">
{"".join(blocks)}
<nav><ul class="pager">{nxt if page < PAGES else ""}</ul></nav>
</div>{_padding()}</div></div></body></html>"""


def author_page(slug: str) -> str:
    name, born, bio = AUTHORS[slug]
    return f"""<!DOCTYPE html><html><head><title>{name}</title></head><body>
<div class="author-details">
    <h3 class="author-title">{name}
    </h3>
    <p><strong>Born:</strong> <span class="author-born-date">{born}</span></p>
    <div class="author-description">
        {bio}
    </div>
</div>{_padding()}</body></html>"""


class QuotesSite:
    """The site on 127.0.0.1, port 0; ``paths`` are the paths requested (in order)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.headers: dict[str, dict[str, str]] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.paths.append(self.path)
                site.headers[self.path] = {k.lower(): v for k, v in self.headers.items()}
                parts = urlsplit(self.path)
                path, ctype = parts.path, "text/html; charset=utf-8"
                body: str | None = None
                if path.startswith("/page/"):
                    n = int(path.split("/")[2])
                    body = quote_page(n) if 1 <= n <= PAGES else None
                elif path.startswith("/author/"):
                    slug = path.split("/")[2]
                    body = author_page(slug) if slug in AUTHORS else None
                elif path == "/api/quotes":
                    n = int(parse_qs(parts.query).get("page", ["1"])[0])
                    body = json.dumps({"quotes": quotes(n), "accept": self.headers["Accept"]})
                    ctype = "application/json"
                data = (body or "not found").encode()
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", ctype)
                self.send_header("X-Site", "quotes")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> QuotesSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
