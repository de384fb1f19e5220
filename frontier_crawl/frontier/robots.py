"""robots.txt rules per origin, parsed with protego and cached on disk with diskcache.

RFC 9309, as this module and the frontier apply it:

* Status (:meth:`RobotsCache.store`): 2xx -> the parsed rules; a 3xx the frontier stops
  following (past five hops, out of scope, or a refused address: see ``frontier.py``), and 4xx
  but 429 -> "unavailable": allow all; 429, 5xx or no answer -> "unreachable":
  ``None``, the caller retries later (2.3.1.3, 2.3.1.4; 429 as Google treats it).
* Body: at most :data:`MAX_ROBOTS_BYTES` are parsed (2.5), decoded as UTF-8 with a leading
  byte order mark dropped (as Google's parser does), invalid bytes replaced.
* Groups (2.2.1): a group applies when the product token of one of its ``User-agent`` lines
  (the value up to the first character that is not a letter, ``_`` or ``-``) equals ours,
  case-insensitively; else the ``*`` group; else none (allow all). protego matches a
  group name anywhere in the name it is given, at a token boundary (so ``example`` would
  match ``fc-eval/1.0 (+http://example.org/bot)``, and ``fc`` the token ``fc-eval``):
  :func:`select_groups` therefore rewrites each ``User-agent`` value, before protego parses
  the text, to our token when it matches and to a name no token can contain when it does
  not, and protego is asked with our token alone. Everything else (rule matching, wildcards,
  percent-encoding, longest match) is protego's.
* Caching (2.4): a body is stored with its fetch time; :meth:`RobotsCache.get` returns it
  with its age for as long as it may serve as the fallback of an unreachable robots.txt
  (``ttl_s + stale_s``); the frontier decides whether it is fresh (``age < ttl_s``). Entries
  are msgpack ``[fetched_at, body or nil]`` in a data-only diskcache
  (:func:`frontier_crawl.safefs.open_cache`: nothing read back is unpickled); an entry of
  any other form, such as the pickled tuples of versions before it, is a miss.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import diskcache
import msgspec
from protego import Protego

from frontier_crawl.frontier.damage import DamagedState, disk_trouble
from frontier_crawl.safefs import open_cache

log = logging.getLogger(__name__)

#: RFC 9309 asks crawlers to parse at least 500 KiB; anything beyond is ignored.
MAX_ROBOTS_BYTES = 512 * 1024
#: RFC 9309 2.4: a cached robots.txt is not used for more than 24 hours (unless unreachable).
MAX_ROBOTS_TTL_S = 86_400.0

_AGENT_FIELDS = frozenset({"user-agent", "useragent", "user agent"})
#: a product token as RFC 9309 2.2.1 defines it (Google's ExtractUserAgent)
_TOKEN = re.compile(r"[A-Za-z_-]*")
#: the User-agent value given to groups that are not ours: '(' and ')' are in no product
#: token, so protego never finds it in ours
_NOT_US = "(not-us)"
#: a cache entry: (fetched_at, body), the body None for "allow all"
_ENTRY = msgspec.msgpack.Decoder(tuple[float, bytes | None])
_ENCODER = msgspec.msgpack.Encoder()


def product_token(user_agent: str) -> str:
    """The product token of a User-Agent header: its text before the first ``/`` or space
    (``PolitenessSection.product_token`` checks it is one)."""
    return re.split(r"[/\s]", user_agent.strip(), maxsplit=1)[0]


def _agent_value(line: str) -> str | None:
    """The value of a ``User-agent`` line as protego reads one, or None for other lines."""
    text = line.split("#", 1)[0].strip()
    if ":" in text:
        field, raw = text.split(":", 1)
        if field.strip().lower() in _AGENT_FIELDS:
            return raw.strip()
        if not raw or raw[0].isspace():
            return None  # "<field>: value" of some other field
    words = text.split()
    for n in (1, 2):
        if " ".join(words[:n]).lower() in _AGENT_FIELDS:
            return " ".join(words[n:])
    return None


def select_groups(text: str, token: str) -> str:
    """``text`` with every User-agent value rewritten: ``*`` (also ``* anything``, as Google
    reads it) stays ``*``, a value whose product token equals ``token`` (case-insensitively)
    becomes ``token``, any other value becomes a name that matches nothing. Other lines are
    kept as they are (line breaks become ``\\n``, as protego splits lines)."""
    lines = text.splitlines()
    mine = token.lower()
    for i, line in enumerate(lines):
        value = _agent_value(line)
        if not value:
            continue  # not a User-agent line, or one without a value (protego skips it)
        if value[0] == "*" and (len(value) == 1 or value[1].isspace()):
            name = "*"
        else:
            match = _TOKEN.match(value)
            name = token if match and match.group().lower() == mine else _NOT_US
        lines[i] = f"User-agent: {name}"
    return "\n".join(lines)


class Rules:
    """The robots.txt rules that apply to one origin for our product token.

    ``refresh_at`` and ``usable_until`` are set by the frontier (monotonic clock): when the
    rules are due to be fetched again, and until when they may stand in for a robots.txt that
    cannot be fetched. ``fetched_at`` (wall clock) is when the body was fetched.
    """

    __slots__ = ("_parser", "allow_all", "crawl_delay_s", "fetched_at", "refresh_at", "token",
                 "usable_until")  # fmt: skip

    def __init__(self, token: str, body: bytes | None, fetched_at: float = 0.0) -> None:
        self.token = token
        self.fetched_at = fetched_at
        self.refresh_at = float("inf")
        self.usable_until = float("inf")
        self._parser: Protego | None = None
        self.allow_all = body is None
        self.crawl_delay_s: float | None = None
        if body is None:
            return
        text = body[:MAX_ROBOTS_BYTES].decode("utf-8-sig", errors="replace")
        try:
            self._parser = Protego.parse(select_groups(text, token))
            delay = self._parser.crawl_delay(token)
            self.crawl_delay_s = float(delay) if delay is not None else None
        except Exception:  # protego on hostile input: treat as no robots.txt
            log.warning("unparsable robots.txt treated as allow-all", exc_info=True)
            self._parser = None
            self.allow_all = True

    @property
    def sitemaps(self) -> list[str]:
        """The robots.txt's ``Sitemap:`` URLs, as written (any group: they stand alone)."""
        if self._parser is None:
            return []
        try:
            return [url for url in self._parser.sitemaps if url]
        except Exception:  # protego on hostile input: no sitemaps
            return []

    def allowed(self, url: str) -> bool:
        """May ``url`` (of this origin) be fetched?"""
        if self._parser is None:
            return True
        try:
            return bool(self._parser.can_fetch(url, self.token))
        except Exception:  # a URL protego cannot handle: be conservative
            return False


class RobotsCache:
    """robots.txt bodies by origin on disk, kept ``ttl_s + stale_s`` seconds; their ages read
    from ``clock`` (the wall clock: ages carry over from one run to the next)."""

    def __init__(
        self,
        directory: Path,
        token: str,
        ttl_s: float,
        stale_s: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            self._cache = open_cache(directory)
            self._cache.get("")  # a read, so a damaged SQLite file shows itself now
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            trouble = disk_trouble(directory, exc)
            if trouble is not None:  # a full or failing disk: nothing to set aside
                raise trouble from exc
            raise DamagedState(
                directory,
                f"the robots.txt cache cannot be opened ({exc})",
                "robots.txt is fetched again from every host (it is only a cache).",
            ) from exc
        self._token = token
        self._keep_s = ttl_s + stale_s
        self.clock = clock
        self._store_failed = False  #: a write to the cache failed (warned about once)

    def get(self, origin: str) -> tuple[Rules, float] | None:
        """Cached rules for an origin and their age in seconds, None if none is kept."""
        try:
            hit = self._cache.get(origin)
            if not isinstance(hit, bytes):
                return None
            fetched_at, body = _ENTRY.decode(hit)
        except Exception:  # a damaged cache entry is a miss
            return None
        age = max(0.0, self.clock() - float(fetched_at))
        if age > self._keep_s:
            return None
        return Rules(self._token, body, float(fetched_at)), age

    def store(self, origin: str, status: int, body: bytes) -> Rules | None:
        """Rules from a fetched robots.txt; None when unreachable (429, 5xx, no response)."""
        if 200 <= status < 300:
            rules_body: bytes | None = body[:MAX_ROBOTS_BYTES]
        elif 300 <= status < 500 and status != 429:
            rules_body = None  # "unavailable" (or a redirect chain not followed): allow all
        else:
            return None
        now = self.clock()
        try:
            self._cache.set(origin, _ENCODER.encode((now, rules_body)), expire=self._keep_s)
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:  # full disk: only a cache
            if not self._store_failed:
                log.warning("robots.txt cache not written (%s): fetched again next run", exc)
            self._store_failed = True
        return Rules(self._token, rules_body, now)

    def close(self) -> None:
        """Close the underlying cache."""
        self._cache.close()
