"""``--check`` refuses what the run refuses: hostile values for every config key.

For each key of every settings class (iterated from the classes, so a new key is covered at
once: the sections, ``[[output.feeds]]``, ``[[extract]]`` and its fields' tables), hypothesis
draws a hostile value: NUL and control characters, path separators, huge, negative and
non-finite numbers, wrong types, odd URLs, empty strings, unicode. Then ``frontier-crawl
--config crawl.toml --check`` and the run are compared: either both accept, or both exit 2
with a config error naming the key; never a traceback.

"The run" is the real command line (``cli.main`` in this process, so each costs a fraction of
a second, not an interpreter start) crawling one seed on a closed loopback port, with every
wait made short: no robots.txt (given up at its first failure when a value turns it on), no
retries, a host retired at its first refused connection. That is the whole
start-up (spider, frontier, fetcher, WARC writer, feeds, control API, worker processes, the
Redis client) and one request that fails at once; a value the run refuses
anywhere on the way shows up. Only loopback is ever contacted: every URL drawn names
127.0.0.1 or [::1], or does not parse. A cluster run (a ``redis_url`` that passes) is started
as ``--node 0`` against a closed loopback port with ``unreachable_timeout_s`` short: its exit
status 1, "Redis unreachable", is the run accepting the config.
"""

from __future__ import annotations

import math
import re
import socket
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier_crawl.cli import main
from frontier_crawl.config.settings import (
    SECTIONS,
    ExtractField,
    ExtractRule,
    FeedSection,
    RecrawlRule,
)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PORT = _closed_port()


def _keys() -> list[tuple[str, ...]]:
    """Every key, as a path into the TOML document."""
    keys: list[tuple[str, ...]] = []
    for name, cls in SECTIONS.items():
        keys += [(name, f.encode_name) for f in msgspec.structs.fields(cls)]
    keys += [("output", "feeds", "0", f.encode_name) for f in msgspec.structs.fields(FeedSection)]
    keys += [("recrawl", "rules", "0", f.encode_name) for f in msgspec.structs.fields(RecrawlRule)]
    keys += [("extract", "0", f.encode_name) for f in msgspec.structs.fields(ExtractRule)]
    fields = msgspec.structs.fields(ExtractField)
    keys += [("extract", "0", "fields", "t", f.encode_name) for f in fields]
    return keys


KEYS = _keys()
EXAMPLES_PER_KEY = 4  #: about 0.1 s per example (most hostile values stop at --check)
SECTION_NAMES = sorted({k[0] for k in KEYS})

_URLS = [
    "http://", "http://127.0.0.1:0/", f"http://127.0.0.1:{PORT}/é?x=\u202e",
    "http://127.0.0.1:99999/", "http://[::1", f"http://u:p@ss@127.0.0.1:{PORT}/",
    "javascript:alert(1)", "file:///etc/passwd", f"redis://127.0.0.1:{PORT}/0",
    f"redis://:S3cret/PW+b64==@127.0.0.1:{PORT}/0", f"rediss://[::1]:{PORT}/99999999999",
    "unix:///nonexistent/redis.sock", f"socks5h://127.0.0.1:{PORT}", "redis://127.0.0.1:-1",
    f"http://127.0.0.1:{PORT}/%00", "//127.0.0.1/", "127.0.0.1:0", "[::1]:0", "[::1]:65536",
    "192.0.2.1:8740",  # an address of nobody: a listen the run cannot bind
]  # fmt: skip
_STRINGS = [
    "", " ", "\x00", "a\x00b", "\x01\x7f", "\n", "a\tb", "\r\n", "/", ".", "..", "../x",
    "a/../../b", "\\", "C:\\x", "é", "😀", "\u202e", "\ufeff", "a" * 300, "%00", "*", "(",
    "[", "{", "'", '"', "-", "report.html", "control.token", "state/x", "worker-0", "0", "nan",
]  # fmt: skip
_NUMBERS = [
    -1, 0, 1, -(2**63), 2**31, 2**62 + 1, 2**63 - 1, 2**64, 10**30, -0.5, 0.0, 1e-300,
    1e300, math.inf, -math.inf, math.nan, True, False,
]  # fmt: skip
_OTHER: list[Any] = [[], {}, {"x": 1}, [[]], [{}]]

_INTS = [v for v in _NUMBERS if type(v) is int]
_FLOATS = [v for v in _NUMBERS if type(v) is float]
#: values of the key's own type first (where the checks must be sharp), any other type too
_OF_KIND: dict[str, st.SearchStrategy[Any]] = {
    "int": st.sampled_from(_INTS) | st.integers(),
    "float": st.sampled_from(_FLOATS) | st.floats(),
    "str": st.sampled_from(_STRINGS + _URLS) | st.text(max_size=6),
    "strs": st.lists(st.sampled_from(_STRINGS + _URLS), min_size=1, max_size=2),
    "bool": st.booleans(),
    "other": st.sampled_from(_OTHER),
}
anything: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(_STRINGS + _URLS + _NUMBERS + _OTHER),
    st.lists(st.sampled_from(_STRINGS + _URLS + _NUMBERS), min_size=1, max_size=2),
)


def _kind_of(t: Any) -> str:
    while isinstance(t, msgspec.inspect.Metadata):
        t = t.type
    if isinstance(t, msgspec.inspect.UnionType):  # str | None and the like
        t = next(x for x in t.types if not isinstance(x, msgspec.inspect.NoneType))
        return _kind_of(t)
    if isinstance(t, msgspec.inspect.VarTupleType):
        return "strs" if _kind_of(t.item_type) == "str" else "other"
    names = {msgspec.inspect.IntType: "int", msgspec.inspect.FloatType: "float",
             msgspec.inspect.StrType: "str", msgspec.inspect.LiteralType: "str",
             msgspec.inspect.BoolType: "bool"}  # fmt: skip
    return names.get(type(t), "other")


def _kind(key: tuple[str, ...]) -> str:
    cls: Any = {
        ("output", "feeds", "0"): FeedSection,
        ("recrawl", "rules", "0"): RecrawlRule,
        ("extract", "0"): ExtractRule,
        ("extract", "0", "fields", "t"): ExtractField,
    }.get(key[:-1]) or SECTIONS[key[0]]
    info = msgspec.inspect.type_info(cls)
    return next(_kind_of(f.type) for f in info.fields if f.encode_name == key[-1])


def hostile(key: tuple[str, ...]) -> st.SearchStrategy[Any]:
    return st.one_of(_OF_KIND[_kind(key)], _OF_KIND[_kind(key)], anything)

# ------------------------------------------------------------------------------ TOML rendering


def _string(value: str) -> str:
    out = []
    for c in value:
        if c in '"\\' or ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        elif 0xD800 <= ord(c) <= 0xDFFF:  # a lone surrogate cannot be written in UTF-8
            out.append("\\ufffd")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    items = ", ".join(f"{_string(k)} = {_value(v)}" for k, v in value.items())
    return "{ " + items + " }"


def render(doc: dict[str, Any]) -> str:
    """``doc`` as TOML: top-level tables, arrays of tables as inline tables."""
    lines = [f"{name} = {_value(v)}" for name, v in doc.items() if isinstance(v, list)]
    for name, table in doc.items():
        if isinstance(table, list):  # [[extract]]: written above, before the first table
            continue
        lines.append(f"[{name}]")
        lines += [f"{_string(k)} = {_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ the run


def base(key: tuple[str, ...]) -> dict[str, Any]:
    """A config whose run is short: one seed on a closed loopback port; with the features
    the key belongs to turned on (feeds, extraction, the HTTP cache, a cluster node)."""
    doc: dict[str, Any] = {
        "crawl": {"seeds": [f"http://127.0.0.1:{PORT}/"], "output_dir": "out"},
        "politeness": {"obey_robots": False, "min_delay_s": 0.0, "max_host_errors": 1,
                       "robots_attempts": 1, "robots_retry_s": 0.05},
        "fetch": {"retries": 0, "connect_timeout_s": 2.0, "timeout_s": 3.0},
        "frontier": {"lmdb_map_size_bytes": 1 << 26},
        # a free-space floor above what the disk has: stop (exit 1), not pause for ever
        "output": {"progress_interval_s": 0.0, "warc": key[0] == "output",
                   "low_space_action": "stop"},
        "cluster": {"unreachable_timeout_s": 0.3},
    }
    if key[0] in ("extract", "spider") or key[:2] == ("output", "feeds"):
        doc["extract"] = [{"url": ".", "fields": {"t": {"css": "title"}}}]
    if key[:2] == ("output", "feeds"):
        doc["output"]["feeds"] = [{"path": "items.jsonl"}]
    if key[:2] == ("recrawl", "rules"):
        doc["recrawl"] = {"rules": [{"pattern": "/"}]}
    if key[:2] == ("fetch", "cache_dir") or key[:2] == ("fetch", "cache_max_bytes"):
        doc["fetch"]["cache"] = True
    if key[0] == "cluster" and key[1] != "redis_url":
        doc["cluster"]["redis_url"] = f"redis://127.0.0.1:{PORT}/0"
    return doc


def put(doc: dict[str, Any], key: tuple[str, ...], value: Any) -> None:
    node: Any = doc
    for part in key[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    node[key[-1]] = value


def dotted(key: tuple[str, ...]) -> str:
    """The key as the config errors name it: ``output.feeds[0].path``, ``extract[0].url``."""
    out = ""
    for part in key:
        out += f"[{part}]" if part.isdigit() else f".{part}" if out else part
    return out


def cli(
    cfg: Path, capfd: pytest.CaptureFixture[str], *args: str
) -> tuple[int | BaseException, str]:
    """(exit status, or the exception that escaped; everything printed, children's too)."""
    try:
        status: int | BaseException = main(["--config", str(cfg), *args])
    except BaseException as exc:  # a traceback: the finding
        status = exc
    out = capfd.readouterr()
    return status, out.out + out.err


def config_error(out: str) -> str:
    m = re.search(r"config error: (.*)", out)
    return m[1] if m else ""


#: the keys a config error may name instead of the hostile one: a cross-key rule
_ALSO = {
    "scope.allow_domains": ("crawl.seeds",),
    "politeness.robots_token": ("politeness.user_agent",),
    "extract[0].fields": ("extract[0].required",),
}


def names(error: str, key: str) -> bool:
    """Whether a config error is about ``key``: it names it (``crawl.seeds[0]: ... matches
    scope.exclude``), or the table it is in (``output.feeds: two feeds share a path``)."""
    about = error.split(": ", 1)[0]
    inside = key == about or key.startswith((about + ".", about + "["))
    return inside or key in error or about.startswith(_ALSO.get(key, ("-",)))


def agree(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], key: tuple[str, ...], value: Any
) -> None:
    doc = base(key)
    put(doc, key, value)
    where = tmp_path / "a" / "b"  # '..' twice stays inside tmp_path
    where.mkdir(parents=True, exist_ok=True)
    cfg = where / "crawl.toml"
    cfg.write_text(render(doc), encoding="utf-8")
    checked, out = cli(cfg, capfd, "--check")
    shown = f"{dotted(key)} = {value!r}\n--check: {checked!r}\n{out[-2000:]}"
    assert not isinstance(checked, BaseException), shown
    assert "Traceback" not in out, shown
    assert checked in (0, 2), shown
    named = config_error(out)
    url = doc["cluster"].get("redis_url")
    node = ["--node", "0"] if isinstance(url, str) and url else []
    if checked == 0 and doc.get("recrawl", {}).get("enabled") is True:
        return  # a continuous crawl never ends by itself (test_continuous_crawl.py runs one)
    ran, run_out = cli(cfg, capfd, *node)
    shown += f"\nrun: {ran!r}\n{run_out[-3000:]}"
    assert not isinstance(ran, BaseException), shown
    assert "Traceback" not in run_out, shown
    if checked == 2:
        assert names(named, dotted(key)), shown
        assert ran == 2 and config_error(run_out) == named, shown
    elif node and checked == 0:
        assert ran == 1 and "unreachable" in run_out, shown  # no Redis: the config was good
    elif "free space below output.min_free_bytes" in run_out:
        assert ran == 1, shown  # a floor this disk cannot meet: the config was good
    else:
        assert ran == 0, shown


@pytest.mark.timeout(120)
@pytest.mark.parametrize("section", SECTION_NAMES)
def test_check_and_run_agree(tmp_path_factory: pytest.TempPathFactory,
                             capfd: pytest.CaptureFixture[str], section: str) -> None:  # fmt: skip
    keys = [k for k in KEYS if k[0] == section]

    @settings(max_examples=EXAMPLES_PER_KEY * len(keys), derandomize=True, deadline=None,
              database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                    HealthCheck.too_slow])  # fmt: skip
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(keys), label="key")
        value = data.draw(hostile(key), label="value")
        agree(tmp_path_factory.mktemp("ex"), capfd, key, value)

    check()


def test_every_key_is_drawn() -> None:
    """The keys come from the settings classes: a new key is tried without editing this file."""
    assert len(KEYS) == len(set(KEYS)) > 80
    assert ("output", "feeds", "0", "path") in KEYS and ("cluster", "redis_url") in KEYS
    import tomllib

    tricky = ["a\x00\"\\é\x7f\ud800", math.inf]
    assert tomllib.loads("x = " + _value(tricky))["x"] == ["a\x00\"\\é\x7f\ufffd", math.inf]
