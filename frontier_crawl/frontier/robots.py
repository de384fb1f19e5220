"""robots.txt rules per origin, parsed with protego and cached on disk with diskcache.

RFC 9309 status handling lives here: 2xx -> the parsed rules; 3xx past the followed hops and
4xx -> allow all; 5xx or no answer
-> not cached, the caller retries later and treats the host as disallow-all meanwhile.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import diskcache
from protego import Protego

from frontier_crawl.frontier.damage import DamagedState, disk_trouble

log = logging.getLogger(__name__)

#: RFC 9309 asks crawlers to parse at least 500 KiB; anything beyond is ignored.
MAX_ROBOTS_BYTES = 512 * 1024


class Rules:
    """The robots.txt rules that apply to one origin for our user agent."""

    __slots__ = ("_parser", "allow_all", "crawl_delay_s", "user_agent")

    def __init__(self, user_agent: str, body: bytes | None) -> None:
        self.user_agent = user_agent
        self._parser: Protego | None = None
        self.allow_all = body is None
        self.crawl_delay_s: float | None = None
        if body is None:
            return
        text = body[:MAX_ROBOTS_BYTES].decode("utf-8", errors="replace")
        try:
            self._parser = Protego.parse(text)
            delay = self._parser.crawl_delay(user_agent)
            self.crawl_delay_s = float(delay) if delay is not None else None
        except Exception:  # protego on hostile input: treat as no robots.txt
            log.warning("unparsable robots.txt treated as allow-all", exc_info=True)
            self._parser = None
            self.allow_all = True

    def allowed(self, url: str) -> bool:
        """May ``url`` (of this origin) be fetched?"""
        if self._parser is None:
            return True
        try:
            return bool(self._parser.can_fetch(url, self.user_agent))
        except Exception:  # a URL protego cannot handle: be conservative
            return False


class RobotsCache:
    """robots.txt bodies by origin on disk, valid for ``ttl_s`` seconds."""

    def __init__(self, directory: Path, user_agent: str, ttl_s: float) -> None:
        try:
            self._cache = diskcache.Cache(str(directory))
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
        self._user_agent = user_agent
        self._ttl_s = ttl_s
        self._store_failed = False  #: a write to the cache failed (warned about once)

    def get(self, origin: str) -> Rules | None:
        """Cached rules for an origin, or None when it must be fetched."""
        if self._ttl_s <= 0:
            return None
        try:
            hit = self._cache.get(origin)
        except Exception:  # a damaged cache entry is a miss
            return None
        if not isinstance(hit, tuple) or len(hit) != 2:
            return None
        fetched_at, body = hit
        if time.time() - float(fetched_at) > self._ttl_s:
            return None
        return Rules(self._user_agent, body)

    def store(self, origin: str, status: int, body: bytes) -> Rules | None:
        """Rules from a fetched robots.txt; None for 5xx / no response (retry later)."""
        if 200 <= status < 300:
            rules_body: bytes | None = body[:MAX_ROBOTS_BYTES]
        elif 300 <= status < 500:
            rules_body = None  # "unavailable" (or a redirect chain past 5 hops): allow all
        else:
            return None
        if self._ttl_s > 0:
            try:
                self._cache.set(origin, (time.time(), rules_body), expire=self._ttl_s)
            except (OSError, sqlite3.Error, diskcache.Timeout) as exc:  # full disk: only a cache
                if not self._store_failed:
                    log.warning("robots.txt cache not written (%s): fetched again next run", exc)
                self._store_failed = True
        return Rules(self._user_agent, rules_body)

    def close(self) -> None:
        """Close the underlying cache."""
        self._cache.close()
