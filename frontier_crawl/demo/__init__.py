"""``frontier-crawl demo``: serve a generated multi-host web on 127.0.0.1 and crawl it.

The hosts (``alpha.demo``, ``bravo.demo``...) all live on one loopback port and are reached through
``fetch.resolve`` entries, exactly as curl's ``--resolve`` would; nothing leaves the machine.
``site.py`` and ``server.py`` use only the standard library so tests can use them on their own.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from frontier_crawl.safefs import make_dir

if TYPE_CHECKING:
    from rich.console import Console

MARKER = "demo.toml"


def demo_config(site_seeds: list[str], resolve: list[str], delay_s: float) -> str:
    """The crawl.toml the demo runs with (written next to its output, kept for the curious)."""

    def toml_list(items: list[str]) -> str:
        return "[" + ", ".join(f'"{i}"' for i in items) + "]"

    return f"""# Written by `frontier-crawl demo`: a crawl of the generated web served on 127.0.0.1.
[crawl]
seeds = {toml_list(site_seeds)}
output_dir = "."
max_depth = 50

[politeness]
min_delay_s = {delay_s}
delay_factor = 0.0                   # a fixed delay: the demo web is ours and local
user_agent = "frontier-crawl-demo/0.1"

[fetch]
concurrency = 64
connect_timeout_s = 5
timeout_s = 10
resolve = {toml_list(resolve)}

[frontier]
memory_urls = 10_000
checkpoint_interval_s = 5

[output]
warc_max_bytes = 67_108_864
progress_interval_s = 1.0
"""


def _prepare(output: Path, console: Console) -> bool:
    if output.exists() and any(output.iterdir()):
        if not (output / MARKER).exists():
            console.print(f"[red]{output} exists and is not a demo output; choose --output[/]")
            return False
        shutil.rmtree(output)  # a previous demo run: start afresh
    make_dir(output)  # never group- or other-writable: the crawl refuses such a directory
    return True


def serve_demo(*, port: int, hosts: int, pages: int, products: int) -> int:
    """Serve the demo web on ``127.0.0.1:port`` until interrupted (for examples/ and by hand)."""
    import threading

    from frontier_crawl.demo.server import DemoServer
    from frontier_crawl.demo.site import Site, SiteSpec

    site = Site(SiteSpec(hosts=hosts, pages=pages, crawl_delay_s=None, products=products))
    try:
        server = DemoServer(site, port)
        port = server.start()
    except OSError as exc:
        print(f"frontier-crawl demo: cannot listen on 127.0.0.1:{port}: {exc}")
        return 2
    try:  # a Ctrl-C at any point from here on stops the server and exits 0
        print(
            f"demo web on 127.0.0.1:{port}: {', '.join(site.hosts)} "
            f"({len(site.products(port))} products at {site.shop_url(port)}); "
            "fetch.resolve entries:"
        )
        for entry in site.resolve_entries(port):
            print(f"  {entry}")
        print("Ctrl-C stops it.", flush=True)
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def run_demo(output: Path, *, hosts: int, pages: int, delay_s: float, products: int = 0) -> int:
    """Serve the demo web, crawl it, check the result against the server's log; exit status."""
    from rich.console import Console

    from frontier_crawl.config import load
    from frontier_crawl.demo.server import DemoServer, politeness_violations
    from frontier_crawl.demo.site import Site, SiteSpec
    from frontier_crawl.runner import crawl, print_ending

    console = Console()
    if not _prepare(output, console):
        return 2
    site = Site(SiteSpec(hosts=hosts, pages=pages, crawl_delay_s=None, products=products))
    with DemoServer(site) as server:
        port = server.port
        config = output / MARKER
        config.write_text(demo_config(site.seeds(port), site.resolve_entries(port), delay_s))
        console.print(
            f"demo web: {len(site.hosts)} hosts ({', '.join(site.hosts)}) on 127.0.0.1:{port}, "
            f"{len(site.expected_pages(port))} reachable pages",
            soft_wrap=True,
        )
        report = crawl(load(config), console, config_path=config, ending=False)
        served = server.log()
    expected = site.expected_pages(port)
    fetched = {f"http://{e.host}:{port}{e.path}" for e in served if e.status == 200}
    violations = politeness_violations(served, delay_s)
    console.print(
        f"\nserver log: {len(served)} requests; expected pages fetched "
        f"{len(expected & fetched)}/{len(expected)}; "
        f"politeness violations: {len(violations)}",
        soft_wrap=True,
    )
    console.print(f"config:      {config}", highlight=False, markup=False, soft_wrap=True)
    print_ending(report, console)  # the last lines: how it ended, where its outputs are
    return 0 if expected <= fetched and not violations else 1
