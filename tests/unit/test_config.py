"""Config: strict, typed, frozen; a bad key or value exits 2 naming the key, before any request."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from frontier_crawl.config import ConfigError, CrawlSettings, load, parse, to_toml
from frontier_crawl.config.reference import render_reference

GOOD = """
[crawl]
seeds = ["http://example.test/"]
output_dir = "out"
"""


def _run_cli(tmp_path: Path, text: str, *extra: str) -> subprocess.CompletedProcess[str]:
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        (
            "[politeness]\nmn_delay_s = 1\n",
            "politeness.mn_delay_s: unknown key (did you mean 'min_delay_s'?)",
        ),
        ('[fetch]\ntimeout_s = "30"\n', "fetch.timeout_s: expected `float`, got `str`"),
        ("[politeness]\nmin_delay_s = -1\n", "politeness.min_delay_s: must be >= 0.0, got -1"),
        ("[crawl2]\nx = 1\n", "crawl2: unknown key"),
        ("[workers]\nprocesses = -1\n", "workers.processes: must be >= 0, got -1"),
        ("[fetch]\nlow_speed_time_s = 1\n", "fetch.low_speed_time_s: must be >= 2, got 1"),
        (
            '[output]\nwarc_compressor = "gzip"\n',
            'output.warc_compressor: must be one of "isal", "zlib-ng", got "gzip"',
        ),
        (
            '[output]\nwarc_compressor = "isal"\nwarc_gzip_level = 6\n',
            "output.warc_gzip_level: isal has levels 1 to 3 (0: its default), got 6",
        ),
        ("[scope]\nexclude = ['(']\n", "scope.exclude: invalid regular expression"),
        ("[fetch]\nresolve = ['nope']\n", "fetch.resolve: expected 'host:port:address'"),
        ('[politeness]\nrobots_token = "bot/1"\n', "politeness.robots_token: 'bot/1' is not"),
        ('[politeness]\nuser_agent = "bot2/1"\n', "set politeness.robots_token"),
        ("[politeness]\nrobots_ttl_s = 0\n", "politeness.robots_ttl_s: must be > 0.0, got 0"),
        ("[recrawl]\nchanged_factor = 2\n", "recrawl.changed_factor: must be <= 1.0, got 2"),
        (
            "[recrawl]\nmin_interval_s = 60\ninitial_interval_s = 30\n",
            "recrawl.initial_interval_s: 30.0 is outside min_interval_s 60.0",
        ),
        ("[[recrawl.rules]]\npattern = '('\n", "recrawl.rules[0].pattern: invalid regular"),
    ],
)
def test_bad_config_exits_2_naming_the_key(tmp_path: Path, snippet: str, expected: str) -> None:
    proc = _run_cli(tmp_path, GOOD + snippet)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing was started


def test_check_prints_effective_config(tmp_path: Path) -> None:
    proc = _run_cli(tmp_path, GOOD + "[politeness]\nmin_delay_s = 0.5\n", "--check")
    assert proc.returncode == 0, proc.stderr
    assert "min_delay_s = 0.5" in proc.stdout
    assert "connections_per_host = 1" in proc.stdout  # defaults are shown too
    assert str(tmp_path / "out") in proc.stdout  # output_dir resolved against the config file


def test_effective_config_round_trips(tmp_path: Path) -> None:
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(GOOD)
    settings = load(cfg)
    again = tmp_path / "again.toml"
    again.write_text(to_toml(settings))
    assert load(again) == settings


def test_settings_are_frozen() -> None:
    settings = parse({"crawl": {"seeds": ["http://a.test/"]}})
    with pytest.raises(AttributeError):
        settings.politeness.min_delay_s = 0  # type: ignore[misc]
    assert isinstance(settings, CrawlSettings)
    assert msgspec.structs.asdict(settings.fetch)["retries"] == 3


def test_seeds_file_and_missing_seeds(tmp_path: Path) -> None:
    (tmp_path / "seeds.txt").write_text("# comment\nhttp://a.test/\n\nhttps://b.test/x\n")
    cfg = tmp_path / "crawl.toml"
    cfg.write_text('[crawl]\nseeds_file = "seeds.txt"\n')
    assert load(cfg).crawl.seeds == ("http://a.test/", "https://b.test/x")
    with pytest.raises(ConfigError, match=r"^crawl\.seeds: at least one seed"):
        parse({})
    with pytest.raises(ConfigError, match=r"^crawl\.seeds: only http and https"):
        parse({"crawl": {"seeds": ["file:///etc/passwd"]}})


def test_bloom_filter_sizing_is_accepted_and_ignored(tmp_path: Path) -> None:
    """crawl.toml files of versions with a Bloom filter load (exit 0); --check says the two
    keys are ignored, and a file without them gets no such note."""
    seeds = f'[crawl]\nseeds = ["http://a.test/"]\noutput_dir = "{tmp_path / "out"}"\n'
    proc = _run_cli(tmp_path, seeds + "[frontier]\nseen_capacity = 100_000\n"
                    "seen_error_rate = 1e-6\n", "--check")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stdout.splitlines() if line.startswith("# note:")]
    assert notes == [
        f"# note: frontier.{key} is ignored (no longer used: the seen-set is exact in LMDB, "
        "with no Bloom filter to size)"
        for key in ("seen_capacity", "seen_error_rate")
    ]
    proc = _run_cli(tmp_path, seeds, "--check")
    assert proc.returncode == 0 and "# note:" not in proc.stdout, proc


def test_invalid_toml_is_a_config_error(tmp_path: Path) -> None:
    proc = _run_cli(tmp_path, "[crawl\nseeds = ")
    assert proc.returncode == 2
    assert "invalid TOML" in proc.stderr


def test_reference_is_in_step_with_settings() -> None:
    committed = Path(__file__).resolve().parents[2] / "docs" / "config.md"
    assert committed.read_text() == render_reference()
    for key in ("min_delay_s", "memory_urls", "seen_error_rate", "warc_max_bytes", "processes"):
        assert f"`{key}`" in committed.read_text()
