"""The state lock and the processes' lifetimes (``frontier_crawl/proctree.py``), with real
processes: a holder in a subprocess, killed with -9, left unreaped, with a child holding on."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from frontier_crawl.proctree import LOCK_NAME, StateLock, StateLocked, alive, child_argv
from tests.waiting import wait_until

#: a process that takes the lock on argv[1], says so, then waits (optionally with a child that
#: inherits the lock's descriptor and outlives it by argv[2] seconds)
HOLDER = """
import subprocess, sys, time
from pathlib import Path
from frontier_crawl.proctree import StateLock
lock = StateLock.acquire(Path(sys.argv[1]))
if len(sys.argv) > 2:  # a child holding the lock (like a WARC writer), outliving us by argv[2]
    subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({sys.argv[2]})"],
                     pass_fds=(lock.fileno,))
print("locked", flush=True)
time.sleep(60)
"""


def state_of(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def hold(state: Path, *extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(state), *extra], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.timeout(30)
def test_a_second_owner_is_refused_naming_the_holder(tmp_path: Path) -> None:
    holder = hold(tmp_path / "state")
    try:
        t0 = time.monotonic()
        with pytest.raises(StateLocked) as refused:
            StateLock.acquire(tmp_path / "state")
        assert time.monotonic() - t0 < 2  # at once, not after a wait
        assert f"in use by process {holder.pid}" in str(refused.value)
        assert "kill -TERM" in str(refused.value)
        info = json.loads((tmp_path / "state" / LOCK_NAME).read_text())
        assert info["pid"] == holder.pid
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.timeout(30)
def test_the_lock_dies_with_its_holder_even_unreaped(tmp_path: Path) -> None:
    """kill -9, the holder left a zombie (not reaped): the lock is free at once."""
    holder = hold(tmp_path / "state")
    os.kill(holder.pid, signal.SIGKILL)
    wait_until("the holder a zombie", lambda: state_of(holder.pid) == "Z", 10)
    os.kill(holder.pid, 0)  # a zombie: kill(pid, 0) still succeeds
    assert not alive(holder.pid)
    lock = StateLock.acquire(tmp_path / "state", wait_s=5)
    lock.release()
    holder.wait()


@pytest.mark.timeout(30)
def test_a_dead_holders_children_are_waited_for(tmp_path: Path) -> None:
    """The holder killed, its child still holding the lock for 1.5 s more: the next owner
    waits for the child's end (and no longer), instead of refusing."""
    holder = hold(tmp_path / "state", "1.5")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    t0 = time.monotonic()
    lock = StateLock.acquire(tmp_path / "state", wait_s=20)
    waited = time.monotonic() - t0
    lock.release()
    assert 0.5 < waited < 15


@pytest.mark.timeout(30)
def test_children_left_holding_it_are_named_after_the_wait(tmp_path: Path) -> None:
    holder = hold(tmp_path / "state", "30")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with pytest.raises(StateLocked) as refused:
        StateLock.acquire(tmp_path / "state", wait_s=0.3)
    text = str(refused.value)
    assert f"left over from process {holder.pid}" in text
    named = re.search(r"still held by process\(es\) ([0-9, ]+), left over", text)
    assert named, text
    held = [int(p) for p in named.group(1).split(", ")]
    assert len(held) == 1 and alive(held[0])
    os.kill(held[0], signal.SIGKILL)


def test_a_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    state = tmp_path / "state"
    state.mkdir()
    (state / LOCK_NAME).symlink_to(outside)
    with pytest.raises(StateLocked, match="symbolic link"):
        StateLock.acquire(state)
    assert outside.read_text() == "precious"


def test_the_same_process_cannot_own_it_twice(tmp_path: Path) -> None:
    lock = StateLock.acquire(tmp_path / "state")
    try:
        with pytest.raises(StateLocked, match=f"in use by process {os.getpid()}"):
            StateLock.acquire(tmp_path / "state")
    finally:
        lock.release()
    StateLock.acquire(tmp_path / "state").release()  # free again once released


@pytest.mark.timeout(30)
def test_children_ignore_the_terminals_signals(tmp_path: Path) -> None:
    """A child started through child_argv survives SIGINT, SIGTERM and SIGHUP once it runs (its
    sh ignores them before it becomes the program: Python then never installs its
    KeyboardInterrupt handler); SIGKILL ends it."""
    marker = tmp_path / "ready"
    code = (
        "import pathlib, signal, time; "
        "assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN; "
        f"pathlib.Path({str(marker)!r}).touch(); time.sleep(60)"
    )
    child = subprocess.Popen(child_argv([sys.executable, "-c", code]))
    try:
        wait_until("the child started with the signals ignored", marker.exists, 20,
                   alive=child)  # fmt: skip
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            child.send_signal(sig)
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(0.3)
    finally:
        child.kill()
    assert child.wait(10) == -signal.SIGKILL


@pytest.mark.timeout(60)
def test_the_warc_writer_is_out_of_the_crawls_process_group(tmp_path: Path) -> None:
    """A terminal's Ctrl-C and timeout(1) signal the crawl's process group: the WARC writer is
    in a group of its own, so not even its start-up can be hit; it still dies with its parent."""
    from frontier_crawl.output.warc import WarcWriter

    writer = WarcWriter(tmp_path / "warc", "t", 1 << 20, {"software": "test"})
    try:
        pid = writer._sink._process.pid  # type: ignore[union-attr]
        assert os.getpgid(pid) != os.getpgid(0)
        writer.flush()  # it has started: an answer comes from its Python
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            os.kill(pid, sig)
        writer.flush()  # still there, still answering
    finally:
        writer.close()
