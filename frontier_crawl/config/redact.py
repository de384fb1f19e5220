"""Secrets in configured URLs (``cluster.redis_url``, ``fetch.proxy``): never shown.

:func:`redact_url` is what every message, ``--check``, report, status and exception text shows
instead of such a URL; :func:`scrub` removes a URL's secret from a text written by someone
else (a library's exception). Both are here, in the lowest layer, so every package can use them.

The URL is not split as RFC 3986 would split it: a password written without percent-encoding
may hold ``/``, ``?``, ``#`` or ``@``, and ``urllib.parse.urlsplit`` then ends the authority at
the first of them, leaving the rest of the password in the "path" or the "fragment" (and the
host in them too). Here the userinfo is everything between ``//`` and the LAST ``@`` of the URL
(an ``@`` in a query, e.g. ``?password=a@b``, hides a little more than it needs to: hiding too
much is the safe side). :func:`userinfo_split` is that split; the config refuses a URL where it
and ``urlsplit`` disagree, since the client library (``redis-py``) would read it wrongly.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import unquote

MASK = "***"
#: query parameters whose value is a secret
SECRET_PARAMS = frozenset({"password", "passwd", "pass", "secret", "token", "auth"})
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):(?P<slashes>//)?")


class UrlParts(NamedTuple):
    """A URL cut at its userinfo: ``scheme://`` + ``userinfo@`` + ``rest``."""

    head: str  #: "scheme://" (or "scheme:" without an authority, or "")
    userinfo: str | None  #: between "//" and the last "@"; None when there is no "@"
    rest: str  #: host, port, path, query, fragment


def userinfo_split(url: str) -> UrlParts:
    """Split ``url`` at its userinfo as the module docstring says (never raises)."""
    m = _SCHEME.match(url)
    head = m.group(0) if m else ""
    tail = url[len(head) :]
    at = tail.rfind("@")
    if at < 0:
        return UrlParts(head, None, tail)
    return UrlParts(head, tail[:at], tail[at + 1 :])


def _redact_query(rest: str) -> str:
    before, q, query = rest.partition("?")
    if not q:
        return rest
    query, hashmark, fragment = query.partition("#")
    shown = "&".join(
        f"{k}={MASK}" if k.lower() in SECRET_PARAMS else f"{k}={v}" if v or "=" in item else k
        for item in query.split("&")
        if item
        for k, _, v in [item.partition("=")]
    )
    return f"{before}?{shown}{hashmark}{fragment}"


def redact_url(url: str) -> str:
    """``url`` with its userinfo (user name and password) replaced by ``:***`` and the values
    of password-like query parameters by ``***``: safe to show, whatever the password's
    characters. A string that is not a URL at all is returned as it is (it holds no "@")."""
    parts = userinfo_split(url)
    shown = _redact_query(parts.rest)
    if parts.userinfo is None:
        return parts.head + shown
    return f"{parts.head}:{MASK}@{shown}"


def secrets_of(url: str) -> list[str]:
    """The secret strings of ``url``: its password (raw and percent-decoded), the user name
    and the values of password-like query parameters; pieces of 4 characters or more of each,
    cut at URL delimiters, since a parser may have quoted any one of them (longest first)."""
    found: list[str] = []
    parts = userinfo_split(url)
    if parts.userinfo:
        found.append(parts.userinfo)
        found += parts.userinfo.split(":", 1)
    query = parts.rest.partition("?")[2].partition("#")[0]
    for item in query.split("&"):
        key, _, value = item.partition("=")
        if key.lower() in SECRET_PARAMS and value:
            found.append(value)
    pieces = set()
    for secret in found:
        for text in (secret, unquote(secret)):
            pieces.add(text)
            pieces.update(re.split(r"[/?#@:\[\]]", text))
    return sorted((p for p in pieces if len(p) >= 4), key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` (a library's message about ``url``) with ``url`` shown redacted and every
    piece of its secrets (:func:`secrets_of`) replaced by ``***``."""
    if url:
        text = text.replace(url, redact_url(url))
    for secret in secrets_of(url):
        text = text.replace(secret, MASK)
    return text
