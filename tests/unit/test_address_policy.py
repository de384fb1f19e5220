"""The address policy (fetch/addresses.py): categories, the seeds' allowances, the setting."""

from __future__ import annotations

import pytest

from frontier_crawl.config import ConfigError, parse
from frontier_crawl.config.settings import ADDRESS_CATEGORIES
from frontier_crawl.fetch.addresses import CATEGORIES, PUBLIC, AddressPolicy, category


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("100.64.0.1", "shared"),
        ("100.127.255.255", "shared"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("255.255.255.255", "reserved"),
        # IPv6 forms carrying an IPv4 address have its category
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
        ("2002:a00:1::", "private"),  # 6to4 of 10.0.0.1
        ("::127.0.0.1", "loopback"),  # IPv4-compatible
        # public
        ("8.8.8.8", PUBLIC),
        ("172.32.0.1", PUBLIC),
        ("100.128.0.1", PUBLIC),
        ("2606:4700::1111", PUBLIC),
        ("::ffff:8.8.8.8", PUBLIC),
    ],
)
def test_categories(address: str, expected: str) -> None:
    assert category(address) == expected


def test_the_config_names_the_same_categories() -> None:
    assert tuple(CATEGORIES) == ADDRESS_CATEGORIES


def test_by_default_only_public_addresses_are_allowed() -> None:
    policy = AddressPolicy()
    assert policy.why_refused("93.184.216.34", "http://example.org/") == ""
    for address in ("127.0.0.1", "169.254.169.254", "10.0.0.1", "::1", "::ffff:127.0.0.1"):
        assert policy.why_refused(address, "http://example.org/") == category(address)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("169.254.169.254", "link-local"),  # a cloud metadata service
        ("10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "link-local"),  # IPv4-mapped: the IPv4 address's category
        ("fe80::1", "link-local"),
        ("100.64.0.1", "shared"),
    ],
)
def test_internal_addresses_are_refused_by_default(address: str, kind: str) -> None:
    """What the e2e tests cannot send traffic to: refused with its category, by default and
    in a crawl whose seeds are on loopback (loopback allowed, for every host, not these)."""
    assert AddressPolicy().why_refused(address, "http://site.test/") == kind
    crawl = AddressPolicy.for_crawl(
        [], ["http://site.test:8080/"], ["site.test:8080:127.0.0.1", f"meta.site.test:80:{address}"]
    )
    assert crawl.categories == {"loopback"}
    assert crawl.why_refused("127.0.0.2", "http://meta.site.test/") == ""
    assert crawl.why_refused(address, "http://meta.site.test/latest/meta-data/") == kind


def test_the_e2e_tests_premise_loopback_beside_a_localhost_seed_is_refused() -> None:
    """tests/e2e/test_ssrf.py: the seed ``localhost`` (no fetch.resolve entry) allows its own
    host only, so ``meta.localhost`` mapped to 127.0.0.2 (plain or IPv4-mapped) is refused,
    and the refused-address tests need no address beyond loopback."""
    policy = AddressPolicy.for_crawl(
        [], ["http://localhost:8080/"], ["meta.localhost:9090:127.0.0.2"]
    )
    assert policy.categories == frozenset()
    assert policy.why_refused("127.0.0.1", "http://localhost:8080/robots.txt") == ""
    assert policy.why_refused("::1", "http://localhost:8080/") == ""
    for address in ("127.0.0.2", "::ffff:127.0.0.2"):
        assert policy.why_refused(address, "http://meta.localhost:9090/") == "loopback"


def test_allowed_categories_and_networks() -> None:
    policy = AddressPolicy(["Loopback", "10.1.0.0/16", "fd00::/8"])
    assert policy.why_refused("127.0.0.1", "http://a.test/") == ""
    assert policy.why_refused("10.1.9.9", "http://a.test/") == ""
    assert policy.why_refused("10.2.0.1", "http://a.test/") == "private"
    assert policy.why_refused("fd00::5", "http://a.test/") == ""
    assert policy.why_refused("169.254.169.254", "http://a.test/") == "link-local"


def test_the_seeds_hosts_and_their_categories() -> None:
    """A seed's host may be anywhere; the categories the config gives for seeds (literal
    addresses, fetch.resolve entries of seed hosts) are allowed for every host; a resolve
    entry of a host that is no seed allows nothing."""
    policy = AddressPolicy.for_crawl(
        [],
        ["http://intranet.corp/", "http://127.0.0.1:8080/", "http://named.test:81/"],
        ["named.test:81:10.9.9.9", "other.test:80:169.254.169.254"],
    )
    assert policy.categories == {"loopback", "private"}
    assert policy.why_refused("192.168.7.7", "http://intranet.corp/x") == ""  # the seed's host
    assert policy.why_refused("192.168.7.7", "http://elsewhere.corp/") == ""  # private allowed
    assert policy.why_refused("127.0.0.2", "http://elsewhere.corp/") == ""
    assert policy.why_refused("169.254.169.254", "http://other.test/") == "link-local"
    assert policy.why_refused("169.254.169.254", "http://intranet.corp/") == ""


def test_a_seed_name_resolved_by_dns_allows_only_itself() -> None:
    policy = AddressPolicy.for_crawl([], ["http://localhost:8080/"], [])
    assert policy.categories == frozenset()
    assert policy.why_refused("127.0.0.1", "http://localhost:8080/a") == ""
    assert policy.why_refused("127.0.0.1", "http://evil.test/") == "loopback"


def test_through_a_proxy_only_literal_addresses_are_checked() -> None:
    policy = AddressPolicy()
    assert policy.refuses_url("http://169.254.169.254/latest/") == "link-local"
    assert policy.refuses_url("http://[::1]:8080/") == "loopback"
    assert policy.refuses_url("http://name.test/") == ""
    assert policy.refuses_url("http://8.8.8.8/") == ""
    # the names a leading digit or a colon does not make addresses
    assert policy.refuses_url("http://127.0.0.1.nip.test/") == ""
    assert policy.refuses_url("http://1e100.test/") == ""
    assert policy.refuses_url("http://10.0.0.1:8080/a?b=c") == "private"
    assert policy.refuses_url("http://[::ffff:127.0.0.1]/") == "loopback"
    assert policy.refuses_url("http://user:pw@localhost/") == ""


def test_answers_are_remembered_boundedly() -> None:
    policy = AddressPolicy()
    for i in range(10_000):
        policy.why_refused(f"10.0.{i // 256}.{i % 256}", "http://a.test/")
    assert len(policy._answers) <= 4096


def _raw(**fetch: object) -> dict[str, dict[str, object]]:
    return {"crawl": {"seeds": ["http://a.test/"], "output_dir": "out"}, "fetch": dict(fetch)}


def test_the_setting_is_checked() -> None:
    s = parse(_raw(allow_addresses=["loopback", "10.0.0.0/8", "::1"]))
    assert s.fetch.allow_addresses == ("loopback", "10.0.0.0/8", "::1")
    assert parse(_raw()).fetch.allow_addresses == ()  # safe default: public only
    for bad in ("localhost", "10.0.0.0/33", "private-ish", ""):
        with pytest.raises(ConfigError, match=r"fetch\.allow_addresses"):
            parse(_raw(allow_addresses=[bad]))
