"""Command line: ``frontier-crawl --config crawl.toml [--check] [--node N]``, ``report``,
``add-seeds urls.txt``, ``demo``, ``wacz``, ``config-reference``, ``ctl``, ``completion bash|zsh``.

Exit status: 0 crawl finished (or stopped gracefully by a signal), 1 runtime failure (a write
that failed, such as a full disk; a stop for low disk space; a failed worker; Redis unreachable
for ``cluster.unreachable_timeout_s``), 2 bad configuration or usage (reported before any
network traffic; ``output_dir`` in use by another live crawl; in a cluster also a ``--node``
out of range or already running, or a crawl identity that differs from the cluster's), 3 a
spider crawl whose every callback failed with no item written. After a 1 the same command
resumes the crawl once the cause is gone.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from frontier_crawl import __version__
from frontier_crawl.config import ConfigError, load, redact_url, to_toml
from frontier_crawl.logsetup import configure as configure_logging

# The rest is imported where a command needs it: this module is also the main module of every
# worker process (multiprocessing's spawn imports it again there), which runs none of them.

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2
#: the crawl ran, but every page given to a spider callback failed there (callback-error)
#: and no item was written: the spider is broken, not the crawl (the report says so too)
EXIT_CALLBACKS_FAILED = 3

# What shell completion offers for an argument (shtab's FILE and DIRECTORY, spelled out here so
# that building the parser, which every worker process does, does not import shtab).
_FILE = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}
_DIRECTORY = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/", "tcsh": "d"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="frontier-crawl",
        description="Polite, crash-safe, memory-bounded web crawler.",
    )
    p.add_argument("--version", action="version", version=f"frontier-crawl {__version__}")
    config = p.add_argument("--config", type=Path, help="crawl.toml describing the crawl")
    config.complete = _FILE  # type: ignore[attr-defined]
    p.add_argument(
        "--check",
        action="store_true",
        help="validate the config (and load the spider, as the run does), print it in full, "
        "and exit",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.add_argument(
        "--node", type=int, help="cluster crawl: this machine's node number, 0 .. cluster.nodes-1"
    )
    sub = p.add_subparsers(dest="command")
    report = sub.add_parser(
        "report",
        help="print a crawl's report again (and write its report.html again) from its output "
        "directory; in a cluster, the whole cluster's, live while it runs",
    )
    seeds = sub.add_parser(
        "add-seeds", help="cluster crawl: route seed URLs (one a line) to their owners"
    )
    seeds.add_argument("urls", type=Path, help="file with one URL per line ('#' comments)"
                       ).complete = _FILE  # type: ignore[attr-defined]  # fmt: skip
    demo = sub.add_parser("demo", help="serve a generated web on 127.0.0.1 and crawl it")
    demo.add_argument("--output", type=Path, default=Path("demo-crawl"), help="output directory"
                      ).complete = _DIRECTORY  # type: ignore[attr-defined]  # fmt: skip
    demo.add_argument("--hosts", type=int, default=4, help="number of generated hosts")
    demo.add_argument("--pages", type=int, default=2000, help="number of generated pages")
    demo.add_argument(
        "--delay", type=float, default=0.0, help="politeness.min_delay_s for the demo crawl"
    )
    demo.add_argument(
        "--products", type=int, default=0, help="products of the shop catalogue on alpha.demo/shop/"
    )
    demo.add_argument(
        "--serve",
        action="store_true",
        help="only serve the demo web (until Ctrl-C), e.g. for examples/catalogue",
    )
    demo.add_argument("--port", type=int, default=8080, help="port for --serve")
    wacz = sub.add_parser(
        "wacz",
        help="package a finished or stopped crawl's WARC files into output_dir/<prefix>.wacz",
        description="Package the crawl's finished WARC files (all runs, every worker) into a "
        "WACZ (WACZ 1.1.1) that ReplayWeb.page and pywb open. The crawl must not be running. "
        "Needs the wacz extra: pip install 'frontier-crawl[wacz]'.",
    )
    sub.add_parser("config-reference", help="print the configuration reference (Markdown)")
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script for the shell, generated from this command "
        "line's own parser. bash: 'frontier-crawl completion bash > "
        "~/.local/share/bash-completion/completions/frontier-crawl'; zsh: 'frontier-crawl "
        "completion zsh > ~/.zfunc/_frontier-crawl' with ~/.zfunc in $fpath.",
    )
    completion.add_argument("shell", choices=["bash", "zsh"], help="the shell")
    ctl = sub.add_parser(
        "ctl",
        help="steer a running crawl through its control API",
        description="Talk to the running crawl that --config describes (its [control] listen "
        "must be set). Exit status: 0 done, 1 the crawl refused the command, 2 bad usage or "
        "config, 3 the crawl cannot be reached (API off, not running).",
    )
    ctl.add_argument("--json", action="store_true", help="print the reply as JSON")
    ctl.add_argument("--html", action="store_true", help="status: write report.html")
    ctl.add_argument("action", help="status|pause|resume|stop|add-seeds FILE|block HOST|"
                     "unblock HOST|delay HOST SECONDS|concurrency N|reload|dashboard")  # fmt: skip
    ctl.add_argument("args", nargs="*", help="the action's arguments")
    # --config and --node are accepted after the command as well as before it (either place)
    for command in (report, seeds, ctl, wacz):
        command.add_argument("--config", type=Path, default=argparse.SUPPRESS,
                             help="the crawl's crawl.toml").complete = _FILE  # type: ignore[attr-defined]  # fmt: skip
        command.add_argument("--node", type=int, default=argparse.SUPPRESS,
                             help="cluster crawl: the node of this machine (its output_dir)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``frontier-crawl`` console script."""
    args = _parser().parse_args(argv)
    configure_logging(verbose=args.verbose)  # again with [logging] once the config is read
    from rich.console import Console

    out = Console(stderr=False)
    if args.command == "config-reference":
        from frontier_crawl.config.reference import render_reference

        sys.stdout.write(render_reference())
        return EXIT_OK
    if args.command == "completion":
        import shtab

        sys.stdout.write(shtab.complete(_parser(), shell=args.shell))
        return EXIT_OK
    if args.command == "ctl":
        from frontier_crawl.ctl import run as run_ctl

        if args.config is None:
            sys.stderr.write("frontier-crawl ctl: --config crawl.toml is required\n")
            return EXIT_CONFIG
        return run_ctl(
            args.config, args.action, args.args, as_json=args.json, html=args.html, node=args.node
        )
    if args.command == "demo":
        from frontier_crawl.demo import run_demo, serve_demo

        if args.serve:
            return serve_demo(
                port=args.port, hosts=args.hosts, pages=args.pages, products=args.products
            )
        return run_demo(
            args.output,
            hosts=args.hosts,
            pages=args.pages,
            delay_s=args.delay,
            products=args.products,
        )
    if args.config is None:
        sys.stderr.write("frontier-crawl: --config crawl.toml is required (or a command: demo)\n")
        return EXIT_CONFIG
    from frontier_crawl.frontier.scope import check_scope
    from frontier_crawl.output.wacz import available as wacz_available

    try:
        from frontier_crawl.spider.adopt import adopt

        notes: list[str] = []
        settings = adopt(load(args.config, notes))  # the spider's start_urls, allowed_domains
        configure_logging(settings.logging.format, settings.logging.level, args.verbose)
        check_scope(settings)  # entries that cannot match, seeds outside the scope
        if (settings.output.wacz or args.command == "wacz") and not wacz_available():
            raise ConfigError("output.wacz: the wacz package is not installed: pip install "
                              "'frontier-crawl[wacz]'")  # fmt: skip
        if args.check:  # as the run does first: a spider or pipeline that does not load
            from frontier_crawl.spider import SpiderHost

            SpiderHost.load(settings)
            _check_listen(settings.control.listen)
            from frontier_crawl.safefs import check_output_dirs, probe_output_dir
            from frontier_crawl.workers.partition import node_root

            root = node_root(settings, args.node)
            check_output_dirs(settings, root)
            probe_output_dir(root, keep=False)  # the run would refuse it: refuse it here
    except ConfigError as exc:
        sys.stderr.write(f"frontier-crawl: config error: {exc}\n")
        return EXIT_CONFIG
    if args.check:
        import msgspec

        # the effective config in full, but never a password (Redis, proxy)
        proxy = settings.fetch.proxy
        shown = msgspec.structs.replace(
            settings,
            cluster=msgspec.structs.replace(
                settings.cluster, redis_url=redact_url(settings.cluster.redis_url)
            ),
            fetch=msgspec.structs.replace(
                settings.fetch, proxy=None if proxy is None else redact_url(proxy)
            ),
        )
        sys.stdout.write("".join(f"# note: {n}\n" for n in notes) + to_toml(shown))
        return EXIT_OK
    for note in notes:  # a default the loader chose for this file: said before the run
        sys.stderr.write(f"frontier-crawl: note: {note}\n")
    from frontier_crawl.cluster import ClusterError, ClusterRefused
    from frontier_crawl.frontier import StateMismatch
    from frontier_crawl.proctree import StateLocked
    from frontier_crawl.runner import crawl

    cluster = bool(settings.cluster.redis_url)
    if args.command == "report" and not cluster:
        from frontier_crawl.runner import print_report

        return print_report(settings, out)
    if args.command == "add-seeds" or args.node is not None:
        if not cluster:
            sys.stderr.write(
                f"frontier-crawl: {'--node' if args.command is None else args.command} needs a "
                "cluster: set cluster.redis_url (and cluster.nodes)\n"
            )
            return EXIT_CONFIG
    elif cluster and args.command != "report":
        sys.stderr.write(
            f"frontier-crawl: cluster.redis_url is set: {args.command or 'start'} each node "
            f"with --node N (0 .. {settings.cluster.nodes - 1}), or use the report or "
            "add-seeds command\n"
        )
        return EXIT_CONFIG
    if args.command == "wacz":
        from frontier_crawl.runner import write_wacz

        return write_wacz(settings, out, args.node)
    try:
        if args.command == "report":
            from frontier_crawl.runner import print_cluster_report

            return print_cluster_report(settings, out, args.node)
        if args.command == "add-seeds":
            from frontier_crawl.runner import add_seeds

            return add_seeds(settings, args.urls, out)
        report = crawl(settings, out, config_path=args.config, node=args.node)
    except ClusterRefused as exc:
        sys.stderr.write(f"frontier-crawl: refused: {exc}\n")
        return EXIT_CONFIG
    except ClusterError as exc:
        sys.stderr.write(f"frontier-crawl: {exc}\n")
        return EXIT_FAILURE
    except (StateMismatch, StateLocked) as exc:
        sys.stderr.write(f"frontier-crawl: {exc}\n")
        return EXIT_CONFIG
    except ConfigError as exc:  # found at start: [control] listen cannot be bound
        sys.stderr.write(f"frontier-crawl: config error: {exc}\n")
        return EXIT_CONFIG
    except OSError as exc:  # a write failed before the engine's loop (or in the coordinator)
        logging.getLogger("frontier_crawl").debug("write failure", exc_info=exc)
        sys.stderr.write(
            f"frontier-crawl: stopping: a write failed ({exc}). Fix the cause (free space, "
            "the disk, the mount) and run the same command to resume.\n"
        )
        return EXIT_FAILURE
    if argv is None:  # the process's own command line: it exits next
        _skip_final_collections()
    status = exit_status(report)
    if status == EXIT_CALLBACKS_FAILED:
        spider = report.get("spider")
        pages = spider.get("pages") if isinstance(spider, dict) else "?"
        sys.stderr.write(
            f"frontier-crawl: every page given to the spider ({pages}) failed in "
            "its callback (callback-error) and no item was written: see the tracebacks above "
            "and the crawl log's callback-error lines\n"
        )
    return status


def _skip_final_collections() -> None:
    """Let the interpreter's exit skip collecting the objects alive now (its modules, their
    classes and functions): ``gc.freeze`` moves them out of the collector's sight, so the full
    collections of its shutdown do not walk them again (about 40-90 ms of CPU per process
    here, for nothing: the process ends). Called once the crawl is over and everything it
    wrote is closed; objects are still freed by reference counting as modules are cleared."""
    import gc

    gc.freeze()


def _check_listen(listen: str) -> None:
    """``--check``: a ``control.listen`` host this machine has no address for is refused, as
    the run refuses it when it binds (that the port is free is only known then)."""
    if not listen:
        return
    import socket

    host = listen.rpartition(":")[0].strip("[]")
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.bind((host, 0))
    except OSError as exc:
        raise ConfigError(f"control.listen: cannot listen on {listen}: "
                          f"{exc.strerror or exc}") from None  # fmt: skip


def exit_status(report: dict[str, object]) -> int:
    """EXIT_FAILURE for a run that ended on a failed write, a low-space stop or a failed
    worker (resumable); EXIT_CALLBACKS_FAILED when every page given to a spider callback
    failed there and no item was written; else EXIT_OK."""
    failed = (
        not report
        or report.get("write_error")
        or report.get("stopped_for_low_space")
        or report.get("failed_workers")
        or report.get("cluster_error")
    )
    if failed:
        return EXIT_FAILURE
    spider = report.get("spider")
    if isinstance(spider, dict):
        pages, broken = int(spider.get("pages") or 0), int(spider.get("failed_pages") or 0)
        if pages and broken >= pages and not spider.get("items"):
            return EXIT_CALLBACKS_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
