"""Incremental, size-bounded content decoding (gzip and deflate).

libcurl hands the fetcher the body as it is on the wire (``HTTP_CONTENT_DECODING`` is off) so
that the archive keeps the raw bytes; the fetcher decodes it here, chunk by chunk. Every
``decompress`` call is given ``max_length`` = the room left under the cap plus one byte (and
at most 64 KiB), so the decoded body never holds more than ``limit + 1`` bytes: a gzip bomb is
stopped after ``limit + 1`` decoded bytes whatever its expanded size.

* ``gzip`` / ``x-gzip``: zlib with ``wbits = 32 + 15`` (gzip or zlib header, auto-detected).
* ``deflate``: RFC 9110 says zlib-wrapped, but some servers send a raw deflate stream; the
  first two bytes decide (a valid zlib header, else raw ``wbits = -15``).
* ``identity`` or no header: no decoder; the body is the raw body (same object). An
  ``identity`` (or empty) member of a list means nothing: ``gzip, identity`` is ``gzip``.
* Anything else (``br``, ``zstd``, two real encodings stacked such as ``gzip, gzip``): no
  decoder; the body is left encoded and the result carries ``body is raw_body``; callers can
  see the encoding in the ``content-encoding`` header.

Data after the end of the first compressed member is ignored. A stream that is corrupt, or
that ends before its end marker, raises :class:`DecodeError` (reported as PROTOCOL).
"""

from __future__ import annotations

import zlib

__all__ = ["BodyDecoder", "DecodeError", "DecodedTooLarge", "decoder_for"]

_GZIP_WBITS = 32 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_WBITS = -zlib.MAX_WBITS
_STEP = 1 << 16  #: decoded bytes per decompress call (bounds zlib's transient buffers too)


class DecodeError(Exception):
    """The compressed body is corrupt or incomplete."""


class DecodedTooLarge(Exception):
    """The decoded body would exceed the limit."""


class BodyDecoder:
    """Decode one content-encoded body incrementally, never holding more than ``limit + 1``."""

    __slots__ = ("_chunks", "_decoder", "_pending", "_size", "_wbits", "limit")

    def __init__(self, wbits: int | None, limit: int) -> None:
        """``wbits`` None means "deflate, sniff zlib vs raw from the first two bytes"."""
        self.limit = limit
        self._wbits = wbits
        self._decoder: zlib._Decompress | None = (
            zlib.decompressobj(wbits) if wbits is not None else None
        )
        self._pending = b""
        self._chunks: list[bytes] = []
        self._size = 0

    @property
    def size(self) -> int:
        """Decoded bytes so far."""
        return self._size

    def feed(self, data: bytes) -> None:
        """Decode ``data``; raise DecodedTooLarge past the limit, DecodeError if corrupt."""
        decoder = self._decoder
        if decoder is None:
            decoder = self._sniff(data)
            if decoder is None:
                return
            data, self._pending = self._pending + data, b""
        if decoder.eof:
            return
        try:
            self._drain(decoder, data)
        except zlib.error as exc:
            raise DecodeError(f"corrupt compressed body: {exc}") from None

    def finish(self) -> bytes:
        """The decoded body; DecodeError if the stream ended before its end marker."""
        if self._decoder is None or not self._decoder.eof:
            if self._decoder is None and not self._pending:
                return b""  # no body at all
            raise DecodeError("compressed body ended before the end of the stream")
        chunks, self._chunks = self._chunks, []
        return b"".join(chunks)

    def head(self) -> bytes:
        """The first ``limit`` decoded bytes (of a body cut short on purpose: no end check)."""
        chunks, self._chunks = self._chunks, []
        return b"".join(chunks)[: self.limit]

    def _drain(self, decoder: zlib._Decompress, data: bytes) -> None:
        while True:
            room = min(self.limit + 1 - self._size, _STEP)
            out = decoder.decompress(data, room)
            if out:
                self._chunks.append(out)
                self._size += len(out)
                if self._size > self.limit:  # the chunks stay for head(); callers drop us
                    raise DecodedTooLarge(f"decoded body exceeds {self.limit} bytes")
            if decoder.eof:
                return
            data = decoder.unconsumed_tail
            if not data and len(out) < room:
                return  # input used up and no output pending (a full `out` may have more)

    def _sniff(self, data: bytes) -> zlib._Decompress | None:
        """Pick zlib or raw deflate once two bytes are known (deflate only)."""
        head = self._pending + data
        if len(head) < 2:
            self._pending = head
            return None
        is_zlib = head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
        self._decoder = zlib.decompressobj(_ZLIB_WBITS if is_zlib else _RAW_WBITS)
        return self._decoder


def decoder_for(content_encoding: str | None, limit: int) -> BodyDecoder | None:
    """A decoder for a Content-Encoding header value, or None when the body is used as is."""
    if content_encoding is None:
        return None
    codings = [c.strip() for c in content_encoding.lower().split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if len(codings) != 1:
        return None  # identity only, or stacked encodings
    coding = codings[0]
    if coding in ("gzip", "x-gzip"):
        return BodyDecoder(_GZIP_WBITS, limit)
    if coding == "deflate":
        return BodyDecoder(None, limit)
    return None
