"""Config values an attacker (or a typo) would try: secrets never shown, URLs that do not parse,
feed paths onto the crawl's own files, values the run would refuse. Each is a config error
naming the key (exit 2) before anything is started, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frontier_crawl.cli import main
from frontier_crawl.config import redact_url

GOOD = """
[crawl]
seeds = ["http://127.0.0.1:9/"]
output_dir = "out"
"""


def _cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, *args: str
) -> tuple[int, str]:
    """(exit status, stdout + stderr) of ``frontier-crawl --config crawl.toml *args``."""
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(text, encoding="utf-8")
    status = main(["--config", str(cfg), *args])
    out = capsys.readouterr()
    return status, out.out + out.err


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


# ------------------------------------------------------------------------------------ secrets

#: passwords with every character that ends an authority or a userinfo in RFC 3986
PASSWORDS = ["S3cret/PW+b64==", "pa#ssword1", "pa?ssword2", "p@ssword3", "pass:word4",
             "pa/ss?wo#rd@5", "[secret6]"]  # fmt: skip


def _pieces(password: str) -> list[str]:
    """The password and each run of 4+ characters of it between URL delimiters."""
    import re

    return [password, *(p for p in re.split(r"[/?#@:\[\]]", password) if len(p) >= 4)]


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize("scheme", ["redis", "rediss"])
def test_redact_hides_any_password(password: str, scheme: str) -> None:
    url = f"{scheme}://user:{password}@redis.example:6380/2"
    shown = redact_url(url)
    assert not any(p in shown for p in _pieces(password)), shown
    assert shown.startswith(f"{scheme}://") and "***" in shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:S3cret/PW+b64==@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://:a#b@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://:a?b@host/0", "redis://:***@host/0"),
        ("unix://:pw@/run/redis.sock?db=1", "unix://:***@/run/redis.sock?db=1"),
        ("redis://host/0?password=pw&db=1", "redis://host/0?password=***&db=1"),
        ("http://user:pw@proxy:3128", "http://:***@proxy:3128"),
        ("not a url", "not a url"),
    ],
)
def test_redact_keeps_the_rest(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize("password", PASSWORDS)
def test_check_never_prints_the_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], password: str
) -> None:
    """Written raw (not percent-encoded) the URL does not parse as meant: a config error that
    says so (exit 2), without the password; --check or the node start never shows it."""
    url = f"redis://:{password}@127.0.0.1:9/0"  # the discard port: nothing listens
    text = GOOD + f"[cluster]\nredis_url = {_toml(url)}\nunreachable_timeout_s = 0.2\n"
    for args in (["--check"], ["--node", "0"]):
        status, out = _cli(tmp_path, capsys, text, *args)
        assert not any(p in out for p in _pieces(password)), out
        assert "Traceback" not in out
        if "@" in password or "/" in password or "?" in password or "#" in password:
            assert status == 2 and "cluster.redis_url" in out, out


def test_check_shows_a_percent_encoded_password_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from urllib.parse import quote

    url = f"redis://:{quote('S3cret/PW+b64==', safe='')}@host:6379/0"
    status, out = _cli(tmp_path, capsys, GOOD + f"[cluster]\nredis_url = {_toml(url)}\n", "--check")
    assert status == 0, out
    assert 'redis_url = "redis://:***@host:6379/0"' in out and "S3cret" not in out


def test_check_redacts_the_proxy_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = _cli(
        tmp_path,
        capsys,
        GOOD + '[fetch]\nproxy = "http://bob:hunter22@127.0.0.1:3128"\n',
        "--check",
    )
    assert status == 0, out
    assert "hunter22" not in out and 'proxy = "http://:***@127.0.0.1:3128"' in out


def test_node_start_error_never_shows_the_password() -> None:
    """redis-py's own message about a URL quotes the part it could not read: scrubbed."""
    from frontier_crawl.cluster import ClusterError, Redis

    with pytest.raises(ClusterError) as err:
        Redis("redis://:S3cret/PW+b64==@host:6379/0", 0.1)
    assert "S3cret" not in str(err.value) and "PW+b64" not in str(err.value), str(err.value)


# ------------------------------------------------------------------------- URLs that do not parse


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://:pw@host:99999/0", "port"),
        ("redis://host:abc/0", "port"),
        ("redis://host:0/0", "port"),
        ("redis://host:-1/0", "port"),
        ("redis://[::1/0", "host"),
        ("redis:///0", "host"),
        ("redis://", "host"),
        ("redis://host/abc", "database"),
        ("redis://host/0?db=x", "db"),
        ("redis://host/0?no_such_option=1", "no_such_option"),
        ("unix://", "socket"),
        ("redis://ho st/0", "spaces"),
        ("http://host/0", "redis://"),
        ("REDIS://H:1", "redis://"),
    ],
)
def test_bad_redis_url_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, problem: str
) -> None:
    status, out = _cli(tmp_path, capsys, GOOD + f"[cluster]\nredis_url = {_toml(url)}\n", "--check")
    assert status == 2, out
    assert out.count("cluster.redis_url:") == 1 and problem in out, out
    assert "Traceback" not in out
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "url",
    ["redis://127.0.0.1:6379/0", "rediss://u:p%40ss@redis.example:6380/2", "redis://[::1]/0",
     "unix:///run/redis.sock?db=2", "redis://h/0?password=pw&health_check_interval=5",
     "rediss://h/0?ssl_cert_reqs=required&ssl_ca_certs=/a/ca.pem"],
)  # fmt: skip
def test_good_redis_urls_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str) -> None:
    status, out = _cli(tmp_path, capsys, GOOD + f"[cluster]\nredis_url = {_toml(url)}\n", "--check")
    assert status == 0, out


# ------------------------------------------------------------------------------------ feed paths


@pytest.mark.parametrize(
    "path",
    ["report.html", "control.token", "control.addr", "report.json", "crawl.jsonl", "workers.json",
     "cluster.lmdb", "cluster.lmdb-lock", "state", "state/x.jsonl", "warc/items.jsonl",
     "worker-0/items.jsonl", "worker-12", "./report.html", "a/../report.html", "Report.HTML",
     "crawl.jsonl.damaged-20240101", ".report.json.abc.tmp", "control.token.tmp", "..",
     "../items.jsonl", "/tmp/items.jsonl", "a/../../x.jsonl", "items\x00.jsonl", "it\x01ems",
     "", ".", "dir/", "frontier-crawl-20240101000000-00000-1.warc.gz"],
)  # fmt: skip
def test_feed_path_onto_the_crawls_own_files_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    text = GOOD + f"[[output.feeds]]\npath = {_toml(path)}\n"
    status, out = _cli(tmp_path, capsys, text, "--check")
    assert status == 2, out
    assert "output.feeds[0].path:" in out or "output.feeds:" in out, out
    assert "Traceback" not in out


def test_two_feeds_one_inside_the_other_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = GOOD + '[[output.feeds]]\npath = "a"\n[[output.feeds]]\npath = "a/b.jsonl"\n'
    status, out = _cli(tmp_path, capsys, text, "--check")
    assert status == 2 and "output.feeds" in out, out


@pytest.mark.parametrize("path", ["items.jsonl", "feeds/books.csv", "a/b/c.jsonl", "reports.json"])
def test_ordinary_feed_paths_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    status, out = _cli(
        tmp_path, capsys, GOOD + f"[[output.feeds]]\npath = {_toml(path)}\n", "--check"
    )
    assert status == 0, out


# ------------------------------------------------------------- what the run refuses, --check too


@pytest.mark.parametrize(
    ("snippet", "key"),
    [
        ('[output]\nwarc_prefix = "../x"\n', "output.warc_prefix:"),
        ('[output]\nwarc_prefix = "a/b"\n', "output.warc_prefix:"),
        ('[output]\nwarc_prefix = ""\n', "output.warc_prefix:"),
        ('[output]\nwarc_prefix = "x\\u0000y"\n', "output.warc_prefix:"),
        ('[politeness]\nuser_agent = "bot\\u0000/1"\n', "politeness.user_agent:"),
        ('[politeness]\nuser_agent = "bot/1 \\u0007"\n', "politeness.user_agent:"),
        (
            '[politeness]\nrobots_token = "bot"\nuser_agent = "bot/1 \\u0000"\n',
            "politeness.user_agent:",
        ),
        ('[politeness]\nuser_agent = "bot/1 (Zürich)"\n', "politeness.user_agent:"),
        ("[fetch]\ntimeout_s = inf\n", "fetch.timeout_s:"),
        ("[fetch]\nconnect_timeout_s = 1e300\n", "fetch.connect_timeout_s:"),
        ("[fetch]\ndns_cache_ttl_s = 9223372036854775807\n", "fetch.dns_cache_ttl_s:"),
        ("[fetch]\nlow_speed_bytes_s = 9223372036854775807\n", "fetch.low_speed_bytes_s:"),
        ('output_dir = "o\\u0000ut"\n', "crawl.output_dir:"),
        ('[fetch]\nproxy = "http://pr\\u0000oxy:1"\n', "fetch.proxy:"),
    ],
)
def test_check_refuses_what_the_run_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], snippet: str, key: str
) -> None:
    if snippet.startswith("output_dir"):  # a key of [crawl]
        text = GOOD.replace('output_dir = "out"\n', snippet)
    else:
        text = GOOD + snippet
    status, out = _cli(tmp_path, capsys, text, "--check")
    assert status == 2, out
    assert key in out and "Traceback" not in out, out


@pytest.mark.parametrize(
    "url",
    ["redis://127.0.0.1:6379/0", "rediss://u:p%40ss@redis.example:6380/2", "redis://[::1]/0",
     "unix:///run/redis.sock?db=2", "redis://h/0?password=pw&health_check_interval=5",
     "rediss://h/0?ssl_cert_reqs=required&ssl_ca_certs=/a/ca.pem&ssl_check_hostname=false",
     "redis://h?db=3&socket_timeout=2.5&client_name=crawler&protocol=3"],
)  # fmt: skip
def test_what_the_config_accepts_the_redis_client_takes(url: str) -> None:
    """Every URL the check passes gives redis-py a connection it can build (no unknown keyword,
    no bad value), and the password it reads is the one written, percent-decoded."""
    import redis
    from redis.connection import URL_QUERY_ARGUMENT_PARSERS

    from frontier_crawl.config.checks import _REDIS_FLOAT, _REDIS_INT, redis_url_problem

    assert redis_url_problem(url) is None
    pool = redis.Redis.from_url(url).connection_pool
    pool.make_connection()  # a TypeError here would be a traceback at the node's start
    if "p%40ss" in url:
        assert pool.connection_kwargs["password"] == "p@ss"
    assert all(URL_QUERY_ARGUMENT_PARSERS[n] is int for n in _REDIS_INT)
    assert all(URL_QUERY_ARGUMENT_PARSERS[n] is float for n in _REDIS_FLOAT)


def test_check_refuses_a_listen_address_this_machine_does_not_have(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """192.0.2.1 (TEST-NET-1) is nobody's address: the run cannot bind it, --check says so."""
    status, out = _cli(tmp_path, capsys, GOOD + '[control]\nlisten = "192.0.2.1:8740"\n', "--check")
    assert status == 2 and "control.listen: cannot listen on 192.0.2.1:8740" in out, out
    status, out = _cli(tmp_path, capsys, GOOD + '[control]\nlisten = "127.0.0.1:0"\n', "--check")
    assert status == 0, out
