"""Operator commands without a crawl: validation, the queue and its wakeup fd, which config keys
a reload takes, and the frontier's blocks and host delays on real LMDB with a test clock."""

from __future__ import annotations

import select
import socket
import threading
from pathlib import Path

import msgspec
import pytest

from frontier_crawl.config import parse
from frontier_crawl.config.reload import FIXED, IDENTITY, key_group, reload_plan
from frontier_crawl.config.settings import SECTIONS
from frontier_crawl.control.commands import (
    BadCommand,
    Command,
    CommandQueue,
    Pending,
    normalise_host,
    parse_command,
)
from frontier_crawl.frontier import HostState
from tests.unit.test_frontier import A, B, make, urls


@pytest.mark.parametrize(
    ("raw", "host"),
    [("example.org", "example.org"), ("Example.ORG.", "example.org"),
     ("https://Example.org:8443/x?y", "example.org"), ("[::1]", "::1"), ("::1", "::1"),
     ("münchen.de", "xn--mnchen-3ya.de"), (" a.test ", "a.test"), ("[0:0::1]", "::1"),
     ("http://[::1]:8080/", "::1"), ("127.0.0.1", "127.0.0.1"), ("_x.a-b.test", "_x.a-b.test"),
     ("a" * 63 + ".test", "a" * 63 + ".test")],
)  # fmt: skip
def test_normalise_host(raw: str, host: str) -> None:
    assert normalise_host(raw) == host


@pytest.mark.parametrize(
    "raw",
    ["", "  ", None, 3, "a b", "a/b", "a.test:80", "http://", "x@y",
     # not host names, though the old check took them: a NUL, markup, empty or long labels,
     # a hyphen at a label's end, quotes, a zone index, a port after an IPv6 address
     "a\x00b.test", "<script>alert(1)</script>", "<b>x", "a..b", ".a", "-a.test", "a-.test",
     "a" * 64 + ".test", "a\"b", "a'b", "a;b", "a%2fb", "fe80::1%eth0", "[::1]:80", "a\x7fb",
     ("a." * 127) + "test"],
)
def test_normalise_host_refuses(raw: object) -> None:
    with pytest.raises(BadCommand):
        normalise_host(raw)


def test_parse_command() -> None:
    assert parse_command("pause", None) == Command("pause")
    assert parse_command("block", {"host": "A.test"}).host == "a.test"
    assert parse_command("host-delay", {"host": "a.test", "delay_s": 2}).delay_s == 2.0
    assert parse_command("host-delay", {"host": "a.test", "delay_s": None}).delay_s is None
    assert parse_command("concurrency", {"value": 8}).value == 8
    assert parse_command("seeds", {"urls": [" http://a.test/ ", ""]}).urls == ("http://a.test/",)
    for name, body in [("pause", [1]), ("host-delay", {"host": "a.test", "delay_s": -1}),
                       ("host-delay", {"host": "a.test", "delay_s": float("nan")}),
                       ("host-delay", {"host": "a.test", "delay_s": True}),
                       ("concurrency", {"value": 1.5}), ("concurrency", {"value": 10_001}),
                       ("seeds", {"urls": [1]}), ("seeds", {"urls": ["x" * 9000]}),
                       ("nothing", {})]:  # fmt: skip
        with pytest.raises(BadCommand):
            parse_command(name, body)


def test_queue_wakes_a_waiting_loop() -> None:
    """A post from another thread makes the fd readable (a loop in select/poll wakes); take
    drains it and returns the command; the answer reaches the poster."""
    queue = CommandQueue()
    assert select.select([queue.fileno], [], [], 0)[0] == []
    replies: list[dict[str, object]] = []
    poster = threading.Thread(target=lambda: replies.append(queue.call(Command("pause"), 10)))
    poster.start()
    assert select.select([queue.fileno], [], [], 5)[0] == [queue.fileno]
    (pending,) = queue.take()
    assert select.select([queue.fileno], [], [], 0)[0] == []
    assert pending.command == Command("pause")
    pending.answer({"result": "applied"})
    poster.join(5)
    assert replies == [{"result": "applied"}]
    late = queue.post(Command("resume"))
    queue.close()
    assert late.wait(1) == {"error": "the crawl has finished"}
    assert queue.post(Command("stop")).wait(0)["error"]  # type: ignore[index]


def test_idle_take_makes_no_system_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop takes every tick and almost every tick finds nothing: that costs no recv (a
    recv on the empty socketpair, raising BlockingIOError, was a few per cent of a crawl's
    CPU). After a command, one recv reads its wake byte, and the queue is idle again."""
    calls: list[int] = []
    real_recv = socket.socket.recv

    def counting_recv(self: socket.socket, *args: int) -> bytes:
        calls.append(1)
        return real_recv(self, *args)

    monkeypatch.setattr(socket.socket, "recv", counting_recv)
    queue = CommandQueue()
    for _ in range(1000):
        assert queue.take() == []
    assert calls == []
    queue.post(Command("pause"))
    queue.post(Command("resume"))
    assert [p.command.name for p in queue.take()] == ["pause", "resume"]
    assert len(calls) == 1
    assert select.select([queue.fileno], [], [], 0)[0] == []
    for _ in range(1000):
        assert queue.take() == []
    assert len(calls) == 1
    queue.close()


@pytest.mark.timeout(30)
def test_no_wake_byte_is_left_behind() -> None:
    """Posts from several threads racing the loop's takes: every command is taken once, and
    once all are, the wake fd is not readable (a byte left there would make the loop's poll
    return at once at every tick) and a take finds nothing."""
    queue = CommandQueue()
    per_thread, threads = 2000, 4
    taken: list[Pending] = []

    def poster() -> None:
        for _ in range(per_thread):
            queue.post(Command("pause"))

    posters = [threading.Thread(target=poster) for _ in range(threads)]
    for thread in posters:
        thread.start()
    while any(thread.is_alive() for thread in posters):
        taken.extend(queue.take())
    for thread in posters:
        thread.join()
    taken.extend(queue.take())
    assert len(taken) == per_thread * threads
    assert len({id(p) for p in taken}) == len(taken)
    assert select.select([queue.fileno], [], [], 0)[0] == []
    assert queue.take() == []
    queue.post(Command("stop"))
    assert select.select([queue.fileno], [], [], 0)[0] == [queue.fileno]
    assert [p.command.name for p in queue.take()] == ["stop"]
    assert select.select([queue.fileno], [], [], 0)[0] == []
    queue.close()


def test_every_key_has_a_reload_group() -> None:
    keys = {f"{s}.{f.encode_name}" for s, cls in SECTIONS.items()
            for f in msgspec.structs.fields(cls)} | {"extract"}  # fmt: skip
    assert keys >= IDENTITY | FIXED  # no stale names (TOML names: spider.class)
    assert key_group("spider.class") == key_group("extract") == "fixed"
    assert key_group("cluster.nodes") == "identity"
    assert key_group("politeness.min_delay_s") == "reloadable"
    assert key_group("workers.processes") == "identity"
    assert key_group("frontier.seen_capacity") == "reloadable"  # ignored: nothing to refuse
    assert key_group("control.listen") == "fixed"


def test_reload_plan() -> None:
    base = {"crawl": {"seeds": ["http://a.test/"]}}
    old = parse(base)
    new = parse({**base, "politeness": {"min_delay_s": 2.0}, "fetch": {"timeout_s": 5.0}})
    plan = reload_plan(old, new)
    assert plan.changed == ("politeness.min_delay_s", "fetch.timeout_s") and not plan.refused
    worse = parse({**base, "workers": {"processes": 3}, "output": {"warc": False},
                   "politeness": {"min_delay_s": 2.0}})  # fmt: skip
    plan = reload_plan(old, worse)
    assert plan.refused == ("output.warc", "workers.processes")
    assert "workers.processes: the crawl's identity" in plan.message
    assert "output.warc: fixed while the crawl runs" in plan.message
    assert reload_plan(old, parse({"crawl": {"seeds": ["http://b.test/"]}})).refused == (
        "crawl.seeds",
    )


def test_block_keeps_urls_until_unblocked(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=0.0)
    f.add([f"{A}/1", f"{A}/2", f"{B}/1"], depth=0, now=0.0)
    assert f.holds.block("a.test", 0.0) == 2
    assert urls(f.next_ready(0.0, 10)) == [f"{B}/1"]
    f.add([f"{A}/3"], depth=0, now=0.0)  # admitted, and held too
    assert f.view.host_state(A) is HostState.BLOCKED and f.holds.held_by_blocks == 3
    assert f.pending == 4 and f.next_wake() is None
    assert f.holds.unblock("a.test", 1.0) == 3
    assert urls(f.next_ready(1.0, 10)) == [f"{A}/1"]
    f.close()


def test_blocks_and_delays_persist(tmp_path: Path) -> None:
    f, _ = make(tmp_path, min_delay_s=0.0)
    f.add([f"{A}/1", f"{A}/2", f"{B}/1"], depth=0, now=0.0)
    with f.batch():
        f.holds.block("b.test", 0.0)
        f.holds.set_host_delay("a.test", 5.0, 0.0)
    f.close()
    f, _ = make(tmp_path, min_delay_s=0.0)
    assert f.holds.blocked_hosts == ["b.test"] and f.holds.host_delays == {"a.test": 5.0}
    (first,) = f.next_ready(10.0, 10)
    assert first.url == f"{A}/1"  # b.test is held
    f.finish(first, 10.5)
    assert f.next_ready(14.9, 10) == []  # 5 s from the start (one connection: from the end)
    assert urls(f.next_ready(15.6, 10)) == [f"{A}/2"]
    f.close()


def test_host_delay_applies_at_once(tmp_path: Path) -> None:
    """A delay set while the host waits moves its next request at once; cleared, the
    configured delay spaces the next ones again."""
    f, _ = make(tmp_path, min_delay_s=10.0)
    f.add([f"{A}/1", f"{A}/2", f"{A}/3"], depth=0, now=0.0)
    (t,) = f.next_ready(0.0, 10)
    f.finish(t, 0.1)
    assert f.next_ready(1.0, 10) == []  # 10 s
    f.holds.set_host_delay("a.test", 0.5, 1.0)
    assert urls(f.next_ready(1.0, 10)) == [f"{A}/2"]  # 0.1 + 0.5 is past
    f.holds.set_host_delay("a.test", None, 1.0)
    assert f.holds.host_delays == {}
    assert f.next_ready(10.9, 10) == []  # 10 s from the start of a/2 again
    assert urls(f.next_ready(11.0, 10)) == []  # a/2 is still in flight (one connection)
    f.close()


def test_reconfigure_applies_tunables_at_once(tmp_path: Path) -> None:
    """A reloaded min_delay_s moves a waiting host's next request now; a reloaded exclude
    applies to links from then on; a reload that leaves the policy alone moves nothing."""
    f, _ = make(tmp_path, min_delay_s=10.0)
    f.add([f"{A}/1", f"{A}/2", f"{A}/3"], depth=0, now=0.0)
    (t,) = f.next_ready(0.0, 10)
    f.finish(t, 0.1)
    raw = {"crawl": {"seeds": [f"{A}/"]}, "scope": {"allow_domains": ["a.test", "b.test"]},
           "politeness": {"min_delay_s": 10.0, "delay_factor": 0.0, "backoff_s": 0.0}}  # fmt: skip
    f.reconfigure(parse(raw), 1.0)  # the same policy: still 10 s
    assert f.next_ready(1.0, 10) == []
    raw["politeness"]["min_delay_s"] = 0.5
    raw["scope"]["exclude"] = [r"/x"]
    f.reconfigure(parse(raw), 1.0)
    assert urls(f.next_ready(1.0, 10)) == [f"{A}/2"]
    assert f.add([f"{A}/x", f"{B}/y"], depth=0, now=1.0) == 1
    f.close()
