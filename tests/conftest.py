"""Shared fixtures: the generated demo web served on 127.0.0.1 (port 0) and crawl configs for it."""

from __future__ import annotations

import compileall
import fcntl
import json
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from warcio.archiveiterator import ArchiveIterator

import frontier_crawl
from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from frontier_crawl.frontier.mailbox import owner_of
from frontier_crawl.frontier.urls import origin


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return repr(value)


def render_toml(sections: dict[str, dict[str, Any]]) -> str:
    out = []
    for name, values in sections.items():
        out.append(f"[{name}]")
        out += [f"{k} = {toml_value(v)}" for k, v in values.items()]
        out.append("")
    return "\n".join(out)


ConfigWriter = Callable[..., Path]


def crawl_config(tmp_path: Path, site: Site, port: int, **sections: dict[str, Any]) -> Path:
    """Write a crawl.toml for ``site`` served on ``port``; ``sections`` override defaults.

    Every key not listed here has its default. Those listed differ from the default, each for
    the reason given beside it.
    """
    base: dict[str, dict[str, Any]] = {
        # max_depth 20 -> 100: the demo site's tree is deeper than 20 links on small hosts
        "crawl": {"seeds": site.seeds(port), "output_dir": "out", "max_depth": 100},
        # min_delay_s 1.0 -> 0.02: hundreds of pages per host would take minutes at 1 s
        "politeness": {"min_delay_s": 0.02, "user_agent": "frontier-crawl-test/0.1"},
        "fetch": {"resolve": site.resolve_entries(port)},
        "frontier": {
            # checkpoint_interval_s 30 -> 1: crashes and restarts meet checkpoints
            "checkpoint_interval_s": 1.0,
        },
        # warc_max_bytes 1 GiB -> 1 MB: the crawl rotates through several WARC files
        # progress_interval_s 5 -> 0: no progress lines in the tests' output
        "output": {"warc_max_bytes": 1_000_000, "progress_interval_s": 0.0},
    }
    for name, values in sections.items():
        base.setdefault(name, {}).update(values)
    path = tmp_path / "crawl.toml"
    path.write_text(render_toml(base))
    return path


@pytest.fixture(scope="module")
def e2e_site() -> Iterator[tuple[Site, DemoServer]]:
    """3 hosts, >= 500 pages, a Disallow on host 0 and a Crawl-delay on host 1."""
    site = Site(SiteSpec(hosts=3, pages=540, crawl_delay_s=0.05, seed=7))
    with DemoServer(site) as server:
        yield site, server


def spread_server(site: Site, partitions: int) -> Iterator[tuple[Site, DemoServer]]:
    """``site`` served on a port that gives each of ``partitions`` worker processes some
    hosts: a host's owner hashes its origin, port included, so a random port can leave a
    worker none (1 port in 15 for 5 hosts and 2 workers), and that worker's outputs empty."""
    for _ in range(20):
        with DemoServer(site) as server:
            origins = {origin(url) for url in site.seeds(server.port)}
            if {owner_of(o, partitions) for o in origins} == set(range(partitions)):
                yield site, server
                return
    pytest.fail(f"20 ports in a row left one of {partitions} partitions without hosts")


def served_pages(server: DemoServer, since: int = 0, wait_s: float = 1.0) -> Counter[str]:
    """Pages (not robots.txt) the server answered with 200 since log entry ``since``, counted.

    ``wait_s``: as ``DemoServer.log``'s (up to 1 s for the requests in flight to be logged:
    a crawl that has ended is all there); 0 while the crawl runs, polled by a wait."""
    port = server.port
    return Counter(
        f"http://{e.host}:{port}{e.path}"
        for e in server.log(wait_s)[since:]
        if e.status == 200 and e.path != "/robots.txt"
    )


def warc_response_uris(paths: Iterable[Path]) -> list[str]:
    """Target URIs of the response records in WARC files, reading every record to its end."""
    uris = []
    for path in paths:
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                rec.content_stream().read()
                if rec.rec_type == "response":
                    uris.append(rec.rec_headers.get_header("WARC-Target-URI"))
    return uris


def children_of(pid: int) -> set[int]:
    """PIDs of a live process's children (Linux /proc)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found.update(int(x) for x in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that is not dead (a zombie is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


#: the crawler's default free-space floor (output.min_free_bytes), plus room for the tests' files
_FREE_NEEDED = (1 << 30) + (512 << 20)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once, saying why, where the temporary directory's filesystem has less room than
    the crawler's default free-space floor: every test crawl would pause (as it should) and the
    tests would time out instead of failing clearly."""
    st = os.statvfs(tempfile.gettempdir())
    free = st.f_bavail * st.f_frsize
    if free < _FREE_NEEDED:
        pytest.exit(
            f"{tempfile.gettempdir()} has {free >> 20} MiB free; the tests need "
            f"{_FREE_NEEDED >> 20} MiB (the crawls' default output.min_free_bytes is 1 GiB)",
            returncode=3,
        )
    _compile_package()


def _compile_package() -> None:
    """Write the package's bytecode (``__pycache__``, ignored by git) before the tests start.

    With PYTHONDONTWRITEBYTECODE set (as on the machines the suite is measured on) nothing
    writes it, and each of the suite's several hundred ``frontier-crawl`` processes and their
    workers compiled the whole package from source again: about 0.25 s of CPU per start. Such
    processes read bytecode that exists; they still write none, so a spider a test writes in
    its ``tmp_path`` (and may rewrite within the second) is always compiled from its source.
    """
    compileall.compile_dir(Path(frontier_crawl.__file__).parent, quiet=2)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, None, None]:
    """Let pytest cache the test modules it rewrites (asserts) while it collects them, even
    with PYTHONDONTWRITEBYTECODE set: otherwise every pytest-xdist worker of every run rewrote
    all of them again (about 5 s of CPU each). Collection only: what the tests themselves
    import (spiders in ``tmp_path``) is never cached."""
    kept = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        yield
    finally:
        sys.dont_write_bytecode = kept


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--test-times",
        metavar="PATH",
        help="write each test's wall and CPU seconds (setup to teardown; CPU of the test's "
        "process and of the children it reaped) into the JSON file PATH, keeping the entries "
        f"of tests not run; {DURATIONS.name} is such a file (see CONTRIBUTING.md)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "serial: runs with no other test of the run beside it (under pytest-xdist, the other "
        "workers wait): for tests that time a crawl in tens of milliseconds from the server's "
        "side, which a CPU-hungry neighbour skews",
    )


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    """Under pytest-xdist, every test holds a shared lock of the run and a ``serial`` one an
    exclusive lock, taken through a turnstile so that a waiting serial test is not starved by
    the others' shared locks. Taken outside pytest-timeout's timer (tryfirst): the wait for
    the lock is not the test's time."""
    run = getattr(item.config, "workerinput", {}).get("testrunuid")
    if run is None:  # one process: nothing runs beside anything
        item.stash[_STARTED] = (time.perf_counter(), *_cpu_s())
        yield
        return
    base = Path(tempfile.gettempdir()) / f"frontier-crawl-tests-{run}"
    with open(f"{base}.gate", "a") as gate, open(f"{base}.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            serial = item.get_closest_marker("serial") is not None
            fcntl.flock(lock, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            item.stash[_STARTED] = (time.perf_counter(), *_cpu_s())  # the test's time from here
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


#: each test's wall and CPU seconds from a whole run, read to start the longest tests first
#: (refreshed by the test command (CONTRIBUTING.md) with ``--test-times tests/durations.json``)
DURATIONS = Path(__file__).with_name("durations.json")
#: a test not in DURATIONS is taken as this long (as the longest): a new test starts with
#: them, where a long one (a continuous crawl of a minute or two) cannot stretch the tail
_UNKNOWN_S = 120.0
#: tests shorter than this keep their collection order (their module's fixtures set up once
#: per worker, not once per test): only the long ones shape the run's tail
_SHORT_S = 2.0

_STARTED = pytest.StashKey[tuple[float, float, float]]()


def _cpu_s() -> tuple[float, float]:
    """User + system CPU seconds of this process (all its threads) and of its reaped children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, Any, None]:
    """The teardown's report carries the test's wall and CPU seconds from setup to teardown
    (``user_properties``: pytest-xdist sends them to the controlling process)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    started = item.stash.get(_STARTED, None)
    if report.when != "teardown" or started is None:
        return
    wall, me, kids = started
    me_now, kids_now = _cpu_s()
    report.user_properties.append(
        ("times", {"wall_s": time.perf_counter() - wall, "cpu_s": me_now - me + kids_now - kids})
    )


_times: dict[str, dict[str, float]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == "times" and isinstance(value, dict):
            _times[report.nodeid] = {k: round(float(v), 2) for k, v in value.items()}


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("test_times")
    if path is None or hasattr(session.config, "workerinput") or not _times:
        return
    out = Path(path)
    known = _read_times(out)
    known.update(_times)
    lines = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(known.items())]
    out.write_text("{\n" + ",\n".join(lines) + "\n}\n")


def _read_times(path: Path) -> dict[str, dict[str, float]]:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell pytest-xdist's workers the run's ``--dist`` mode (theirs is always "no")."""
    node.workerinput["dist"] = node.config.getoption("dist")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the longest tests (DURATIONS) start first, so that the run does not
    end with one worker busy with a long test while the others are idle.

    ``--dist worksteal`` gives each of the N workers a contiguous block of the collection at
    first, and an idle worker takes the end of another's queue. The long tests are dealt to
    the blocks longest first, each to the block with the least work so far; the short ones
    follow in their collection order, one contiguous share per block; the ``serial`` ones end
    the blocks. Every worker computes the same order (same file, same N), as pytest-xdist
    requires. In one process nothing is reordered.
    """
    workers = getattr(config, "workerinput", {}).get("workercount")
    if not workers or workers < 2 or len(items) < 2:
        return
    known = _read_times(DURATIONS)

    def wall(item: pytest.Item) -> float:
        entry = known.get(item.nodeid)
        return float(entry.get("wall_s", 0.0)) if isinstance(entry, dict) else _UNKNOWN_S

    items[:] = schedule(
        items,
        wall,
        lambda item: item.get_closest_marker("serial") is not None,
        workers,
        worksteal=getattr(config, "workerinput", {}).get("dist") == "worksteal",
    )


T = TypeVar("T")


def schedule(
    items: list[T], wall: Callable[[T], float], serial: Callable[[T], bool], workers: int,
    *, worksteal: bool,
) -> list[T]:  # fmt: skip
    """``items`` reordered for ``workers`` (see pytest_collection_modifyitems)."""
    ends = [i for i in items if serial(i)]
    rest = [i for i in items if not serial(i)]
    long = sorted((i for i in rest if wall(i) >= _SHORT_S), key=wall, reverse=True)
    short = [i for i in rest if wall(i) < _SHORT_S]
    if not worksteal:
        return long + short + ends
    # the block sizes worksteal sends first: len // N to the first worker, and so on
    sizes, left = [], len(items)
    for remaining in range(workers, 0, -1):
        sizes.append(left // remaining)
        left -= sizes[-1]
    blocks: list[list[T]] = [[] for _ in sizes]
    sums = [0.0] * workers
    for item in long:  # each to the block with the least work so far (that has room)
        j = min((j for j in range(workers) if len(blocks[j]) < sizes[j]), key=sums.__getitem__)
        blocks[j].append(item)
        sums[j] += wall(item)
    # the serial tests end their blocks: one waits for every running test to end, the other
    # workers waiting with it, and near the end of the run those are the short ones
    for j, block in enumerate(blocks):
        end = ends[j::workers]
        take = max(0, sizes[j] - len(block) - len(end))
        block += short[:take]
        del short[:take]
        block += end
    blocks[-1] += short  # only where the serial tests outnumber a block's room
    return [item for block in blocks for item in block]
