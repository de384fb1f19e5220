"""The fetcher: ``submit`` requests, ``poll`` for results, one event loop, no threads.

One :class:`~frontier_crawl.fetch.multi.MultiLoop` (a ``CurlMulti`` driven by
``socket_action``), one ``CurlShare`` (DNS cache, TLS sessions and the connection cache,
shared by every handle), and a :class:`~frontier_crawl.fetch.pool.HandlePool` of at most
``concurrency`` handles. Per-transfer state lives in ``dict[pycurl.Curl, Transfer]``.

Only http and https URLs reach libcurl: anything else is answered by the next ``poll()`` with
``FORBIDDEN_SCHEME``, and every handle is restricted to http/https (``PROTOCOLS`` and
``REDIR_PROTOCOLS``). libcurl follows no redirect (``FOLLOWLOCATION`` is off on every handle
and never turned on): a 3xx comes back as it is, and whoever wants its target (the engine:
robots.txt hops and page redirects alike) asks for it with a request of its own, which passes
scope and the address policy like any other.

With an :class:`~frontier_crawl.fetch.addresses.AddressPolicy`, every new connection's
address is checked after name resolution (``fetch/addresses.py``, ``Transfer.open_socket``),
and a request that found no allowed address comes back with ``ADDRESS_REFUSED``. With a
proxy, connections go only to the proxy, and the policy checks only targets given as literal
addresses (before anything is sent).

Content encoding: the request offers ``Accept-Encoding: gzip, deflate`` (unless the request
brings its own), libcurl's decoding is off, and ``fetch/decode.py`` decodes the body with a
hard cap of ``max_body_bytes`` (see there for the handling of unknown encodings).

With ``cache_dir`` set, an :class:`~frontier_crawl.fetch.cache.HttpCache` makes requests for
URLs it holds a response for conditional, and turns a 304 back into that response
(``FetchResult.not_modified``); see ``fetch/cache.py``.

The DNS cache's prune. libcurl drops stale entries from its DNS cache by walking every entry
when a transfer ends (``multi_done``), unless the handle's ``DNS_CACHE_TIMEOUT`` is -1 (then it
neither prunes nor checks an entry's age on lookup). With thousands of hosts resolved within
``fetch.dns_cache_ttl_s`` (or thousands of ``fetch.resolve`` entries) that walk was the broad
crawl's largest single cost (bench/README). So one
transfer in every ``DNS_PRUNE_EVERY_S`` carries a lifetime and prunes; the others carry -1. An
address is therefore reused for at most ``dns_cache_ttl_s`` plus that second.
``dns_cache_ttl_s = 0`` (resolve every time) is set on every transfer, as before.
``fetch.resolve`` entries are loaded per transfer, each transfer its own host's, as aging
entries that this prune drops (``fetch/resolvemap.py``), so they do not fill the cache either.

The DNS cache's size. libcurl's cache (the share's) is a chained hash of a fixed 23 slots,
never resized, and every name lookup walks one chain: the lookup when a connection is set up,
the check of a pending lookup each time its transfer runs, and the insertion of the answer
(which walks the chain to replace a duplicate). Each lookup therefore costs in proportion to
the names in the cache: with every host resolved within the TTL kept (up to libcurl's own cap,
29,999 entries, chains of about 1,300), those walks became the largest cost of a crawl of
10^5 hosts (bench/README). So the prune's lifetime is the TTL only while the names looked up
within it stay under ``DNS_CACHE_NAMES``: the transfers that set up a connection (or failed
on DNS) since the last prune give the rate of new names, and the lifetime is the TTL or
``DNS_CACHE_NAMES`` over that rate, whichever is shorter, and at least a second (libcurl
counts whole seconds; with aging ``fetch.resolve`` entries, at least ``fetch.timeout_s``: a
loaded entry must outlive its transfer's wait for its lookup). The cache then holds about
the names of the last few seconds' new connections, which are the hosts being crawled now;
a host whose entry went early and needs a new connection is looked up again.

Idle connections. The connection cache holds the transfers' connections plus up to
``IDLE_PER_SLOT`` idle ones per fetch slot: the frontier serves hosts within a session first
(``frontier/hosts.py``), each after its politeness delay, so a broad crawl revisits about its
request rate times that delay of hosts, each of which should find its connection open. They
come back in the order they went, and a full cache closes its oldest idle connection, the
one needed next: with fewer idle connections than hosts in session every request opens a
new one (and looks its name up again), so the share per slot covers a crawl whose responses
take a fraction of its delay (hosts in session several times its slots). The
sockets need file descriptors: the soft ``RLIMIT_NOFILE`` is raised towards the hard one for
them (``_fd_room``), and the idle share is cut to what fits.

A name server that never answers: libcurl (threaded resolver) gives up on the name at the
connect timeout, so the transfer ends in time, but the ``getaddrinfo`` thread it started runs
on for the system resolver's own timeout (glibc: 5 s times 2 attempts per server), and
``curl_multi_cleanup`` waits for it. After such a resolve timeout, :meth:`Fetcher.close`
therefore runs the libcurl cleanup in a daemon thread, so the crawl's end is bounded by our
own timeouts, not by the system resolver's.
"""

from __future__ import annotations

import dataclasses
import logging
import resource
import threading
import time
from bisect import bisect_left
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import pycurl

from frontier_crawl.config.settings import PolitenessSection
from frontier_crawl.fetch.addresses import AddressPolicy
from frontier_crawl.fetch.cache import CACHE_ERRORS, HttpCache, Stored
from frontier_crawl.fetch.errors import CURLE_OPERATION_TIMEDOUT
from frontier_crawl.fetch.multi import MultiLoop
from frontier_crawl.fetch.pool import CurlOptions, HandlePool
from frontier_crawl.fetch.resolvemap import resolve_map
from frontier_crawl.fetch.transfer import Transfer, error_result
from frontier_crawl.fetch.types import ErrorKind, FetchRequest, FetchResult

if TYPE_CHECKING:
    from frontier_crawl.config.settings import FetchSection

__all__ = ["Fetcher"]

log = logging.getLogger(__name__)

_SCHEMES = frozenset({"http", "https"})
_ACCEPT_ENCODING = "Accept-Encoding: gzip, deflate"
_DEFAULT_HEADER_LINES = (_ACCEPT_ENCODING,)  #: a request's header lines when it brings none
#: idle connections kept per fetch slot, for hosts revisited soon (module docstring)
IDLE_PER_SLOT = 16
#: file descriptors left for everything but the connections (LMDB, outputs, pipes, logs)
_FD_RESERVE = 512
#: one transfer in this many seconds lets libcurl prune its DNS cache (module docstring)
DNS_PRUNE_EVERY_S = 1.0
#: the names libcurl's DNS cache is kept near: 23 chains of about 20 (module docstring)
DNS_CACHE_NAMES = 460
_DEFAULT_USER_AGENT = PolitenessSection().user_agent
_CONDITIONAL = frozenset({"if-none-match", "if-modified-since"})
#: upper bounds (seconds) of the fetch-time histogram's buckets (``Fetcher.fetch_times``)
FETCH_TIME_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip


class Fetcher:
    """Concurrent HTTP(S) GETs: ``submit()`` while ``free_slots > 0``, then ``poll()``.

    Every submitted request comes back exactly once from :meth:`poll` as a
    :class:`FetchResult`; ``in_flight`` counts requests submitted and not yet returned.
    """

    def __init__(
        self,
        *,
        concurrency: int = 256,
        user_agent: str = _DEFAULT_USER_AGENT,
        connect_timeout_s: float = 10.0,
        timeout_s: float = 30.0,
        low_speed_bytes_s: int = 100,
        low_speed_time_s: int = 15,
        max_body_bytes: int = 10_485_760,
        resolve: tuple[str, ...] = (),
        proxy: str | None = None,
        verify_tls: bool = True,
        ca_bundle: str | None = None,
        dns_cache_ttl_s: int = 120,
        http2: bool = True,
        cache_dir: str | Path | None = None,
        cache_max_bytes: int = 1 << 30,
        capture_requests: bool = True,
        addresses: AddressPolicy | None = None,
    ) -> None:
        """Build the multi, the share and the (empty) handle pool (and open the cache).

        ``capture_requests``: fill ``FetchResult.request_bytes`` with the request header block
        as sent (for a WARC request record). libcurl reports it only through its debug
        callback, which it calls only in verbose mode, and verbose mode makes libcurl format
        and hand over every informational line and data chunk of every transfer (with handles
        no longer reset per transfer, that cost is within the noise of a local benchmark:
        measured, 0.69-0.80 against 0.75-0.82 ms of crawl-loop CPU per page). Without it,
        ``request_bytes`` is empty.
        """
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if not verify_tls:
            log.warning(
                "TLS certificate verification is off (fetch.verify_tls = false): "
                "https responses are not authenticated"
            )
        # first, so that a cache it cannot open (CacheUnusable) leaves nothing else open
        cache = HttpCache(Path(cache_dir), cache_max_bytes) if cache_dir else None
        self._concurrency = concurrency
        self._max_body_bytes = max_body_bytes
        maxconnects = concurrency + _fd_room(concurrency, IDLE_PER_SLOT * concurrency)
        self._options = CurlOptions(
            user_agent=user_agent,
            connect_timeout_s=connect_timeout_s,
            timeout_s=timeout_s,
            low_speed_bytes_s=low_speed_bytes_s,
            low_speed_time_s=low_speed_time_s,
            max_body_bytes=max_body_bytes,
            proxy=proxy,
            verify_tls=verify_tls,
            ca_bundle=ca_bundle,
            dns_cache_ttl_s=dns_cache_ttl_s,
            maxconnects=maxconnects,
            http2=http2,
        )
        self._share = _make_share()
        # a resolver thread per transfer at most (fetch/resolvethreads.py: the default pool of
        # 20 is held up by a few name servers that never answer)
        self._loop = MultiLoop(maxconnects, resolve_threads=max(concurrency, 20))
        self._pool = HandlePool(concurrency, self._options.apply, self._share)
        #: each transfer's own ``fetch.resolve`` entries (``fetch/resolvemap.py``)
        self._resolve = resolve_map(
            resolve, permanent=_permanent(dns_cache_ttl_s, timeout_s), proxy=proxy
        )
        self._transfers: dict[pycurl.Curl, Transfer] = {}
        self._prune_at = 0.0  #: when a transfer next carries the DNS lifetime (module docstring)
        #: transfers since the last prune that may have added a name to the DNS cache, and
        #: when that prune was (module docstring, the DNS cache's size)
        self._lookups = 0
        self._counted_at = time.monotonic()
        self._timeout_s = timeout_s
        self._ready: list[FetchResult] = []
        self._closed = False
        self._cache = cache
        self._revalidating: dict[pycurl.Curl, Stored] = {}
        self._resolver_stuck = False  # a resolve timed out: its thread may outlive the transfer
        self._capture_requests = capture_requests
        #: checked at each new connection (None with a proxy: connections go to the proxy)
        self._addresses = addresses if proxy is None else None
        #: with a proxy: the policy for targets given as literal addresses
        self._proxied = addresses if proxy is not None else None
        #: transfers ended, and their seconds (submit to completion) and name-lookup seconds
        self.transfers = 0
        self.transfer_s = 0.0
        self.dns_s = 0.0
        #: transfers by fetch time: count per ``FETCH_TIME_BUCKETS`` bucket, the last +Inf
        self.fetch_times = [0] * (len(FETCH_TIME_BUCKETS) + 1)

    @classmethod
    def from_settings(
        cls,
        fetch: FetchSection,
        politeness: PolitenessSection,
        *,
        capture_requests: bool = True,
        addresses: AddressPolicy | None = None,
    ) -> Fetcher:
        """A fetcher configured from the ``[fetch]`` and ``[politeness]`` sections (the address
        policy, which needs the seeds too, is the caller's: ``AddressPolicy.for_crawl``)."""
        return cls(
            concurrency=fetch.concurrency,
            user_agent=politeness.user_agent,
            connect_timeout_s=fetch.connect_timeout_s,
            timeout_s=fetch.timeout_s,
            low_speed_bytes_s=fetch.low_speed_bytes_s,
            low_speed_time_s=fetch.low_speed_time_s,
            max_body_bytes=fetch.max_body_bytes,
            resolve=fetch.resolve,
            proxy=fetch.proxy,
            verify_tls=fetch.verify_tls,
            ca_bundle=fetch.ca_bundle,
            dns_cache_ttl_s=fetch.dns_cache_ttl_s,
            http2=fetch.http2,
            cache_dir=fetch.cache_dir if fetch.cache else None,
            cache_max_bytes=fetch.cache_max_bytes,
            capture_requests=capture_requests,
            addresses=addresses,
        )

    # -- the seam --------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Requests submitted whose result poll() has not returned yet."""
        return len(self._transfers) + len(self._ready)

    @property
    def free_slots(self) -> int:
        """How many more requests submit() accepts now."""
        return max(0, self._concurrency - self.in_flight)

    @property
    def concurrency(self) -> int:
        """The most requests in flight at once."""
        return self._concurrency

    def wake_on(self, fd: int | None) -> None:
        """Make :meth:`poll` return at once when ``fd`` becomes readable (the engine's
        command wakeup; its owner drains it). None: no longer."""
        self._loop.wake_on(fd)

    def reconfigure(self, fetch: FetchSection, politeness: PolitenessSection) -> None:
        """Apply changed tunables of a reloaded config: ``concurrency`` at once (lowered: no
        new request until fewer are in flight), timeouts, low-speed cutoff, body cap and user
        agent for transfers started from now on. The rest (resolve, proxy, TLS, DNS cache,
        HTTP/2, cache) is fixed at start: ``engine.reload`` refuses changes to it."""
        self._concurrency = fetch.concurrency
        self._pool.capacity = max(self._pool.capacity, fetch.concurrency)
        self._max_body_bytes = fetch.max_body_bytes
        self._options = dataclasses.replace(
            self._options,
            user_agent=politeness.user_agent,
            connect_timeout_s=fetch.connect_timeout_s,
            timeout_s=fetch.timeout_s,
            low_speed_bytes_s=fetch.low_speed_bytes_s,
            low_speed_time_s=fetch.low_speed_time_s,
            max_body_bytes=fetch.max_body_bytes,
        )
        self._pool.reconfigure(self._options.apply)
        self._resolve.set_permanent(_permanent(self._options.dns_cache_ttl_s, fetch.timeout_s))
        self._timeout_s = fetch.timeout_s

    def set_concurrency(self, value: int) -> None:
        """Change the most requests in flight at once (lowered: none is cut; no new one
        starts until fewer are in flight)."""
        if value < 1:
            raise ValueError(f"concurrency must be >= 1, got {value}")
        self._concurrency = value
        self._pool.capacity = max(self._pool.capacity, value)

    @property
    def waited_s(self) -> float:
        """Seconds poll() has spent blocked, waiting for sockets or curl's timer."""
        return self._loop.waited_s

    def submit(self, req: FetchRequest) -> None:
        """Start a request; its result comes from a later poll(). RuntimeError if no slot is
        free."""
        if self._closed:
            raise RuntimeError("fetcher is closed")
        if self.free_slots <= 0:
            raise RuntimeError(f"no free slot: {self.in_flight} requests in flight")
        scheme = _scheme(req.url)
        if scheme not in _SCHEMES:
            detail = f"scheme {scheme!r} is not http or https; not fetched"
            self._ready.append(error_result(req, ErrorKind.FORBIDDEN_SCHEME, detail))
            return
        if self._proxied is not None and (why := self._proxied.refuses_url(req.url)):
            detail = f"address refused ({why}, fetch.allow_addresses); not sent to the proxy"
            self._ready.append(error_result(req, ErrorKind.ADDRESS_REFUSED, detail))
            return
        stored = self._lookup(req)
        handle = self._pool.acquire()
        if self._options.dns_cache_ttl_s > 0:  # (0: every handle carries it, CurlOptions)
            now = time.monotonic()
            if now < self._prune_at:
                handle.setopt(pycurl.DNS_CACHE_TIMEOUT, -1)  # no walk of the cache
            else:
                self._prune_at = now + DNS_PRUNE_EVERY_S
                handle.setopt(pycurl.DNS_CACHE_TIMEOUT, self._dns_lifetime(now))
        transfer = Transfer(req, self._max_body_bytes, self._addresses)
        extra = stored.conditional_headers() if stored is not None else ()
        try:
            self._resolve.apply(handle, req.url)
            _set_request_options(handle, req, transfer, extra, self._capture_requests)
        except (pycurl.error, ValueError, TypeError) as exc:
            self._pool.release(handle)
            self._ready.append(error_result(req, ErrorKind.OTHER, f"bad request: {exc}"))
            return
        self._transfers[handle] = transfer
        if stored is not None:
            self._revalidating[handle] = stored
        self._loop.add(handle)

    def _dns_lifetime(self, now: float) -> int:
        """The DNS cache lifetime (whole seconds) the pruning transfer carries: the TTL, or
        shorter when the names looked up within it would exceed ``DNS_CACHE_NAMES`` (module
        docstring, the DNS cache's size)."""
        ttl = self._options.dns_cache_ttl_s
        rate = self._lookups / max(now - self._counted_at, 1e-3)
        self._lookups, self._counted_at = 0, now
        if rate * ttl <= DNS_CACHE_NAMES:
            return ttl
        floor = int(self._timeout_s) + 1 if self._resolve.aging else 1
        return min(ttl, max(floor, int(DNS_CACHE_NAMES / rate)))

    def poll(self, timeout_s: float) -> list[FetchResult]:
        """Wait at most ``timeout_s`` for transfers to finish; return every finished one.

        Returns as soon as at least one result is available (results of requests that never
        reached libcurl are returned without waiting). May return an empty list.
        """
        if self._closed:
            raise RuntimeError("fetcher is closed")
        completions = self._loop.run(0.0 if self._ready else timeout_s)
        results, self._ready = self._ready, []
        for completion in completions:
            transfer = self._transfers.pop(completion.handle)
            result = transfer.result(completion.handle, completion.code, completion.message)
            self.dns_s += float(completion.handle.getinfo(pycurl.NAMELOOKUP_TIME))
            if completion.handle.getinfo(pycurl.NUM_CONNECTS) or result.error is ErrorKind.DNS:
                self._lookups += 1  # (module docstring, the DNS cache's size)
            self._pool.release(completion.handle)
            duration = result.duration_s
            self.transfers += 1
            self.transfer_s += duration
            self.fetch_times[bisect_left(FETCH_TIME_BUCKETS, duration)] += 1
            if completion.code == CURLE_OPERATION_TIMEDOUT and result.error is ErrorKind.DNS:
                self._resolver_stuck = True
            results.append(self._cached(result, self._revalidating.pop(completion.handle, None)))
        return results

    def close(self) -> None:
        """Abandon transfers in flight and free every libcurl resource (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for handle, transfer in self._transfers.items():
            self._loop.remove(handle)
            if not transfer.request_sent(handle):  # abandoned before its request went out
                self._resolver_stuck = True
        if self._transfers:
            log.debug("closing with %d transfers in flight", len(self._transfers))
        self._transfers.clear()
        self._revalidating.clear()
        self._ready.clear()
        self._pool.close()
        if self._cache is not None:
            self._cache.close()
        if self._resolver_stuck:  # see the module docstring
            threading.Thread(target=self._cleanup, name="curl-cleanup", daemon=True).start()
        else:
            self._cleanup()

    def _cleanup(self) -> None:
        self._loop.close()
        self._share.close()

    # -- the HTTP cache --------------------------------------------------------------------

    def _lookup(self, req: FetchRequest) -> Stored | None:
        """The stored response to revalidate ``req`` against, if the cache applies to it."""
        if self._cache is None or req.keep_bytes or req.method != "GET":  # a cut body
            return None  # (robots.txt) is not cached, nor a form's answer
        if any(name.lower() in _CONDITIONAL for name, _ in req.headers):
            return None  # the caller asks its own question
        try:
            return self._cache.lookup(req.url)
        except CACHE_ERRORS as exc:
            log.warning("HTTP cache lookup failed for %s: %s", req.url, exc)
            return None

    def _cached(self, result: FetchResult, stored: Stored | None) -> FetchResult:
        """Store a fresh 200, or turn a 304 into the stored response it confirms."""
        if self._cache is None or result.request.keep_bytes or result.request.method != "GET":
            return result
        if stored is not None and result.status == 304 and result.error is None:
            return self._cache.revalidated(result, stored, self._max_body_bytes)
        try:
            self._cache.store(result)
        except CACHE_ERRORS as exc:
            log.warning("HTTP cache store failed for %s: %s", result.url, exc)
        return result

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _scheme(url: str) -> str:
    """The URL's scheme, lower-cased ("" when there is none); never raises."""
    head, colon, _ = url.partition(":")
    return head.lower() if colon else ""


def _permanent(dns_cache_ttl_s: int, timeout_s: float) -> bool:
    """Whether ``fetch.resolve`` entries are loaded permanent: when an aging one could be
    pruned within a transfer's life (``fetch/resolvemap.py``)."""
    return dns_cache_ttl_s <= timeout_s


def _make_share() -> pycurl.CurlShare:
    share = pycurl.CurlShare()
    share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_DNS)
    share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_SSL_SESSION)
    share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_CONNECT)
    return share


def _set_request_options(
    handle: pycurl.Curl,
    req: FetchRequest,
    transfer: Transfer,
    extra_headers: tuple[tuple[str, str], ...] = (),
    capture_request: bool = True,
) -> None:
    """The per-request options (the common ones were applied by the pool). Never
    ``FOLLOWLOCATION``: libcurl follows no redirect (module docstring)."""
    handle.setopt(pycurl.URL, req.url)
    # Wait for a connection being set up to the same origin, in case it turns out to carry
    # HTTP/2, only where HTTP/2 is possible (TLS with ALPN): on cleartext http the wait gains
    # nothing, and with many transfers to one host it made some sit out the whole connect
    # timeout with nothing sent (about 3 in 100 with 64 at once, measured).
    handle.setopt(pycurl.PIPEWAIT, 1 if req.url[:6].lower() == "https:" else 0)
    if req.method != "GET":
        _set_method(handle, req)
        handle.setopt(pycurl.HTTPHEADER, [*_header_lines(req.headers + extra_headers), "Expect:"])
    else:
        handle.setopt(pycurl.HTTPHEADER, _header_lines(req.headers + extra_headers))
    if req.keep_bytes > 0:  # read up to keep_bytes of any body, whatever its announced size
        handle.setopt(pycurl.MAXFILESIZE_LARGE, 0)
    if transfer.policy is not None:
        handle.setopt(pycurl.OPENSOCKETFUNCTION, transfer.open_socket)
    handle.setopt(pycurl.WRITEFUNCTION, transfer.on_write)
    handle.setopt(pycurl.HEADERFUNCTION, transfer.header_lines.append)  # no frame per line
    if capture_request:
        handle.setopt(pycurl.DEBUGFUNCTION, transfer.on_debug)
        handle.setopt(pycurl.VERBOSE, 1)  # libcurl calls DEBUGFUNCTION only when verbose


def _set_method(handle: pycurl.Curl, req: FetchRequest) -> None:
    """A request other than a GET: its method, and its body as given (the handle's reset on
    release clears these)."""
    if req.method == "HEAD":
        handle.setopt(pycurl.NOBODY, 1)
        return
    if req.method == "POST" or req.body:
        handle.setopt(pycurl.POSTFIELDSIZE_LARGE, len(req.body))
        handle.setopt(pycurl.COPYPOSTFIELDS, req.body)
    if req.method != "POST":
        handle.setopt(pycurl.CUSTOMREQUEST, req.method)


def _header_lines(headers: tuple[tuple[str, str], ...]) -> list[str] | tuple[str, ...]:
    if not headers:  # most requests (pycurl copies the lines into libcurl's own list)
        return _DEFAULT_HEADER_LINES
    lines: list[str] = []
    for name, value in headers:
        if any(ch in name or ch in value for ch in "\r\n\0") or not name.strip():
            raise ValueError(f"invalid request header {name!r}")
        if not (name.isascii() and value.isascii()):  # (pycurl hands libcurl ASCII only)
            raise ValueError(f"request header {name}: {value!r} is not ASCII; not sent")
        lines.append(f"{name}: {value}")
    if not any(name.lower() == "accept-encoding" for name, _ in headers):
        lines.append(_ACCEPT_ENCODING)
    return lines


def _fd_room(concurrency: int, idle: int) -> int:
    """How many idle connections, up to ``idle``, the process's open-file limit leaves room
    for beside ``concurrency`` transfers and ``_FD_RESERVE`` other files; the soft limit is
    raised as far as needed (and the hard limit allows) first."""
    want = concurrency + idle + _FD_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want:
        raised = want if hard == resource.RLIM_INFINITY else min(want, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (OSError, ValueError):
            pass
    if soft == resource.RLIM_INFINITY:
        return idle
    return max(0, min(idle, soft - concurrency - _FD_RESERVE))
