"""The web-platform-tests URL test data against the link resolver and the canonicaliser.

``tests/data/urltestdata.json`` is ``url/resources/urltestdata.json`` of the public
web-platform-tests repository, as mirrored by the Ada project (ada-url/ada
``tests/wpt/urltestdata.json``, last synced from web-platform-tests in its commit c4f3af6,
2026-07-11); its licence is ``tests/data/urltestdata.LICENSE.md``.

Every case whose base, input or expected URL is http(s) is run (the others are about schemes a
crawler never requests) two ways:

1. ``resolve`` (parse/resolve.py, fast paths included) must return the expected ``href`` without
   its fragment, or None where the data expects a failure or a non-http(s) URL;
2. what the frontier keeps must agree: ``canonicalize(resolve(...)) ==
   canonicalize(expected href)``, and for an input without a base also
   ``canonicalize(input)`` (the canonicaliser parses seeds and Location targets itself).

``SKIPPED`` lists the cases that do not pass, each with its reason; the test fails if a listed
case starts to pass (so the list never goes stale) or if any other case fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.frontier.urls import canonicalize
from frontier_crawl.parse.resolve import Base, resolve

DATA = Path(__file__).parent.parent / "data" / "urltestdata.json"
_C0_OR_SPACE = "".join(chr(i) for i in range(0x21))

_OLD_ADA = (
    "can_ada 3.0.0 bundles an Ada release older than this data: it still refuses a host "
    "label that starts with xn-- but is not valid punycode, which the URL Standard now "
    "accepts (ada-url 4.0.0 passes). Such a host is left uncrawled; no valid name is lost"
)
SKIPPED: dict[tuple[str, str | None], str] = {
    ("http://a.b.c.xn--pokxncvks", None): _OLD_ADA,
    ("http://10.0.0.xn--pokxncvks", None): _OLD_ADA,
    ("http://a.b.c.XN--pokxncvks", None): _OLD_ADA,
    ("http://a.b.c.Xn--pokxncvks", None): _OLD_ADA,
    ("http://10.0.0.XN--pokxncvks", None): _OLD_ADA,
    ("http://10.0.0.xN--pokxncvks", None): _OLD_ADA,
    ("https://xn--/", None): _OLD_ADA,
}


def _is_http(case: dict[str, Any]) -> bool:
    """Does the case involve an http(s) URL (as base, input or expected result)?"""
    text = case["input"].strip(_C0_OR_SPACE)
    text = text.replace("\t", "").replace("\n", "").replace("\r", "").lower()
    base = case.get("base") or ""
    return (
        case.get("protocol") in ("http:", "https:")
        or base.startswith(("http:", "https:"))
        or text.startswith(("http:", "https:"))
    )


def _cases() -> list[dict[str, Any]]:
    return [c for c in json.loads(DATA.read_text("utf-8")) if isinstance(c, dict) and _is_http(c)]


def _expected(case: dict[str, Any]) -> str | None:
    if case.get("failure") or case.get("protocol") not in ("http:", "https:"):
        return None
    href: str = case["href"]
    return href.split("#")[0]


def _problems(case: dict[str, Any]) -> list[str]:
    """What is wrong with our answer to one case (empty: it passes)."""
    base = Base.of(case["base"]) if case.get("base") else Base("")
    got, expected = resolve(base, case["input"]), _expected(case)
    problems = []
    if got != expected:
        problems.append(f"resolve: {got!r}, expected {expected!r}")
    kept = canonicalize(got) if got is not None else None
    wanted = canonicalize(expected) if expected is not None else None
    if kept != wanted:
        problems.append(f"canonicalize(resolve): {kept!r}, expected {wanted!r}")
    if not case.get("base") and canonicalize(case["input"]) != wanted:
        problems.append(f"canonicalize(input): {canonicalize(case['input'])!r} != {wanted!r}")
    return problems


def test_wpt_url_data_http_cases(capsys: pytest.CaptureFixture[str]) -> None:
    cases = _cases()
    failed: dict[tuple[str, str | None], list[str]] = {}
    for case in cases:
        problems = _problems(case)
        if problems:
            failed[(case["input"], case.get("base"))] = problems
    unexpected = {key: p for key, p in failed.items() if key not in SKIPPED}
    stale = [key for key in SKIPPED if key not in failed]
    with capsys.disabled():
        print(
            f"\nweb-platform-tests urltestdata.json: {len(cases)} http(s) cases run, "
            f"{len(cases) - len(failed)} passed, {len(failed)} skipped (listed in SKIPPED)"
        )
    assert not unexpected, unexpected
    assert not stale, f"these now pass: remove them from SKIPPED: {stale}"
    assert len(cases) > 400  # the file is the real suite, not a stub
