"""policy/hosts.py: one answer to "is this host this machine only?" for the gateway's bind check, the
security audit and the chat provider."""

from __future__ import annotations

import pytest

from mnemo.gateway.server import BindRefused, check_bind
from mnemo.policy.hosts import is_loopback_host, url_is_loopback


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST", "app.localhost", "127.0.0.1", "127.0.0.2", "::1", "[::1]", " ::1 "]
)
def test_loopback_spellings(host: str) -> None:
    assert is_loopback_host(host) and is_loopback_host(host, resolve=True)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "example.com", "", "[fe80::1]"])
def test_not_loopback(host: str) -> None:
    assert not is_loopback_host(host)


def test_a_name_counts_only_when_resolved_and_all_its_addresses_are_loopback() -> None:
    assert not is_loopback_host("ip6-localhost-does-not-exist.invalid", resolve=True)
    assert is_loopback_host("localhost", resolve=True)


def test_urls() -> None:
    assert url_is_loopback("http://127.0.0.1:8080/v1") and url_is_loopback("http://[::1]:8080/v1")
    assert url_is_loopback("http://localhost/v1")
    assert not url_is_loopback("https://api.openai.com/v1") and not url_is_loopback("not a url")


def test_the_gateway_binds_bracketed_ipv6_loopback_without_auth() -> None:
    check_bind("[::1]", auth_configured=False)  # was refused: the bracket spelling was not recognised
    with pytest.raises(BindRefused):
        check_bind("0.0.0.0", auth_configured=False)
