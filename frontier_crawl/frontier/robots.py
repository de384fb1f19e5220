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
  any other form, such as the pickled tuples of versions before it, is a miss. Writes are
  batched (:class:`RobotsCache`): a crash loses up to :data:`PENDING_WRITES` entries, whose
  robots.txt is then fetched again.
* Parsing once per body: hosts that serve byte-identical bodies share one parsed body
  (:class:`ParsedBodies`, bounded); each host keeps its own fetch time, refresh time and
  stale limit (:class:`Rules`).
"""

from __future__ import annotations

import logging
import math
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
#: cache entries kept in memory before they are written in one transaction (and their bytes)
PENDING_WRITES = 64
PENDING_BYTES = 1 << 20

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


class ParsedBody:
    """One robots.txt body parsed for our product token: what the rules of every host that
    serves this body share (:class:`ParsedBodies`). ``parser`` None: allow all (no body, or
    one protego could not parse)."""

    __slots__ = ("crawl_delay_s", "parser", "token")

    def __init__(self, token: str, body: bytes | None) -> None:
        self.token = token
        self.parser: Protego | None = None
        self.crawl_delay_s: float | None = None
        if body is None:
            return
        text = body[:MAX_ROBOTS_BYTES].decode("utf-8-sig", errors="replace")
        try:
            self.parser = Protego.parse(select_groups(text, token))
            delay = self.parser.crawl_delay(token)
            self.crawl_delay_s = float(delay) if delay is not None else None
        except Exception:  # protego on hostile input: treat as no robots.txt
            log.warning("unparsable robots.txt treated as allow-all", exc_info=True)
            self.parser = None
            self.crawl_delay_s = None


class ParsedBodies:
    """Parsed robots.txt bodies by their bytes, shared between the hosts that serve the same
    body (most hosts of a broad crawl serve one of a few): a least-recently-used table of at
    most ``entries`` bodies and ``body_bytes`` bytes of them, so it never grows with the
    hosts. A host's :class:`Rules` holds its :class:`ParsedBody` for as long as it keeps its
    rules, whether or not the table still does. ``parses`` counts the bodies parsed,
    ``hits`` those found here."""

    __slots__ = ("_bodies", "_bytes", "body_bytes", "entries", "hits", "parses", "token")

    def __init__(self, token: str, entries: int = 256, body_bytes: int = 4 << 20) -> None:
        self.token = token
        self.entries = entries
        self.body_bytes = body_bytes
        self._bodies: dict[bytes, ParsedBody] = {}  #: least recently used first
        self._bytes = 0  #: the length of the bodies held
        self.parses = 0
        self.hits = 0

    def parsed(self, body: bytes) -> ParsedBody:
        """The parsed form of ``body`` (at most :data:`MAX_ROBOTS_BYTES` of it is read)."""
        body = body[:MAX_ROBOTS_BYTES]
        bodies = self._bodies
        hit = bodies.pop(body, None)
        if hit is not None:
            self.hits += 1
            bodies[body] = hit  # the most recently used, last
            return hit
        self.parses += 1
        parsed = ParsedBody(self.token, body)
        bodies[body] = parsed
        self._bytes += len(body)
        while len(bodies) > self.entries or (self._bytes > self.body_bytes and len(bodies) > 1):
            oldest = next(iter(bodies))
            del bodies[oldest]
            self._bytes -= len(oldest)
        return parsed

    def __len__(self) -> int:
        return len(self._bodies)


#: a float shared by every ``Rules`` not yet timed (``math.inf`` once, not a float each)
_NEVER = math.inf


class Rules:
    """The robots.txt rules that apply to one origin for our product token.

    ``refresh_at`` and ``usable_until`` are set by the frontier (monotonic clock): when the
    rules are due to be fetched again, and until when they may stand in for a robots.txt that
    cannot be fetched. ``fetched_at`` (wall clock) is when the body was fetched. Those are the
    host's own; the parsed body is shared (``bodies``: the table to take it from, else it is
    parsed for this host alone).
    """

    __slots__ = ("_parsed", "fetched_at", "refresh_at", "usable_until")

    def __init__(
        self,
        token: str,
        body: bytes | None,
        fetched_at: float = 0.0,
        bodies: ParsedBodies | None = None,
    ) -> None:
        self.fetched_at = fetched_at
        self.refresh_at = _NEVER
        self.usable_until = _NEVER
        if body is None:
            self._parsed = _allow_all(token)
        elif bodies is not None and bodies.token == token:
            self._parsed = bodies.parsed(body)
        else:
            self._parsed = ParsedBody(token, body)

    @property
    def token(self) -> str:
        """The product token the rules were selected for."""
        return self._parsed.token

    @property
    def allow_all(self) -> bool:
        """No rule applies: no robots.txt (or an unparsable one)."""
        return self._parsed.parser is None

    @property
    def crawl_delay_s(self) -> float | None:
        """The Crawl-delay of our group, None without one."""
        return self._parsed.crawl_delay_s

    @property
    def sitemaps(self) -> list[str]:
        """The robots.txt's ``Sitemap:`` URLs, as written (any group: they stand alone)."""
        parser = self._parsed.parser
        if parser is None:
            return []
        try:
            return [url for url in parser.sitemaps if url]
        except Exception:  # protego on hostile input: no sitemaps
            return []

    def allowed(self, url: str) -> bool:
        """May ``url`` (of this origin) be fetched?"""
        parsed = self._parsed
        if parsed.parser is None:
            return True
        try:
            return bool(parsed.parser.can_fetch(url, parsed.token))
        except Exception:  # a URL protego cannot handle: be conservative
            return False


_ALLOW_ALL: dict[str, ParsedBody] = {}  #: "no robots.txt" by token (one token a crawl)


def _allow_all(token: str) -> ParsedBody:
    parsed = _ALLOW_ALL.get(token)
    if parsed is None:
        parsed = _ALLOW_ALL[token] = ParsedBody(token, None)
    return parsed


class RobotsCache:
    """robots.txt bodies by origin on disk, kept ``ttl_s + stale_s`` seconds; their ages read
    from ``clock`` (the wall clock: ages carry over from one run to the next). The parsed
    bodies are shared between origins (``bodies``, a :class:`ParsedBodies`).

    Writes are batched: :meth:`store` keeps up to :data:`PENDING_WRITES` entries (and
    :data:`PENDING_BYTES` of them) in memory and writes them in one SQLite transaction when
    the batch is full, at :meth:`flush` (the frontier's checkpoint) and at :meth:`close`;
    :meth:`get` reads the pending ones first. A crash loses the pending entries, which is
    acceptable for a cache: those robots.txt are fetched again.
    """

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
        self.bodies = ParsedBodies(token)  #: the parsed bodies, shared between origins
        self._pending: dict[str, bytes] = {}  #: origin -> its entry, not written yet
        self._pending_bytes = 0
        self._store_failed = False  #: a write to the cache failed (warned about once)

    def get(self, origin: str) -> tuple[Rules, float] | None:
        """Cached rules for an origin and their age in seconds, None if none is kept."""
        try:
            hit = self._pending.get(origin)
            if hit is None:
                hit = self._cache.get(origin)
            if not isinstance(hit, bytes):
                return None
            fetched_at, body = _ENTRY.decode(hit)
        except Exception:  # a damaged cache entry is a miss
            return None
        age = max(0.0, self.clock() - float(fetched_at))
        if age > self._keep_s:
            return None
        return Rules(self._token, body, float(fetched_at), self.bodies), age

    def store(self, origin: str, status: int, body: bytes) -> Rules | None:
        """Rules from a fetched robots.txt; None when unreachable (429, 5xx, no response)."""
        if 200 <= status < 300:
            rules_body: bytes | None = body[:MAX_ROBOTS_BYTES]
        elif 300 <= status < 500 and status != 429:
            rules_body = None  # "unavailable" (or a redirect chain not followed): allow all
        else:
            return None
        now = self.clock()
        entry = _ENCODER.encode((now, rules_body))
        pending = self._pending
        old = pending.pop(origin, None)
        pending[origin] = entry
        self._pending_bytes += len(entry) - (len(old) if old is not None else 0)
        if len(pending) >= PENDING_WRITES or self._pending_bytes >= PENDING_BYTES:
            self.flush()
        return Rules(self._token, rules_body, now, self.bodies)

    def flush(self) -> None:
        """Write the pending entries, in one transaction (a full or failing disk: warned about
        once, and the entries dropped: robots.txt is fetched again next run)."""
        pending = self._pending
        if not pending:
            return
        self._pending = {}
        self._pending_bytes = 0
        cache, keep_s = self._cache, self._keep_s
        try:
            with cache.transact():
                for origin, entry in pending.items():
                    cache.set(origin, entry, expire=keep_s)
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:  # full disk: only a cache
            if not self._store_failed:
                log.warning("robots.txt cache not written (%s): fetched again next run", exc)
            self._store_failed = True

    def close(self) -> None:
        """Write the pending entries and close the underlying cache."""
        try:
            self.flush()
        finally:
            self._cache.close()
