"""WARC revisit records (both WARC 1.1 profiles) and chosen record IDs, read back with the
libraries' own readers: warcio's ArchiveIterator (digests checked) and ``warcio check``, and
cdxj-indexer's CDXJ index resolved the way pywb's replay resolves a revisit.

pywb itself is not a dev dependency: it does not install beside this project from the
registry (``pip install -e '.[dev]' pywb==V`` on Python 3.11: pywb 2.8.4 to 2.10.0 pin
``redis==2.10.6``, the project needs ``redis>=5``; 2.8.0 pins ``greenlet<3``, playwright needs
``greenlet>=3.1.1``; 2.7.4 pins ``gevent==21.12.0``, which has no wheel for 3.11 and whose
source build fails, a Cython CompileError). The resolution below follows pywb's
``ResolvingLoader._load_different_url_payload`` and ``load_cdx_for_dupe``
(pywb/warcserver/resource/resolvingloader.py): the revisit's own record gives the HTTP
headers; the payload comes from the index entry of ``WARC-Refers-To-Target-URI`` closest to
``WARC-Refers-To-Date``, filtered to the revisit's digest and to non-revisits.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
import surt
from cdxj_indexer.main import CDXJIndexer
from hypothesis import given
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.cli import main as warcio_main
from warcio.timeutils import iso_date_to_timestamp

import frontier_crawl.output as output
from frontier_crawl.output import (
    IDENTICAL_PAYLOAD_DIGEST,
    SERVER_NOT_MODIFIED,
    ArchiveRecord,
    Revisit,
    WarcWriter,
    new_record_id,
    warcfile,
)
from frontier_crawl.output.warc import warc_date

T0 = 1_714_564_800.25
URL = "http://h.test/page"
BODY = b"<html><body>" + b"the same page, visit after visit " * 300 + b"</body></html>"
HEAD_200 = b'HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nETag: "v1"\r\n\r\n'
HEAD_304 = b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n'
REQUEST = b"GET /page HTTP/1.1\r\nHost: h.test\r\n\r\n"


def capture(at: float, head: bytes, payload: bytes, **kw: Any) -> ArchiveRecord:
    return ArchiveRecord(URL, "192.0.2.9", at, REQUEST, head, payload, **kw)


def write_visits(directory: Path, *, background: bool = True) -> dict[str, Any]:
    """A first capture, a 304 revisit and an identical 200 revisit of it, and a changed page
    (a full response): the engine's records of four visits, record IDs chosen up front."""
    digest = hashlib.sha1(BODY).digest()
    first = new_record_id()
    ids = {"first": first, "not_modified": new_record_id(), "identical": new_record_id(),
           "changed": new_record_id()}  # fmt: skip
    with WarcWriter(directory, "crawl", 1 << 20, {}, background=background) as writer:
        writer.write(capture(T0, HEAD_200, BODY, record_id=first, payload_digest=digest))
        writer.write(capture(
            T0 + 60, HEAD_304, b"", record_id=ids["not_modified"],
            revisit_of=Revisit(URL, T0, first, SERVER_NOT_MODIFIED, digest),
        ))  # fmt: skip
        writer.write(capture(
            T0 + 120, HEAD_200, BODY, record_id=ids["identical"], payload_digest=digest,
            revisit_of=Revisit(URL, T0, first, IDENTICAL_PAYLOAD_DIGEST, digest),
        ))  # fmt: skip
        writer.write(capture(T0 + 180, HEAD_200, BODY + b"<!-- new -->",
                             record_id=ids["changed"]))  # fmt: skip
    (path,) = writer.paths
    return {"path": path, "ids": ids, "digest": digest}


def records(path: Path) -> list[tuple[Any, bytes, bytes]]:
    """(record, its block as stored, decoded content) of every record but warcinfo and requests,
    with
    warcio checking every digest it checks (not a revisit's: see ``revisit_block_digest``)."""
    out = []
    data = path.read_bytes()
    with path.open("rb") as f:
        it = ArchiveIterator(f, check_digests="raise")
        for rec in it:
            if rec.rec_type in ("warcinfo", "request"):
                continue
            content = rec.content_stream().read()
            it.read_to_end(rec)
            start, length = it.get_record_offset(), it.get_record_length()
            member = gzip.decompress(data[start : start + length])  # the record alone
            block = member.split(b"\r\n\r\n", 1)[1][: int(rec.rec_headers["Content-Length"])]
            out.append((rec, block, content))
    return out


def label(digest: bytes) -> str:
    return warcfile._sha1_label(digest)


def test_revisit_records_follow_warc_1_1(tmp_path: Path) -> None:
    """6.7.3: server-not-modified, the 304's block, WARC-Refers-To and the original's
    WARC-Payload-Digest; 6.7.2: identical-payload-digest, the 200's header block and no
    payload, WARC-Truncated: length, WARC-Payload-Digest equal to the original's; both name
    the original by WARC-Refers-To, -Target-URI and -Date. Chosen record IDs are used."""
    w = write_visits(tmp_path)
    ids, digest = w["ids"], w["digest"]
    got = records(w["path"])
    assert [r.rec_type for r, _, _ in got] == ["response", "revisit", "revisit", "response"]
    (first, _, body), (snm, snm_head, snm_body), (same, same_head, same_body), changed = got
    assert [r.rec_headers.get_header("WARC-Record-ID") for r, _, _ in got] == list(ids.values())
    assert body == BODY
    assert first.rec_headers.get_header("WARC-Payload-Digest") == label(digest)
    for rec, head, block, profile, status in (
        (snm, snm_head, snm_body, SERVER_NOT_MODIFIED, "304"),
        (same, same_head, same_body, IDENTICAL_PAYLOAD_DIGEST, "200"),
    ):
        h = rec.rec_headers
        assert h.get_header("WARC-Profile") == profile
        assert h.get_header("WARC-Refers-To") == ids["first"]
        assert h.get_header("WARC-Refers-To-Target-URI") == URL
        assert h.get_header("WARC-Refers-To-Date") == warc_date(T0)
        assert h.get_header("WARC-Payload-Digest") == label(digest)  # the original's
        assert rec.http_headers.get_statuscode() == status
        assert block == b""  # no payload
        # the block is the header block alone, and its digest (which warcio does not check
        # on revisits) is right
        assert int(h.get_header("Content-Length")) == len(head)
        assert h.get_header("WARC-Block-Digest") == label(hashlib.sha1(head).digest())
    assert same_head == HEAD_200 and snm_head == HEAD_304
    assert same.rec_headers.get_header("WARC-Truncated") == "length"
    assert snm.rec_headers.get_header("WARC-Truncated") is None  # a 304 is complete
    new = hashlib.sha1(BODY + b"<!-- new -->").digest()
    assert changed[0].rec_headers.get_header("WARC-Payload-Digest") == label(new)


def test_warcio_check_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``warcio check -v``: every digest it checks passes (exit 0), revisits reported as not
    checked, and a payload digest given by the caller is what the file says (a wrong one is
    caught: the writer does not compute it again)."""
    w = write_visits(tmp_path / "good")
    with pytest.raises(SystemExit) as done:
        warcio_main(["check", "-v", str(w["path"])])
    text = capsys.readouterr().out
    assert done.value.code == 0, text
    assert text.count("digest pass") == 1 + 2 + 4  # warcinfo, 2 responses, 4 requests
    assert text.count("digest present but not checked (revisit)") == 2

    with WarcWriter(tmp_path / "bad", "crawl", 1 << 20, {}) as writer:
        writer.write(capture(T0, HEAD_200, BODY, payload_digest=hashlib.sha1(b"other").digest()))
    with pytest.raises(SystemExit) as done:
        warcio_main(["check", str(writer.paths[0])])
    assert done.value.code == 1
    assert "payload digest failed" in capsys.readouterr().out


def test_inline_writer_writes_the_same_records(tmp_path: Path) -> None:
    """background=False (no wire) gives the same records as the child process."""
    w = write_visits(tmp_path, background=False)
    assert [r.rec_type for r, _, _ in records(w["path"])] == [
        "response", "revisit", "revisit", "response"
    ]  # fmt: skip


def index(path: Path, tmp_path: Path) -> list[tuple[str, str, dict[str, str]]]:
    """cdxj-indexer's index of ``path``: (urlkey, timestamp, fields) per line."""
    out = tmp_path / "index.cdxj"
    CDXJIndexer(output=str(out), inputs=[str(path)]).process_all()
    lines = []
    for line in out.read_text().splitlines():
        key, ts, fields = line.split(" ", 2)
        lines.append((key, ts, json.loads(fields)))
    return lines


def load(path: Path, entry: dict[str, str]) -> Any:
    """The record an index entry points at (its offset and length), read alone."""
    with path.open("rb") as f:
        f.seek(int(entry["offset"]))
        member = io.BytesIO(f.read(int(entry["length"])))
    rec = next(iter(ArchiveIterator(member, check_digests="raise")))
    rec.payload = rec.content_stream().read()
    return rec


def resolve(path: Path, lines: list[tuple[str, str, dict[str, str]]], entry: dict[str, str]
            ) -> tuple[Any, Any]:  # fmt: skip
    """pywb's replay of an index entry: (the record giving the HTTP headers, the record
    giving the payload). A revisit's original is the non-revisit entry of its
    WARC-Refers-To-Target-URI with the revisit's digest, closest to its WARC-Refers-To-Date."""
    headers = load(path, entry)
    if entry.get("mime") != "warc/revisit":
        return headers, headers
    h = headers.rec_headers
    target = h.get_header("WARC-Refers-To-Target-URI")
    assert target, "pywb: 'Original for revisit record could not be loaded'"
    when = int(iso_date_to_timestamp(h.get_header("WARC-Refers-To-Date")))
    key = surt.surt(target)  # cdxj-indexer's urlkey
    candidates = [
        (abs(int(ts) - when), fields)
        for k, ts, fields in lines
        if k == key and fields.get("mime") != "warc/revisit"
        and fields.get("digest") == entry.get("digest")
    ]  # fmt: skip
    assert candidates, "no original with the revisit's digest"
    return headers, load(path, min(candidates, key=lambda c: c[0])[1])


def test_revisits_resolve_to_the_original_through_the_index(tmp_path: Path) -> None:
    """Indexed by cdxj-indexer (pywb's format), each revisit resolves, pywb's way, to the
    first capture: the 200 revisit replays as its own 200 headers with the original's
    payload; the 304 revisit finds the same original (pywb itself replays a 3xx revisit's
    headers alone, so its 304 is served as a 304). The original found is the record the
    revisit's WARC-Refers-To names."""
    w = write_visits(tmp_path)
    lines = index(w["path"], tmp_path)
    by_id = {}
    for _, ts, fields in lines:
        rec = load(w["path"], fields)
        by_id[rec.rec_headers.get_header("WARC-Record-ID")] = (ts, fields)
    ids = w["ids"]
    assert set(by_id) == set(ids.values())  # revisits and responses indexed, requests not
    revisit = by_id[ids["identical"]][1]
    assert revisit["mime"] == "warc/revisit" and revisit["status"] == "200"
    assert revisit["digest"] == label(w["digest"])
    assert by_id[ids["not_modified"]][1]["digest"] == label(w["digest"])  # not the empty one
    for name in ("identical", "not_modified"):
        head, original = resolve(w["path"], lines, by_id[ids[name]][1])
        assert original.rec_headers.get_header("WARC-Record-ID") == ids["first"]
        assert head.rec_headers.get_header("WARC-Refers-To") == ids["first"]
        assert original.payload == BODY
    head, _ = resolve(w["path"], lines, by_id[ids["identical"]][1])
    assert head.http_headers.get_statuscode() == "200"
    assert head.http_headers.get_header("Content-Type") == "text/html"
    changed, payload = resolve(w["path"], lines, by_id[ids["changed"]][1])
    assert changed is payload and payload.payload == BODY + b"<!-- new -->"


# --- the caller's mistakes, the wire ------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Revisit(URL, T0, profile="http://example.test/diff"),
        lambda: Revisit(URL, T0, payload_digest=b"short"),
        lambda: Revisit(URL, T0, record_id="urn:uuid:no-brackets"),
        lambda: Revisit(URL, T0, record_id="<urn:uuid:x>\r\nWARC-Type: response"),
    ],
)
def test_bad_revisits_are_refused(make: Any) -> None:
    with pytest.raises(ValueError):
        make()


def test_bad_records_are_refused_before_the_child(tmp_path: Path) -> None:
    """A malformed record ID, a digest that is no SHA-1, an identical-payload-digest revisit
    whose payload digest differs from the original's: ValueError at write(), nothing
    written. (Without a digest of its own, the revisit's is the original's: not checked
    against the payload, which would cost the SHA-1 the caller saved.)"""
    digest = hashlib.sha1(BODY).digest()
    other = Revisit(URL, T0, "", IDENTICAL_PAYLOAD_DIGEST, hashlib.sha1(b"x").digest())
    bad = [
        capture(T0, HEAD_200, BODY, record_id="<two words>"),
        capture(T0, HEAD_200, BODY, payload_digest=b"\x00" * 19),
        capture(T0, HEAD_200, BODY, payload_digest=digest, revisit_of=other),
    ]
    with WarcWriter(tmp_path, "crawl", 1 << 20, {}) as writer:
        for rec in bad:
            with pytest.raises(ValueError):
                writer.write(rec)
        assert writer.written() == 0
    assert list(tmp_path.iterdir()) == []  # not even a file begun


def test_identical_revisit_without_a_digest_computes_it(tmp_path: Path) -> None:
    """Without any digest given, an identical-payload-digest revisit's is the payload's (the
    payload itself is not archived)."""
    with WarcWriter(tmp_path, "crawl", 1 << 20, {}) as writer:
        writer.write(capture(T0, HEAD_200, BODY,
                             revisit_of=Revisit(URL, T0 - 9, profile=IDENTICAL_PAYLOAD_DIGEST)))
    ((rec, head, body),) = records(writer.paths[0])
    assert rec.rec_headers.get_header("WARC-Payload-Digest") == label(hashlib.sha1(BODY).digest())
    assert rec.rec_headers.get_header("WARC-Refers-To") is None  # no ID known
    assert head == HEAD_200 and body == b""


def test_new_record_id_is_exported_and_fresh() -> None:
    ids = {output.new_record_id() for _ in range(100)}
    assert len(ids) == 100 and all(i.startswith("<urn:uuid:") for i in ids)


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@given(
    st.builds(
        warcfile.Capture,
        _text, _text, st.floats(allow_nan=False), st.binary(max_size=40), st.binary(max_size=40),
        st.binary(max_size=40), _text, _text, st.floats(allow_nan=False),
        st.sampled_from(["", *warcfile.PROFILES]), _text,
        st.sampled_from([b"", b"\x01" * 20]), _text,
    ),
    st.integers(1, 3),
)  # fmt: skip
def test_wire_round_trip(c: warcfile.Capture, n: int) -> None:
    """Captures cross the pipe to the writer's child unchanged, many to a message."""
    parts: list[bytes | memoryview] = [warcfile.APPEND]
    size = sum(warcfile.encode_capture(c, parts) for _ in range(n))
    buf = b"".join(parts)
    assert len(buf) == size + 1
    assert list(warcfile.decode_captures(buf, 1)) == [c] * n


#: file names as the OS gives them: any bytes but NUL, decoded as os.fsdecode does (lone
#: surrogates only as surrogateescape makes them; a str such as "\ud800" names no file)
_PATHS = st.lists(st.integers(1, 255), max_size=30).map(bytes).map(os.fsdecode)


@given(
    st.booleans(), st.integers(0, 2**63), st.text(max_size=30), st.none() | st.integers(0, 200),
    st.lists(_PATHS, max_size=4),
)  # fmt: skip
def test_report_round_trip(
    reply: bool, written: int, error: str, code: int | None, finished: list[str]
) -> None:
    """The child's reports (durable count, its error and errno, files finished) reach the
    parent unchanged (surrogates in an error are escaped, not a crash)."""
    framed = warcfile.report_bytes(int(reply), written, error, code, finished)
    (n,) = warcfile.FRAME.unpack_from(framed)
    assert n == len(framed) - warcfile.FRAME.size
    got = warcfile.parse_report(framed[warcfile.FRAME.size :])
    text = error.encode("utf-8", "backslashreplace").decode("utf-8")
    assert got == (reply, written, text, code, finished)


@given(st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=4), st.booleans(),
       st.text(min_size=1, max_size=20))  # fmt: skip
def test_files_settings_round_trip(info: dict[str, str], durable: bool, prefix: str) -> None:
    """What the child is told to write (directory, prefix, sizes, warcinfo fields) arrives as
    it was set, NULs and non-ASCII included."""
    files = warcfile.Files("/tmp/d\u00e9j\u00e0", prefix, 123, info, 2, "zlib-ng", durable)
    message = warcfile.setup_message(files, 0.025)
    assert message[:1] == warcfile.SETUP
    got = warcfile.Files.from_settings(message, 9)
    assert (got.directory, got.prefix, got.max_bytes, got.info, got.level, got.compressor,
            got.durable) == (files.directory, prefix, 123, info, 2, "zlib-ng", durable)  # fmt: skip


@pytest.mark.parametrize("size", [0, 1, 600, warcfile.SMALL_RECORD - 1, warcfile.SMALL_RECORD,
                                  50_000])  # fmt: skip
@pytest.mark.parametrize(("compressor", "level"), [("isal", 1), ("isal", 3), ("zlib-ng", 6)])
def test_gzip_members_small_and_large(size: int, compressor: str, level: int) -> None:
    """Each record is one complete gzip member, whichever way it was deflated (a small record
    at isal's level 1 with fixed Huffman codes), and two members read back as one stream."""
    data = bytes(random_bytes(size))
    one = warcfile.gzip_member(data, level, compressor)
    assert gzip.decompress(one) == data
    both = one + warcfile.gzip_member(data[::-1], level, compressor)
    assert gzip.decompress(both) == data + data[::-1]


def random_bytes(n: int) -> bytes:
    """Text-like bytes (compressible, as headers are)."""
    words = [b"GET ", b"Host: ", b"example.org", b"\r\n", b"Accept: */*", b"x-", b"0123"]
    out = bytearray()
    i = 0
    while len(out) < n:
        out += words[(i * 7 + len(out)) % len(words)]
        i += 1
    return bytes(out[:n])


def test_write_all_survives_short_writes() -> None:
    """Members go out whole and in order through a descriptor that takes a little at a time
    (a pipe read by a thread while the writer's writev calls come back short)."""
    import threading

    parts = [bytes([i]) * (1000 * i + 1) for i in range(1, 120)]
    r, w = os.pipe()
    got = bytearray()

    def drain() -> None:
        while chunk := os.read(r, 4096):
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        warcfile._write_all(w, parts)
    finally:
        os.close(w)
        reader.join(timeout=30)
        os.close(r)
    assert bytes(got) == b"".join(parts)


def test_a_forked_child_draws_other_record_ids() -> None:
    """Record IDs come from a generator seeded per process: a forked child is reseeded, so
    it does not repeat its parent's IDs (before: the same sequence, duplicate IDs)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, new_record_id().encode())
        os._exit(0)
    os.close(write)
    try:
        child = os.read(read, 100).decode()
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert child.startswith("<urn:uuid:") and child != new_record_id()
