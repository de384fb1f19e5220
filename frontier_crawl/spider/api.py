"""What a spider is written against: :class:`Spider`, :class:`Request` and :class:`Response`.

A callback (``Spider.parse`` for the seeds, any other method named by a request's ``callback``)
takes a :class:`Response` and is a generator, or returns an iterable or None, of
:class:`Request` objects and items (dicts, dataclasses or msgspec Structs). A request's callback
goes by *name* and its ``meta`` must serialise with msgpack, because both are stored with the URL
in the frontier and survive a restart; a relative URL is resolved against the response's URL.

Non-2xx responses reach callbacks only when the spider asks, with a class attribute
``handle_status`` (like Scrapy's ``handle_httpstatus_list``): a collection of status codes
(``[404, 410]``, ``range(400, 500)``) or ``"all"``; a callback method may carry its own
(``parse_gone.handle_status = [404, 410]`` after its ``def``), which then applies to the
requests naming that callback instead of the class's. Redirects never reach callbacks: the
request's callback and meta go with the redirect target, so the callback sees the final
response. robots.txt responses never reach callbacks.

:class:`Response` does work only when asked: ``text`` decodes the body on first use (with the
charset the engine found, else UTF-8; undecodable bytes become U+FFFD), ``css()`` parses the page
with selectolax (lexbor) once, on its first call, and ``meta`` unpacks the request's meta on first
use. A callback that only reads ``links`` costs no parse and no decode.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import msgspec
from selectolax.lexbor import LexborHTMLParser

if TYPE_CHECKING:
    from selectolax.lexbor import LexborNode

    from frontier_crawl.spider.page import Page

_decode_meta = msgspec.msgpack.Decoder(dict[str, Any]).decode


class Request(msgspec.Struct):
    """A URL for the frontier, with the callback that will parse its response.

    ``callback`` is the *name* of a method of the spider (a bound method of the spider is also
    accepted and stored by name); None or ``"parse"`` means ``parse``. ``meta`` is a dict that
    must serialise with msgpack (strings, numbers, booleans, None, bytes, lists, dicts,
    datetimes...): the callback receives it, as decoded from msgpack, in ``response.meta``
    (a tuple comes back as a list). ``priority``: higher is fetched sooner within a host, as the
    frontier orders its queues. (A msgspec Struct, for speed: nothing is checked when it is
    built; the host checks it when the callback yields it.) The request goes through the
    frontier like any link: canonicalisation, scope, the seen-set (a URL already seen is not
    fetched again, whatever its callback), robots.txt, politeness and trap rules.
    """

    url: str
    callback: str | Callable[..., Any] | None = None
    meta: Mapping[str, Any] | None = None
    priority: int = 0


class Response:
    """One fetched page as a callback sees it (built by the host; read-only).

    ``url`` is the final URL (after redirects), ``status`` the HTTP status, ``headers`` the
    response headers as a dict with lower-cased names (a repeated header's values joined with
    ``", "``; ``header_list`` keeps them as received), ``body`` the decoded body bytes (content
    coding undone), ``links`` the links the engine extracted (absolute, canonical, in scope, in
    document order), ``depth`` the number of links followed from a seed, ``meta`` the meta of the
    request that led here (``{}`` for seeds).
    """

    __slots__ = ("_headers", "_meta", "_page", "_text", "_tree")

    def __init__(self, page: Page) -> None:
        self._page = page
        self._text: str | None = None
        self._tree: LexborHTMLParser | None = None
        self._meta: dict[str, Any] | None = None
        self._headers: dict[str, str] | None = None

    @property
    def url(self) -> str:
        return self._page.url

    @property
    def status(self) -> int:
        return self._page.status

    @property
    def body(self) -> bytes:
        return self._page.body

    @property
    def links(self) -> list[str]:
        return self._page.links

    @property
    def depth(self) -> int:
        return self._page.depth

    @property
    def content_type(self) -> str:
        """Media type, lower-case, without parameters (``text/html``)."""
        return self._page.content_type

    @property
    def charset(self) -> str | None:
        """The encoding the engine found for the page (a Python codec name), None if unknown."""
        return self._page.charset

    @property
    def header_list(self) -> tuple[tuple[str, str], ...]:
        """The headers as received: (lower-cased name, value) pairs."""
        return self._page.headers

    @property
    def headers(self) -> dict[str, str]:
        if self._headers is None:
            headers: dict[str, str] = {}
            for name, value in self._page.headers:
                headers[name] = f"{headers[name]}, {value}" if name in headers else value
            self._headers = headers
        return self._headers

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            raw = self._page.meta
            self._meta = _decode_meta(raw) if raw else {}
        return self._meta

    @property
    def text(self) -> str:
        """The body as text, in the page's charset (UTF-8 if unknown), errors replaced."""
        if self._text is None:
            self._text = _decode(self._page.body, self._page.charset)
        return self._text

    @property
    def tree(self) -> LexborHTMLParser:
        """The parsed page (selectolax lexbor): the engine's parse if it handed it over
        (``Page.tree``), else parsed on first use and kept."""
        if self._tree is None:
            if self._page.tree is not None:
                self._tree = self._page.tree
                return self._tree
            charset = self._page.charset
            if charset is None or charset.replace("_", "-").lower() in ("utf-8", "utf8"):
                self._tree = LexborHTMLParser(self._page.body)
            else:
                self._tree = LexborHTMLParser(self.text)
        return self._tree

    def css(self, selector: str) -> list[LexborNode]:
        """Nodes matching a CSS selector (``response.css("h1")[0].text()``)."""
        return self.tree.css(selector)

    def css_first(self, selector: str, default: Any = None) -> LexborNode | Any:
        """The first node matching a CSS selector, else ``default``."""
        return self.tree.css_first(selector, default=default)

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.url}>"


def _decode(body: bytes, charset: str | None) -> str:
    if charset is not None:
        try:
            return body.decode(charset, "replace")
        except LookupError:
            pass
    return body.decode("utf-8", "replace")


HandleStatus = Collection[int] | Literal["all"]


class Spider:
    """Base class of a spider: subclass it and write callbacks.

    The default :meth:`parse` follows every link of the page and yields no items, so a spider
    that only adds items to some callback keeps the crawl it would have without a spider. With a
    spider, only the requests its callbacks yield are followed.

    Class attributes: ``handle_status``, the non-2xx statuses that reach callbacks (a
    collection of ints, ``range(400, 600)``, or ``"all"``; default none). Hooks: :meth:`open`
    before the first request, :meth:`close` at the end of the run (also after a stop). A spider
    is instantiated with no arguments, once per worker process.
    """

    handle_status: ClassVar[HandleStatus] = ()

    def open(self) -> None:
        """Called once before the crawl sends its first request; an exception stops the crawl
        (exit status 2)."""

    def close(self) -> None:
        """Called once when the crawl ends or stops; an exception is logged, never raised."""

    def parse(self, response: Response) -> Iterable[Any] | None:
        """The seeds' callback; by default a :class:`Request` for each of ``response.links``."""
        return [Request(url) for url in response.links]
