"""One Redis connection with the retry policy every cluster call uses, and key names.

Every call goes through :meth:`Redis.call`: on a connection problem (refused, reset, timed
out, Redis still loading its AOF after a restart) it logs a warning naming the Redis (with
any password replaced by ``***``, :func:`redact`) and retries with exponential backoff
(0.1 s doubling to 5 s) until ``unreachable_timeout_s`` have passed without an answer; then
it raises :class:`ClusterUnavailable`. Error replies that say Redis cannot take writes for
now (``MISCONF``, ``READONLY``...) are retried the same way.

A full Redis (``OOM``: ``maxmemory`` reached under ``noeviction``) is one fault however many
calls meet it: it begins at the first refusal and lasts while refusals keep coming (no
``FULL_CLEAR_S`` without one), so that writes let in now and then by the owners' draining
(XDEL and XACK are allowed when full) do not restart the clock. Once it has lasted
``unreachable_timeout_s`` every call refused for memory raises :class:`ClusterFull` (exit
status 1, resumable), also those that do not wait (``when_full``: the sender's, which keeps
its batch in its durable outbox and tries again, and the probe's). :meth:`Redis.full_for`
says how long it has lasted (the status's ``redis-full`` bottleneck).

A call that is retried may have been executed once already (the answer was lost): every
caller is written so that doing it twice is harmless (a stream entry added twice is admitted
once, by its batch id, see ``node.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from frontier_crawl.config import redact_url, scrub

if TYPE_CHECKING:  # imported where used: redis-py takes ~0.17 s to import, and only a
    import redis  # cluster crawl needs it (every crawl process and worker would pay it)

log = logging.getLogger(__name__)

T = TypeVar("T")

BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 5.0
#: a full Redis (OOM replies) counts as one fault until this long passes without a refusal
FULL_CLEAR_S = 2 * BACKOFF_MAX_S
SOCKET_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 3.0
#: how long the ``report`` command waits for an unreachable Redis (someone waits for it)
REPORT_WAIT_S = 3.0
GROUP = "owner"
"""The one consumer group of every partition stream; its one consumer is the owner node."""
CONSUMER = "owner"

FULL = "Redis answered that it is out of memory (maxmemory, noeviction)"
_RETRIED_REPLIES = ("MISCONF", "READONLY", "MASTERDOWN", "TRYAGAIN", "LOADING")


class ClusterError(Exception):
    """A cluster problem the command line reports without a traceback."""


class ClusterUnavailable(ClusterError):
    """Redis did not answer for ``cluster.unreachable_timeout_s`` (exit status 1, resumable)."""


class ClusterFull(ClusterUnavailable):
    """Redis refused writes for lack of memory for ``cluster.unreachable_timeout_s``."""


class ClusterRefused(ClusterError):
    """This node may not join: wrong ``--node``, a live node with that number, another crawl
    identity (exit status 2)."""


def _not_now(text: str) -> str | None:
    """Why an error reply means "not now" ("full", "login", "busy"), None if it does not.

    In a MULTI the reply names the command first ("Command # 1 (XADD ...) of pipeline caused
    error: ..."), so the code is looked for anywhere in the first part of the text."""
    head = text[:300]
    if "NOAUTH" in head or "WRONGPASS" in head:
        return "login"
    if "OOM" in head or "> 'maxmemory'" in text:
        return "full"
    if any(code in head for code in _RETRIED_REPLIES):
        return "busy"
    return None


def refused_for_memory(text: str) -> bool:
    """Whether an error reply is Redis refusing a write for lack of memory (``maxmemory``)."""
    return _not_now(text) == "full"


def redact(url: str) -> str:
    """``url`` with its password (and user name) replaced by ``***``: safe to log, whatever
    the password's characters (``frontier_crawl.config.redact``)."""
    return redact_url(url)


class Keys:
    """The Redis keys of one crawl: ``<key_prefix>:identity`` names the crawl that owns the
    prefix (its crawl id, ``crawlid.py``), and every other key is under
    ``<key_prefix>:<crawl id>``, so that no key of another crawl is ever read (a crawl started
    by a version without crawl ids has the id "": its keys are right under the prefix)."""

    def __init__(self, base: str, crawl: str = "") -> None:
        self.base = base  #: ``cluster.key_prefix``
        self.crawl = crawl
        self.identity = f"{base}:identity"
        self.prefix = prefix = f"{base}:{crawl}" if crawl else base
        self.joined = f"{prefix}:joined"  #: set: the nodes that have joined this crawl
        self.counts = f"{prefix}:counts"  #: hash: sent (batches added, over all runs)
        self.probe = f"{prefix}:probe"  #: termination probe number (node.py)
        self.status = f"{prefix}:status"  #: hash: node -> its answer to the probe
        self.done = f"{prefix}:done"  #: set once the crawl has ended
        self.reports = f"{prefix}:reports"  #: hash: node -> its merged report (JSON)

    def stream(self, partition: int) -> str:
        return f"{self.prefix}:p:{partition}"

    def member(self, node: int) -> str:
        return f"{self.prefix}:member:{node}"


class Redis:
    """A redis-py client for ``url`` whose calls retry as the module docstring says."""

    def __init__(
        self, url: str, unreachable_timeout_s: float, *, give_up: str = ""
    ) -> None:
        """``give_up``: what the message says when Redis stays unreachable (by default, that
        ``cluster.unreachable_timeout_s`` has passed)."""
        self.url = url
        self.where = redact(url)
        self.unreachable_timeout_s = unreachable_timeout_s
        self._give_up = give_up or (
            f"gave up after cluster.unreachable_timeout_s = {unreachable_timeout_s:g} s"
        )
        #: the current outage (thread-safe reads: the control API's status names it):
        #: (monotonic start, what was being done, the error), None while Redis answers
        self.outage: tuple[float, str, str] | None = None
        self._full_since = 0.0  #: the first refusal for memory of the current fault
        self._last_full = 0.0  #: the last one
        self._room_said = True  #: "room again" logged for the current fault (none yet)
        import redis

        try:
            self.client: redis.Redis = redis.Redis.from_url(
                url,
                socket_timeout=SOCKET_TIMEOUT_S,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                retry_on_timeout=False,
            )
        except ValueError as exc:  # redis-py may quote the part it could not read
            raise ClusterRefused(
                f"cluster.redis_url {self.where}: {scrub(str(exc), url)}"
            ) from None

    def call(self, what: str, fn: Callable[[redis.Redis], T], *, when_full: T | None = None) -> T:
        """``fn(client)``, retried while Redis is unreachable or full (module docstring).

        ``when_full``: returned at once, without retrying, if Redis answers that it is out of
        memory (for calls that must not hold up the loop or draining the streams, which frees
        it), until the full Redis has lasted ``unreachable_timeout_s``: then ClusterFull."""
        import redis

        retried = (redis.ConnectionError, redis.TimeoutError)  # BusyLoading is a ConnectionError
        deadline = time.monotonic() + self.unreachable_timeout_s
        delay = BACKOFF_FIRST_S
        first_failure = 0.0
        while True:
            try:
                try:
                    result = fn(self.client)
                except redis.ResponseError as exc:
                    reason = _not_now(str(exc))
                    if reason == "login":
                        raise redis.AuthenticationError(str(exc)[:200]) from None
                    if reason == "full":
                        self._refused_for_memory(what)
                        if when_full is not None:
                            return when_full
                    elif reason is None:
                        raise
                    # out of memory (maxmemory with noeviction), a failed RDB save, a replica:
                    # as for an outage, wait for Redis (the owners' draining frees memory)
                    raise redis.ConnectionError(
                        FULL if reason == "full" else f"Redis answered: {str(exc)[:200]}"
                    ) from None
            except redis.AuthenticationError as exc:  # a ConnectionError: before retried
                raise ClusterRefused(
                    f"Redis at {self.where} refused the login: {scrub(str(exc), self.url)}"
                ) from None
            except retried as exc:
                now = time.monotonic()
                first_failure = first_failure or now
                if str(exc) != FULL:
                    self.outage = (first_failure, what, scrub(str(exc), self.url)[:200])
                if now >= deadline:
                    raise ClusterUnavailable(
                        f"Redis at {self.where} unreachable for {now - first_failure:.0f} s "
                        f"({what}: {scrub(str(exc), self.url)}); {self._give_up}. Start "
                        "Redis (or fix the URL) and run the same command to resume."
                    ) from None
                log.warning(
                    "Redis at %s unreachable (%s: %s): retrying in %.1f s",
                    self.where, what, scrub(str(exc), self.url), delay,
                )  # fmt: skip
                if str(exc) == FULL:  # the full Redis's own deadline (module docstring)
                    deadline = min(deadline, self._full_since + self.unreachable_timeout_s)
                time.sleep(min(delay, max(0.0, deadline - now)))
                delay = min(delay * 2, BACKOFF_MAX_S)
                continue
            self.outage = None
            if self._last_full and not self._room_said and (when_full is not None or first_failure):
                self._room_said = True  # (a write taken: once a fault, however it flickers)
                log.warning(
                    "Redis at %s has room again after %.1f s out of memory (%s)",
                    self.where, time.monotonic() - self._full_since, what,
                )  # fmt: skip
            elif first_failure:
                log.warning(
                    "Redis at %s reachable again after %.1f s (%s)",
                    self.where, time.monotonic() - first_failure, what,
                )  # fmt: skip
            return result

    def _refused_for_memory(self, what: str) -> None:
        """Count a refusal into the current full-Redis fault; ClusterFull once it has lasted
        ``unreachable_timeout_s``."""
        now = time.monotonic()
        if self.full_for(now) is None:
            self._full_since, self._room_said = now, False
            log.warning(
                "Redis at %s is out of memory (maxmemory, noeviction; %s): what needs a write "
                "waits (link batches in their outbox) and is retried; giving up after %g s "
                "(cluster.unreachable_timeout_s) unless it has room again",
                self.where, what, self.unreachable_timeout_s,
            )  # fmt: skip
        self._last_full = now
        lasted = now - self._full_since
        if lasted >= self.unreachable_timeout_s:
            raise ClusterFull(
                f"Redis at {self.where} is out of memory (maxmemory reached, noeviction): it "
                f"refused writes for {lasted:.0f} s ({what}); gave up after "
                f"cluster.unreachable_timeout_s = {self.unreachable_timeout_s:g} s. Give Redis "
                "more memory (maxmemory; a node that is down leaves its batches there: start "
                "it) and run the same command to resume."
            )

    def unreachable(self, now: float) -> str:
        """The status's sentence while Redis does not answer ("" while it does): which
        Redis (password hidden), for how long, the error, when the node gives up."""
        outage = self.outage
        if outage is None:
            return ""
        since, what, error = outage
        lasted = now - since
        left = max(0.0, self.unreachable_timeout_s - lasted)
        return (
            f"Redis at {self.where} unreachable for {lasted:.0f} s ({what}: {error}); "
            f"retrying, giving up in {left:.0f} s (cluster.unreachable_timeout_s)"
        )

    def full_for(self, now: float) -> float | None:
        """How long Redis has been refusing writes for lack of memory (None: it is not)."""
        if self._last_full == 0.0 or now - self._last_full > FULL_CLEAR_S:
            return None
        return now - self._full_since

    def close(self) -> None:
        self.client.close()
