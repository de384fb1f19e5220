"""Checks of single values that the run would otherwise refuse late, with a traceback: URLs
(``cluster.redis_url``, ``fetch.proxy``), feed paths, file-name parts, strings libcurl takes.

Each ``*_problem`` function returns why a value is refused (a sentence without the key, and
never with a secret: URLs are shown by :func:`~frontier_crawl.config.redact.redact_url`), or
None when the value is good. ``settings.py`` calls them from ``__post_init__``.
"""

from __future__ import annotations

import math
import re
from urllib.parse import parse_qsl, unquote, urlsplit

from frontier_crawl.config.redact import redact_url, scrub, userinfo_split

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")

#: What the crawl itself writes in an output_dir (a node's root, or a worker's directory):
#: ``engine.Layout`` (warc/, state/, crawl.jsonl, report.json, report.html), ``workers/``
#: (workers.json, cluster.lmdb, cluster.json, worker-<i>/), ``control/server.py`` (control.addr,
#: control.token). A feed may not be one of them, nor their temporary or set-aside copies
#: (``<name>.tmp``, ``.<name>.<random>.tmp``, ``<name>.damaged-<time>``, ``<name>-lock``).
#: tests/e2e/test_feed_paths.py lists what a crawl leaves in its output_dir against this.
CRAWL_FILES = (
    "warc",
    "state",
    "crawl.jsonl",
    "report.json",
    "report.html",
    "workers.json",
    "cluster.lmdb",
    "cluster.json",
    "control.addr",
    "control.token",
)


def has_controls(text: str) -> bool:
    """Whether ``text`` holds a control character (C0 or DEL; NUL included)."""
    return _CONTROL_RE.search(text) is not None


def ascii_problem(text: str, what: str) -> str | None:
    """libcurl takes its strings as ASCII without NUL (pycurl raises otherwise)."""
    if not text.isascii() or has_controls(text):
        return f"{what} must be printable ASCII (libcurl takes it as it is), got {text!r}".strip()
    return None


def plain_name_problem(name: str) -> str | None:
    """Why ``name`` is not a plain file-name part (one that stays in its directory)."""
    if not name or name in (".", ".."):
        return "must be a plain file name part, not empty, '.' or '..'"
    if any(c in name for c in "/\\") or has_controls(name):
        return "must be a plain file name part: no '/', '\\' or control characters"
    return None


def feed_parts(path: str) -> tuple[str, ...]:
    """The components of a feed path relative to output_dir, '.' and empty ones left out,
    case-folded (as a case-insensitive file system compares them)."""
    parts = path.replace("\\", "/").split("/")
    return tuple(p.casefold() for p in parts if p not in ("", "."))


def _crawl_file(name: str) -> str | None:
    """The crawl's own file (CRAWL_FILES) that ``name`` (a first component) is, or a copy of."""
    bare = name[1:] if name.startswith(".") else name  # .<name>.<random>.tmp
    if bare.startswith("worker-"):  # worker-<i>/ and anything like it
        return "worker-<i>"
    for own in CRAWL_FILES:
        if bare == own or bare.startswith((own + ".", own + "-")):
            return own
    return None


def feed_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a feed: it leaves output_dir, or names (or is inside, or is a
    temporary copy of) a file or directory the crawl itself writes there."""
    shown = repr(path)
    if has_controls(path):
        return f"{shown} has a control character"
    unix = path.replace("\\", "/")
    if unix.startswith("/") or re.match(r"^[A-Za-z]:", path):
        return f"{shown} must be relative to output_dir, not absolute"
    raw = unix.split("/")
    if ".." in raw:
        return f"{shown} must stay inside output_dir, without '..'"
    parts = feed_parts(path)
    if not parts or raw[-1] in ("", "."):
        return f"{shown} must name a file relative to output_dir"
    own = _crawl_file(parts[0])
    if own is not None:
        return (f"{shown} is (or is inside, or a temporary copy of) {own}, which the crawl "
                f"itself writes in output_dir; the crawl's own names are "
                f"{', '.join(CRAWL_FILES)} and worker-<i>")  # fmt: skip
    return None


# ------------------------------------------------------------------------------------- URLs

_PROXY_SCHEMES = ("http", "https", "socks4", "socks4a", "socks5", "socks5h")
#: query parameters redis-py reads from the URL, by the type it converts them to
#: (redis.connection.URL_QUERY_ARGUMENT_PARSERS); others become keyword arguments of the
#: connection, where an unknown one fails only at the first connection (a TypeError)
_REDIS_INT = frozenset({"db", "socket_read_size", "max_connections", "health_check_interval",
                        "protocol"})  # fmt: skip
_REDIS_FLOAT = frozenset({"socket_timeout", "socket_connect_timeout"})
_REDIS_BOOL = frozenset({"socket_keepalive", "retry_on_timeout", "ssl_check_hostname"})
_REDIS_STR = frozenset({"username", "password", "client_name"})
_REDIS_TLS = frozenset({"ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile",
                        "ssl_ca_path", "ssl_password", "ssl_check_hostname"})  # fmt: skip
_REDIS_PARAMS = _REDIS_INT | _REDIS_FLOAT | _REDIS_BOOL | _REDIS_STR | _REDIS_TLS


def _authority_problem(url: str) -> str | None:
    """What keeps ``url`` from being read as written: characters, or a user name or password
    holding a character that ends it (redis-py and libcurl split at the first of them)."""
    shown = redact_url(url)
    if not url.isascii() or has_controls(url) or " " in url:
        return f"{shown} must be printable ASCII without spaces (percent-encode the rest)"
    userinfo = userinfo_split(url).userinfo
    if userinfo is not None and any(c in userinfo for c in "/?#@"):
        return (f"the user name or password in {shown} holds '/', '?', '#' or '@': "
                "percent-encode them (%2F, %3F, %23, %40), or the URL is read as another "
                "host")  # fmt: skip
    return None


def _host_port_problem(url: str, *, host_needed: bool) -> str | None:
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        return f"cannot read the host of {shown}: {scrub(str(exc), url)}"
    if host_needed and not host:
        return f"{shown} names no host"
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 0 < port < 65536:
        return f"the port of {shown} must be a number from 1 to 65535"
    return None


def proxy_url_problem(url: str) -> str | None:
    """Why libcurl could not use ``url`` as its proxy."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme not in _PROXY_SCHEMES:
        return (f"unsupported proxy scheme in {redact_url(url)} (one of "
                f"{', '.join(s + '://' for s in _PROXY_SCHEMES)})")  # fmt: skip
    return _authority_problem(url) or _host_port_problem(url, host_needed=True)


def _redis_param_problem(name: str, value: str, scheme: str) -> str | None:
    if name not in _REDIS_PARAMS:
        return (f"query parameter {name!r} is not one the Redis client reads "
                f"({', '.join(sorted(_REDIS_PARAMS))})")  # fmt: skip
    if name in _REDIS_TLS and name != "ssl_check_hostname" and scheme != "rediss":
        return f"query parameter {name!r} is for rediss:// (TLS) only"
    if name in _REDIS_INT:
        if not re.fullmatch(r"\d{1,18}", value):
            return f"query parameter {name!r} must be a whole number >= 0, got {value!r}"
    elif name in _REDIS_FLOAT:
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        if not 0 < seconds < 1e9:
            return f"query parameter {name!r} must be a number of seconds > 0, got {value!r}"
    return None


def redis_url_problem(url: str) -> str | None:
    """Why redis-py would refuse ``url``, or read it otherwise than it is written: the scheme
    (redis://, rediss://, unix://), the host and port, the database, the query parameters.
    Checked at load time so that a bad URL is a config error naming the key (exit 2), never
    a traceback at the node's start."""
    scheme = url.partition("://")[0] if "://" in url else ""
    if scheme not in ("redis", "rediss", "unix"):  # redis-py compares them as written
        start = url.split(":", 1)[0] if ":" in url else ""
        return (f"must start with redis://, rediss:// or unix:// (got a URL starting "
                f"{redact_url(start)!r})")  # fmt: skip
    problem = _authority_problem(url)
    if problem:
        return problem
    shown = redact_url(url)
    problem = _host_port_problem(url, host_needed=scheme != "unix")
    if problem:
        return problem
    parts = urlsplit(url)
    if scheme == "unix":
        if not unquote(parts.path).strip("/"):
            return f"{shown} names no socket path (unix:///path/to/redis.sock)"
    elif not re.fullmatch(r"/?(\d{1,9})?/?", unquote(parts.path)):
        return f"the path of {shown} must be the database number (/0, /1...), or nothing"
    try:
        params = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        return f"the query of {shown} is not name=value pairs joined by '&'"
    for name, value in params:
        problem = _redis_param_problem(name, value, scheme)
        if problem:
            return scrub(problem, url)
    return None
