"""The crawl's cookie jars, as Scrapy's CookiesMiddleware keeps them.

With a spider (``[spider] cookies = true``, the default when ``spider.source`` is set), every
response's ``Set-Cookie`` headers go into a jar and every request carries the jar's cookies
for its URL in a ``Cookie`` header. The rules are the standard library's
``http.cookiejar.DefaultCookiePolicy`` (domain and path matching, ``Secure``, expiry, a cookie
for another domain refused), with RFC 6265's host-only rule (a cookie set without ``Domain``
goes back to its host only, not to its subdomains, ``DomainStrictNonDomain``), not
hand-written parsing.

- ``Request(cookies=...)``: those cookies go into the jar (for the request's host, or the
  domain and path given) when the request is sent, and so are sent with it and later ones.
- ``meta["dont_merge_cookies"] = True``: the request carries no cookie of the jar and none of
  its own, and its response's cookies are not kept (Scrapy's key).
- ``meta["cookiejar"] = key``: the request uses the jar of that key (any int or string; one
  jar per key, created on first use); without it, the default jar. A request yielded from a
  callback does not inherit its page's key: pass it on (``meta={"cookiejar":
  response.meta["cookiejar"]}``), as in Scrapy.

The jars are saved with the crawl state (:meth:`CookieJars.dump`, in the transaction that
commits the pages that set them), so a resumed crawl keeps its sessions, session cookies
included (a browser would drop those when it closes; a crawl that resumes is not a new
session). Cookies are secrets: nothing here logs a name or a value, and they are not in
the crawl log or the status. (The WARC records are the exchange as it went over the wire,
Cookie and Set-Cookie headers included, as every WARC crawler writes them.)

Without a spider (an archive crawl) there are no jars (:data:`NO_COOKIES`): each request is
sent as the site would see a first visit, so what is archived does not depend on what order
the pages were fetched in.
"""

from __future__ import annotations

import http.cookiejar
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import msgspec

from frontier_crawl.spider.api import envelope, request_meta

__all__ = ["COOKIES_BLOB", "NO_COOKIES", "CookieJars", "NoCookies"]

log = logging.getLogger(__name__)

#: the frontier blob holding the jars
COOKIES_BLOB = "spider-cookies"
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(list[tuple[Any, list[list[Any]]]]).decode
#: http.cookiejar.Cookie's constructor arguments, in order (what a saved cookie holds)
_FIELDS = ("version", "name", "value", "port", "port_specified", "domain", "domain_specified",
           "domain_initial_dot", "path", "path_specified", "secure", "expires", "discard",
           "comment", "comment_url", "_rest", "rfc2109")  # fmt: skip


class _Request:
    """What ``http.cookiejar`` asks of a request (urllib.request.Request's interface)."""

    def __init__(self, url: str) -> None:
        self.full_url = url
        parts = urlsplit(url)
        self.type = parts.scheme
        self.host = parts.netloc
        self.origin_req_host = parts.hostname or ""
        self.unverifiable = False
        self.cookie = ""

    def get_full_url(self) -> str:
        return self.full_url

    def get_host(self) -> str:
        return self.host

    def get_type(self) -> str:
        return self.type

    def is_unverifiable(self) -> bool:
        return False

    def get_origin_req_host(self) -> str:
        return self.origin_req_host

    def has_header(self, name: str) -> bool:
        return name.lower() == "cookie" and bool(self.cookie)

    def get_header(self, name: str, default: str | None = None) -> str | None:
        return self.cookie if name.lower() == "cookie" and self.cookie else default

    def header_items(self) -> list[tuple[str, str]]:
        return [("Cookie", self.cookie)] if self.cookie else []

    def add_unredirected_header(self, name: str, value: str) -> None:
        if name.lower() == "cookie":
            self.cookie = value


class _Headers:
    """A response's headers as ``http.cookiejar`` reads them (``info().get_all``)."""

    def __init__(self, headers: Iterable[tuple[str, str]]) -> None:
        self._headers = headers

    def get_all(self, name: str, default: Any = None) -> list[str] | Any:
        name = name.lower()
        found = [v for k, v in self._headers if k == name]
        return found or default


class _Response:
    def __init__(self, headers: Iterable[tuple[str, str]]) -> None:
        self._info = _Headers(headers)

    def info(self) -> _Headers:
        return self._info


class NoCookies:
    """No jar: requests carry no cookies, responses' are not kept (an archive crawl)."""

    changed = False

    def request_headers(self, url: str, meta: bytes) -> tuple[tuple[str, str], ...]:
        return ()

    def response(self, url: str, headers: tuple[tuple[str, str], ...], meta: bytes) -> None:
        return None

    def dump(self) -> bytes:
        return b""

    def load(self, blob: bytes | None) -> None:
        return None


NO_COOKIES = NoCookies()


class CookieJars(NoCookies):
    """The crawl's jars by ``meta["cookiejar"]`` key (module docstring)."""

    def __init__(self) -> None:
        self._jars: dict[Any, http.cookiejar.CookieJar] = {}
        # RFC 6265 5.3 step 6: a cookie set without a Domain attribute is host-only, never
        # sent to subdomains (the policy's default, DomainLiberal, sends it to them)
        self._policy = http.cookiejar.DefaultCookiePolicy(
            strict_ns_domain=http.cookiejar.DefaultCookiePolicy.DomainStrictNonDomain
        )
        #: a jar changed since the last :meth:`dump` (the engine saves it with its commit)
        self.changed = False

    def _jar(self, key: Any) -> http.cookiejar.CookieJar:
        jar = self._jars.get(key)
        if jar is None:
            jar = self._jars[key] = http.cookiejar.CookieJar(self._policy)
        return jar

    def request_headers(self, url: str, meta: bytes) -> tuple[tuple[str, str], ...]:
        """The Cookie header of a request to ``url`` (none if the jar has no cookie for it)."""
        given = None
        if meta:
            e = envelope(meta)
            user = e.meta if e is not None else request_meta(meta)
            if user.get("dont_merge_cookies") is True:
                return ()
            key = _key(user.get("cookiejar"))
            given = e.cookies if e is not None and e.cookies else None
        else:
            key = None
        if given is None and key not in self._jars:
            return ()
        jar = self._jar(key)
        request = _Request(url)
        if given:
            self._merge(jar, request, given)
        jar.add_cookie_header(request)  # type: ignore[arg-type]  # (the interface it reads)
        return (("Cookie", request.cookie),) if request.cookie else ()

    def _merge(self, jar: http.cookiejar.CookieJar, request: _Request,
               given: list[tuple[str, str, str, str]]) -> None:  # fmt: skip
        """A request's own cookies into its jar, as Set-Cookie lines of its host would be."""
        lines = []
        for name, value, domain, path in given:
            line = f"{name}={value}"
            if domain:
                line += f"; Domain={domain}"
            if path:
                line += f"; Path={path}"
            lines.append(("set-cookie", line))
        for cookie in jar.make_cookies(_Response(lines), request):  # type: ignore[arg-type]
            if self._policy.set_ok(cookie, request):  # type: ignore[arg-type]
                jar.set_cookie(cookie)
                self.changed = True

    def response(self, url: str, headers: tuple[tuple[str, str], ...], meta: bytes) -> None:
        """Keep the cookies a response sets (its ``Set-Cookie`` headers), unless its request's
        meta says ``dont_merge_cookies``."""
        if not any(k == "set-cookie" or k == "set-cookie2" for k, _ in headers):
            return
        key = None
        if meta:
            user = request_meta(meta)
            if user.get("dont_merge_cookies") is True:
                return
            key = _key(user.get("cookiejar"))
        jar = self._jar(key)
        jar.extract_cookies(_Response(headers), _Request(url))  # type: ignore[arg-type]
        self.changed = True

    def dump(self) -> bytes:
        """Every jar's cookies (expired ones dropped), for the crawl state."""
        self.changed = False
        out = []
        for key, jar in self._jars.items():
            jar.clear_expired_cookies()
            out.append((key, [[getattr(c, f) for f in _FIELDS] for c in jar]))
        return _encode(out)

    def load(self, blob: bytes | None) -> None:
        """The jars saved by an earlier run (none: empty jars). A blob that does not decode
        is logged (without its content) and the jars start empty."""
        if not blob:
            return
        try:
            saved = _decode(blob)
            for key, cookies in saved:
                jar = self._jar(_key(key))
                for fields in cookies:
                    jar.set_cookie(http.cookiejar.Cookie(*fields))
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError, ValueError) as exc:
            log.warning("the saved cookie jars do not read (%s); starting with empty jars",
                        type(exc).__name__)  # fmt: skip
            self._jars.clear()


def _key(value: Any) -> Any:
    """A jar key: an int, a string or None as given; anything else by its repr."""
    return value if value is None or type(value) in (int, str) else repr(value)

