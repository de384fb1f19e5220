"""WARC record bytes, gzip members and the files they go to: what the WARC writer's child
process runs (``warc.py`` has the writer the engine holds, and the file layout).

Self-contained on purpose: the standard library, isal and zlib-ng, nothing of frontier_crawl.
The writer's child imports this file alone (``CHILD_CODE``), so it does not pay for importing
the package (about 0.45 s of CPU per child start, the spider, config and report modules it
never uses: with a writer per worker, a twentieth of a millisecond per page on a 10,000-page
crawl); and it runs without ``site`` (``python -S``) and imports only light standard modules
at run time (no ``typing``, ``multiprocessing``, ``pathlib``, ``json``, ``re``, ``pickle``:
``Capture`` is a ``collections.namedtuple``, typed for mypy in a ``TYPE_CHECKING`` block; the
socket is read and written as a raw descriptor, messages framed by a length), about half the
CPU of its start-up before (bench/README.md, "WARC path").

Records are built as bytes here, not through warcio's record builder and writer (whose
per-record Python was about a quarter of a record's CPU): the same WARC headers in warcio's
order, the same digests (SHA-1 over whole buffers, base32 as warcio's ``Digester`` writes
them), the same blocks; tests read them back with warcio (digests checked) and compare them
with what warcio itself writes for the same capture.

Between the engine's process and the child, captures travel as bytes (``encode_capture``:
lengths, then the fields), many to a message (``FRAME``: its length, then its bytes), never
as pickled objects; the parent sends a batch's parts with one ``sendmsg`` (no copy into one
buffer), the child reads it into one buffer and builds the records from ``memoryview`` slices
of it; its reports back are structs (``REPORT``). Each append's gzip members go to the file
in one ``writev``.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import math
import os
import random
import select
import struct
import sys
import time
import zlib
from datetime import UTC, datetime

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a child's start-up)
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from typing import Any, NamedTuple

_isal: Any
_zng: Any
try:  # Intel ISA-L's igzip: standard gzip at a fraction of zlib's CPU
    from isal import isal_zlib as _isal
except ImportError:  # pragma: no cover - isal has wheels for every platform we run on
    _isal = None
try:  # zlib's maintained fork; the standard library's zlib where it is missing
    from zlib_ng import zlib_ng as _zng
except ImportError:  # pragma: no cover
    _zng = zlib

#: the WARC 1.1 revisit profiles (section 6.7): a 304 that confirmed the last capture, and a
#: 2xx whose payload has the last capture's digest
SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL_PAYLOAD_DIGEST = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
PROFILES = (SERVER_NOT_MODIFIED, IDENTICAL_PAYLOAD_DIGEST)
_CONTROL_ESCAPES = {c: f"%{c:02X}" for c in (*range(0x21), 0x7F)}

#: deflate libraries for the gzip members: name -> (default level, highest level)
COMPRESSORS: dict[str, tuple[int, int]] = {"isal": (1, 3), "zlib-ng": (6, 9)}


#: Capture's fields and their defaults (the runtime class is made from them: ``typing``, for
#: a ``NamedTuple`` class, would cost the child a tenth of its start-up)
_CAPTURE_FIELDS = ("url", "ip", "fetched_at", "request_bytes", "header_bytes", "payload",
                   "truncated", "refers_uri", "refers_date", "profile", "record_id",
                   "payload_digest", "refers_id", "request_body")  # fmt: skip
_CAPTURE_DEFAULTS = ("", "", 0.0, "", "", b"", "", b"")

if TYPE_CHECKING:

    class Capture(NamedTuple):
        """One fetch as it went over the wire, in the form the child builds records from (the
        fields of ``warc.ArchiveRecord``, its revisit flattened). The byte fields may be
        ``memoryview`` slices of a received message in the child."""

        url: str
        ip: str
        fetched_at: float
        request_bytes: bytes
        header_bytes: bytes
        payload: bytes | memoryview
        truncated: str = ""
        refers_uri: str = ""  #: for a revisit: the capture it repeats ("" otherwise)
        refers_date: float = 0.0
        profile: str = ""  #: a revisit's WARC-Profile (``PROFILES``); "" for a response record
        record_id: str = ""  #: WARC-Record-ID of the response or revisit record ("" : a new one)
        #: SHA-1 of the payload (20 bytes; b"" : computed here). A revisit's is the repeated
        #: capture's, written as its WARC-Payload-Digest (none for a 304 without one)
        payload_digest: bytes | memoryview = b""
        refers_id: str = ""  #: for a revisit: that capture's WARC-Record-ID ("" : unknown)
        #: the request's body as sent (a form's POST), the request record's payload
        request_body: bytes | memoryview = b""

else:
    Capture = collections.namedtuple("Capture", _CAPTURE_FIELDS, defaults=_CAPTURE_DEFAULTS)


# --------------------------------------------------------------------------- the wire

#: per capture: fetched_at, refers_date, then the lengths of url, ip, request, header,
#: payload, truncated, refers_uri, profile, record_id, payload_digest, refers_id,
#: request_body; the fields follow in that order
_WIRE = struct.Struct("<dd12I")


def encode_capture(c: Capture, out: list[bytes | memoryview]) -> int:
    """Append ``c``'s wire form to ``out`` (parts to join); returns its size in bytes."""
    url, ip = c.url.encode("utf-8", "surrogatepass"), c.ip.encode()
    truncated, refers = c.truncated.encode(), c.refers_uri.encode("utf-8", "surrogatepass")
    profile, rid, refers_id = c.profile.encode(), c.record_id.encode(), c.refers_id.encode()
    parts = (url, ip, c.request_bytes, c.header_bytes, c.payload, truncated, refers, profile,
             rid, c.payload_digest, refers_id, c.request_body)  # fmt: skip
    lengths = [len(part) for part in parts]
    out += (_WIRE.pack(c.fetched_at, c.refers_date, *lengths), *parts)
    return _WIRE.size + sum(lengths)


def decode_captures(buf: bytes | bytearray, start: int = 0) -> Iterator[Capture]:
    """The captures encoded back to back in ``buf[start:]``. The payloads (and digests) are
    ``memoryview`` slices of ``buf``, not copies; the header blocks are bytes."""
    size, unpack, end = _WIRE.size, _WIRE.unpack_from, len(buf)
    view = memoryview(buf)
    at = start
    while at < end:
        fetched_at, refers_date, *lengths = unpack(buf, at)
        at += size
        fields = []
        for n in lengths:
            fields.append(view[at : at + n])
            at += n
        (url, ip, request, head, payload, truncated, refers, profile, rid, digest, refers_id,
         request_body) = fields  # fmt: skip
        yield Capture(str(url, "utf-8", "surrogatepass"), str(ip, "utf-8"), fetched_at,
                      bytes(request), bytes(head), payload, str(truncated, "utf-8"),
                      str(refers, "utf-8", "surrogatepass"), refers_date, str(profile, "utf-8"),
                      str(rid, "utf-8"), digest, str(refers_id, "utf-8"),
                      request_body)  # fmt: skip


# --------------------------------------------------------------------------- records


def record_bytes(c: Capture) -> list[bytes]:
    """The uncompressed WARC records of a capture: its response (or revisit) record, then its
    request record when there is a request header block. Raises ValueError for an empty
    response header block or a revisit of an unknown profile."""
    if not c.header_bytes.strip():
        raise ValueError(f"empty response header block for {c.url}")
    head = without_transfer_encoding(last_header_block(c.header_bytes))
    uri = _header_safe(c.url)
    shared = f"WARC-Target-URI: {uri}\r\nWARC-Date: {warc_date(c.fetched_at)}\r\n"
    if c.ip:
        shared += f"WARC-IP-Address: {c.ip}\r\n"
    block = hashlib.sha1(head)
    payload: bytes | memoryview
    if c.profile:
        payload, fields = b"", _revisit_fields(c)
        fields += f"WARC-Block-Digest: {_sha1_label(block.digest())}\r\n"
    else:
        payload = c.payload
        block.update(payload)
        digest = c.payload_digest or hashlib.sha1(payload).digest()
        fields = f"WARC-Truncated: {c.truncated}\r\n" if c.truncated else ""
        fields += (
            f"WARC-Block-Digest: {_sha1_label(block.digest())}\r\n"
            f"WARC-Payload-Digest: {_sha1_label(digest)}\r\n"
        )
    rid = c.record_id or new_record_id()
    kind = "revisit" if c.profile else "response"
    out = [_record(kind, rid, shared + fields, "application/http; msgtype=response", head, payload)]
    if c.request_bytes.strip():
        request = last_header_block(c.request_bytes)
        body = bytes(c.request_body)
        digest_of_body = _sha1_label(hashlib.sha1(body).digest()) if body else _EMPTY_SHA1
        fields = (
            f"WARC-Concurrent-To: {rid}\r\n"
            f"WARC-Block-Digest: {_sha1_label(hashlib.sha1(request + body).digest())}\r\n"
            f"WARC-Payload-Digest: {digest_of_body}\r\n"
        )
        kind = "application/http; msgtype=request"
        out.append(_record("request", new_record_id(), shared + fields, kind, request, body))
    return out


def _revisit_fields(c: Capture) -> str:
    """A revisit record's own fields (WARC 1.1 section 6.7), block digest aside.

    Both profiles: WARC-Profile, WARC-Refers-To (the repeated capture's record ID, when known),
    WARC-Refers-To-Target-URI and WARC-Refers-To-Date (its target URI and date: what pywb
    looks the original up by), and WARC-Payload-Digest: the repeated capture's payload digest
    (6.7.2 makes it mandatory for identical-payload-digest; for server-not-modified, 6.7.3
    defines the payload as the original's and the field's own section allows it for a payload
    left off by a revisit profile: it must be the original's, never the digest of the 304's
    empty body, or replay tools looking the original up by digest find nothing). The
    block is the response's header block: a 304's is complete; a 2xx's is the response
    truncated after its headers, so identical-payload-digest also says ``WARC-Truncated:
    length`` (6.7.2: "shall be used for any identical-digest truncation")."""
    if c.profile not in PROFILES:
        raise ValueError(f"unknown revisit profile {c.profile!r} for {c.url}")
    identical = c.profile == IDENTICAL_PAYLOAD_DIGEST
    if identical and len(c.payload_digest) != 20:
        raise ValueError(f"identical-payload-digest revisit of {c.url} without its SHA-1")
    fields = f"WARC-Profile: {c.profile}\r\n"
    if c.refers_id:
        fields += f"WARC-Refers-To: {c.refers_id}\r\n"
    fields += (
        f"WARC-Refers-To-Target-URI: {_header_safe(c.refers_uri)}\r\n"
        f"WARC-Refers-To-Date: {warc_date(c.refers_date)}\r\n"
    )
    if identical:
        fields += "WARC-Truncated: length\r\n"
    if c.payload_digest:
        fields += f"WARC-Payload-Digest: {_sha1_label(c.payload_digest)}\r\n"
    return fields


def warcinfo_bytes(filename: str, info: Mapping[str, str], now: float) -> bytes:
    """The uncompressed warcinfo record that opens file ``filename`` (fields with a value)."""
    block = "".join(f"{k}: {v}\r\n" for k, v in info.items() if v).encode("utf-8")
    fields = (
        f"WARC-Filename: {filename}\r\nWARC-Date: {warc_date(now)}\r\n"
        f"WARC-Block-Digest: {_sha1_label(hashlib.sha1(block).digest())}\r\n"
    )
    return _record("warcinfo", new_record_id(), fields, "application/warc-fields", block, b"")


def _record(
    kind: str, rid: str, fields: str, content_type: str, head: bytes,
    payload: bytes | memoryview,
) -> bytes:
    """One record: WARC/1.1, type and ID first (then ``fields``), Content-Type and
    Content-Length last, as warcio orders them; the block, then the blank lines."""
    header = (
        f"WARC/1.1\r\nWARC-Type: {kind}\r\nWARC-Record-ID: {rid}\r\n{fields}"
        f"Content-Type: {content_type}\r\nContent-Length: {len(head) + len(payload)}\r\n\r\n"
    )
    return b"".join((header.encode("utf-8"), head, payload, b"\r\n\r\n"))


def new_record_id() -> str:
    """A fresh ``<urn:uuid:...>`` (version 4, random), as ``uuid.uuid4()`` makes them at a
    fifth of its cost: 122 random bits from a generator seeded from ``os.urandom`` in each
    process, and again in a forked child (record IDs must be unique, not secret)."""
    n = (_RANDOM.getrandbits(128) & _UUID_CLEAR) | _UUID_SET
    h = f"{n:032x}"
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}>"


_RANDOM = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _RANDOM.seed(os.urandom(32)))
_UUID_CLEAR = ~((0xF << 76) | (0x3 << 62))  #: the version and variant bits
_UUID_SET = (4 << 76) | (0x2 << 62)  #: version 4, RFC 4122 variant


def _sha1_label(digest: bytes | memoryview) -> str:
    """A SHA-1 digest as WARC writes it (``sha1:`` and base32, as warcio's ``Digester``).

    160 bits are exactly 32 base32 digits, 16 pairs of them: looked up per 10 bits, about 8x
    faster than ``base64.b32encode`` (pure Python before 3.13); a test compares the two.
    """
    n = int.from_bytes(digest, "big")
    pairs = _B32_PAIRS
    return "sha1:" + "".join([pairs[(n >> shift) & 0x3FF] for shift in _B32_SHIFTS])


_B32_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_PAIRS = [a + b for a in _B32_ALPHABET for b in _B32_ALPHABET]
_B32_SHIFTS = range(150, -1, -10)
_EMPTY_SHA1 = _sha1_label(hashlib.sha1(b"").digest())


def gzip_member(data: bytes | memoryview, level: int, compressor: str = "isal") -> bytes:
    """``data`` as one complete gzip member (one record per member, as WARC asks).

    Standard gzip that every reader takes, from either library:

    * isal (Intel ISA-L's igzip), levels 1 to 3: at level 1 about 5x less CPU than zlib-ng at
      level 6, files about 8% larger (bench/warc_writer.py: 0.11 against 0.69 ms per page,
      ratio 0.284 against 0.264 on the benchmark's pages; 0.060 against 0.303, 0.295 against
      0.272 on real HTML); at level 1 a record under ``SMALL_RECORD`` bytes gets fixed
      Huffman codes (a request record: a third of the CPU, 16% larger);
    * zlib-ng, zlib's maintained fork with SIMD code paths: at the same level about 40% less
      CPU than zlib for the same size on HTML.

    Without the isal package, "isal" falls back to the standard library's zlib at level 1,
    and without zlib-ng, "zlib-ng" is the standard library's zlib.
    """
    if compressor == "isal":
        if _isal is not None:
            if level == 1 and len(data) < SMALL_RECORD:  # fixed codes: no table to build
                fixed = _isal.compressobj(0, _isal.DEFLATED, _GZIP_WBITS, 8, _isal.Z_FIXED)
                return fixed.compress(data) + fixed.flush()  # type: ignore[no-any-return]
            return _isal.compress(data, level, _GZIP_WBITS)  # type: ignore[no-any-return]
        return zlib.compress(data, 1, _GZIP_WBITS)  # pragma: no cover - the fallback
    return _zng.compress(data, level, _GZIP_WBITS)  # type: ignore[no-any-return]


_GZIP_WBITS = 16 + zlib.MAX_WBITS  #: deflate with a gzip header and trailer
#: records shorter than this (requests, revisits, warcinfo: a few hundred bytes) are deflated
#: with fixed Huffman codes at isal's level 1: building a record's own code tables is most of
#: the CPU of such a record (a 630-byte request: 13 us, 460 bytes; fixed codes: 4 us, 534)
SMALL_RECORD = 2048


def warc_file_name(prefix: str, now: datetime, serial: int, pid: int) -> str:
    """``{prefix}-{UTC YYYYmmddHHMMSSffffff}-{serial:05d}-{pid}.warc.gz``."""
    return f"{prefix}-{now.astimezone(UTC):%Y%m%d%H%M%S%f}-{serial:05d}-{pid}.warc.gz"


def warc_date(epoch_s: float) -> str:
    """WARC 1.1 date with microseconds, e.g. ``2024-05-01T12:00:00.123456Z``.

    The part up to the seconds is formatted once per second (``_second_text``), not per record.
    """
    frac, whole = math.modf(epoch_s)  # rounded as datetime.fromtimestamp rounds
    second, micro = int(whole), round(frac * 1_000_000)
    if micro >= 1_000_000:
        second, micro = second + 1, micro - 1_000_000
    elif micro < 0:
        second, micro = second - 1, micro + 1_000_000
    return f"{_second_text(second)}.{micro:06d}Z"


@functools.lru_cache(maxsize=4)
def _second_text(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def last_header_block(block: bytes) -> bytes:
    """The last non-empty header block in ``block``, ending with a blank line."""
    first = block.find(b"\n")
    if (  # the common case, answered without splitting: one CRLF block and its blank line
        first > 0
        and block[first - 1] == 0x0D
        and block.endswith(b"\r\n\r\n")
        and block.find(b"\n\r\n") == len(block) - 3
        and b"\n\n" not in block
        and b"\n\r\r" not in block
        and block[0] not in b"\r\n"
    ):
        return block
    return _last_header_block(block)


def _last_header_block(block: bytes) -> bytes:
    """``last_header_block`` line by line (a blank line: only CRs before its LF)."""
    current: list[bytes] = []
    last: list[bytes] = []
    for line in _lines(block):
        if line.strip(b"\r\n"):
            current.append(line)
        elif current:
            last, current = current, []
    last = current or last
    newline = b"\r\n" if not last or last[0].endswith(b"\r\n") else b"\n"
    if last and not last[-1].endswith(b"\n"):
        last[-1] += newline
    return b"".join(last) + newline


def without_transfer_encoding(head: bytes) -> bytes:
    """``head`` without ``Transfer-Encoding`` header lines (and their folded continuations)."""
    if b"transfer-encoding" not in head.lower():
        return head
    out: list[bytes] = []
    dropping = False
    for line in _lines(head):
        if dropping and line[:1] in (b" ", b"\t"):
            continue
        name, colon, _ = line.partition(b":")
        dropping = bool(colon) and name.strip().lower() == b"transfer-encoding"
        if not dropping:
            out.append(line)
    return b"".join(out)


def _lines(data: bytes) -> list[bytes]:
    """``data`` split after each LF (a lone CR is not a line break in HTTP/1.1)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _header_safe(url: str) -> str:
    """``url`` with controls and spaces percent-encoded: a CR/LF must not end a WARC header."""
    return url.translate(_CONTROL_ESCAPES) if not url.isprintable() or " " in url else url


def fsync_directory(directory: str) -> None:
    """Make a new or renamed name in ``directory`` durable (``safefs.fsync_directory``, which
    this file cannot import: see the module docstring)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, parts: Sequence[bytes]) -> None:
    """Write ``parts`` to ``fd`` in as few ``writev`` calls as it takes."""
    parts = list(parts)
    while parts:
        done = os.writev(fd, parts[:_IOV_MAX])
        while parts and done >= len(parts[0]):
            done -= len(parts[0])
            del parts[0]
        if done:  # a short write, mid-part
            parts[0] = parts[0][done:]


_IOV_MAX = 512  #: parts per writev (Linux takes 1,024)


# --------------------------------------------------------------------------- files


class Files:
    """The WARC files themselves: gzip members appended, files rotated, fsynced and renamed.

    ``directory`` and the ``paths`` of finished files are strings (no ``pathlib`` in the
    child). Each append's members go to the file in one ``writev`` (the file is unbuffered:
    nothing of a record waits in this process once ``append`` returns)."""

    def __init__(
        self,
        directory: str,
        prefix: str,
        max_bytes: int,
        info: dict[str, str],
        level: int,
        compressor: str = "isal",
        durable: bool = True,
    ) -> None:
        self.directory = str(directory)
        self.durable = durable
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.info = info
        self.level = level
        self.compressor = compressor
        self.paths: list[str] = []
        self._serial = 0
        self._fd: int | None = None
        self._size = 0  #: bytes in the file being written
        self._name = ""
        self.appended = 0  #: records appended so far
        self.synced = 0  #: records durable so far (fdatasynced, or in a finished file)

    def settings(self) -> bytes:
        """What the child needs to make the same ``Files`` (``from_settings``), as bytes."""
        return _pack_strings([self.directory, self.prefix, str(self.max_bytes), str(self.level),
                              self.compressor, "1" if self.durable else "",
                              *(x for kv in self.info.items() for x in kv)])  # fmt: skip

    @classmethod
    def from_settings(cls, buf: bytes | bytearray, start: int = 0) -> Files:
        directory, prefix, max_bytes, level, compressor, durable, *info = _unpack_strings(
            buf, start
        )
        return cls(directory, prefix, int(max_bytes), dict(zip(info[::2], info[1::2], strict=True)),
                   int(level), compressor, bool(durable))  # fmt: skip

    @property
    def path(self) -> str:
        """The file being written."""
        return os.path.join(self.directory, f"{self._name}.open")

    def written(self) -> int:
        """Records durable: all of them, once flushed."""
        self.flush()
        return self.appended

    def durable_count(self) -> int:
        """Records as ``WarcWriter.written`` counts them, as of the last flush."""
        return self.synced if self.durable else self.appended

    def append(self, captures: Sequence[Capture]) -> None:
        """Append each capture's response (or revisit) and request records, each its own gzip
        member; rotate past ``max_bytes`` (checked after each capture: a file passes it by one
        capture at most). The members go out in one ``writev`` per file."""
        level, compressor = self.level, self.compressor
        pending: list[bytes] = []
        counted = 0
        for c in captures:
            members = [gzip_member(r, level, compressor) for r in record_bytes(c)]
            if self._fd is None:
                self._open()
            pending += members
            self._size += sum(map(len, members))
            counted += 1
            if self._size > self.max_bytes:
                self._write(pending, counted)
                pending, counted = [], 0
                self._finish()
        if pending:
            self._write(pending, counted)

    def _write(self, members: list[bytes], captures: int) -> None:
        assert self._fd is not None
        _write_all(self._fd, members)
        self.appended += captures

    def hand_over(self) -> None:
        """Hand the records to the OS (no fdatasync): done by every append already."""

    def flush(self) -> None:
        """Hand the records to the OS and, if ``durable``, fdatasync them."""
        if self._fd is not None and self.durable and self.synced < self.appended:
            os.fdatasync(self._fd)
        self.synced = self.appended

    def close(self) -> None:
        if self._fd is not None:
            self._finish()

    def _open(self) -> None:
        """Start the next file with its warcinfo record."""
        now = datetime.now(UTC)
        self._name = warc_file_name(self.prefix, now, self._serial, os.getpid())
        self._serial += 1
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        self._fd = os.open(self.path, flags, 0o666)
        self._size = 0
        if self.durable:  # the name must survive a power cut too
            fsync_directory(self.directory)
        info = gzip_member(warcinfo_bytes(self._name, self.info, now.timestamp()), self.level,
                           self.compressor)  # fmt: skip
        _write_all(self._fd, [info])
        self._size = len(info)

    def _finish(self) -> None:
        """fsync, close and rename the current file to its final name."""
        assert self._fd is not None
        fd, self._fd = self._fd, None
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        final = os.path.join(self.directory, self._name)
        os.replace(self.path, final)
        fsync_directory(self.directory)
        self.synced = self.appended
        self.paths.append(final)


def _pack_strings(items: Sequence[str]) -> bytes:
    """``items`` as bytes: each one's UTF-8 length (u32), then its bytes."""
    out: list[bytes] = []
    for item in items:
        data = item.encode("utf-8", "surrogateescape")
        out += (_U32.pack(len(data)), data)
    return b"".join(out)


def _unpack_strings(buf: bytes | bytearray, start: int = 0) -> list[str]:
    out, at, end = [], start, len(buf)
    while at < end:
        (n,) = _U32.unpack_from(buf, at)
        out.append(bytes(buf[at + 4 : at + 4 + n]).decode("utf-8", "surrogateescape"))
        at += 4 + n
    return out


_U32 = struct.Struct("<I")


# --------------------------------------------------------------------------- the child

#: what the engine's process sends the child, each message's first byte (the rest: the
#: settings for SETUP, captures for APPEND, nothing for the others)
SETUP, APPEND, FLUSH, CLOSE = b"S", b"A", b"F", b"C"
#: the child reports its progress at least every this many records while it has a backlog
REPORT_EVERY = 32
#: every message, both ways: its length (u64), then its bytes
FRAME = struct.Struct("<Q")
#: a report of the child's (``serve``): progress (0) or reply (1), records durable, the
#: errno of its error (-1: none), the error's length; then the error text and the files
#: finished since the last report (each path followed by a NUL)
REPORT = struct.Struct("<BQiI")
#: the interpreter's ``-c`` program of the child (run with ``-S``: no ``site``, whose import
#: hooks were a third of the child's start-up): this file imported alone (argv: the socket's
#: descriptor, the parent's PID, then the directories to import from: this file's first, then
#: isal's and zlib-ng's, joined by ``os.pathsep``; appended after the standard library's)
CHILD_CODE = (
    "import sys; sys.path += sys.argv[3].split(__import__('os').pathsep); "
    "import warcfile as fc_warcfile; fc_warcfile.child_entry()"
)


def child_path() -> str:
    """The ``os.pathsep``-joined directories the child imports from (``CHILD_CODE``)."""
    dirs = [os.path.dirname(os.path.abspath(__file__))]
    for lib in (_isal, _zng):
        name = getattr(lib, "__name__", "")
        if "." in name:  # isal.isal_zlib, zlib_ng.zlib_ng: the package's parent directory
            package = sys.modules[name.partition(".")[0]]
            dirs.append(os.path.dirname(os.path.dirname(os.path.abspath(str(package.__file__)))))
    return os.pathsep.join(dict.fromkeys(dirs))


def read_frame(fd: int) -> bytearray:
    """The next message on ``fd``; raises EOFError at its end."""
    (n,) = FRAME.unpack(_read_exact(fd, FRAME.size))
    return _read_exact(fd, n)


def _read_exact(fd: int, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if k == 0:
            raise EOFError("end of the WARC writer's socket")
        got += k
    return buf


def report_bytes(
    kind: int, written: int, error: str, code: int | None, finished: list[str]
) -> bytes:
    """A report of the child's, framed (``REPORT``)."""
    text = error.encode("utf-8", "backslashreplace")
    body = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in finished)
    head = REPORT.pack(kind, written, -1 if code is None else code, len(text))
    return FRAME.pack(REPORT.size + len(text) + len(body)) + head + text + body


def parse_report(buf: bytes | bytearray) -> tuple[bool, int, str, int | None, list[str]]:
    """(is a reply, records durable, error, its errno, files finished) of a report."""
    kind, written, code, n = REPORT.unpack_from(buf)
    text = bytes(buf[REPORT.size : REPORT.size + n]).decode("utf-8")
    paths = bytes(buf[REPORT.size + n :]).split(b"\0")[:-1]
    finished = [p.decode("utf-8", "surrogateescape") for p in paths]
    return kind == 1, written, text, None if code < 0 else code, finished


def _die_with_parent(parent: int | None) -> None:
    """``proctree.die_with_parent`` and ``ignore_terminal_signals``, which this file cannot
    import (see the module docstring): SIGKILL when the parent dies (Linux's
    ``PR_SET_PDEATHSIG``), the end now if it has died already; SIGINT, SIGTERM and SIGHUP
    ignored (already, by the child's ``sh``; in case it was started otherwise)."""
    import ctypes
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    try:  # noqa: SIM105 - contextlib would be one more import to start the child
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # pragma: no cover - not Linux: the socket's end tells
        pass
    if parent is not None and os.getppid() != parent:  # it died before the prctl
        os._exit(1)


_PR_SET_PDEATHSIG = 1


def child_entry() -> None:
    """The WARC writer process: ``python -S -c CHILD_CODE <fd> <parent pid> <path>``."""
    _die_with_parent(int(sys.argv[2]) if len(sys.argv) > 2 else None)
    fd = int(sys.argv[1])
    try:
        first = read_frame(fd)
    except EOFError:
        return
    if first[:1] != SETUP:
        return
    (sync_interval_s,) = _F64.unpack_from(first, 1)
    try:
        serve(fd, Files.from_settings(first, 1 + _F64.size), sync_interval_s)
    except (BrokenPipeError, ConnectionResetError):
        # the parent closed its end while a report was on its way (it stopped after a failed
        # write): nothing to say, the .open file is left to the next run's recovery
        return


_F64 = struct.Struct("<d")


def setup_message(files: Files, sync_interval_s: float) -> bytes:
    """The SETUP message: the sync interval, then ``files``'s settings."""
    return SETUP + _F64.pack(sync_interval_s) + files.settings()


def serve(fd: int, files: Files, sync_interval_s: float) -> None:
    """The child's loop: apply messages read from ``fd`` to ``files`` until CLOSE or the
    socket's end.

    Every message to the parent is a report (``REPORT``: records durable, error, its errno,
    files finished since the last report): a reply to each flush and close, and a progress
    report once records are durable. Without ``files.durable`` that is after an append once
    the backlog is worked off, or every ``REPORT_EVERY`` records while there is one (every
    append hands its records to the OS). With it, the records are handed to the OS as
    before, and fdatasynced (then reported) at most once per ``sync_interval_s`` and at the
    latest that long after they were appended; a flush or close syncs at once. That is at
    most one report per append; the parent reads them before each send, so neither side can
    be left blocked sending to the other. After the first error, appends are skipped, every
    message carries the error and reports 0 records written.
    """
    error = ""
    code: int | None = None
    reported = 0  # files.durable_count() as of the last report
    announced = 0  # files.paths already sent
    sync_due: float | None = None  # when the records handed to the OS must be synced
    last_sync = float("-inf")
    poller = select.poll()
    poller.register(fd, select.POLLIN)

    def ready(timeout_s: float) -> bool:
        return bool(poller.poll(max(0, math.ceil(timeout_s * 1000))))

    def send(kind: int) -> None:
        nonlocal announced, reported
        finished = files.paths[announced:]
        announced = len(files.paths)
        reported = files.durable_count()
        _write_all(fd, [report_bytes(kind, 0 if error else reported, error, code, finished)])

    def fail(exc: Exception) -> None:
        nonlocal error, code
        where = f": {files.path}" if isinstance(exc, OSError) and exc.filename is None else ""
        error = f"{type(exc).__name__}: {exc}{where}"
        code = exc.errno if isinstance(exc, OSError) else None

    while True:
        if sync_due is not None and not error:
            left = sync_due - time.monotonic()
            if left <= 0 or not ready(left):
                try:
                    files.flush()
                except Exception as exc:
                    fail(exc)
                sync_due, last_sync = None, time.monotonic()
                send(_PROGRESS)
                continue
        try:
            message = read_frame(fd)
        except EOFError:  # the parent is gone: leave the .open file to its recovery
            return
        command = message[:1]
        if error:  # skip the work; answer commands, report nothing more
            if command != APPEND:
                send(_REPLY)
            if command == CLOSE:
                return
            continue
        try:
            if command == APPEND:
                files.append(list(decode_captures(message, 1)))
                del message  # the payloads' buffer, once appended
                due = files.appended - reported >= REPORT_EVERY or not ready(0)
                if not files.durable:
                    if due and files.appended > reported:
                        files.flush()
                        send(_PROGRESS)
                elif files.durable_count() > reported:  # a file finished: synced
                    send(_PROGRESS)
                elif due and sync_due is None and files.appended > reported:
                    files.hand_over()
                    sync_due = max(time.monotonic(), last_sync + sync_interval_s)
            elif command == FLUSH:
                files.flush()
                sync_due, last_sync = None, time.monotonic()
            elif command == CLOSE:
                files.close()
        except Exception as exc:  # reported to the parent, which raises it
            fail(exc)
            if command == APPEND:
                send(_PROGRESS)
        if command != APPEND:
            send(_REPLY)
        if command == CLOSE:
            return


_PROGRESS, _REPLY = 0, 1
