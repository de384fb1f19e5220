"""``complete_gzip_prefix`` against a plain reference: the longest prefix of whole gzip members.

The files are built member by member, so the right answer is known twice over: the member
boundaries we wrote, and a reference decoder that inflates each member whole with zlib (fine in
a test, where files are a few MiB; the function under test must never hold a member in memory).
"""

from __future__ import annotations

import gzip
import random
import tracemalloc
import zlib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zlib_ng import zlib_ng

from frontier_crawl.output.recover import complete_gzip_prefix, scan_gzip_tail

#: each example writes and scans up to ~10 MiB (compressed, plus as much again decompressed):
#: 40 examples keep the property test to a few seconds; no deadline, since an example's time
#: depends mostly on its (random) size
EXAMPLES = 40
MIB = 1 << 20


def reference_prefix(data: bytes) -> int:
    """Decode member by member, each member whole, with zlib: the end of the last whole one."""
    pos = good = 0
    while pos < len(data):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            d.decompress(data[pos:])
        except zlib.error:
            break
        if not d.eof:
            break
        pos = len(data) - len(d.unused_data)
        good = pos
    return good


def member(rnd: random.Random, size: int, incompressible: bool, level: int) -> bytes:
    """One gzip member of ``size`` bytes decompressed: random bytes (stored blocks make the
    compressed member larger than its data) or repetitive text (compresses well)."""
    if incompressible:
        data = rnd.randbytes(size)
    else:
        words = [rnd.randbytes(rnd.randint(1, 8)).hex().encode() for _ in range(64)]
        # choices, not a loop of choice: the same text, drawn 4x faster (most of the test's time)
        data = b" ".join(rnd.choices(words, k=size // 5 + 1))[:size]
    c = zlib_ng.compressobj(level, zlib_ng.DEFLATED, 16 + zlib_ng.MAX_WBITS)
    return c.compress(data) + c.flush()


sizes = st.one_of(
    st.integers(1, 512),  # tiny records
    st.integers(60_000, 140_000),  # either side of the 64 KiB the old loop stumbled on
    st.integers(140_000, 3 * MIB),  # large pages
)
members = st.lists(
    st.tuples(sizes, st.booleans(), st.sampled_from([0, 1, 6])), min_size=1, max_size=8
).filter(lambda ms: sum(m[0] for m in ms) <= 6 * MIB)
#: where the file is cut: not at all, anywhere, at a member boundary, inside a member's 10-byte
#: gzip header, inside its 8-byte trailer (CRC32, ISIZE)
cut_kinds = st.sampled_from(["none", "random", "boundary", "header", "trailer"])


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # tmp_path: one file, rewritten
)
@given(members, cut_kinds, st.integers(0, 2**32), st.binary(max_size=64))
def test_prefix_matches_the_reference(
    tmp_path: Path,
    spec: list[tuple[int, bool, int]],
    cut_kind: str,
    seed: int,
    garbage: bytes,
) -> None:
    rnd = random.Random(seed)
    parts = [member(rnd, size, incompressible, level) for size, incompressible, level in spec]
    ends = [sum(len(p) for p in parts[: i + 1]) for i in range(len(parts))]
    data = b"".join(parts)
    starts = [0, *ends[:-1]]
    i = rnd.randrange(len(parts))
    cut = {
        "none": len(data),
        "random": rnd.randint(0, len(data)),
        "boundary": ends[i],
        "header": starts[i] + rnd.randint(1, 9),
        "trailer": ends[i] - rnd.randint(1, 7),
    }[cut_kind]
    data = data[:cut]
    if cut_kind == "boundary" and garbage[:2] != b"\x1f\x8b":
        data += garbage  # a complete member followed by bytes that are no gzip member
    path = tmp_path / "x.warc.gz.open"
    path.write_bytes(data)
    expected = max((e for e in [0, *ends] if e <= cut), default=0)
    assert reference_prefix(data) == expected
    assert complete_gzip_prefix(path) == expected
    # the tail scan finds the same end from a tail of any length (one too short is lengthened)
    tail = rnd.choice([1, 100, 10_000, MIB])
    assert scan_gzip_tail(path, tail)[0] == expected, tail


def test_members_over_64_kib(tmp_path: Path) -> None:
    """The case of the issue: three members of 70,000 bytes gave a negative length."""
    rnd = random.Random(9)
    path = tmp_path / "x.warc.gz.open"
    for size in (60_000, 70_000):
        data = b"".join(gzip.compress(rnd.randbytes(size)) for _ in range(3))
        path.write_bytes(data)
        assert complete_gzip_prefix(path) == len(data)
        path.write_bytes(data[:-3])
        assert complete_gzip_prefix(path) == reference_prefix(data[:-3]) > 0


def test_memory_stays_bounded_for_a_huge_member(tmp_path: Path) -> None:
    """A 64 MiB member (of zeros: 64 KiB compressed) is checked within a few MiB."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(MIB)
    path = tmp_path / "x.warc.gz.open"
    with path.open("wb") as fh:
        for _ in range(64):
            fh.write(c.compress(block))
        fh.write(c.flush())
    size = path.stat().st_size
    tracemalloc.start()
    try:
        assert complete_gzip_prefix(path) == size
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB, f"peak {peak / MIB:.1f} MiB"
