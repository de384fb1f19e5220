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

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import urlencode, urljoin, urlsplit, urlunsplit

import msgspec
from selectolax.lexbor import LexborHTMLParser

from frontier_crawl.spider.select import Selector, SelectorList, select

if TYPE_CHECKING:
    import parsel
    from selectolax.lexbor import LexborNode

    from frontier_crawl.spider.page import Page

_decode_meta = msgspec.msgpack.Decoder(dict[str, Any]).decode
_encode = msgspec.msgpack.Encoder().encode

#: The first byte of a stored meta that carries more than the meta: a request's cb_kwargs,
#: headers, errback, method, body or cookies, packed as ``ENVELOPE + msgpack([meta,
#: cb_kwargs, headers, errback, origin, method, body, cookies])`` (:class:`Envelope`; origin:
#: the scheme://host:port the headers were given for). 0xc1 is the one byte msgpack never
#: uses, so a plain meta (a msgpack map) never starts so. Envelopes stored before method, body
#: and cookies existed have five items and read as GETs without cookies.
ENVELOPE = b"\xc1"
#: headers not sent to another origin than the request's (a redirect elsewhere), as Scrapy
#: and browsers do
CREDENTIAL_HEADERS = frozenset(("authorization", "cookie", "proxy-authorization"))
#: methods that may be sent again without the user's say (RFC 9110 9.2.2: idempotent)
IDEMPOTENT_METHODS = frozenset(("GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"))
#: failures after which a request is known not to have been sent (nothing reached the server):
#: the only ones a non-idempotent request is retried after (the crawl log's error kinds)
NOT_SENT_ERRORS = frozenset(("dns-error", "connect-error"))
#: a Request(cookies=) cookie as stored: (name, value, domain, path); "" domain: the request's
#: host, "" path: the request's default path
StoredCookie = tuple[str, str, str, str]


class Envelope(msgspec.Struct, array_like=True, gc=False):
    """What a stored meta carries besides the meta (see ``ENVELOPE``)."""

    meta: dict[str, Any]
    cb_kwargs: dict[str, Any]
    headers: list[tuple[str, str]]
    errback: str
    origin: str = ""
    method: str = "GET"
    body: bytes = b""
    cookies: list[StoredCookie] = msgspec.field(default_factory=list)


_decode_envelope = msgspec.msgpack.Decoder(Envelope).decode


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def pack_envelope(
    meta: Mapping[str, Any] | None, cb_kwargs: Mapping[str, Any] | None,
    headers: list[tuple[str, str]], errback: str, origin: str = "", method: str = "GET",
    body: bytes = b"", cookies: list[StoredCookie] | None = None,
) -> bytes:  # fmt: skip
    """A request's stored meta with its cb_kwargs, headers, errback, method, body and cookies
    (msgpack errors propagate: TypeError, ValueError, OverflowError)."""
    packed: list[Any] = [meta or {}, cb_kwargs or {}, headers, errback, origin]
    if method != "GET" or body or cookies:
        packed += [method, body, cookies or []]
    return ENVELOPE + _encode(packed)


def envelope(raw: bytes) -> Envelope | None:
    """The envelope of a stored meta, None for a plain meta."""
    return _decode_envelope(raw[1:]) if raw[:1] == ENVELOPE else None


def unpack_envelope(
    raw: bytes,
) -> tuple[dict[str, Any], dict[str, Any], list[tuple[str, str]], str]:
    """(meta, cb_kwargs, headers, errback) of a stored meta."""
    if not raw:
        return {}, {}, [], ""
    if raw[:1] == ENVELOPE:
        e = _decode_envelope(raw[1:])
        return e.meta, e.cb_kwargs, e.headers, e.errback
    return _decode_meta(raw), {}, [], ""


def request_meta(raw: bytes) -> dict[str, Any]:
    """The user's meta of a stored meta (plain or in an envelope)."""
    if not raw:
        return {}
    return _decode_envelope(raw[1:]).meta if raw[:1] == ENVELOPE else _decode_meta(raw)


def request_headers(raw: bytes, url: str) -> tuple[tuple[str, str], ...]:
    """The headers a stored meta carries for its request to ``url`` (none without an
    envelope; credentials only to the origin they were given for, not after a redirect)."""
    if raw[:1] != ENVELOPE:
        return ()
    e = _decode_envelope(raw[1:])
    if e.origin and origin_of(url) != e.origin:
        return tuple((k, v) for k, v in e.headers if k.lower() not in CREDENTIAL_HEADERS)
    return tuple((k, v) for k, v in e.headers)


def request_method(raw: bytes) -> tuple[str, bytes]:
    """(method, body) of the request a stored meta belongs to (("GET", b"") for most)."""
    if raw[:1] != ENVELOPE:
        return "GET", b""
    e = _decode_envelope(raw[1:])
    return e.method, e.body


def request_variant(raw: bytes) -> str:
    """What the frontier adds to a request's canonical URL for its seen-set key: "" for a GET
    without a body (every link, so a URL's key is what it always was), else the method and
    the SHA-1 of the body, after a NUL (no canonical URL holds one), so two requests to one
    URL are one request exactly when their method and body are the same, as in Scrapy's
    request fingerprint."""
    if raw[:1] != ENVELOPE:
        return ""
    e = _decode_envelope(raw[1:])
    if e.method == "GET" and not e.body:
        return ""
    return f"\x00{e.method}\x00{hashlib.sha1(e.body, usedforsecurity=False).hexdigest()}"


def may_retry(raw: bytes, error: str | None) -> bool:
    """Whether a request may be retried after a failure (``error``: the crawl log's error
    kind, None for an HTTP status the crawl retries: 5xx, 429): always, unless its meta says
    ``dont_retry: True`` (Scrapy's key); a non-idempotent one (POST, PATCH) only after a
    failure before anything was sent (DNS, connect), unless its meta says ``dont_retry:
    False``, the user's explicit leave to send it again."""
    if not raw:
        return True
    meta = request_meta(raw)
    dont = meta.get("dont_retry")
    if dont is True:
        return False
    if dont is False:
        return True
    method = request_method(raw)[0]
    return method in IDEMPOTENT_METHODS or error in NOT_SENT_ERRORS


def redirected(raw: bytes, status: int) -> bytes:
    """A stored meta for the target of a redirect, as Scrapy's RedirectMiddleware: a 302 or
    303 of anything but a HEAD becomes a GET without body (and without Content-Type); 301,
    307 and 308 keep the method and body. Request cookies are not sent again (the jar has
    them)."""
    if raw[:1] != ENVELOPE:
        return raw
    e = _decode_envelope(raw[1:])
    if e.method == "GET" and not e.body and not e.cookies:
        return raw
    method, body, headers = e.method, e.body, e.headers
    if status in (302, 303) and method != "HEAD":
        method, body = "GET", b""
        headers = [(k, v) for k, v in headers if k.lower() not in ("content-type",)]
    return pack_envelope(e.meta, e.cb_kwargs, headers, e.errback, e.origin, method, body)


def _text_of(value: Any, encoding: str) -> str:
    return value.decode(encoding) if isinstance(value, bytes) else str(value)


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
    ``method`` (``"POST"``, ``"PUT"``...) and ``body`` (bytes, or str encoded with
    ``encoding``) are sent as given: a request is the same request as another when its
    canonical URL, method and body are (Scrapy's fingerprint), so a form posted twice with the
    same data is sent once. ``cookies`` (a dict of name -> value, or a list of dicts with
    ``name``, ``value`` and optionally ``domain`` and ``path``) go into the crawl's cookie jar
    for the request's host and are sent with it (``meta["dont_merge_cookies"]``: neither the
    jar nor these cookies; ``meta["cookiejar"]``: the key of one of several jars).
    ``dont_filter=True`` is accepted but cannot make the frontier fetch a request twice
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
    method: str = "GET"
    body: bytes | str | None = None
    cookies: Mapping[str, Any] | list[Mapping[str, Any]] | None = None
    encoding: str = "utf-8"

    def __repr__(self) -> str:  # Scrapy's: never the headers, body or cookies (secrets)
        return f"<{self.method} {self.url}>"

    __str__ = __repr__


def _set_default_header(req: Request, name: str, value: str) -> None:
    """Give ``req`` the header unless it has it (any case): its headers become a list."""
    given = req.headers
    pairs = list(given.items() if isinstance(given, Mapping) else given or ())
    if not any(_text_of(k, "latin-1").lower() == name.lower() for k, _ in pairs):
        pairs.append((name, value))
    req.headers = pairs


def form_encode(formdata: Any, encoding: str) -> str:
    """``formdata`` (a dict, or pairs; a list value is several fields) as
    application/x-www-form-urlencoded text, as Scrapy encodes it."""
    items = formdata.items() if isinstance(formdata, Mapping) else formdata
    values = [
        (_bytes_of(k, encoding), _bytes_of(v, encoding))
        for k, vs in items
        for v in (vs if isinstance(vs, list | tuple) else [vs])
    ]
    return urlencode(values, doseq=True)


def _bytes_of(value: Any, encoding: str) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode(encoding)


class FormRequest(Request):
    """Scrapy's ``FormRequest``: ``formdata`` (a dict or pairs; a list value is several
    fields) url-encoded into the body of a POST (the method when ``formdata`` is given and no
    ``method``), with ``Content-Type: application/x-www-form-urlencoded``, or into the query
    of a GET (replacing the URL's query). :meth:`from_response` fills in a page's form."""

    formdata: Any = None
    method: str = ""

    def __post_init__(self) -> None:
        if not self.method:
            self.method = "POST" if self.formdata else "GET"
        self.method = self.method.upper()
        if not self.formdata:
            return
        query = form_encode(self.formdata, self.encoding)
        if self.method == "POST":
            _set_default_header(self, "Content-Type", "application/x-www-form-urlencoded")
            self.body = query.encode("ascii")
        else:
            self.url = urlunsplit(urlsplit(self.url)._replace(query=query))

    @classmethod
    def from_response(
        cls, response: Response, formname: str | None = None, formid: str | None = None,
        formnumber: int = 0, formdata: Any = None, clickdata: dict[str, Any] | None = None,
        dont_click: bool = False, formxpath: str | None = None, formcss: str | None = None,
        **kwargs: Any,
    ) -> FormRequest:  # fmt: skip
        """A request that submits a form of ``response`` as a browser would: its fields'
        values (hidden ones included: a CSRF token, ``__VIEWSTATE``), ``formdata`` overriding
        them, the first submit button's (or ``clickdata``'s) name and value unless
        ``dont_click``, to the form's ``action`` with its ``method``. The form is chosen by
        ``formname``, ``formid``, ``formxpath`` or ``formcss`` (an element inside it will do),
        else the ``formnumber``-th. As Scrapy's (``form.py``)."""
        from frontier_crawl.spider.form import form_request_args

        url, method, pairs = form_request_args(
            response, formname, formid, formnumber, formdata, clickdata, dont_click,
            formxpath, formcss, kwargs.pop("url", None), kwargs.pop("method", None),
        )  # fmt: skip
        kwargs.setdefault("encoding", response.charset or "utf-8")
        return cls(url=url, method=method, formdata=pairs, **kwargs)


class JsonRequest(Request):
    """Scrapy's ``JsonRequest``: ``data`` serialised as the JSON body (``dumps_kwargs`` for
    ``json.dumps``; keys sorted by default), POST unless ``method`` is given, with
    ``Content-Type: application/json`` and a JSON ``Accept`` unless given."""

    data: Any = None
    dumps_kwargs: dict[str, Any] | None = None
    method: str = ""

    def __post_init__(self) -> None:
        if self.body is None and self.data is not None:
            kwargs = {"sort_keys": True, **(self.dumps_kwargs or {})}
            self.body = json.dumps(self.data, **kwargs)
            self.method = self.method or "POST"
        self.method = (self.method or "GET").upper()
        _set_default_header(self, "Content-Type", "application/json")
        _set_default_header(self, "Accept", "application/json, text/javascript, */*; q=0.01")


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

    __slots__ = ("_by_tag", "_cb_kwargs", "_headers", "_json", "_meta", "_page", "_selector",
                 "_text", "_tree")  # fmt: skip

    def __init__(self, page: Page) -> None:
        self._page = page
        self._text: str | None = None
        self._tree: LexborHTMLParser | None = None
        self._meta: dict[str, Any] | None = None
        self._cb_kwargs: dict[str, Any] | None = None
        self._headers: Headers | None = None
        self._selector: parsel.Selector | None = None
        self._json: Any = _UNSET
        #: tag -> (lexbor elements' mem_ids in document order, lxml's count), for xpath_context
        self._by_tag: dict[str, tuple[dict[int, int], int]] | None = None

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
        return select(self.tree, query, self)

    def xpath_context(self, node: LexborNode) -> parsel.Selector | None:
        """The element of :attr:`selector` (lxml) that a ``css()``-picked lexbor element is:
        the one with its tag at the same index in document order; None (with a warning, once
        per process) when the two parses hold different numbers of elements of that tag."""
        tag = node.tag or ""
        if self._by_tag is None:
            self._by_tag = {}
        known = self._by_tag.get(tag)
        if known is None:
            order = {n.mem_id: i for i, n in enumerate(self.tree.css(tag))} if tag else {}
            counted = self.selector.xpath("count(//*[name()=$t])", t=tag).get() or "0"
            known = self._by_tag[tag] = (order, int(float(counted)))
        order, in_lxml = known
        index = order.get(node.mem_id)
        if index is None or in_lxml != len(order):
            global _WARNED_XPATH
            if not _WARNED_XPATH:
                _WARNED_XPATH = True
                logging.getLogger(__name__).warning(
                    "%s: an xpath() on an element picked with css() sees only that element's "
                    "own HTML: lxml and lexbor parse this page into different numbers of <%s> "
                    "elements (use response.xpath() from the page for this query)", self.url,
                    tag,
                )  # fmt: skip
            return None
        return self.selector.xpath("(//*[name()=$t])[$i]", t=tag, i=index + 1)[0]

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
_WARNED_XPATH = False


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
    seeds), :meth:`start` and :meth:`start_requests` (requests with callbacks and meta at
    depth 0),
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

    async def start(self) -> AsyncIterator[Request]:
        """The requests the crawl starts with (besides the config's seeds), as Scrapy 2.13's:
        by default those of :meth:`start_requests`. Override it as an asynchronous generator
        (``async def start(self): yield Request(...)``) or a method returning an iterable;
        run to its end once per worker process at the start of each run (``start.py``); what
        it yields is deduplicated like any request."""
        for request in self.start_requests():
            yield request

    def start_requests(self) -> Iterable[Request]:
        """The older name of :meth:`start` (synchronous), which the default ``start()``
        iterates: by default a :class:`Request` to ``parse`` for each of ``start_urls``."""
        return [Request(url) for url in self.start_urls]

    def open(self) -> None:
        """Called once before the crawl sends its first request; an exception stops the crawl
        (exit status 2)."""

    def close(self) -> None:
        """Called once when the crawl ends or stops; an exception is logged, never raised."""

    def parse(self, response: Response) -> Iterable[Any] | None:
        """The seeds' callback; by default a :class:`Request` for each of ``response.links``."""
        return [Request(url) for url in response.links]
