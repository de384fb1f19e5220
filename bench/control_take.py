"""What the loop's per-tick command check costs when nothing is queued, two trees alternated.

    git archive <commit> | tar -x -C DIR
    .venv/bin/python bench/control_take.py --baseline DIR [--rounds 7] [--takes 200000]

Each round: ``--takes`` calls of ``CommandQueue.take()`` on an idle queue, in CPU time of this
process, for each tree's ``frontier_crawl.control.commands`` in turn. Prints ns per take.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent.parent


def module(tree: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, tree / "frontier_crawl/control/commands.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # (dataclasses look their module up)
    spec.loader.exec_module(mod)
    return mod


def per_take_ns(mod: ModuleType, takes: int) -> float:
    queue = mod.CommandQueue()
    take = queue.take
    cpu0 = time.process_time()
    for _ in range(takes):
        take()
    cpu = time.process_time() - cpu0
    queue.close()
    return cpu / takes * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, type=Path, help="a tree of the code")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--takes", type=int, default=200_000)
    args = ap.parse_args()
    mods = {"before": module(args.baseline.resolve(), "before_commands"),
            "after": module(HERE, "after_commands")}  # fmt: skip
    samples: dict[str, list[float]] = {name: [] for name in mods}
    for r in range(args.rounds):
        for name in list(mods) if r % 2 == 0 else list(reversed(mods)):
            samples[name].append(per_take_ns(mods[name], args.takes))
    print(f"CommandQueue.take() on an idle queue, {args.takes} a round, {args.rounds} rounds, "
          "CPU ns per take (median, all)")  # fmt: skip
    for name, values in samples.items():
        print(
            f"{name:6} {statistics.median(values):8.0f}  ({' '.join(f'{x:.0f}' for x in values)})"
        )


if __name__ == "__main__":
    main()
