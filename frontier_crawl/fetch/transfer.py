"""State of one transfer in flight, the libcurl callbacks that fill it, and its result.

The fetcher keeps a ``dict[pycurl.Curl, Transfer]``; the handle's ``WRITEFUNCTION`` and
``DEBUGFUNCTION`` are bound methods of the transfer, its ``HEADERFUNCTION`` the transfer's
``header_lines.append``, and the handle's ``reset()`` drops them (and the buffers) when the
handle goes back to the pool.

* Response headers: every line is appended to ``Transfer.header_lines`` (the handle's
  ``HEADERFUNCTION`` is that list's ``append``: no Python frame per line). The block is cut
  from them when it is needed (:meth:`Transfer.block`, at the body's start and at the end): it
  runs from the last status line, so with ``100 Continue`` or a proxy's CONNECT reply only the
  last response's block is kept, to its blank line; lines after it are trailers and are not
  part of the block.
* Request headers: :meth:`Transfer.on_debug` keeps the last ``HEADER_OUT`` block libcurl
  reports (``VERBOSE`` must be on for libcurl to call the debug function; the fetcher sets
  both only when it is asked to capture requests).
* Body: :meth:`Transfer.on_write` keeps the raw bytes and decodes them incrementally
  (``fetch/decode.py``); past ``max_body_bytes`` raw or decoded bytes it aborts the transfer
  by returning 0, and records that it did, so ``CURLE_WRITE_ERROR`` maps to TOO_LARGE. A
  request with ``keep_bytes`` (robots.txt) is cut instead: past ``keep_bytes`` raw or decoded
  bytes the transfer is stopped the same way, and the result is the first ``keep_bytes`` bytes
  of the body with no error (``FetchResult.cut``).
* Addresses: with an address policy, :meth:`Transfer.open_socket` is the handle's
  ``OPENSOCKETFUNCTION``: libcurl asks it for each new connection's socket, with the address
  it is about to connect to (after name resolution); a refused address gets no socket
  (``SOCKET_BAD``: libcurl tries the name's next address, if any), and a transfer that found
  no allowed address ends with ``ADDRESS_REFUSED`` (``fetch/addresses.py``).
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pycurl

from frontier_crawl.fetch.decode import BodyDecoder, DecodedTooLarge, DecodeError, decoder_for
from frontier_crawl.fetch.errors import Phase, map_curl_error
from frontier_crawl.fetch.types import ErrorKind, FetchRequest, FetchResult

if TYPE_CHECKING:
    from frontier_crawl.fetch.addresses import AddressPolicy

__all__ = ["Transfer", "error_result", "parse_header_block"]

_HTTP_VERSIONS: dict[int, str] = {
    pycurl.CURL_HTTP_VERSION_1_0: "1.0",
    pycurl.CURL_HTTP_VERSION_1_1: "1.1",
    pycurl.CURL_HTTP_VERSION_2_0: "2",
    pycurl.CURL_HTTP_VERSION_3: "3",
}
_BLANK_LINES = (b"\r\n", b"\n")
_INET = frozenset({socket.AF_INET, socket.AF_INET6})
_SOCKET_BAD: int = pycurl.SOCKET_BAD


@dataclass(slots=True, eq=False)
class Transfer:
    """Everything gathered for one request between submit and completion."""

    request: FetchRequest
    max_body_bytes: int
    policy: AddressPolicy | None = None  #: checks each new connection's address (None: none)
    started_at: float = field(default_factory=time.time)
    started_mono: float = field(default_factory=time.monotonic)
    header_lines: list[bytes] = field(default_factory=list)
    """every header line libcurl handed over, of every block (and trailers): see ``block``"""
    request_chunks: list[bytes] = field(default_factory=list)
    request_done: bool = True  # the next HEADER_OUT data starts a new block
    raw_chunks: list[bytes] = field(default_factory=list)
    raw_size: int = 0
    body_started: bool = False
    parsed: tuple[int, bytes, tuple[tuple[str, str], ...]] | None = None
    """(len(header_lines), the block cut from them, its parse) when last cut: reused by
    result() when no header line came since (no trailer, no new block)."""
    decoder: BodyDecoder | None = None
    decode_error: str = ""
    too_large: bool = False
    cut: bool = False  #: stopped at ``request.keep_bytes`` on purpose
    head: bytes | None = None  #: the decoded body kept when ``cut`` (None: not encoded)
    refused: str = ""  #: the first address the policy refused, and why ("" if none)
    opened: bool = False  #: a socket was opened to an allowed address

    def __post_init__(self) -> None:
        if self.request.keep_bytes > 0:  # the body limit is the request's, whatever the page cap
            self.max_body_bytes = self.request.keep_bytes

    # -- libcurl callbacks -----------------------------------------------------------------

    def block(self) -> bytes:
        """The last response's header block: from the last status line to its blank line."""
        return self._cut_block()[1]

    def on_debug(self, kind: int, data: bytes) -> None:
        """DEBUGFUNCTION: keep the last request header block libcurl sent."""
        if kind != pycurl.INFOTYPE_HEADER_OUT:
            return
        if self.request_done:
            self.request_chunks = []
        self.request_chunks.append(data)
        self.request_done = data.endswith(b"\r\n\r\n")

    def on_write(self, data: bytes) -> int | None:
        """WRITEFUNCTION: keep and decode the body; return 0 to abort when it is too large."""
        if not self.body_started:
            self._start_body()
        self.raw_size += len(data)
        over = self.raw_size > self.max_body_bytes
        if over and not self.request.keep_bytes:
            return self._abort_too_large()
        if over:
            data = data[: len(data) - (self.raw_size - self.max_body_bytes)]
        self.raw_chunks.append(data)
        if self.decoder is not None:
            try:
                self.decoder.feed(data)
            except DecodedTooLarge:
                return self._abort_too_large()
            except DecodeError as exc:
                self.decode_error = str(exc)
                self.decoder = None  # keep receiving the raw bytes for the archive
        return self._cut() if over else None

    def open_socket(self, _purpose: int, address: Any) -> int:
        """OPENSOCKETFUNCTION: a socket for ``address`` (family, type, protocol, sockaddr) if
        the address policy allows it, else ``SOCKET_BAD`` (recorded in ``refused``).

        The socket is handed over as its descriptor (``detach``), which libcurl then owns and
        closes: given a socket object, pycurl calls its ``repr()`` (two system calls,
        ``getsockname`` and ``getpeername``, and the formatting), ``fileno()`` twice and
        ``dup()``, and the object closes its own descriptor later: all of that per new
        connection, for nothing."""
        family, socktype, protocol, sockaddr = address
        assert self.policy is not None
        why = (
            self.policy.why_refused(sockaddr[0], self.request.url)
            if family in _INET
            else "not an IP socket"
        )
        if why:
            if not self.refused:
                self.refused = f"{sockaddr[0]} ({why})" if family in _INET else why
            return _SOCKET_BAD
        self.opened = True
        return socket.socket(family, socktype, protocol).detach()

    def request_sent(self, handle: pycurl.Curl) -> bool:
        """Whether request headers went out on ``handle`` (so the connection was up, TLS
        included; also true on a reused connection, for which libcurl reports zero resolve
        and connect times). ``REQUEST_SIZE`` works with or without the debug callback."""
        return bool(self.request_chunks) or int(handle.getinfo(pycurl.REQUEST_SIZE)) > 0

    def _start_body(self) -> None:
        self.body_started = True
        headers = self._headers()
        codings = [value for name, value in headers if name == "content-encoding"]
        if codings:
            self.decoder = decoder_for(", ".join(codings), self.max_body_bytes)

    def _headers(self) -> tuple[tuple[str, str], ...]:
        """The parsed header block, parsed once per block."""
        return self._cut_block()[2]

    def _cut_block(self) -> tuple[int, bytes, tuple[tuple[str, str], ...]]:
        """(lines seen, the block, its parse), cut and parsed again only if lines came since."""
        lines, parsed = self.header_lines, self.parsed
        if parsed is not None and parsed[0] == len(lines):
            return parsed
        block = _last_block(b"".join(lines))
        parsed = (len(lines), block, _parse_lines(block.decode("iso-8859-1").split("\n")))
        self.parsed = parsed
        return parsed

    def _cut(self) -> int:
        """Stop reading a ``keep_bytes`` request's body: what was read so far is the result."""
        self.cut = True
        if self.decoder is not None:
            self.head = self.decoder.head()
            self.decoder = None
        return 0

    def _abort_too_large(self) -> int:
        if self.request.keep_bytes:
            return self._cut()
        self.too_large = True
        self.raw_chunks = []
        self.decoder = None
        return 0

    # -- the result ------------------------------------------------------------------------

    def result(self, handle: pycurl.Curl, code: int, message: str) -> FetchResult:
        """Build the result from the collected state and the handle's info (before reset)."""
        finished = time.monotonic()
        status = int(handle.getinfo(pycurl.RESPONSE_CODE))
        _, header_bytes, headers = self._cut_block()
        raw_body, body, error, detail = self._body_and_error(handle, code, message, status)
        return FetchResult(  # libcurl follows no redirect: the URL is the request's
            request=self.request,
            url=self.request.url,
            status=status,
            error=error,
            error_detail=detail,
            header_bytes=header_bytes,
            headers=headers,
            raw_body=raw_body,
            body=body,
            request_bytes=b"".join(self.request_chunks),
            ip=str(handle.getinfo(pycurl.PRIMARY_IP) or ""),
            http_version=_http_version(handle) if status else "",
            started_at=self.started_at,
            finished=finished,
            duration_s=finished - self.started_mono,
            cut=self.cut,
        )

    def _body_and_error(
        self, handle: pycurl.Curl, code: int, message: str, status: int
    ) -> tuple[bytes, bytes, ErrorKind | None, str]:
        """(raw_body, body, error, error_detail) for the way the transfer ended."""
        if self.too_large:  # we aborted it: libcurl's "Failure writing output" says nothing
            detail = f"body exceeds max_body_bytes ({self.max_body_bytes}), raw or decoded"
            return b"", b"", ErrorKind.TOO_LARGE, detail
        raw = b"".join(self.raw_chunks)
        self.raw_chunks = []
        if self.cut:  # stopped on purpose (CURLE_WRITE_ERROR): the body read so far
            if self.decode_error:
                return raw, b"", ErrorKind.PROTOCOL, self.decode_error
            return raw, raw if self.head is None else self.head, None, ""
        if code != 0 and self.refused and not self.opened:
            detail = f"address {self.refused} refused (fetch.allow_addresses); not connected"
            return b"", b"", ErrorKind.ADDRESS_REFUSED, detail
        if code != 0:
            message = message or f"libcurl error {code}"
            kind = map_curl_error(code, message, self._phase(handle, status))
            if kind is ErrorKind.TOO_LARGE:
                return b"", b"", kind, message
            # what arrived is kept; an encoded body is not decoded when the transfer failed
            return raw, b"" if self._encoded else raw, kind, message
        if self.decode_error:
            return raw, b"", ErrorKind.PROTOCOL, self.decode_error
        if self.decoder is None:
            return raw, raw, None, ""
        try:
            return raw, self.decoder.finish(), None, ""
        except DecodeError as exc:
            return raw, b"", ErrorKind.PROTOCOL, str(exc)

    @property
    def _encoded(self) -> bool:
        return self.decoder is not None or bool(self.decode_error)

    def _phase(self, handle: pycurl.Curl, status: int) -> Phase:
        """How far the transfer got, from what the callbacks saw and libcurl's timings.

        Once request headers went out (:meth:`request_sent`) the connection was up.
        (``PRETRANSFER_TIME`` is no help: libcurl fills it in on failure.)
        """
        connected = status > 0 or bool(self.header_lines) or self.request_sent(handle)
        resolved = connected or float(handle.getinfo(pycurl.NAMELOOKUP_TIME)) > 0
        return Phase(resolved=resolved, connected=connected, aborted_too_large=self.too_large)


def _last_block(data: bytes) -> bytes:
    """The header block that a response's headers are, in ``data`` (every header line of a
    transfer, joined): from the last status line to the blank line that ends it (b"" if none).

    libcurl hands over whole lines, each ending in LF, so a status line is an ``HTTP/`` at
    the start or after an LF, and the blank line is an LF followed by CRLF or LF."""
    last = data.rfind(b"\nHTTP/")
    if last >= 0:
        data = data[last + 1 :]
    elif not data.startswith(b"HTTP/"):
        return b""
    crlf, lf = data.find(b"\n\r\n"), data.find(b"\n\n")
    if crlf >= 0 and (lf < 0 or crlf < lf):
        return data[: crlf + 3]
    return data[: lf + 2] if lf >= 0 else data


def _http_version(handle: pycurl.Curl) -> str:
    return _HTTP_VERSIONS.get(int(handle.getinfo(pycurl.INFO_HTTP_VERSION)), "")


def parse_header_block(lines: list[bytes]) -> tuple[tuple[str, str], ...]:
    """(lower-cased name, stripped value) pairs of a header block; the status line is skipped.

    Bytes are decoded as ISO-8859-1 (lossless); obsolete line folding is joined with a space.
    """
    return _parse_lines([raw.decode("iso-8859-1") for raw in lines])


def _parse_lines(lines: list[str]) -> tuple[tuple[str, str], ...]:
    """parse_header_block of the block's lines decoded (line ends kept or not)."""
    parsed: list[tuple[str, str]] = []
    for text in lines[1:]:
        line = text.rstrip("\r\n")
        if not line:
            break
        if line[0] in " \t" and parsed:
            name, value = parsed[-1]
            parsed[-1] = (name, f"{value} {line.strip()}".strip())
            continue
        name, sep, value = line.partition(":")
        if sep:
            parsed.append((name.strip().lower(), value.strip()))
    return tuple(parsed)


def error_result(request: FetchRequest, error: ErrorKind, detail: str) -> FetchResult:
    """A result for a request that never reached libcurl (forbidden scheme, bad option)."""
    now = time.monotonic()
    return FetchResult(
        request=request,
        url=request.url,
        status=0,
        error=error,
        error_detail=detail,
        header_bytes=b"",
        headers=(),
        raw_body=b"",
        body=b"",
        request_bytes=b"",
        ip="",
        http_version="",
        started_at=time.time(),
        finished=now,
        duration_s=0.0,
    )
