"""web.http_request rules not covered elsewhere (harness.md §17.2–17.3): environment proxies are ignored, credentials
do not follow a redirect to another origin, at most 32 result headers, and the time limit spans every hop."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from web_target_server import TargetServer, serving

from wakeful.harness.web import WebClient
from wakeful.harness.web_policy import WebSettings
from wakeful.runtime import ManualClock

ALLOW = WebSettings(allow_networks=("127.0.0.2/32",))


@pytest.fixture
def server() -> Iterator[TargetServer]:
    with serving() as target:
        yield target


def client(**names: list[str]) -> WebClient:
    table = {k.replace("_", "."): v for k, v in names.items()}

    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    return WebClient(ALLOW, monotonic_ns=ManualClock().monotonic_ns, resolver=resolve)


async def test_environment_proxies_are_ignored(
    harness_runner: Any, server: TargetServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # a proxy that refuses every connection
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    web = client(site_example=["127.0.0.2"])
    for url in (server.base + "/ok", f"http://site.example:{server.port}/echo"):
        result = await web.request({"url": url})
        assert result["status"] == 200, result
    assert server.hits["/ok"] == 1 and server.hits["/echo"] == 1  # reached directly, not through the proxy
    echoed = json.loads(result["body"])
    assert echoed["path"] == "/echo" and echoed["headers"]["host"] == f"site.example:{server.port}"


async def test_credentials_do_not_follow_a_redirect_to_another_origin(
    harness_runner: Any, server: TargetServer,
) -> None:
    web = client(other_example=["127.0.0.2"])
    sent = {"Authorization": "Bearer secret-token", "Cookie": "sid=1", "X-Trace": "t-1"}
    same = await web.request({"url": f"{server.base}/redirect?to=/echo&status=307", "headers": sent,
                              "follow_redirects": True})
    kept = json.loads(same["body"])["headers"]
    assert kept["authorization"] == "Bearer secret-token" and kept["cookie"] == "sid=1"  # same origin
    cross = await web.request({"url": f"{server.base}/redirect?to=http://other.example:{server.port}/echo&status=307",
                               "headers": sent, "follow_redirects": True})
    assert cross["final_url"] == f"http://other.example:{server.port}/echo"
    dropped = json.loads(cross["body"])["headers"]
    assert "authorization" not in dropped and "cookie" not in dropped
    assert dropped["x-trace"] == "t-1" and dropped["host"] == f"other.example:{server.port}"


async def test_at_most_32_result_headers(harness_runner: Any, server: TargetServer) -> None:
    result = await client().request({"url": server.base + "/headers?n=40"})
    headers = result["headers"]
    assert result["status"] == 200 and len(headers) == 32
    assert all(name == name.lower() for name in headers) and "set-cookie" not in headers
    assert headers["x-h00"] == "0" and "x-h39" not in headers  # the first 32 are kept, in order
    assert len(headers["x-custom"]) == 512


async def test_the_time_limit_spans_every_hop(harness_runner: Any, server: TargetServer) -> None:
    from urllib.parse import quote

    web = client()
    second = "/redirect?delay=0.4&to=/ok"
    url = f"{server.base}/redirect?delay=0.4&to={quote(second, safe='')}"
    ok = await web.request({"url": url, "follow_redirects": True, "timeout_ms": 5000})
    assert ok["status"] == 200 and ok["body"] == "hello"  # two slow hops fit 5 s
    result = await web.request({"url": url, "follow_redirects": True, "timeout_ms": 600})
    assert result["error"]["code"] == "timeout", result  # each hop fits 600 ms, the exchange does not
    assert server.hits["/redirect"] == 4 and server.hits["/ok"] == 1


# harness.md §17.3: one address of every blocked class (IPv4, IPv6 and IPv6 forms embedding a blocked IPv4)
CLASSES = {
    "loopback": "127.0.0.1", "loopback-v6": "::1", "unspecified": "0.0.0.0", "unspecified-v6": "::",
    "private-10": "10.1.2.3", "private-172": "172.16.0.1", "private-192": "192.168.1.1", "ula-v6": "fd00::1",
    "link-local": "169.254.169.254", "link-local-v6": "fe80::1", "cgnat": "100.64.0.1", "multicast": "224.0.0.1",
    "multicast-v6": "ff02::1", "broadcast": "255.255.255.255", "reserved": "240.0.0.1",
    "benchmarking": "198.18.0.1", "v4-mapped": "::ffff:10.0.0.1", "nat64": "64:ff9b::a00:1",
    "6to4": "2002:a00:1::", "v4-compatible": "::127.0.0.1",
}


@pytest.mark.parametrize("address", CLASSES.values(), ids=list(CLASSES))
async def test_every_class_is_refused_by_name_and_by_redirect(
    harness_runner: Any, server: TargetServer, address: str,
) -> None:
    web = client(target_example=[address], pair_example=["127.0.0.2", address])
    for host in ("target.example", "pair.example"):  # alone, and next to an allowed address
        direct = await web.request({"url": f"http://{host}:{server.port}/ok"})
        assert direct["error"]["code"] == "blocked_destination", (host, direct)
        hop = f"{server.base}/redirect?to=http://{host}:{server.port}/ok&status=302"
        redirected = await web.request({"url": hop, "follow_redirects": True})
        assert redirected["error"]["code"] == "blocked_destination", (host, redirected)
    assert web.connects == 2 and server.hits["/redirect"] == 2 and server.hits["/ok"] == 0  # first hops only
