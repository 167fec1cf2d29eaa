"""The HTTP limits reach the server (docs/decisions-api.md "Slow clients"): ``server.*`` keys become uvicorn's
keep-alive and the guarded protocol's deadlines and connection limit, which fits the descriptor limit; the raw
answers are well-formed HTTP with the API's error body."""

from __future__ import annotations

import json

import h11

from wakeful.api.connections import GuardedH11Protocol, raw_answer
from wakeful.api.server import FD_RESERVE, connection_limit, make_server
from wakeful.harness.config import Config, HttpLimits, load_config
from wakeful.harness.embed import Harness


def test_server_keys_reach_the_uvicorn_server() -> None:
    limits = HttpLimits(header_timeout_s=3, body_timeout_s=4, keep_alive_s=7, max_connections=50)
    server = make_server(Harness(Config(http=limits)), "127.0.0.1", 0, access_log=False)
    server.config.load()
    protocol = server.config.http_protocol_class
    assert isinstance(protocol, type) and issubclass(protocol, GuardedH11Protocol)
    assert protocol.guard.limits == limits and protocol.guard.max_connections == connection_limit(50)
    assert server.config.timeout_keep_alive == 7


def test_the_keys_are_configuration_keys_with_defaults() -> None:
    cfg = load_config(env={"WAKEFUL_HOME": "/nonexistent-wakeful", "WAKEFUL_SERVER__MAX_CONNECTIONS": "64"})
    assert cfg.http == HttpLimits(max_connections=64)
    shown = cfg.effective()
    assert shown["server.header_timeout_s"] == (10, "default") and shown["server.body_timeout_s"] == (30, "default")
    assert shown["server.keep_alive_s"] == (5, "default")
    assert shown["server.max_connections"] == (64, "env WAKEFUL_SERVER__MAX_CONNECTIONS")


def test_the_connection_limit_fits_the_descriptor_limit() -> None:
    assert connection_limit(1000, 1024) == 1024 - 128  # an eighth kept back
    assert connection_limit(1000, 256) == 256 - FD_RESERVE
    assert connection_limit(1000, 20_000) == 1000
    assert connection_limit(1000, 50) == 1  # never zero
    assert connection_limit(1000, -1) == 1000  # unlimited


def test_raw_answers_parse_as_http() -> None:
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    client.receive_data(raw_answer(503, "unavailable", "too many \"connections\"", retry_after=1))
    response = client.next_event()
    assert isinstance(response, h11.Response) and response.status_code == 503
    headers = dict(response.headers)
    assert headers[b"retry-after"] == b"1" and headers[b"connection"] == b"close"
    assert headers[b"x-request-id"].startswith(b"req_")
    data = client.next_event()
    assert isinstance(data, h11.Data)
    assert json.loads(data.data) == {"error": "unavailable", "message": "too many \"connections\""}
    assert isinstance(client.next_event(), h11.EndOfMessage)
