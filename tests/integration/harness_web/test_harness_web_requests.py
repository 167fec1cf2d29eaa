"""web.http_request against a real loopback server (harness.md §17, §21): SSRF refusals before any packet
(literals, spellings, DNS names, redirects), pinning against rebinding, redirects, size and time limits,
the web:<loop> bucket and the in-flight bound."""

from __future__ import annotations

import asyncio
import base64
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


def client(settings: WebSettings = ALLOW, clock: ManualClock | None = None, **names: list[str]) -> WebClient:
    """A client whose resolver knows ``names`` (dots as underscores) and nothing else."""
    table = {k.replace("_", "."): v for k, v in names.items()}
    calls: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    web = WebClient(settings, monotonic_ns=(clock or ManualClock()).monotonic_ns, resolver=resolve)
    web.resolve_calls = calls  # type: ignore[attr-defined]
    return web


def error(result: dict[str, Any]) -> str:
    assert set(result) == {"error"}, result
    assert result["error"]["message"]
    return str(result["error"]["code"])


async def test_plain_get(harness_runner: Any, server: TargetServer) -> None:
    web = client()
    result = await web.request({"url": server.base + "/ok#frag"})
    assert result["status"] == 200 and result["body"] == "hello" and result["encoding"] == "utf-8"
    assert result["final_url"] == server.base + "/ok" and result["truncated"] is False
    assert result["body_bytes"] == 5 and isinstance(result["elapsed_ms"], int)
    assert "set-cookie" not in result["headers"] and len(result["headers"]["x-custom"]) == 512
    assert all(k == k.lower() for k in result["headers"])


BLOCKED = [
    "http://127.0.0.1:{port}/ok", "http://[::1]:{port}/ok", "http://10.0.0.1/", "http://172.16.5.4/",
    "http://172.31.255.255/", "http://192.168.1.1/", "http://169.254.169.254/latest/meta-data/",
    "http://[fd00::1]/", "http://[fc00::1]/", "http://[fe80::1]/", "http://100.64.0.1/", "http://0.0.0.0:{port}/",
    "http://[::]/", "http://[::ffff:127.0.0.1]:{port}/", "http://[::ffff:10.0.0.1]/", "http://[::ffff:7f00:1]/",
    "http://2130706433:{port}/", "http://0177.0.0.1:{port}/", "http://0x7f.0.0.1:{port}/", "http://127.1:{port}/",
    "http://017700000001:{port}/ok", "http://[64:ff9b::a00:1]/", "http://[2002:a00:1::]/", "http://[::127.0.0.1]/",
    "http://224.0.0.1/", "http://255.255.255.255/", "http://198.18.0.1/", "http://127.0.0.3:{port}/",
    "https://169.254.169.254/",
]


@pytest.mark.parametrize("url", BLOCKED)
async def test_forbidden_targets_are_refused_before_any_packet(
    harness_runner: Any, server: TargetServer, url: str,
) -> None:
    web = client()
    result = await web.request({"url": url.format(port=server.port)})
    assert error(result) == "blocked_destination"
    assert web.connects == 0 and sum(server.hits.values()) == 0


async def test_names_resolving_to_forbidden_addresses(harness_runner: Any, server: TargetServer) -> None:
    web = client(internal_example=["10.0.0.1"], mixed_example=["93.184.216.34", "10.0.0.1"],
                 meta_example=["169.254.169.254"], six_example=["::ffff:127.0.0.1"], ok_example=["127.0.0.2"])
    for host in ("internal.example", "mixed.example", "meta.example", "six.example"):
        assert error(await web.request({"url": f"http://{host}:{server.port}/ok"})) == "blocked_destination"
    assert error(await web.request({"url": "http://nowhere.example/"})) == "dns_failure"
    assert web.connects == 0 and sum(server.hits.values()) == 0
    real = WebClient(ALLOW, monotonic_ns=ManualClock().monotonic_ns)  # the system resolver
    assert error(await real.request({"url": f"http://localhost:{server.port}/ok"})) == "blocked_destination"
    assert real.connects == 0


async def test_the_connection_is_pinned_to_the_checked_address(harness_runner: Any, server: TargetServer) -> None:
    answers = iter([["127.0.0.2"], ["127.0.0.1"]])  # a rebinding resolver: safe first, loopback after

    async def rebinding(host: str, port: int) -> list[str]:
        return next(answers)

    web = WebClient(ALLOW, monotonic_ns=ManualClock().monotonic_ns, resolver=rebinding)
    result = await web.request({"url": f"http://rebind.test:{server.port}/echo"})
    echoed = json.loads(result["body"])
    assert result["status"] == 200 and echoed["headers"]["host"] == f"rebind.test:{server.port}"
    assert next(answers) == ["127.0.0.1"]  # resolved exactly once
    assert web.connects == 1


async def test_redirects_are_off_by_default_and_each_hop_is_checked(
    harness_runner: Any, server: TargetServer,
) -> None:
    web = client(internal_example=["10.0.0.1"])
    to_loopback = f"{server.base}/redirect?to=http://127.0.0.1:{server.port}/ok"
    result = await web.request({"url": to_loopback})
    assert result["status"] == 302 and result["headers"]["location"] == f"http://127.0.0.1:{server.port}/ok"
    assert error(await web.request({"url": to_loopback, "follow_redirects": True})) == "blocked_destination"
    for to in (f"http://internal.example:{server.port}/ok", "http://[::ffff:127.0.0.1]/",
               "http://2130706433/", "http://169.254.169.254/"):
        assert error(await web.request({"url": f"{server.base}/redirect?to={to}&status=307",
                                        "follow_redirects": True})) == "blocked_destination"
    assert server.hits["/ok"] == 0 and server.hits["/redirect"] == 6
    assert web.connects == 6  # one per first hop: no packet to a refused redirect target
    assert error(await web.request({"url": f"{server.base}/redirect?to=ftp://x/", "follow_redirects": True})) \
        == "invalid_request"


async def test_redirect_hops(harness_runner: Any, server: TargetServer) -> None:
    web = client()
    ok = await web.request({"url": server.base + "/chain/3", "follow_redirects": True})
    assert ok["status"] == 200 and ok["body"] == "end of chain" and ok["final_url"] == server.base + "/chain/0"
    assert error(await web.request({"url": server.base + "/chain/4", "follow_redirects": True})) \
        == "too_many_redirects"
    post = await web.request({"method": "POST", "url": f"{server.base}/redirect?to=/echo&status=303",
                              "body": {"a": 1}, "follow_redirects": True})
    assert json.loads(post["body"])["method"] == "GET"
    keep = await web.request({"method": "PUT", "url": f"{server.base}/redirect?to=/echo&status=307",
                              "body": "x", "follow_redirects": True})
    assert json.loads(keep["body"])["method"] == "PUT" and json.loads(keep["body"])["body"] == "x"


async def test_request_shapes(harness_runner: Any, server: TargetServer) -> None:
    web = client()
    result = await web.request({"method": "post", "url": server.base + "/echo?q=1", "body": {"k": [1, "é"]},
                                "headers": {"X-Token": "abc", "Accept": "application/json"}})
    echoed = json.loads(result["body"])
    assert echoed["method"] == "POST" and echoed["path"] == "/echo?q=1"
    assert json.loads(echoed["body"]) == {"k": [1, "é"]}
    assert echoed["headers"]["content-type"] == "application/json" and echoed["headers"]["x-token"] == "abc"
    text = json.loads((await web.request({"method": "PATCH", "url": server.base + "/echo", "body": "plain"}))["body"])
    assert text["headers"]["content-type"].startswith("text/plain") and text["body"] == "plain"
    head = await web.request({"method": "HEAD", "url": server.base + "/ok"})
    assert head["status"] == 200 and head["body"] == ""


async def test_size_limits(harness_runner: Any, server: TargetServer) -> None:
    web = client()
    small = await web.request({"url": server.base + "/big?n=2000", "max_bytes": 100})
    assert small["truncated"] is True and small["body_bytes"] == 100 and small["body"] == "0123456789" * 10
    default = await web.request({"url": server.base + "/big?n=2000"})
    assert default["truncated"] is True and default["body_bytes"] == 8192
    exact = await web.request({"url": server.base + "/big?n=10", "max_bytes": 100})
    assert exact["truncated"] is False and exact["body_bytes"] == 100
    binary = await web.request({"url": server.base + "/bin", "max_bytes": 12_288})
    assert binary["encoding"] == "base64" and binary["truncated"] is True
    raw = base64.b64decode(binary["body"])
    assert raw == (bytes(range(256)) * 60)[: len(raw)] and binary["body_bytes"] == len(raw)
    assert len(json.dumps(binary, separators=(",", ":")).encode()) <= 16_384 - 256  # fits a host-call result
    utf8 = await web.request({"url": server.base + "/utf8"})
    assert utf8["encoding"] == "utf-8" and utf8["body"] == "héllo wörld ✓\ufffd"


async def test_time_limit_and_transport_failures(harness_runner: Any, server: TargetServer) -> None:
    web = client()
    assert error(await web.request({"url": server.base + "/slow?s=2", "timeout_ms": 300})) == "timeout"
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        closed = s.getsockname()[1]
    assert error(await web.request({"url": f"http://127.0.0.2:{closed}/"})) == "connect_failed"
    assert error(await web.request({"url": f"https://127.0.0.2:{server.port}/"})) == "tls_error"


async def test_the_time_limit_covers_dns(harness_runner: Any) -> None:
    async def stuck(host: str, port: int) -> list[str]:
        await asyncio.sleep(30)
        return ["127.0.0.2"]

    web = WebClient(ALLOW, monotonic_ns=ManualClock().monotonic_ns, resolver=stuck)
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert error(await web.request({"url": "http://slow-dns.example/", "timeout_ms": 200})) == "timeout"
    assert loop.time() - start < 5  # generous: the 200 ms bound, not the resolver's 30 s
    assert web.connects == 0


async def test_loop_bucket_and_in_flight_bound(harness_runner: Any, server: TargetServer) -> None:
    clock = ManualClock()
    web = client(clock=clock)
    codes = [("error" in await web.request({"url": server.base + "/ok"}, loop_id="lp_1")) for _ in range(61)]
    assert codes == [False] * 60 + [True]
    assert "error" not in await web.request({"url": server.base + "/ok"}, loop_id="lp_2")
    clock.advance(ms=1000)
    assert "error" not in await web.request({"url": server.base + "/ok"}, loop_id="lp_1")
    assert error(await web.request({"url": server.base + "/ok"}, loop_id="lp_1")) == "rate_limited"

    one = client(WebSettings(allow_networks=("127.0.0.2/32",), max_in_flight=1))
    slow = asyncio.ensure_future(one.request({"url": server.base + "/slow?s=0.5"}))
    await asyncio.sleep(0.1)
    assert error(await one.request({"url": server.base + "/ok"})) == "rate_limited"
    assert (await slow)["status"] == 200
    assert (await one.request({"url": server.base + "/ok"}))["status"] == 200


async def test_allow_private_opens_private_ranges_but_not_unspecified(
    harness_runner: Any, server: TargetServer,
) -> None:
    web = client(WebSettings(allow_private=True))
    assert (await web.request({"url": server.base + "/ok"}))["status"] == 200
    assert error(await web.request({"url": f"http://0.0.0.0:{server.port}/"})) == "blocked_destination"
    assert error(await web.request({"url": "http://224.0.0.1/"})) == "blocked_destination"


@pytest.mark.parametrize("args", [
    None, "http://x/", {}, {"url": "ftp://example.com/"}, {"url": "http://user:pw@example.com/"},
    {"url": "http:///path"}, {"url": "/relative"}, {"url": "http://example.com/" + "a" * 2048},
    {"url": "http://exa mple.com/"}, {"url": "http://example.com/", "method": "TRACE"},
    {"url": "http://example.com/", "method": "CONNECT"}, {"url": "http://example.com/", "extra": 1},
    {"url": "http://example.com/", "headers": {"Host": "evil"}},
    {"url": "http://example.com/", "headers": {"proxy-authorization": "x"}},
    {"url": "http://example.com/", "headers": {"Transfer-Encoding": "chunked"}},
    {"url": "http://example.com/", "headers": {"X-A": "a\r\nInjected: 1"}},
    {"url": "http://example.com/", "headers": {"bad name": "v"}},
    {"url": "http://example.com/", "headers": {"X-A": 1}},
    {"url": "http://example.com/", "headers": {f"X-{i}": "v" for i in range(33)}},
    {"url": "http://example.com/", "headers": {"X-Big": "v" * 8200}},
    {"url": "http://example.com/", "body": "x"},
    {"url": "http://example.com/", "method": "POST", "body": "x" * 8193},
    {"url": "http://example.com/", "timeout_ms": 0}, {"url": "http://example.com/", "timeout_ms": 20_001},
    {"url": "http://example.com/", "max_bytes": 12_289}, {"url": "http://example.com/", "max_bytes": "10"},
    {"url": "http://example.com/", "follow_redirects": "yes"}, {"url": "http://[fe80::1%25eth0]/"},
    {"url": "http://1.2.3.4.5/"}, {"url": "http://example.com:99999/"},
])
async def test_invalid_arguments(harness_runner: Any, args: Any) -> None:
    web = client()
    assert error(await web.request(args)) == "invalid_request"
    assert web.connects == 0 and web.resolve_calls == []  # type: ignore[attr-defined]
