"""Trap limits: each names the config key that stopped the URL."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from frontier_crawl.frontier.traps import Limits, trap_reason

L = Limits(max_depth=5, max_url_length=100, max_repeated_segments=2, max_query_params=3)


def test_each_limit() -> None:
    assert trap_reason("http://a.test/x", 5, L) is None
    assert trap_reason("http://a.test/x", 6, L) == "max-depth"
    assert trap_reason("http://a.test/" + "x" * 100, 0, L) == "max-url-length"
    assert trap_reason("http://a.test/a/b/a/b/a/b", 0, L) == "max-repeated-segments"
    assert trap_reason("http://a.test/a/b/a/b", 0, L) is None
    assert trap_reason("http://a.test/?a=1&b=2&c=3", 0, L) is None
    assert trap_reason("http://a.test/?a=1&b=2&c=3&d=4", 0, L) == "max-query-params"
    # the host part never counts as a path segment
    assert trap_reason("http://a.a.a.test/a", 0, L) is None


def test_zero_disables() -> None:
    off = Limits(max_depth=100, max_url_length=10_000, max_repeated_segments=0, max_query_params=0)
    assert trap_reason("http://a.test/a/a/a/a/a/a/a?" + "&".join("x" * 50), 0, off) is None


@given(st.lists(st.sampled_from(["a", "b", "cal", "2024"]), max_size=12))
def test_repeated_segments_property(segments: list[str]) -> None:
    url = "http://a.test/" + "/".join(segments)
    hit = trap_reason(url, 0, Limits(max_url_length=10_000, max_repeated_segments=2))
    too_many = any(segments.count(s) > 2 for s in segments)
    assert (hit == "max-repeated-segments") == too_many


def _reference(url: str, depth: int, limits: Limits) -> str | None:
    """trap_reason as first written (before its fast paths): split, then count."""
    from collections import Counter

    if depth > limits.max_depth:
        return "max-depth"
    if len(url) > limits.max_url_length:
        return "max-url-length"
    path, _, query = url.split("://", 1)[-1].partition("?")
    if limits.max_query_params and query.count("&") + 1 > limits.max_query_params:
        return "max-query-params"
    if limits.max_repeated_segments:
        segments = [s for s in path.split("/")[1:] if s]
        if (
            len(segments) > limits.max_repeated_segments
            and Counter(segments).most_common(1)[0][1] > limits.max_repeated_segments
        ):
            return "max-repeated-segments"
    return None


@given(
    st.lists(st.sampled_from(["a", "b", "", "x.html", "://", "?", "&", "=1", "/", "a&b"])),
    st.sampled_from(["http://a.test/", "https://h.test:8080/", "", "a.test/", "http://a/"]),
    st.integers(0, 4),
    st.integers(0, 4),
)
def test_fast_paths_answer_as_the_split(
    parts: list[str], start: str, repeated: int, params: int
) -> None:
    """The bounds counted over the whole URL never skip a URL the split would stop."""
    url = start + "".join(parts)
    limits = Limits(max_url_length=10_000, max_repeated_segments=repeated,
                    max_query_params=params)  # fmt: skip
    assert trap_reason(url, 0, limits) == _reference(url, 0, limits)
