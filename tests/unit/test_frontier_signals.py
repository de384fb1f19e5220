"""The frontier's host counts for the status are kept by its transitions, not by a scan: after
any sequence of operations they must equal a count of every host's state."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from frontier_crawl.frontier import Failure, HostState, Ticket
from tests.unit.test_frontier import make

HOSTS = [f"h{i}.test" for i in range(6)]


def recount(f: object, hosts: list[str]) -> Counter[HostState]:
    counted: Counter[HostState] = Counter()
    for h in hosts:
        state = f.view.host_state(f"http://{h}")  # type: ignore[attr-defined]
        if state is not None:
            counted[state] += 1
    return counted


@pytest.mark.parametrize("seed", range(8))
def test_host_counts_follow_every_transition(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    f, _ = make(tmp_path, allow_domains=["test"], max_depth=50, min_delay_s=0.5, backoff_s=1.0,
                obey_robots=bool(seed % 2), connections_per_host=1 + seed % 2)  # fmt: skip
    now = 0.0
    out: list[Ticket] = []
    serial = 0
    visited: Counter[HostState] = Counter()
    held = 0
    try:
        for _step in range(300):
            now += rnd.choice((0.0, 0.1, 0.6, 2.0))
            op = rnd.random()
            with f.batch():
                if op < 0.3:
                    serial += 1
                    h = rnd.choice(HOSTS)
                    f.add([f"http://{h}/p{serial}"], depth=1, now=now)
                elif op < 0.55:
                    out += f.next_ready(now, rnd.randint(1, 4))
                elif op < 0.85 and out:
                    t = out.pop(rnd.randrange(len(out)))
                    if t.robots:
                        f.robots_done(t, now, rnd.choice((200, 404, 503, 0)), b"User-agent: *\n")
                    elif rnd.random() < 0.3 and t.attempt < 2:
                        f.retry(t, now, 1.0, failure=rnd.choice(list(Failure)),
                                hold_s=rnd.choice((0.0, 5.0)))  # fmt: skip
                    else:
                        f.finish(t, now, failure=rnd.choice(list(Failure)),
                                   hold_s=rnd.choice((0.0, 0.0, 30.0)))  # fmt: skip
                elif op < 0.92:
                    h = rnd.choice(HOSTS)
                    (f.holds.block if rnd.random() < 0.5 else f.holds.unblock)(h, now)
                else:
                    f.holds.set_host_delay(rnd.choice(HOSTS), rnd.choice((None, 0.1, 3.0)), now)
            sig = f.view.host_signals(now)
            counts = recount(f, HOSTS)
            visited.update(counts)
            held += sig.backoff
            assert sig.ready == counts[HostState.READY]
            assert sig.blocked == counts[HostState.BLOCKED]
            assert sig.retired == counts[HostState.RETIRED]
            assert sig.waiting + sig.backoff == counts[HostState.SNOOZED]
            assert sig.total == sum(
                counts[s] for s in (HostState.READY, HostState.SNOOZED, HostState.BUSY,
                                    HostState.BLOCKED)
            )  # fmt: skip
            assert 0 <= sig.robots <= counts[HostState.BUSY]
            if sig.next_due is not None:
                assert sig.next_due[1] in ("delay", "crawl-delay", "retry", "retry-after",
                                           "backoff")  # fmt: skip
                assert sig.next_due[2] >= 0
        # the sequence went through every state the counts keep (else it proves little)
        for state in (HostState.READY, HostState.SNOOZED, HostState.BUSY, HostState.BLOCKED):
            assert visited[state], state
        assert held
    finally:
        f.close()
