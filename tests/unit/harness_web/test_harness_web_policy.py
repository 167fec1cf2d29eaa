"""The egress policy of web.http_request (harness.md §17.3) as a table, and URL parsing (§17.1)."""

from __future__ import annotations

import ipaddress

import pytest

from wakeful.harness.errors import InvalidRequest
from wakeful.harness.web_policy import TargetError, WebSettings, blocked_reason, parse_target

DEFAULT = WebSettings()
PRIVATE = WebSettings(allow_private=True)


@pytest.mark.parametrize(("address", "why"), [
    ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"), ("::1", "loopback"),
    ("0.0.0.0", "unspecified"), ("0.1.2.3", "unspecified"), ("::", "unspecified"),
    ("10.0.0.1", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"), ("192.168.0.1", "private"),
    ("fc00::1", "private"), ("fd12:3456::1", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"), ("febf::1", "link-local"),
    ("100.64.0.1", "cgnat"), ("100.127.255.255", "cgnat"),
    ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"), ("ff02::1", "multicast"),
    ("255.255.255.255", "broadcast"), ("240.0.0.1", "reserved"), ("192.0.2.1", "reserved"),
    ("198.18.0.1", "benchmarking"), ("198.19.255.255", "benchmarking"),
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:169.254.169.254", "link-local"),
    ("64:ff9b::a00:1", "private (embedded in 64:ff9b::a00:1)"),
    ("2002:c0a8:101::1", "private (embedded in 2002:c0a8:101::1)"),
    ("::7f00:1", "loopback (embedded in ::7f00:1)"),
])
def test_blocked_classes(address: str, why: str) -> None:
    assert blocked_reason(ipaddress.ip_address(address), DEFAULT) == why


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "172.32.0.1", "100.128.0.1", "169.253.0.1",
                                     "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"])
def test_public_addresses_pass(address: str) -> None:
    assert blocked_reason(ipaddress.ip_address(address), DEFAULT) is None


def test_operator_allowances() -> None:
    nets = WebSettings(allow_networks=("127.0.0.2/32", "fd00::/8"))
    assert blocked_reason(ipaddress.ip_address("127.0.0.2"), nets) is None
    assert blocked_reason(ipaddress.ip_address("127.0.0.1"), nets) == "loopback"
    assert blocked_reason(ipaddress.ip_address("fd00::5"), nets) is None
    assert blocked_reason(ipaddress.ip_address("::ffff:127.0.0.2"), nets) is None  # the same socket target
    for ok in ("127.0.0.1", "10.1.1.1", "169.254.169.254", "::1", "fe80::1", "::ffff:10.0.0.1"):
        assert blocked_reason(ipaddress.ip_address(ok), PRIVATE) is None
    for never in ("0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "ff02::1"):
        assert blocked_reason(ipaddress.ip_address(never), PRIVATE) is not None
    with pytest.raises(ValueError):
        WebSettings(allow_networks=("10.0.0.0/33",))
    with pytest.raises(InvalidRequest):
        WebSettings.parse({"allow_networks": "10.0.0.0/8"}, {})
    assert WebSettings.parse({}, {"WAKEFUL_WEB__ALLOW_NETWORKS": "10.0.0.0/8, 127.0.0.2/32",
                                  "WAKEFUL_WEB__ALLOW_PRIVATE": "false"}).allow_networks == ("10.0.0.0/8",
                                                                                            "127.0.0.2/32")


@pytest.mark.parametrize(("url", "host", "port", "target", "clean"), [
    ("http://Example.COM/a?b=1#frag", "example.com", 80, "/a?b=1", "http://example.com/a?b=1"),
    ("https://example.com", "example.com", 443, "/", "https://example.com/"),
    ("HTTP://example.com:8080/x", "example.com", 8080, "/x", "http://example.com:8080/x"),
    ("http://2130706433/", "127.0.0.1", 80, "/", "http://127.0.0.1/"),
    ("http://0177.0.0.01/", "127.0.0.1", 80, "/", "http://127.0.0.1/"),
    ("http://0x7f000001/", "127.0.0.1", 80, "/", "http://127.0.0.1/"),
    ("http://127.1/", "127.0.0.1", 80, "/", "http://127.0.0.1/"),
    ("http://[::FFFF:127.0.0.1]:81/", "::ffff:127.0.0.1", 81, "/", "http://[::ffff:127.0.0.1]:81/"),
    ("http://bücher.de/ä", "xn--bcher-kva.de", 80, "/%C3%A4", "http://xn--bcher-kva.de/%C3%A4"),
])
def test_targets(url: str, host: str, port: int, target: str, clean: str) -> None:
    parsed = parse_target(url)
    assert (parsed.host, parsed.port, parsed.target) == (host, port, target)
    assert parsed.url == clean


@pytest.mark.parametrize("url", ["", "ftp://x/", "http://u@x/", "http://:80/", "http://x y/", "http://a..b/",
                                 "http://1.2.3.4.5/", "http://[zz]/", "http://x:0/",
                                 "http://x/" + "a" * 2050, "http://\x00/", "javascript:alert(1)"])
def test_bad_targets(url: str) -> None:
    with pytest.raises(TargetError):
        parse_target(url)
