"""How soon a command posted to the control API is applied, with and without the wakeup fd.

    .venv/bin/python bench/control_latency.py            # 40 commands per variant
    .venv/bin/python bench/control_latency.py --commands 100

A crawl of one slow host (a scripted server on 127.0.0.1, ``min_delay_s`` 30: the loop spends
its time waiting in ``Fetcher.poll``, up to ``MAX_WAIT_S`` = 1 s at a time) runs in a thread of
this process; the bench posts ``pause`` / ``resume`` alternately through the real HTTP API and
times each request until its reply (the reply comes once the loop has applied the command).
Variant "wakeup fd": as shipped (the command queue's socketpair is watched by the fetcher's
selector). Variant "no wakeup": the same crawl with the fetcher's ``wake_on`` disabled, so a
command waits for the loop's next tick. Prints the median and the 90th percentile of each.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from frontier_crawl.engine import Engine
from tests.scripted_server import NOT_FOUND, ScriptedServer, crawl_settings, page


def run(commands: int, wake: bool) -> list[float]:
    def script(host: str, path: str, nth: int) -> object:
        return NOT_FOUND if path == "/robots.txt" else page(*[f"/{i}" for i in range(50)])

    with ScriptedServer(script) as srv, tempfile.TemporaryDirectory() as tmp:  # type: ignore[arg-type]
        settings = crawl_settings(
            Path(tmp), [srv.url("slow.test", "/")], srv.resolve("slow.test"),
            politeness={"min_delay_s": 30.0}, control={"listen": "127.0.0.1:0"},
        )  # fmt: skip
        engine = Engine(settings)
        if not wake:
            engine.fetcher.wake_on = lambda fd: None  # type: ignore[method-assign]
        crawl = threading.Thread(target=engine.run, daemon=True)
        crawl.start()
        out = Path(settings.crawl.output_dir)
        while not (out / "control.addr").exists():
            time.sleep(0.01)
        time.sleep(0.2)
        address = (out / "control.addr").read_text().strip()
        token = (out / "control.token").read_text().strip()
        host, port = address.split(":")
        times = []
        rng = random.Random(7)
        for i in range(commands):
            time.sleep(rng.uniform(0.0, 1.0))  # land anywhere in the loop's 1 s wait
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            t0 = time.perf_counter()
            conn.request("POST", f"/api/{'pause' if i % 2 == 0 else 'resume'}", body=b"{}",
                         headers={"Authorization": f"Bearer {token}", "Host": address})  # fmt: skip
            reply = json.loads(conn.getresponse().read())
            times.append(time.perf_counter() - t0)
            conn.close()
            assert reply["result"] == "applied", reply
        engine.request_stop()
        crawl.join(30)
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commands", type=int, default=40)
    args = p.parse_args()
    for name, wake in (("wakeup fd", True), ("no wakeup", False)):
        t = sorted(run(args.commands, wake))
        p90 = t[int(len(t) * 0.9) - 1]
        print(f"{name:10s}: median {statistics.median(t) * 1000:7.1f} ms, "
              f"p90 {p90 * 1000:7.1f} ms over {len(t)} commands")  # fmt: skip


if __name__ == "__main__":
    main()
