"""A freelist of ``pycurl.Curl`` handles and the options every handle carries.

Handles are created lazily, up to ``capacity``, and recycled: :meth:`HandlePool.release` calls
``reset()`` (which drops every option and Python callback, so the finished transfer's buffers
are freed at once, and clears libcurl's per-handle state, while libcurl keeps the share, live
connections and caches) and re-applies the common options of :class:`CurlOptions`. A handle
taken from the pool therefore only needs the per-request options (URL, headers, address check,
callbacks).

The reset is kept so that each transfer starts from libcurl's defaults and no per-request
option can leak into the next one (a test checks headers). ``fetch.resolve`` entries are not
common options: each transfer carries only its own host's (``fetch/resolvemap.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pycurl

__all__ = ["CurlOptions", "HandlePool"]

log = logging.getLogger(__name__)

_HTTP_PROTOCOLS = pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS


@dataclass(slots=True, frozen=True)
class CurlOptions:
    """Options set on every handle, in plain values (seconds and bytes as in the config)."""

    user_agent: str
    connect_timeout_s: float = 10.0
    timeout_s: float = 30.0
    low_speed_bytes_s: int = 100
    low_speed_time_s: int = 15
    max_body_bytes: int = 10_485_760
    proxy: str | None = None
    verify_tls: bool = True
    ca_bundle: str | None = None
    dns_cache_ttl_s: int = 120
    maxconnects: int = 0  #: connection cache size; 0 leaves libcurl's default
    http2: bool = True  #: negotiate HTTP/2 over TLS (ALPN); HTTP/1.1 otherwise
    #: what :meth:`apply` sets, (option, value) in order: computed once, set in one loop
    #: per released handle (not four methods and their tests per transfer)
    _pairs: tuple[tuple[int, object], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        recorder = _Recorder()
        self._apply_transport(recorder)
        self._apply_limits(recorder)
        self._apply_tls(recorder)
        self._apply_http(recorder)
        object.__setattr__(self, "_pairs", tuple(recorder.pairs))

    def apply(self, handle: pycurl.Curl) -> None:
        """Set the common options on a new or reset handle."""
        setopt = handle.setopt
        for option, value in self._pairs:
            setopt(option, value)

    def _apply_transport(self, handle: _Options) -> None:
        handle.setopt(pycurl.NOSIGNAL, 1)
        handle.setopt(pycurl.PROTOCOLS, _HTTP_PROTOCOLS)
        handle.setopt(pycurl.REDIR_PROTOCOLS, _HTTP_PROTOCOLS)
        handle.setopt(pycurl.FOLLOWLOCATION, 0)  # libcurl's default, said: it follows nothing
        handle.setopt(pycurl.DNS_CACHE_TIMEOUT, self.dns_cache_ttl_s)
        # The configured proxy, or none: never one from the environment (http_proxy, ...), and
        # no host bypasses the configured one (no_proxy), so the address policy knows where
        # every connection goes (fetch/addresses.py).
        handle.setopt(pycurl.PROXY, self.proxy if self.proxy is not None else "")
        if self.proxy is not None:
            handle.setopt(pycurl.NOPROXY, "")
        if self.maxconnects > 0:
            handle.setopt(pycurl.MAXCONNECTS, self.maxconnects)

    def _apply_limits(self, handle: _Options) -> None:
        handle.setopt(pycurl.CONNECTTIMEOUT_MS, _ms(self.connect_timeout_s))
        handle.setopt(pycurl.TIMEOUT_MS, _ms(self.timeout_s))
        if self.low_speed_bytes_s > 0:
            handle.setopt(pycurl.LOW_SPEED_LIMIT, self.low_speed_bytes_s)
            handle.setopt(pycurl.LOW_SPEED_TIME, self.low_speed_time_s)
        # Fast path: refuse an announced Content-Length over the cap before any body arrives.
        handle.setopt(pycurl.MAXFILESIZE_LARGE, self.max_body_bytes)

    def _apply_tls(self, handle: _Options) -> None:
        handle.setopt(pycurl.SSL_VERIFYPEER, 1 if self.verify_tls else 0)
        handle.setopt(pycurl.SSL_VERIFYHOST, 2 if self.verify_tls else 0)
        if self.ca_bundle is not None:
            handle.setopt(pycurl.CAINFO, self.ca_bundle)

    def _apply_http(self, handle: _Options) -> None:
        handle.setopt(pycurl.USERAGENT, self.user_agent)
        handle.setopt(pycurl.HTTP_CONTENT_DECODING, 0)  # raw bytes; fetch/decode.py decodes
        version = pycurl.CURL_HTTP_VERSION_2TLS if self.http2 else pycurl.CURL_HTTP_VERSION_1_1
        handle.setopt(pycurl.HTTP_VERSION, version)


class _Options(Protocol):
    """What the ``_apply_*`` methods set options on: a handle, or a :class:`_Recorder`."""

    def setopt(self, option: int, value: Any) -> None: ...


class _Recorder:
    """Records the options set on it, in order (``CurlOptions._pairs``)."""

    def __init__(self) -> None:
        self.pairs: list[tuple[int, object]] = []

    def setopt(self, option: int, value: Any) -> None:
        self.pairs.append((option, value))


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class HandlePool:
    """At most ``capacity`` Curl handles, created on demand and reused LIFO.

    A new handle is attached to ``share`` once and configured with ``configure``: ``reset()``
    keeps the share attached (curl_easy_reset(3) leaves shares, live connections and caches
    alone, and pycurl keeps its reference), so on release only ``configure`` runs again.
    """

    def __init__(
        self,
        capacity: int,
        configure: Callable[[pycurl.Curl], None],
        share: pycurl.CurlShare | None = None,
    ) -> None:
        """``configure`` applies the common options to a new or reset handle."""
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._configure = configure
        self._share = share
        self._free: list[pycurl.Curl] = []
        self._all: list[pycurl.Curl] = []

    @property
    def available(self) -> int:
        """Handles that can be acquired now (free or not yet created)."""
        return len(self._free) + self.capacity - len(self._all)

    @property
    def created(self) -> int:
        """Handles created so far."""
        return len(self._all)

    def acquire(self) -> pycurl.Curl:
        """A configured handle; RuntimeError when all ``capacity`` handles are in use."""
        if self._free:
            return self._free.pop()
        if len(self._all) >= self.capacity:
            raise RuntimeError(f"all {self.capacity} curl handles are in use")
        handle = pycurl.Curl()
        if self._share is not None:
            handle.setopt(pycurl.SHARE, self._share)
        self._configure(handle)
        self._all.append(handle)
        log.debug("created curl handle %d of %d", len(self._all), self.capacity)
        return handle

    def release(self, handle: pycurl.Curl) -> None:
        """Reset the handle (freeing its callbacks and buffers) and put it back on the list."""
        handle.reset()
        self._configure(handle)
        self._free.append(handle)

    def reconfigure(self, configure: Callable[[pycurl.Curl], None]) -> None:
        """Configure handles from now on with new options; free handles get them at once (a
        handle in use gets them when it is released, so a running transfer keeps its own)."""
        self._configure = configure
        for handle in self._free:
            handle.reset()
            configure(handle)

    def close(self) -> None:
        """Close every handle (the caller removed them from the multi first)."""
        for handle in self._all:
            handle.close()
        self._all.clear()
        self._free.clear()
