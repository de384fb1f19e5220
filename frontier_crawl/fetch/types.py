"""Records of the fetch subsystem: what is asked (FetchRequest) and what came back (FetchResult).

Both are frozen; the fetcher never returns dicts. ``ErrorKind`` is the only vocabulary of failure
the rest of the crawler sees: every libcurl error code is mapped to one kind, once, in
``fetch/errors.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ErrorKind", "FetchRequest", "FetchResult", "NotModified", "sendable"]


def sendable(value: str) -> bool:
    """Whether ``value`` can go in a request header: printable ASCII (0x20-0x7E) only."""
    return value.isascii() and value.isprintable()


class ErrorKind(StrEnum):
    """Why a transfer produced no complete response. The value is what the crawl log shows."""

    DNS = "dns-error"  #: the host name did not resolve (or the resolver timed out)
    CONNECT = "connect-error"  #: TCP connect refused / unreachable / connect timeout
    TIMEOUT = "timeout"  #: total timeout, or slower than the low-speed limit
    TLS = "tls-error"  #: TLS handshake or certificate verification failed
    TOO_LARGE = "too-large"  #: body exceeded max_body_bytes (after decompression)
    TRUNCATED = "truncated"  #: connection closed before the announced end of the body
    PROTOCOL = "protocol-error"  #: malformed HTTP, bad chunking, undecodable content
    PROXY = "proxy-error"  #: the proxy refused or failed
    #: libcurl's own redirect limit (never reached: libcurl follows no redirect)
    REDIRECTS = "too-many-redirects"
    FORBIDDEN_SCHEME = "forbidden-scheme"  #: not http or https; never sent
    #: every address of the host is refused by the address policy (``fetch/addresses.py``);
    #: no connection was made, nothing was sent
    ADDRESS_REFUSED = "address-refused"
    OTHER = "other-error"  #: anything else libcurl reports

    @property
    def transient(self) -> bool:
        """Worth retrying later (the same request may succeed)."""
        return self in _TRANSIENT


_TRANSIENT = frozenset(
    {ErrorKind.DNS, ErrorKind.CONNECT, ErrorKind.TIMEOUT, ErrorKind.TRUNCATED, ErrorKind.PROXY}
)


@dataclass(slots=True, frozen=True)
class FetchRequest:
    """One request: a GET unless ``method`` says otherwise (``body`` is then sent as it is,
    with no ``Expect: 100-continue``; a HEAD reads no body). ``token`` is opaque to the
    fetcher and handed back in the result. Only GETs go through the HTTP cache.

    There is no way to have libcurl follow redirects: a 3xx comes back as it is, and its
    target, if the caller wants it, is a request of its own (which passes scope and the
    address policy like any other)."""

    url: str
    token: object = None
    headers: tuple[tuple[str, str], ...] = ()
    #: 0: a body over the fetcher's ``max_body_bytes`` is an error (TOO_LARGE). Else the first
    #: ``keep_bytes`` bytes of the body (decoded) are kept and the rest is not read, whatever
    #: ``max_body_bytes``: the result is no error, and ``FetchResult.cut`` says it was cut.
    keep_bytes: int = 0
    method: str = "GET"
    body: bytes = b""


@dataclass(slots=True, frozen=True)
class NotModified:
    """The stored response a 304 confirmed (see ``fetch/cache.py``)."""

    url: str  #: the URL the stored response was fetched from
    fetched_at: float  #: wall clock of that fetch: the WARC-Date of the record holding it


@dataclass(slots=True, frozen=True)
class FetchResult:
    """The outcome of one FetchRequest: a response (``status > 0``) and/or an ``error``.

    With the HTTP cache on, a ``304 Not Modified`` answer to a conditional request comes back
    with ``status`` 304 and ``header_bytes`` of the 304 as received, but ``headers``, ``body``
    and ``raw_body`` of the stored 200 response it confirmed (headers updated by the 304's, as
    RFC 9111 section 4.3.4 says), and ``not_modified`` set.
    """

    request: FetchRequest
    url: str  #: the request's URL (libcurl follows no redirect: each hop is a request)
    status: int  #: HTTP status of the final response, 0 if none was received
    error: ErrorKind | None
    error_detail: str  #: libcurl's message, empty when error is None
    #: response header block exactly as received (status line + headers, CRLF, blank line)
    header_bytes: bytes
    headers: tuple[tuple[str, str], ...]  #: parsed (name lower-cased, value stripped)
    raw_body: bytes  #: body as on the wire after de-chunking (still content-encoded)
    body: bytes  #: body after content decoding (== raw_body when not encoded)
    request_bytes: bytes  #: request header block as sent (for the WARC request record)
    ip: str  #: primary IP address of the connection, "" if none
    http_version: str  #: "1.0", "1.1", "2", or "" if no response
    started_at: float  #: wall clock (time.time()) when the request was submitted
    finished: float  #: time.monotonic() when the transfer completed
    duration_s: float  #: submit -> completion
    #: set when a 304 confirmed a stored response (``body`` is then that response's body)
    not_modified: NotModified | None = None
    #: the body was cut at ``request.keep_bytes`` (``raw_body`` holds what was read)
    cut: bool = False

    def header(self, name: str) -> str | None:
        """Last value of a response header (case-insensitive), or None."""
        name = name.lower()
        for key, value in reversed(self.headers):
            if key == name:
                return value
        return None

    def validator(self, name: str) -> str | None:
        """A validator header (``etag``, ``last-modified``) as a later conditional request can
        send it back, or None: only visible ASCII and spaces (RFC 9110 8.8.2 and 8.8.3, less
        the obsolete bytes 0x80-0xFF an ETag may hold, which libcurl's header list does not
        take). A revisit of a page whose validators are unusable is unconditional."""
        value = self.header(name)
        return value if value and sendable(value) else None

    @property
    def content_type(self) -> str:
        """Media type without parameters, lower-case ("" if absent)."""
        value = self.header("content-type") or ""
        return value.split(";", 1)[0].strip().lower()
