"""The records the frontier hands out and keeps: plain data, imported by every part that needs
them (a leaf module: it imports no other part of the frontier).

* :class:`Ticket`: one URL handed out for fetching (``hosts.py``, ``dispatch.py``);
* :class:`LastCapture`: what a revisit ticket carries of the URL's previous visits;
* :class:`Visit`: the stored record of a scheduled URL (``recrawl.py``'s ``b"recrawl-visits"``);
* :data:`Link`: a link for a host another worker owns (``mailbox.py``).
"""

from __future__ import annotations

import msgspec

__all__ = ["LastCapture", "Link", "PlainLink", "Ticket", "Visit"]

#: url, depth, referrer, hops, callback, meta, priority (the request's, for a spider; "", b"", 0)
Link = tuple[str, int, str | None, int, str, bytes, int]
PlainLink = tuple[str, int, str | None, int]  #: url, depth, referrer, hops


class LastCapture(msgspec.Struct, frozen=True, gc=False):
    """What the frontier keeps of a URL's previous visits, handed out with its revisit ticket."""

    etag: str = ""  #: validators of the last 2xx (sent as If-None-Match / If-Modified-Since)
    last_modified: str = ""
    digest: bytes = b""  #: SHA-1 of the payload of the last full capture (20 bytes)
    record_id: str = ""  #: WARC-Record-ID of that capture's response record ("": WARC off)
    uri: str = ""  #: its WARC-Target-URI
    date: float = 0.0  #: its WARC-Date, epoch seconds
    visits: int = 0  #: completed visits so far (>= 1 for a revisit)
    interval_s: float = 0.0  #: the interval that made it due
    due: float = 0.0  #: wall time it was due (for overdue figures)


class Visit(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """The stored record of a scheduled URL (``b"recrawl-visits"``)."""

    url: str
    depth: int = 0
    referrer: str | None = None
    callback: str = ""
    meta: bytes = b""
    priority: int = 0
    etag: str = ""
    last_modified: str = ""
    digest: bytes = b""
    record_id: str = ""
    uri: str = ""  #: the capture's WARC-Target-URI ("": ``url``, the usual case)
    date: float = 0.0
    visits: int = 0
    interval_s: float = 0.0
    due: float = 0.0  #: wall time the next visit is due
    gone: int = 0  #: 404/410 answers in a row
    status: int = 0  #: of the last visit (0: no response)
    location: str = ""  #: the last visit's redirect target ("": none)
    visited: float = 0.0  #: wall time of the last visit

    def last(self) -> LastCapture:
        uri = self.uri or (self.url if self.date else "")
        return LastCapture(self.etag, self.last_modified, self.digest, self.record_id, uri,
                           self.date, self.visits, self.interval_s, self.due)  # fmt: skip


class Ticket(msgspec.Struct, frozen=True, gc=False):
    """One URL handed out for fetching; give it back with complete/retry/robots_done.

    A frozen msgspec Struct rather than a frozen dataclass: one is built per URL handed out,
    and a frozen dataclass's ``__init__`` (``object.__setattr__`` per field) costs many times
    more. ``gc=False``: it holds only str, bytes, int, bool and None.
    """

    key: bytes  #: queue entry key, ``store.py`` (b"" for robots.txt tickets and rejected URLs)
    origin: str
    url: str
    depth: int
    hops: int = 0
    attempt: int = 0
    referrer: str | None = None
    robots: bool = False
    callback: str = ""  #: the spider callback its response goes to ("": the default)
    meta: bytes = b""  #: the request's meta (msgpack; b"": none)
    priority: int = 0  #: the request's priority (stored with the URL; orders its host's queue)
    #: a revisit's previous captures (``recrawl.py``); None: a first fetch
    last: LastCapture | None = None
