"""A quotes.toscrape.com-like site on 127.0.0.1 (port 0), for Scrapy-tutorial spiders.

Pages ``/page/1/`` .. ``/page/N/`` hold ten quotes each (text, author with an "(about)" link,
tags) and a ``li.next`` link; ``/author/<slug>/`` the author's name, birth date and bio;
``/api/quotes?page=N`` the page's quotes as JSON, echoing the request's Accept header. Every
HTML page is padded past 20 KB (a sidebar of tag links and a footer), as real pages are.

As the real site's app, a login and a stateful search form:

- ``/login``: a form with a CSRF token in a hidden field, tied to a ``session`` cookie set
  with it; a POST with that cookie, the token and a username and password logs the session
  in and redirects (302) to ``/favourites/``; anything else answers 403. ``/favourites/``
  (behind the login: a 302 to ``/login`` without a logged-in session) lists the user's
  favourite quotes (``FAVOURITES``, by username), ``/favourites/2/`` the rest of them.
- ``/search.aspx``: an ASP.NET-style form (``__VIEWSTATE``, an author ``<select>``) posting
  to ``/filter.aspx``; posted with an author it answers the same form with that author's tags
  and a new ``__VIEWSTATE`` naming the author; posted with a tag and the matching view
  state, the author's quotes with that tag (``search_results``); a view state that does not
  match the posted author answers 400.
- ``/echo``: any method; answers what it got (method, body, Cookie header) as JSON;
  a POST to ``/flaky`` answers 503, one to ``/see-other`` 303 to ``/echo?after=303``.

``requests`` records every request as (method, path, body, headers).
"""

from __future__ import annotations

import base64
import html
import json
import secrets
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


#: username -> the numbers of their favourite quotes
FAVOURITES = {"john": [1, 4, 9, 16, 25], "jane": [2, 3]}
FAVOURITES_PER_PAGE = 3


def favourites_page(user: str, page: int) -> str:
    numbers = FAVOURITES.get(user, [])
    shown = numbers[(page - 1) * FAVOURITES_PER_PAGE : page * FAVOURITES_PER_PAGE]
    every = [q for n in range(1, PAGES + 1) for q in quotes(n)]
    items = "".join(
        f'<li class="fav" data-n="{n}"><span class="text">{html.escape(every[n]["text"])}'
        f"</span></li>" for n in shown
    )
    more = len(numbers) > page * FAVOURITES_PER_PAGE
    nxt = f'<li class="next"><a href="/favourites/{page + 1}/">Next</a></li>' if more else ""
    return f"""<!DOCTYPE html><html><body><div class="header-box">
<p>Logged in as <span class="user">{user}</span> <a href="/logout">Logout</a></p></div>
<ul class="favourites">{items}</ul><nav><ul class="pager">{nxt}</ul></nav>
{_padding()}</body></html>"""


def login_page(token: str) -> str:
    return f"""<!DOCTYPE html><html><body><div class="col-md-4">
<form action="/login" method="post" accept-charset="utf-8">
    <input type="hidden" name="csrf_token" value="{token}">
    <div class="form-group"><label for="username">Username</label>
        <input type="text" class="form-control" id="username" name="username"></div>
    <div class="form-group"><label for="password">Password</label>
        <input type="password" class="form-control" id="password" name="password"></div>
    <input type="submit" value="Login" class="btn btn-primary">
</form></div>{_padding()}</body></html>"""


def search_results(author: str, tag: str) -> list[dict[str, Any]]:
    every = [q for n in range(1, PAGES + 1) for q in quotes(n)]
    return [q for q in every if q["author"] == author and tag in q["tags"]]


def _view_state(author: str) -> str:
    return base64.b64encode(json.dumps({"author": author, "v": 7}).encode()).decode()


def search_form(author: str = "") -> str:
    authors = "".join(
        f'<option value="{a}"{" selected" if a == author else ""}>{a}</option>'
        for a in sorted(name for name, _, _ in AUTHORS.values())
    )
    tags = ""
    if author:
        found = sorted({t for n in range(1, PAGES + 1) for q in quotes(n)
                        if q["author"] == author for t in q["tags"]})  # fmt: skip
        tags = "".join(f'<option value="{t}">{t}</option>' for t in found)
    return f"""<!DOCTYPE html><html><body>
<form action="/filter.aspx" method="post">
    <label for="author">Author</label>
    <select name="author" id="author"><option>----------</option>{authors}</select>
    <label for="tag">Tag</label>
    <select name="tag" id="tag"><option>----------</option>{tags}</select>
    <input type="hidden" name="__VIEWSTATE" value="{_view_state(author)}">
    <input type="submit" name="submit_button" value="Search" class="btn btn-default">
</form>{_padding()}</body></html>"""


def results_page(author: str, tag: str) -> str:
    blocks = "".join(
        f'<div class="quote"><span class="content">{html.escape(q["text"])}</span>'
        f'<span class="author">{q["author"]}</span><span class="tag">{tag}</span></div>'
        for q in search_results(author, tag)
    )
    return f"<!DOCTYPE html><html><body>{search_form(author)}<div class=\"results\">" \
        f"{blocks}</div></body></html>"  # fmt: skip


class QuotesSite:
    """The site on 127.0.0.1, port 0; ``paths`` are the paths requested (in order)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.headers: dict[str, dict[str, str]] = {}
        self.requests: list[tuple[str, str, bytes, dict[str, str]]] = []
        #: session id -> (csrf token, logged-in username or "")
        self.sessions: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def _session(self) -> str:
                from http.cookies import SimpleCookie

                jar = SimpleCookie(self.headers.get("Cookie") or "")
                morsel = jar.get("session")
                return morsel.value if morsel is not None else ""

            def _send(self, status: int, body: str, ctype: str = "text/html; charset=utf-8",
                      extra: tuple[tuple[str, str], ...] = ()) -> None:  # fmt: skip
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("X-Site", "quotes")
                for name, value in extra:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _record(self) -> tuple[str, bytes, dict[str, str]]:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                with site._lock:
                    site.paths.append(self.path)
                    site.headers[self.path] = headers
                    site.requests.append((self.command, self.path, body, headers))
                return urlsplit(self.path).path, body, headers

            def do_POST(self) -> None:
                path, body, headers = self._record()
                form = {k: v[0] for k, v in parse_qs(body.decode(), True).items()}
                if path == "/echo":
                    self._echo(body, headers)
                elif path == "/flaky":
                    self._send(503, "try later")
                elif path == "/see-other":
                    self._send(303, "", extra=(("Location", "/echo?after=303"),))
                elif path == "/login":
                    sid = self._session()
                    token, _ = site.sessions.get(sid, ("", ""))
                    if not token or form.get("csrf_token") != token or not form.get(
                        "username") or not form.get("password"):  # fmt: skip
                        self._send(403, "Error while logging in")
                        return
                    site.sessions[sid] = (token, form["username"])
                    self._send(302, "", extra=(("Location", "/favourites/"),))
                elif path == "/filter.aspx":
                    author = form.get("author", "")
                    state = form.get("__VIEWSTATE", "")
                    if "tag" not in form or form["tag"] == "----------":
                        self._send(200, search_form(author))
                    elif state != _view_state(author):
                        self._send(400, "bad view state")
                    else:
                        self._send(200, results_page(author, form["tag"]))
                else:
                    self._send(404, "not found")

            def do_PUT(self) -> None:
                _, body, headers = self._record()
                self._echo(body, headers)

            def _echo(self, body: bytes, headers: dict[str, str]) -> None:
                answer = {"method": self.command, "body": body.decode("latin-1"),
                          "cookie": headers.get("cookie", "")}  # fmt: skip
                self._send(200, json.dumps(answer), "application/json")

            def do_GET(self) -> None:
                path, _, headers = self._record()
                if path == "/echo":
                    self._echo(b"", headers)
                    return
                if path == "/login":
                    sid, token = secrets.token_hex(8), secrets.token_hex(8)
                    site.sessions[sid] = (token, "")
                    self._send(200, login_page(token),
                               extra=(("Set-Cookie", f"session={sid}; Path=/; HttpOnly"),))
                    return
                if path.startswith("/favourites/"):
                    user = site.sessions.get(self._session(), ("", ""))[1]
                    if not user:
                        self._send(302, "", extra=(("Location", "/login"),))
                        return
                    n = int(path.split("/")[2] or 1)
                    self._send(200, favourites_page(user, n))
                    return
                if path == "/search.aspx":
                    self._send(200, search_form())
                    return
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
                self._send(200 if body is not None else 404, body or "not found", ctype)

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
