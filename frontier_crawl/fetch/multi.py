"""The event loop: one ``CurlMulti`` driven by ``socket_action``, its sockets in a selector.

libcurl tells us which sockets to watch (``M_SOCKETFUNCTION``) and when it next needs a call
without socket activity (``M_TIMERFUNCTION``); :meth:`MultiLoop.run` waits on the selector
(epoll on Linux) for at most ``min(caller's timeout, curl's timer)``, hands every ready socket
to ``socket_action`` with the matching ``CSELECT_*`` bits, fires the timer when it is due, and
collects finished transfers from ``info_read``. It never sleeps in a polling loop: the only
``time.sleep`` is for the case where curl watches no socket at all, when there is nothing to
wait on but a deadline.

Unlike pycurl's ``multi-socket_action-select.py`` example, a socket for which curl asks
``POLL_INOUT`` is watched for reading *and* writing.
"""

from __future__ import annotations

import logging
import selectors
import time
from typing import NamedTuple

import pycurl

from frontier_crawl.fetch.resolvethreads import set_resolve_threads

__all__ = ["Completion", "MultiLoop"]

log = logging.getLogger(__name__)

_WANTED: dict[int, int] = {
    pycurl.POLL_IN: selectors.EVENT_READ,
    pycurl.POLL_OUT: selectors.EVENT_WRITE,
    pycurl.POLL_INOUT: selectors.EVENT_READ | selectors.EVENT_WRITE,
}


class Completion(NamedTuple):
    """A finished transfer as ``info_read`` reports it: ``code`` 0 means success (a named
    tuple: one per transfer, cheaper to build than a frozen dataclass)."""

    handle: pycurl.Curl
    code: int
    message: str


class MultiLoop:
    """A CurlMulti whose sockets and timer are driven from a ``selectors`` selector."""

    def __init__(self, maxconnects: int, multiplex: bool = True, resolve_threads: int = 0) -> None:
        """``maxconnects`` sizes the connection cache (in-flight plus idle connections);
        ``resolve_threads`` (if > 0) libcurl's resolver thread pool (``resolvethreads.py``)."""
        self._selector = selectors.DefaultSelector()
        self._watched: dict[int, int] = {}  # fd -> selector events
        self._timer_at: float | None = None  # monotonic time curl wants to be called back
        self._handles = 0
        self._closed = False
        #: seconds spent blocked waiting for sockets or curl's timer (the loop's idle time)
        self.waited_s = 0.0
        self._wake_fd: int | None = None  #: readable: return from run() at once (wake_on)
        self._woken = False
        self._multi = pycurl.CurlMulti()
        self._multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        self._multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        self._multi.setopt(pycurl.M_MAXCONNECTS, maxconnects)
        if multiplex:
            self._multi.setopt(pycurl.M_PIPELINING, pycurl.PIPE_MULTIPLEX)
        #: libcurl took ``resolve_threads`` as its resolver pool's size
        self.resolve_threads = resolve_threads > 0 and set_resolve_threads(
            self._multi, resolve_threads
        )

    @property
    def handles(self) -> int:
        """Easy handles currently added."""
        return self._handles

    def wake_on(self, fd: int | None) -> None:
        """Return from :meth:`run` as soon as ``fd`` is readable (a wakeup pipe or socketpair
        whose owner drains it before the next run: a readable fd ends every wait at once).
        None: stop watching it (before its owner closes it)."""
        if self._wake_fd is not None:
            self._selector.unregister(self._wake_fd)
            self._wake_fd = None
        if fd is not None:
            self._selector.register(fd, selectors.EVENT_READ)
            self._wake_fd = fd

    def add(self, handle: pycurl.Curl) -> None:
        """Start a configured transfer (curl arms its timer; the next run() kicks it off)."""
        self._multi.add_handle(handle)
        self._handles += 1

    def remove(self, handle: pycurl.Curl) -> None:
        """Detach a handle, finished or not (an unfinished transfer is abandoned)."""
        self._multi.remove_handle(handle)
        self._handles -= 1

    def run(self, timeout_s: float) -> list[Completion]:
        """Drive transfers until at least one finishes or ``timeout_s`` has passed.

        Finished handles are removed from the multi before they are returned.
        """
        deadline = time.monotonic() + max(0.0, timeout_s)
        self._woken = False
        while True:
            self._wait_and_act(deadline)
            done = self._read_completions()
            if done or self._woken or time.monotonic() >= deadline:
                return done

    def close(self) -> None:
        """Close the multi and the selector (remove the easy handles first).

        May run in another thread (see ``fetcher.py``): callbacks libcurl makes during its
        cleanup are ignored from here on.
        """
        self._closed = True
        self._multi.close()
        self._selector.close()
        self._watched.clear()

    # -- one turn of the loop ------------------------------------------------------------

    def _wait_and_act(self, deadline: float) -> None:
        now = time.monotonic()
        wait = max(0.0, deadline - now)
        if self._timer_at is not None:
            wait = min(wait, max(0.0, self._timer_at - now))
        if self._watched or self._wake_fd is not None:
            t0 = time.perf_counter()
            events = self._selector.select(wait)
            self.waited_s += time.perf_counter() - t0
            for key, mask in events:
                if key.fd in self._watched:
                    self._act(key.fd, _curl_bits(mask))
                elif key.fd == self._wake_fd:
                    self._woken = True
        elif wait > 0:
            time.sleep(wait)  # no socket to wait on: only a deadline (curl's or the caller's)
            self.waited_s += wait
        if self._timer_at is not None and time.monotonic() >= self._timer_at:
            self._timer_at = None
            self._act(pycurl.SOCKET_TIMEOUT, 0)

    def _act(self, fd: int, bits: int) -> None:
        while True:
            ret, _running = self._multi.socket_action(fd, bits)
            if ret != pycurl.E_CALL_MULTI_PERFORM:
                return

    def _read_completions(self) -> list[Completion]:
        done: list[Completion] = []
        while True:
            queued, ok, failed = self._multi.info_read()
            done.extend(Completion(handle, 0, "") for handle in ok)
            done.extend(Completion(handle, int(code), str(msg)) for handle, code, msg in failed)
            if not queued:
                break
        for completion in done:
            self.remove(completion.handle)
        return done

    # -- callbacks from libcurl ------------------------------------------------------------

    def _on_timer(self, timeout_ms: int) -> None:
        if self._closed:
            return
        self._timer_at = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000.0

    def _on_socket(self, what: int, fd: int, _multi: object, _socketp: object) -> None:
        if self._closed:
            return
        try:
            events = _WANTED.get(what)  # None for POLL_REMOVE (and POLL_NONE)
            if events is None:
                self._unwatch(fd)
            else:
                self._watch(fd, events)
        except Exception:  # an exception must not escape into libcurl
            log.exception("socket callback failed for fd %d (what=%d)", fd, what)

    def _watch(self, fd: int, events: int) -> None:
        current = self._watched.get(fd)
        if current == events:
            return
        if current is None:
            self._selector.register(fd, events)
        else:
            try:
                self._selector.modify(fd, events)
            except OSError:  # fd was closed and reused behind our back: start over
                self._selector.unregister(fd)
                self._selector.register(fd, events)
        self._watched[fd] = events

    def _unwatch(self, fd: int) -> None:
        if self._watched.pop(fd, None) is not None:
            self._selector.unregister(fd)


def _curl_bits(mask: int) -> int:
    bits = 0
    if mask & selectors.EVENT_READ:
        bits |= pycurl.CSELECT_IN
    if mask & selectors.EVENT_WRITE:
        bits |= pycurl.CSELECT_OUT
    return bits
