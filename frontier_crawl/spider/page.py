"""The page the engine hands a spider: a leaf module, so the user API (``api.py``) and the
host that runs callbacks (``host.py``) both use it without importing each other."""

from __future__ import annotations

from typing import Any

import msgspec


class Page(msgspec.Struct, frozen=True, gc=False):
    """What the engine hands over for one response."""

    url: str  # final URL of the response
    status: int
    headers: tuple[tuple[str, str], ...]  # as FetchResult.headers (name lower-cased)
    body: bytes  # decoded body (FetchResult.body)
    content_type: str  # media type, lower-case, no parameters
    charset: str | None  # the charset the engine found (parse/charset.py), None if unknown
    links: list[str]  # the page's links: absolute, canonical, in scope (engine decided)
    depth: int
    callback: str  # "" means the seeds' callback, "parse"
    meta: bytes  # msgpack of the request's meta; b"" means {}
    #: the page as the engine parsed it for its links (a selectolax LexborHTMLParser), if it
    #: can hand it over: ``Response.css`` then uses it instead of parsing the page again
    tree: Any = None
    #: wall clock (time.time()) of the fetch; 0.0: not given (the items carry no fetch time)
    fetched_at: float = 0.0
