"""The suite's own schedule under pytest-xdist (tests/conftest.py ``schedule``): longest first,
balanced over worksteal's first blocks, short tests in collection order, serial ones last."""

from __future__ import annotations

import random

from tests.conftest import _SHORT_S, _UNKNOWN_S, schedule


def _blocks(order: list[str], workers: int) -> list[list[str]]:
    """The contiguous blocks pytest-xdist's worksteal sends first (len // N, and so on)."""
    out, left, at = [], len(order), 0
    for remaining in range(workers, 0, -1):
        size = left // remaining
        out.append(order[at : at + size])
        at, left = at + size, left - size
    return out


def test_worksteal_blocks_start_long_balanced_and_end_serial() -> None:
    rng = random.Random(5)
    walls = {f"t{i}": rng.choice([0.01, 0.3, 1.5]) for i in range(300)}
    walls |= {f"long{i}": rng.uniform(_SHORT_S, 80.0) for i in range(40)}
    walls["new"] = _UNKNOWN_S  # not in the durations file: first
    items = list(walls)
    rng.shuffle(items)
    serial = {"t7", "t8", "t9"}
    for workers in (2, 3, 4, 6):
        order = schedule(items, walls.__getitem__, serial.__contains__, workers, worksteal=True)
        assert sorted(order) == sorted(items)  # a permutation
        assert order == schedule(items, walls.__getitem__, serial.__contains__, workers,
                                 worksteal=True)  # fmt: skip
        blocks = _blocks(order, workers)
        long_sums = [sum(walls[t] for t in b if walls[t] >= _SHORT_S) for b in blocks]
        assert max(long_sums) - min(long_sums) <= _UNKNOWN_S, long_sums  # within one test
        assert "new" in [b[0] for b in blocks]
        for block in blocks:
            heads = [walls[t] for t in block if walls[t] >= _SHORT_S and t not in serial]
            assert heads == sorted(heads, reverse=True)  # longest first
            n = len(heads)
            assert all(walls[t] < _SHORT_S or t in serial for t in block[n:])
            tail = [t for t in block if t in serial]
            assert block[len(block) - len(tail) :] == tail  # serial ones end the block
        short = [t for t in order if walls[t] < _SHORT_S and t not in serial]
        assert short == [t for t in items if walls[t] < _SHORT_S and t not in serial]


def test_other_modes_run_longest_first_then_short_then_serial() -> None:
    walls = {"a": 0.1, "b": 30.0, "c": 5.0, "d": 0.2, "s": 9.0}
    order = schedule(list(walls), walls.__getitem__, lambda t: t == "s", 4, worksteal=False)
    assert order == ["b", "c", "a", "d", "s"]
