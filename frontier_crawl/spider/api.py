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

Scrapy's API is there too (docs/scrapy.md): ``response.css()`` gives parsel-style
selectors (``::text``, ``::attr()``, ``.get()``, ``.getall()``, ``.re()``, ``.attrib``: see
:mod:`frontier_crawl.spider.select`), ``response.xpath()`` and ``response.selector`` are
parsel's, built on first use; ``urljoin``, ``follow``, ``follow_all``, ``json()``,
``cb_kwargs``; ``Request(cb_kwargs=, headers=, dont_filter=, errback=)``; a spider's ``name``,
``start_urls``, ``start_requests()``, ``allowed_domains``, ``custom_settings`` and ``logger``.
Nothing of it costs a page that does not use it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import urljoin, urlsplit

import msgspec
from selectolax.lexbor import LexborHTMLParser

from frontier_crawl.spider.select import Selector, SelectorList, select

if TYPE_CHECKING:
    import parsel
    from selectolax.lexbor import LexborNode

    from frontier_crawl.spider.page import Page

_decode_meta = msgspec.msgpack.Decoder(dict[str, Any]).decode
_decode_envelope = msgspec.msgpack.Decoder(
    tuple[dict[str, Any], dict[str, Any], list[tuple[str, str]], str, str]
).decode
_encode = msgspec.msgpack.Encoder().encode

#: The first byte of a stored meta that carries more than the meta: a request's cb_kwargs,
#: headers or errback, packed as ``ENVELOPE + msgpack([meta, cb_kwargs, headers, errback,
#: origin])`` (origin: the scheme://host:port the headers were given for).
#: 0xc1 is the one byte msgpack never uses, so a plain meta (a msgpack map) never starts so.
ENVELOPE = b"\xc1"
#: headers not sent to another origin than the request's (a redirect elsewhere), as Scrapy
#: and browsers do
CREDENTIAL_HEADERS = frozenset(("authorization", "cookie", "proxy-authorization"))


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def pack_envelope(
    meta: Mapping[str, Any] | None, cb_kwargs: Mapping[str, Any] | None,
    headers: list[tuple[str, str]], errback: str, origin: str = "",
) -> bytes:  # fmt: skip
    """A request's stored meta with its cb_kwargs, headers and errback (msgpack errors
    propagate: TypeError, ValueError, OverflowError)."""
    return ENVELOPE + _encode([meta or {}, cb_kwargs or {}, headers, errback, origin])


def unpack_envelope(
    raw: bytes,
) -> tuple[dict[str, Any], dict[str, Any], list[tuple[str, str]], str]:
    """(meta, cb_kwargs, headers, errback) of a stored meta."""
    if not raw:
        return {}, {}, [], ""
    if raw[:1] == ENVELOPE:
        return _decode_envelope(raw[1:])[:4]
    return _decode_meta(raw), {}, [], ""


def request_headers(raw: bytes, url: str) -> tuple[tuple[str, str], ...]:
    """The headers a stored meta carries for its request to ``url`` (none without an
    envelope; credentials only to the origin they were given for, not after a redirect)."""
    if raw[:1] != ENVELOPE:
        return ()
    headers, origin = (e := _decode_envelope(raw[1:]))[2], e[4]
    if origin and origin_of(url) != origin:
        return tuple((k, v) for k, v in headers if k.lower() not in CREDENTIAL_HEADERS)
    return tuple((k, v) for k, v in headers)


class Request(msgspec.Struct):
    """A URL for the frontier, with the callback that will parse its response.

    ``callback`` is the *name* of a method of the spider (a bound method of the spider is also
    accepted and stored by name); None or ``"parse"`` means ``parse``. ``meta`` is a dict that
    must serialise with msgpack (strings, numbers, booleans, None, bytes, lists, dicts,
    datetimes...): the callback receives it, as decoded from msgpack, in ``response.meta``
    (a tuple comes back as a list). ``priority``: higher is fetched sooner within a host, as in
    Scrapy (FIFO among equal priorities; clamped to +-65535 in the frontier's queue key;
    hosts still take turns by politeness). (A msgspec Struct, for speed: nothing is checked
    when it is built; the host checks it when the callback yields it.) The request goes through the
    frontier like any link: canonicalisation, scope, the seen-set (a URL already seen is not
    fetched again, whatever its callback), robots.txt, politeness and trap rules.

    As in Scrapy: ``cb_kwargs`` (msgpack-able) are passed to the callback as keyword
    arguments; ``headers`` (a dict or pairs, str or bytes) are sent with the request
    (``Host``, ``Content-Length``, ``Transfer-Encoding``, ``Connection``, ``User-Agent`` and
    ``Accept-Encoding`` are refused: a bad-yield);
    ``errback`` (a method or name) is called with a :class:`Failure` when the request fails
    for good (after retries) or gets an HTTP error status its callback does not handle.
    ``dont_filter=True`` is accepted but cannot make the frontier fetch a URL twice
    (exactly-once is a guarantee of the crawl): it is logged once as a warning.
    """

    url: str
    callback: str | Callable[..., Any] | None = None
    meta: Mapping[str, Any] | None = None
    priority: int = 0
    cb_kwargs: Mapping[str, Any] | None = None
    headers: Mapping[str, Any] | Iterable[tuple[Any, Any]] | None = None
    dont_filter: bool = False
    errback: str | Callable[..., Any] | None = None


class Headers(dict[str, str]):
    """Response headers: a dict with lower-cased names, read case-insensitively.

    Values are ``str`` (Scrapy's are ``bytes``); a repeated header's values are joined with
    ``", "`` (``getlist`` gives them apart, as received)."""

    __slots__ = ("_pairs",)

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        super().__init__()
        self._pairs = pairs
        for name, value in pairs:
            self[name] = f"{self[name]}, {value}" if name in self else value

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name.lower() if isinstance(name, str) else name)

    def getlist(self, name: str) -> list[str]:
        """Every value of a header, in the order received."""
        name = name.lower()
        return [v for k, v in self._pairs if k == name]


class Field(dict[str, Any]):
    """Scrapy's ``scrapy.Field()``: declares a field of an :class:`Item` (its metadata is
    kept, unused)."""


class Item(dict[str, Any]):
    """Scrapy's ``scrapy.Item``: a dict that takes only its declared fields
    (``text = Field()``); an undeclared key is a KeyError, as in Scrapy."""

    fields: ClassVar[dict[str, Field]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: dict[str, Field] = {}
        for klass in reversed(cls.__mro__):
            fields.update((k, v) for k, v in vars(klass).items() if isinstance(v, Field))
        cls.fields = fields

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self.fields:
            raise KeyError(f"{type(self).__name__} does not support field: {key}")
        super().__setitem__(key, value)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value


class DropItem(Exception):
    """Raised by a pipeline's ``process_item``: the item is dropped (logged at DEBUG, counted
    in the report per pipeline), never a problem."""


class NotConfigured(Exception):
    """Raised by a pipeline's ``from_crawler`` or ``__init__``: the pipeline is left out (logged
    at INFO)."""


class IgnoreRequest(Exception):
    """Scrapy's name, for imports; a callback raising it is a callback-error as any other."""


class CloseSpider(Exception):
    """Scrapy's name, for imports; raising it does not stop the crawl (a callback-error):
    stop a crawl with SIGINT/SIGTERM or the control API."""


class Failure:
    """What an errback receives (after Twisted's Failure, as Scrapy passes it): ``value`` the
    exception (:class:`DownloadError` or :class:`HttpError`), ``request`` the request that
    failed (its URL, callback name, meta and cb_kwargs), ``check(*types)``."""

    __slots__ = ("request", "value")

    def __init__(self, value: Exception, request: Request) -> None:
        self.value = value
        self.request = request

    def check(self, *types: type[BaseException]) -> type[BaseException] | None:
        for t in types:
            if isinstance(self.value, t):
                return t
        return None

    def getErrorMessage(self) -> str:
        return str(self.value)

    def __repr__(self) -> str:
        return f"<Failure {type(self.value).__name__}: {self.value}>"


class DownloadError(Exception):
    """A request that failed without an HTTP response: ``kind`` is the crawl log's outcome
    error (``timeout``, ``dns``, ``connect``...)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind


class HttpError(Exception):
    """A response whose status its callback does not handle (Scrapy's HttpError):
    ``response`` is that response."""

    def __init__(self, response: Response) -> None:
        super().__init__(f"Ignoring non-200 response: {response.status} {response.url}")
        self.response = response


class Response:
    """One fetched page as a callback sees it (built by the host; read-only).

    ``url`` is the final URL (after redirects), ``status`` the HTTP status, ``headers`` the
    response headers as a dict with lower-cased names (a repeated header's values joined with
    ``", "``; ``header_list`` keeps them as received), ``body`` the decoded body bytes (content
    coding undone), ``links`` the links the engine extracted (absolute, canonical, in scope, in
    document order), ``depth`` the number of links followed from a seed, ``meta`` the meta of the
    request that led here (``{}`` for seeds).
    """

    __slots__ = ("_cb_kwargs", "_headers", "_json", "_meta", "_page", "_selector", "_text",
                 "_tree")  # fmt: skip

    def __init__(self, page: Page) -> None:
        self._page = page
        self._text: str | None = None
        self._tree: LexborHTMLParser | None = None
        self._meta: dict[str, Any] | None = None
        self._cb_kwargs: dict[str, Any] | None = None
        self._headers: Headers | None = None
        self._selector: parsel.Selector | None = None
        self._json: Any = _UNSET

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
    def headers(self) -> Headers:
        """Case-insensitive (``headers["Content-Type"]``), values ``str``: see :class:`Headers`."""
        if self._headers is None:
            self._headers = Headers(self._page.headers)
        return self._headers

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            raw = self._page.meta
            if not raw:
                self._meta = {}
            elif raw[:1] == ENVELOPE:
                self._meta, self._cb_kwargs = unpack_envelope(raw)[:2]
            else:
                self._meta = _decode_meta(raw)
        return self._meta

    @property
    def cb_kwargs(self) -> dict[str, Any]:
        """The request's ``cb_kwargs`` (also passed to the callback as keyword arguments)."""
        if self._cb_kwargs is None:
            raw = self._page.meta
            self._cb_kwargs = unpack_envelope(raw)[1] if raw[:1] == ENVELOPE else {}
        return self._cb_kwargs

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

    def css(self, query: str) -> SelectorList:
        """Scrapy's ``response.css``: parsel-style selectors (``::text``, ``::attr(name)``,
        ``.get()``, ``.getall()``, ``.re()``...) answered from the lexbor tree; an element's
        selector also answers selectolax's node API (``response.css("h1")[0].text()``)."""
        return select(self.tree, query)

    @property
    def selector(self) -> parsel.Selector:
        """The page as a ``parsel.Selector`` (lxml), built on first use and kept."""
        if self._selector is None:
            import parsel

            self._selector = parsel.Selector(text=self.text, base_url=self.url)
        return self._selector

    def xpath(self, query: str, **kwargs: Any) -> parsel.SelectorList[parsel.Selector]:
        """parsel's ``xpath`` on :attr:`selector` (the lxml tree is built on the first call)."""
        return self.selector.xpath(query, **kwargs)

    def json(self) -> Any:
        """The body parsed as JSON (``json.loads`` of :attr:`text`), once."""
        if self._json is _UNSET:
            self._json = json.loads(self.text)
        return self._json

    def urljoin(self, url: str) -> str:
        """``url`` made absolute against the page's URL."""
        return urljoin(self.url, url)

    def follow(
        self, url: str | Selector | Any, callback: str | Callable[..., Any] | None = None,
        **kwargs: Any,
    ) -> Request:  # fmt: skip
        """A :class:`Request` for ``url`` (relative or absolute; a selector of an ``<a>`` or
        ``<link>`` element, or of a ``::attr()``/``::text`` value), as Scrapy's.
        ``kwargs``: the other arguments of :class:`Request`."""
        return Request(self.urljoin(_url_of(url)), callback, **kwargs)

    def follow_all(
        self, urls: Iterable[str | Selector | Any] | None = None,
        callback: str | Callable[..., Any] | None = None, *, css: str | None = None,
        xpath: str | None = None, **kwargs: Any,
    ) -> Iterator[Request]:  # fmt: skip
        """A :class:`Request` for each of ``urls``, or of the matches of ``css`` or ``xpath``
        (exactly one of the three), as Scrapy's."""
        if sum(x is not None for x in (urls, css, xpath)) != 1:
            raise ValueError("follow_all: give exactly one of urls, css= or xpath=")
        found: Iterable[Any] = (
            urls if urls is not None else self.css(css) if css is not None
            else self.xpath(xpath or "")
        )  # fmt: skip
        for url in found:
            yield self.follow(url, callback, **kwargs)

    def css_first(self, selector: str, default: Any = None) -> LexborNode | Any:
        """The first node matching a CSS selector, else ``default``."""
        return self.tree.css_first(selector, default=default)

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.url}>"


_UNSET: Any = object()


def _url_of(url: Any) -> str:
    """The URL a follow() argument means (Scrapy's rules: a string, a string-valued selector,
    or the href of an ``<a>``/``<link>`` element)."""
    if isinstance(url, str):
        return url
    root = getattr(url, "root", None)
    if isinstance(root, str):
        return root
    tag = getattr(root, "tag", None)
    if tag in ("a", "link"):
        attrs: Any = getattr(root, "attributes", None)  # lexbor
        href = attrs.get("href") if attrs is not None else root.get("href")  # type: ignore[union-attr]  # lxml
        if href is None:
            raise ValueError(f"<{tag}> element has no href attribute: {url!r}")
        return str(href)
    if root is None:
        raise TypeError(f"follow: expected a URL or a selector, got {type(url).__name__}")
    raise ValueError(f"Only <a> and <link> elements are supported; got <{tag}>")


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

    Scrapy's attributes: ``name`` (the logger's name), ``start_urls`` (added to the config's
    seeds), :meth:`start_requests` (requests with callbacks and meta at depth 0),
    ``allowed_domains`` (narrows the config's scope), ``custom_settings`` (Scrapy setting
    names mapped to their crawl.toml keys; any other is a config error naming the key to use),
    ``handle_httpstatus_list`` (as ``handle_status``), :attr:`logger`.
    """

    handle_status: ClassVar[HandleStatus] = ()
    name: ClassVar[str] = ""
    start_urls: ClassVar[Collection[str]] = ()
    allowed_domains: ClassVar[Collection[str]] = ()
    custom_settings: ClassVar[Mapping[str, Any] | None] = None

    @property
    def logger(self) -> logging.Logger:
        """A logger named after the spider (``name``, else its class name)."""
        return logging.getLogger(self.name or type(self).__name__)

    def start_requests(self) -> Iterable[Request]:
        """The requests the crawl starts with (besides the config's seeds): by default a
        :class:`Request` to ``parse`` for each of ``start_urls``. Called once per worker
        process at the start of each run; what it yields is deduplicated like any request."""
        return [Request(url) for url in self.start_urls]

    def open(self) -> None:
        """Called once before the crawl sends its first request; an exception stops the crawl
        (exit status 2)."""

    def close(self) -> None:
        """Called once when the crawl ends or stops; an exception is logged, never raised."""

    def parse(self, response: Response) -> Iterable[Any] | None:
        """The seeds' callback; by default a :class:`Request` for each of ``response.links``."""
        return [Request(url) for url in response.links]
