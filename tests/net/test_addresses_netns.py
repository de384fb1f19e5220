"""The address policy against names that resolve or rebind to loopback, the seed being on a
"public" address, in a private network namespace (tests/hostile/netns_addresses.py); skipped
where namespaces cannot be made."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.netns import netns_unavailable
from tests.hostile.netns_addresses import run

_WHY = netns_unavailable()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")


@pytest.mark.timeout(90)
def test_names_resolving_or_rebinding_to_loopback_are_refused(tmp_path: Path) -> None:
    """The seed's host is on 198.51.100.7, so loopback is not allowed. ``inner.site.test``
    (fetch.resolve -> 127.0.0.1) is refused; ``rebind.site.test`` answers 198.51.100.7 for
    its robots.txt, then 127.0.0.1 for its pages (TTL 0, a new connection each): refused at
    the address connected to. The server on 127.0.0.1 is never asked anything."""
    out = run(str(tmp_path / "out"))
    assert out["loopback"] == []
    got = {x["url"].split("/", 3)[2].split(":")[0] + "/" + x["url"].split("/", 3)[3]:
           (x["outcome"], x["error"]) for x in out["lines"]}  # fmt: skip
    # its robots.txt, the first request, is refused: the host is retired, its pages with it
    assert got["inner.site.test/robots.txt"] == ("robots-txt", "address-refused")
    assert got["inner.site.test/latest/meta-data/"][0] == "address-refused"
    assert got["rebind.site.test/robots.txt"] == ("robots-txt", None)  # the first answer
    assert got["rebind.site.test/a"][0] == "address-refused"
    assert got["rebind.site.test/b"][0] == "address-refused"
    assert ["rebind.site.test", "/robots.txt"] in out["public"]
    assert out["a_queries"] >= 2
    assert out["complete"] is True
