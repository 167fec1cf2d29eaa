"""TLS through the pinned connection (harness.md §17.3): the socket goes to the checked address while SNI and
certificate verification use the original host name; a certificate for another name is ``tls_error``."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from wakeful.harness.web import WebClient
from wakeful.harness.web_policy import WebSettings
from wakeful.runtime import ManualClock


def _cert(tmp: Path, name: str) -> tuple[Path, Path]:
    key, cert = tmp / f"{name}.key", tmp / f"{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=30)
    return key, cert


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[int, Path, list[str]]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (it makes the test certificate)")
    key, cert = _cert(tmp_path, "pinned.test")
    snis: list[str] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: snis.append(str(name))  # type: ignore[assignment,misc,func-returns-value]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = f"host={self.headers['Host']}".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1]), cert, snis
    finally:
        server.shutdown()
        server.server_close()


async def test_tls_uses_the_name_while_connecting_to_the_checked_address(
    harness_runner: Any, tls_server: tuple[int, Path, list[str]],
) -> None:
    port, cert, snis = tls_server

    async def resolve(host: str, port: int) -> list[str]:
        return {"pinned.test": ["127.0.0.2"], "other.test": ["127.0.0.2"]}[host]

    web = WebClient(WebSettings(allow_networks=("127.0.0.2/32",)), monotonic_ns=ManualClock().monotonic_ns,
                    resolver=resolve)
    web.tls_verify = ssl.create_default_context(cafile=str(cert))
    ok = await web.request({"url": f"https://pinned.test:{port}/x"})
    assert ok["status"] == 200 and ok["body"] == f"host=pinned.test:{port}"
    assert snis == ["pinned.test"]
    wrong = await web.request({"url": f"https://other.test:{port}/x"})  # the certificate names pinned.test
    assert wrong["error"]["code"] == "tls_error"
    untrusted = WebClient(WebSettings(allow_networks=("127.0.0.2/32",)), monotonic_ns=ManualClock().monotonic_ns,
                          resolver=resolve)  # the system trust store does not know the test certificate
    assert (await untrusted.request({"url": f"https://pinned.test:{port}/x"}))["error"]["code"] == "tls_error"
