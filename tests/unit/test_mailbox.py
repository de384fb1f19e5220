"""Link batches between workers: the inbox environment, and a frontier ingesting from it.

Two frontiers of a two-worker crawl share nothing but the owner's ``state/inbox.lmdb``; these
tests drive delivery (from another process, as a peer delivers: py-lmdb opens an environment
once per process) and ingestion by hand, with real LMDB environments.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_crawl.config import CrawlSettings
from frontier_crawl.config.settings import CrawlSection, PolitenessSection
from frontier_crawl.frontier import Frontier, mailbox
from frontier_crawl.frontier.mailbox import (
    INBOX_ENV,
    Inbox,
    Link,
    decode_links,
    encode_batches,
    encode_links,
    owner_of,
)

RUN = b"run-0001"
MAP = 1 << 24

_DELIVER = """
import sys
from pathlib import Path
from frontier_crawl.frontier.mailbox import Mailbox, encode_links
path, run_id, *batches = sys.argv[1:]
mailbox = Mailbox({0: Path(path)}, MAP, run_id.encode())
for batch in batches:
    mailbox.send(0, encode_links([(url, 1, "http://a.test/", 0) for url in batch.split(",")]))
assert mailbox.sent == len(batches)
mailbox.close()
""".replace("MAP", str(MAP))


def deliver(inbox: Path, *batches: list[str], run_id: bytes = RUN) -> None:
    """Deliver link batches into ``inbox`` from another process, as a peer worker does."""
    args = [",".join(f"http://a.test{p}" for p in batch) for batch in batches]
    subprocess.run(
        [sys.executable, "-c", _DELIVER, str(inbox), run_id.decode(), *args],
        check=True,
        timeout=60,
    )


def links(*paths: str) -> list[Link]:
    return [(f"http://a.test{p}", 1, "http://a.test/", 0) for p in paths]


def open_owner(tmp_path: Path) -> Frontier:
    """Worker 0 of two, owning every host (its route says so)."""
    settings = CrawlSettings(
        crawl=CrawlSection(seeds=("http://a.test/",), output_dir=str(tmp_path)),
        politeness=PolitenessSection(obey_robots=False, min_delay_s=0.0),
    )
    return Frontier.from_settings(settings, tmp_path / "state", route=lambda _o: 0, worker=0)


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[Frontier]:
    f = open_owner(tmp_path)
    yield f
    f.close()


def test_inbox_take_ack_release(tmp_path: Path) -> None:
    path = tmp_path / INBOX_ENV
    inbox = Inbox(path, MAP)
    try:
        deliver(path, ["/0"], ["/1"], ["/2"])
        first = inbox.take(2)
        assert len(first) == 2 and all(key.startswith(RUN) for key, _ in first)
        (third,) = inbox.take(10)  # what was taken is not handed out again
        assert third not in first
        assert inbox.take(10) == []
        inbox.release()  # the admitting transaction aborted: all three come back
        assert len(inbox.take(10)) == 3
        assert inbox.pending() == 3
        inbox.ack()
        assert inbox.pending() == 0
        assert inbox.take(10) == []
    finally:
        inbox.close()


def test_batches_leave_the_inbox_only_after_the_commit(owner: Frontier, tmp_path: Path) -> None:
    path = tmp_path / "state" / INBOX_ENV
    deliver(path, ["/x", "/y"], ["/z"])
    inbox = owner._files.inbox
    assert inbox is not None
    with owner.batch():
        assert owner.mail.ingest_inbox(0.0, RUN) == (2, 2)
        assert inbox.pending() == 2  # not yet committed
        assert owner.mail.ingest_inbox(0.0, RUN) == (0, 0)  # and not taken twice
    assert inbox.pending() == 0
    assert owner.pending == 3
    # an earlier run's batch (a killed run delivered it) is ingested but not counted
    deliver(path, ["/old"], run_id=b"run-0000")
    assert owner.mail.ingest_inbox(0.0, RUN) == (1, 0)
    assert owner.pending == 4


def test_an_aborted_ingest_takes_the_batches_again(tmp_path: Path) -> None:
    """The transaction that admitted a batch fails: the batch stays in the inbox and is handed
    out again; nothing of it was committed (a restart, as after the engine's crash, finds the
    links only in the inbox and ingests them)."""
    deliver(tmp_path / "state" / INBOX_ENV, ["/x"])
    owner = open_owner(tmp_path)
    try:
        with pytest.raises(RuntimeError), owner.batch():
            assert owner.mail.ingest_inbox(0.0, RUN) == (1, 1)
            raise RuntimeError("the batch fails before its commit")
        inbox = owner._files.inbox
        assert inbox is not None and inbox.pending() == 1
        assert len(inbox.take(10)) == 1  # released: handed out again
    finally:
        owner.close()
    owner = open_owner(tmp_path)
    try:
        assert owner.pending == 0  # the admission was rolled back with the transaction
        assert owner.mail.ingest_inbox(0.0, RUN) == (1, 1)
        assert owner.pending == 1
        assert owner._files.inbox is not None and owner._files.inbox.pending() == 0
    finally:
        owner.close()


def test_reingesting_a_batch_admits_nothing_twice(owner: Frontier, tmp_path: Path) -> None:
    """A kill between the owner's commit and the inbox delete: the batch is read again after
    the restart, and the seen-set makes that harmless."""
    path = tmp_path / "state" / INBOX_ENV
    deliver(path, ["/x", "/y"])
    assert owner.mail.ingest_inbox(0.0, RUN) == (1, 1)
    deliver(path, ["/x", "/y"])  # the same links delivered again
    assert owner.mail.ingest_inbox(0.0, RUN) == (1, 1)
    assert owner.pending == 2


def test_admitted_batches_are_deleted_together(tmp_path: Path) -> None:
    """Each commit that admitted batches does not delete them in a transaction of its own
    (an fdatasync of the inbox each): the first delete is at once, the next ones wait up to
    ACK_EVERY_S and go in one transaction, or at close. Meanwhile they are not taken again."""
    path = tmp_path / "state" / INBOX_ENV
    deliver(path, ["/a"], ["/b"], ["/c"], ["/d"])
    owner = open_owner(tmp_path)
    try:
        inbox = owner._files.inbox
        assert inbox is not None
        txnid = inbox._env.info()["last_txnid"]
        for _ in range(4):  # one commit per batch, well within ACK_EVERY_S
            with owner.batch():
                assert owner.mail.ingest_inbox(0.0, RUN, limit=1) == (1, 1)
        assert inbox._env.info()["last_txnid"] - txnid == 1  # the first delete only
        assert inbox.pending() == 0 and owner.mail.ingest_inbox(0.0, RUN) == (0, 0)
        assert owner.pending == 4
    finally:
        owner.close()
    reopened = Inbox(path, MAP)
    try:
        assert reopened.pending() == 0 and reopened.take(10) == []  # deleted at close
    finally:
        reopened.close()


def test_owner_of_is_stable_and_spread() -> None:
    origins = [f"http://h{i}.test" for i in range(1000)]
    owners = [owner_of(o, 4) for o in origins]
    assert owners == [owner_of(o, 4) for o in origins]
    assert set(owners) == {0, 1, 2, 3}
    assert min(owners.count(w) for w in range(4)) > 150
    assert owner_of("http://x.test", 1) == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.text(min_size=1, max_size=300), st.integers(0, 30)), max_size=80),
    st.integers(16, 3000),
    st.integers(1, 9),
)
def test_encode_batches_keeps_every_link_under_the_caps(
    raw: list[tuple[str, int]], max_bytes: int, max_links: int
) -> None:
    """Every link once, in order; each batch at most ``max_bytes`` (a link larger than that:
    alone) and MAX_BATCH_LINKS links; one batch, encoded once, when they all fit."""
    links: list[Link] = [(u, d, None, 0, "", b"", 0) for u, d in raw]
    with mock.patch.object(mailbox, "MAX_BATCH_LINKS", max_links):
        batches = encode_batches(links, max_bytes)
    assert [link for b in batches for link in decode_links(b)] == [
        (u, d, None, 0, "", b"", 0) for u, d in raw
    ]
    for b in batches:
        n = len(decode_links(b))
        assert 1 <= n <= max_links
        assert len(b) <= max_bytes or n == 1
    whole = encode_links(links)
    if links and len(whole) <= max_bytes and len(links) <= max_links:
        assert batches == [whole]
