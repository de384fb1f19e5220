"""What a fetch's result tells the frontier, and the retry and hold policy decided from it.

The engine maps each fetch result to a :class:`Completion`: the facts only (the HTTP status,
the error kind, the Retry-After header as received, the fetch time, the peer address). The
frontier decides from them, in :meth:`Frontier.complete`, with the pure functions here:

* :func:`failure_of` — how the result bears on its host's politeness (:class:`Failure`);
* :func:`retry_after_s` — the Retry-After of a 429/503, in seconds (None: none, or another
  status); the host is held that long, capped at ``fetch.max_retry_delay_s`` (:func:`hold_for`);
* :func:`retry_in` — whether the URL is tried again and after how long: a transient failure
  (the error kinds in :data:`TRANSIENT_ERRORS`, 429, 5xx) with retries left, unless its
  Retry-After is longer than the cap (then it is given up and its host held for the cap);
* :func:`decide` — the three together, as the frontier applies them to one result.

The error kinds are ``fetch.types.ErrorKind`` values (strings): the frontier never imports
``fetch``; ``tests/unit/test_frontier_completion.py`` checks that both agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import msgspec

from frontier_crawl.frontier.politeness import parse_retry_after, retry_delay

if TYPE_CHECKING:
    from frontier_crawl.config import FetchSection

#: error kinds that say the host (not this URL) is in trouble: the name does not resolve, the
#: connection (TCP or TLS) cannot be made. A timeout or reset once connected is the URL's.
CONNECTION_ERRORS = frozenset({"dns-error", "connect-error", "tls-error"})
#: error kinds worth another try (``ErrorKind.transient``)
TRANSIENT_ERRORS = frozenset({"dns-error", "connect-error", "timeout", "truncated", "proxy-error"})
#: statuses that speak for the whole host (and whose Retry-After holds it)
HOST_STATUSES = frozenset({429, 503})


class Failure(Enum):
    """How a fetch went wrong, as far as the host's politeness is concerned."""

    NONE = 0  #: a response the host meant (2xx, 3xx, 4xx but 429)
    SERVER = 1  #: 429 or 503: the host is struggling; back off
    CONNECTION = 2  #: DNS, connect (refused, reset, timed out), TLS: back off, and retire after
    #: max_host_errors in a row
    URL = 3  #: this URL failed (timeout, reset mid-transfer, other 5xx): the host backs off only
    #: once ``host_error_urls`` distinct URLs fail in a row


class Completion(msgspec.Struct, frozen=True, gc=False):
    """The facts of one fetch result, as the engine hands them to :meth:`Frontier.complete`.

    A frozen msgspec Struct (one is built per result, as :class:`Ticket` is per URL).
    """

    finished: float  #: monotonic time the transfer ended
    status: int = 0  #: HTTP status of the final response, 0 if none was received
    error: str | None = None  #: the error kind (an ``ErrorKind`` value), None if none
    retry_after: str | None = None  #: the response's Retry-After header as received
    duration_s: float = 0.0  #: how long the transfer took
    ip: str = ""  #: the peer address, "" if unknown
    # the facts a continuous crawl's schedule needs (``recrawl.py``); defaults: none known
    etag: str | None = None  #: the response's ETag header
    last_modified: str | None = None  #: the response's Last-Modified header
    digest: bytes = b""  #: SHA-1 of the payload as received, 2xx only
    #: WARC-Record-ID of the full response record written ("": none written, or a revisit
    #: record: the last capture stays the one revisits refer to)
    record_id: str = ""
    fetched_at: float = 0.0  #: wall clock of the fetch (WARC-Date); 0: the frontier's clock
    location: str = ""  #: a 3xx's resolved target ("" otherwise)
    #: the request may not be sent again, whatever the failure (the engine's say: a spider's
    #: POST that may have reached the server, a request whose meta says dont_retry)
    no_retry: bool = False


class Settled(msgspec.Struct, frozen=True, gc=False):
    """What :meth:`Frontier.complete` decided (a Struct: one per result)."""

    retried: bool  #: the URL was queued again for a retry (else it is finished)
    held_s: float  #: how long the response holds the host beyond its politeness delay
    failed: bool  #: the result was a failure as far as the host is concerned


@dataclass(slots=True, frozen=True)
class RetryPolicy:
    """The numbers the retry and hold policy needs (from ``[fetch]``)."""

    retries: int = 3
    backoff_s: float = 2.0
    max_delay_s: float = 300.0

    @classmethod
    def from_settings(cls, f: FetchSection) -> RetryPolicy:
        return cls(retries=f.retries, backoff_s=f.retry_backoff_s, max_delay_s=f.max_retry_delay_s)


def failure_of(c: Completion) -> Failure:
    """How a result bears on its host's politeness (backoff, retirement): host-wide signals
    (connection failures, 429, 503) or a failure of this URL only (timeouts, resets, other
    5xx), which backs the host off only when several distinct URLs fail in a row."""
    if c.error is not None:
        if c.error in CONNECTION_ERRORS:
            return Failure.CONNECTION
        return Failure.URL if c.error in TRANSIENT_ERRORS else Failure.NONE
    if c.status in HOST_STATUSES:
        return Failure.SERVER
    return Failure.URL if c.status >= 500 else Failure.NONE


def answer_s(c: Completion) -> float:
    """The fetch time the adaptive delay follows: that of a complete response. A transfer that
    failed (timed out, cut, reset) says how long one URL hung, not how fast the host answers:
    counting it would snooze the whole host for delay_factor x the timeout per attempt."""
    return c.duration_s if c.error is None else 0.0


def retry_after_s(status: int, retry_after: str | None, now_wall: float) -> float | None:
    """A 429/503's Retry-After in seconds (uncapped); None for other statuses or none given."""
    if status not in HOST_STATUSES or not retry_after:
        return None
    return parse_retry_after(retry_after, now_wall)


def hold_for(after: float | None, p: RetryPolicy) -> float:
    """How long a Retry-After holds the host: at most ``max_delay_s``."""
    return min(after, p.max_delay_s) if after is not None else 0.0


def retry_in(c: Completion, attempt: int, after: float | None, p: RetryPolicy) -> float | None:
    """Seconds before attempt ``attempt + 1`` of a URL, or None if it is not tried again.

    Retried: a transient failure with retries left. Not retried: anything else, and a
    Retry-After (``after``) longer than ``max_delay_s``, which is not waited out cap after cap.
    """
    transient = c.error in TRANSIENT_ERRORS if c.error is not None else (
        c.status == 429 or c.status >= 500
    )  # fmt: skip
    if not transient or attempt >= p.retries:
        return None
    if after is not None and after > p.max_delay_s:
        return None
    return retry_delay(attempt, p.backoff_s, p.max_delay_s, after)


class Decision(msgspec.Struct, frozen=True, gc=False):
    """What the policy decides of one result (:func:`decide`)."""

    retry_s: float | None  #: seconds before the URL is tried again; None: it is finished
    failure: Failure  #: how the result bears on its host's politeness
    hold_s: float  #: how long the result holds the host (a 429/503's Retry-After)


#: a response the host meant (2xx, 3xx, 4xx but 429): finished, no failure, no hold
_MEANT = Decision(None, Failure.NONE, 0.0)


def decide(
    c: Completion, attempt: int, p: RetryPolicy, wall_clock: Callable[[], float]
) -> Decision:
    """The policy for attempt ``attempt`` of a URL that came back with ``c``: retried or
    finished (:func:`retry_in`), the failure (:func:`failure_of`) and the hold of a 429/503's
    Retry-After (uncapped for a retry, which a longer one never is; capped by :func:`hold_for`
    when finished). ``wall_clock`` dates an HTTP-date Retry-After; read only for a 429/503."""
    status = c.status
    if c.error is None and status < 500 and status != 429:
        return _MEANT  # what the steps below decide for it, without taking them
    after = retry_after_s(status, c.retry_after, wall_clock()) if status in HOST_STATUSES else None
    failure = failure_of(c)
    retry_s = None if c.no_retry else retry_in(c, attempt, after, p)
    if retry_s is not None:
        return Decision(retry_s, failure, after or 0.0)
    return Decision(None, failure, hold_for(after, p))
