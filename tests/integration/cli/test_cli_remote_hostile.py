"""Remote mode against a hostile or broken server (interfaces.md §4.1): a real loopback HTTP server in a thread
answers NaN, wrong shapes, deep nesting, endless pages, trickled or huge bodies, terminal control characters,
rich markup, redirects and an SSE stream with an endless line.

The `wakeful` command runs as a real subprocess: it must end with a typed error and its exit code — one JSON
document with `--json`, no traceback — and never hang, exhaust memory, follow a redirect with the key or print
control characters raw. The trickle and size bounds of the shared client are checked in-process.
"""

from __future__ import annotations

import http.server
import json
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from support.cli_remote import env_for

pytestmark = pytest.mark.integration

KEY = "wk_k1_secretsecret"
Reply = Callable[[http.server.BaseHTTPRequestHandler], None]


def _json(body: Any, status: int = 200, ctype: str = "application/json") -> Reply:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()

    def reply(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    return reply


INFO = _json({"principal": {"group_id": "g1", "kind": "group"}})


@contextmanager
def hostile(routes: dict[str, Reply]) -> Iterator[tuple[str, list[tuple[str, dict[str, str]]]]]:
    """A loopback server answering each path by the longest matching prefix; yields its URL and the requests."""
    seen: list[tuple[str, dict[str, str]]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def handle_any(self) -> None:
            seen.append((self.path, dict(self.headers)))
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            match = max((p for p in routes if self.path.startswith(p)), key=len, default=None)
            with suppress(BrokenPipeError, ConnectionResetError):
                (routes[match] if match is not None else _json({"error": "not_found", "message": "no"}, 404))(self)

        do_GET = do_POST = do_DELETE = handle_any

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    # the client has gone when the block ends: closing does not wait for a handler that still sleeps (a stream
    # that stalls for 30 s would hold every such test for those 30 s)
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _limit_memory() -> None:  # a client that buffers without bound fails here instead of exhausting the machine
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def cli(tmp_path: Path, url: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wakeful.cli.main", "--server", url, "--key", KEY, *args],
                          capture_output=True, text=True, env=env_for(tmp_path), timeout=timeout,
                          preexec_fn=_limit_memory)


def one_doc(proc: subprocess.CompletedProcess[str]) -> Any:
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return json.loads(lines[0])


def refused(proc: subprocess.CompletedProcess[str], code: int = 1) -> dict[str, Any]:
    found = one_doc(proc)
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert isinstance(found, dict) and isinstance(found.get("error"), str), found
    assert KEY not in proc.stdout + proc.stderr
    return found


LOOPS = "/v1/agent-groups/g1/loops"


@pytest.mark.parametrize("body", [
    b'{"items":[{"id":NaN}],"next_cursor":null}',  # Python's json reads NaN; --json must not crash on it
    b'[' * 100_000 + b']' * 100_000,  # nesting deeper than the decoder's recursion
], ids=["nan", "deep"])
def test_a_body_that_is_not_plain_json_is_a_typed_error(tmp_path: Path, body: bytes) -> None:
    with hostile({"/v1/info": INFO, LOOPS: _json(body)}) as (url, _):
        for args in (("loop", "list", "--json"), ("loop", "get", "L1", "--json")):
            assert refused(cli(tmp_path, url, *args))["error"] == "invalid_response"


@pytest.mark.parametrize(("route", "body", "args"), [
    (LOOPS + "/L1", [1, 2, 3], ("loop", "get", "L1")),  # a list where the Loop object belongs
    (LOOPS + "/L1", "text", ("loop", "get", "L1")),
    (LOOPS + "/L1/events", [1], ("loop", "events", "L1")),
    (LOOPS + "/L1/events", {"items": [1, {"x": 1}], "next_cursor": None}, ("loop", "events", "L1")),
    (LOOPS, {"items": [1, None], "next_cursor": None}, ("loop", "list")),
    (LOOPS + "/L1/pending/retry", {"retried": 5}, ("loop", "retry", "L1")),
    ("/v1/agent-groups/g1/artifacts", {"nope": 1}, ("session", "messages", "S1")),
], ids=["list", "text", "events-list", "events-items", "loop-items", "retry", "messages"])
def test_a_wrong_shape_is_one_typed_error_in_both_outputs(tmp_path: Path, route: str, body: Any,
                                                          args: tuple[str, ...]) -> None:
    with hostile({"/v1/info": INFO, route: _json(body),
                  "/v1/agent-groups/g1/sessions": _json({"items": "no"})}) as (url, _):
        proc = cli(tmp_path, url, *args, "--json")
        found = one_doc(proc)  # the server's odd items as they came (exit 0), or a typed error (exit 1)
        if proc.returncode:
            assert refused(proc)["error"] in ("invalid_response", "internal")
        else:
            assert isinstance(found, list)
        human = cli(tmp_path, url, *args)
        assert human.returncode == 1, (human.stdout, human.stderr)
        assert "Traceback" not in human.stderr and human.stderr.startswith("error ")


def test_pages_that_never_end_do_not_hang_the_command(tmp_path: Path) -> None:
    # every page empty, every page naming a next one: the client must give up, not loop forever
    with hostile({"/v1/info": INFO, LOOPS: _json({"items": [], "next_cursor": "again"})}) as (url, seen):
        assert refused(cli(tmp_path, url, "loop", "list", "--json"))["error"] == "invalid_response"
        assert len(seen) < 5000


def test_error_pages_and_redirects(tmp_path: Path) -> None:
    with hostile({}) as (elsewhere, stolen):
        def moved(h: http.server.BaseHTTPRequestHandler) -> None:
            h.send_response(307)
            h.send_header("Location", f"{elsewhere}/v1/agent-groups/g1/loops")
            h.send_header("Content-Length", "0")
            h.end_headers()

        html = b"<html><body>\x1b[2J oops</body></html>"
        with hostile({"/v1/info": INFO, LOOPS + "/moved": moved, LOOPS + "/html": _json(html, 500, "text/html"),
                      LOOPS + "/busy": _json(html, 503, "text/html")}) as (url, _):
            assert refused(cli(tmp_path, url, "loop", "get", "moved", "--json"))["error"] == "invalid_response"
            assert not stolen, "the key followed a redirect to another server"
            assert refused(cli(tmp_path, url, "loop", "get", "html", "--json"))["error"] == "invalid_response"
            assert refused(cli(tmp_path, url, "loop", "get", "busy", "--json"), 3)["error"] == "unavailable"


def test_control_characters_and_markup_from_the_server_are_shown_not_obeyed(tmp_path: Path) -> None:
    evil = "\x1b]52;c;SGVsbG8=\x07\x1b[31m[/bold][link=x]\x9b"
    loop = {"id": "L1", "name": evil, "state": "active", "incarnation": 1, "agent_id": "a1"}
    with hostile({"/v1/info": INFO, LOOPS: _json({"items": [loop], "next_cursor": None}),
                  LOOPS + "/L1/logs": _json({"items": [{"seq": 1, "at_ms": 1, "incarnation": 1, "source": "guest",
                                                        "text": evil}], "next_after_seq": 1})}) as (url, _):
        for args in (("loop", "list"), ("loop", "logs", "L1")):
            proc = cli(tmp_path, url, *args)
            assert proc.returncode == 0, (proc.stdout, proc.stderr)
            assert not any(c in proc.stdout for c in "\x1b\x07\x9b"), repr(proc.stdout)
            assert "\\x1b]52" in proc.stdout and "[/bold][link=x]" in proc.stdout, repr(proc.stdout)


def _stream(chunks: Callable[[], Iterator[bytes]]) -> Reply:
    def reply(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for chunk in chunks():
            h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            h.wfile.flush()

    return reply


SESSION = "/v1/agent-groups/g1/sessions/S1"


def test_session_watch_survives_an_endless_line_and_junk(tmp_path: Path) -> None:
    def endless() -> Iterator[bytes]:
        yield b"data: "
        block = b"a" * 65536
        while True:
            yield block

    with hostile({"/v1/info": INFO, SESSION + "/messages": _json({"items": [], "next_cursor": None}),
                  SESSION + "/stream": _stream(endless)}) as (url, _):
        proc = cli(tmp_path, url, "session", "watch", "S1", "--from-start", "--for", "30", "--json", timeout=100)
        assert refused(proc)["error"] == "invalid_response"

    message = {"id": "m1", "kind": "wake", "content": "\x1b[2Jhi\x07", "created_ms": 1, "cursor": "c1"}

    def junk() -> Iterator[bytes]:
        yield b"garbage without colon\n:comment\nevent: other\ndata: {}\n\nid: \xff\xfe\ndata: not json\n\n"
        yield b"id: c1\ndata: " + json.dumps(message).encode() + b"\n\n"
        time.sleep(30)

    with hostile({"/v1/info": INFO, SESSION + "/messages": _json({"items": [], "next_cursor": None}),
                  SESSION + "/stream": _stream(junk)}) as (url, _):
        proc = cli(tmp_path, url, "session", "watch", "S1", "--from-start", "--for", "3", timeout=100)
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\\x1b[2Jhi" in proc.stdout


def test_the_client_bounds_time_and_size_of_an_answer() -> None:
    from wakeful.cli.output import Unavailable
    from wakeful.cli.remote import Remote, RemoteError

    def trickle(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", "100000")
        h.end_headers()
        for _ in range(200):  # a byte every 0.2 s: each read is quick, the answer never completes
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(0.2)

    def huge(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        block = b" " * (1 << 20)
        for _ in range(400):  # 400 MiB, far beyond any answer of the API
            h.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))

    with hostile({"/slow": trickle, "/huge": huge}) as (url, _):
        began = time.monotonic()
        with pytest.raises(Unavailable):
            Remote(url, KEY, timeout=1.0).get("/slow")
        assert time.monotonic() - began < 30  # a generous smoke bound: the trickle alone lasts 40 s
        with pytest.raises(RemoteError) as caught:
            Remote(url, KEY, timeout=30.0).get("/huge")
        assert caught.value.code == "invalid_response"


def test_bad_arguments_are_usage_errors_and_a_url_password_is_never_echoed(tmp_path: Path) -> None:
    with hostile({"/v1/info": INFO, "/v1/agent-groups/g1/goals": _json({"items": [], "next_cursor": None})}) as (
            url, seen):
        for agent in ("é", "a\nb"):  # an agent id no header can carry: exit 2, nothing sent
            proc = cli(tmp_path, url, "goal", "list", "--group", "g1", "--agent", agent, "--json")
            assert refused(proc, 2)["error"] == "invalid_request"
        assert not seen
    for server in ("http://[::1", "http://h:99999"):
        proc = subprocess.run([sys.executable, "-m", "wakeful.cli.main", "--server", server, "--key", KEY, "loop",
                               "list", "--json"], capture_output=True, text=True, env=env_for(tmp_path), timeout=60)
        assert refused(proc, 2)["error"] == "invalid_request"
    proc = subprocess.run([sys.executable, "-m", "wakeful.cli.main", "--server", "http://u:hunter2@127.0.0.1:1",
                           "--key", KEY, "loop", "list", "--json"], capture_output=True, text=True,
                          env=env_for(tmp_path), timeout=60)
    assert refused(proc, 3)["error"] == "unavailable"
    assert "hunter2" not in proc.stdout + proc.stderr


def test_session_watch_refuses_a_start_cursor_no_header_can_carry_and_skips_nan(tmp_path: Path) -> None:
    page = {"items": [{"id": "m0", "cursor": "c\n0"}], "next_cursor": None}
    with hostile({"/v1/info": INFO, SESSION + "/messages": _json(page)}) as (url, seen):
        proc = cli(tmp_path, url, "session", "watch", "S1", "--for", "20", "--json", timeout=100)
        assert refused(proc)["error"] == "invalid_response"
        assert not any("/stream" in path for path, _ in seen)

    def nan() -> Iterator[bytes]:
        yield b'id: c1\ndata: {"id": "m1", "content": NaN}\n\nid: c2\ndata: {"id": "m2", "content": "ok"}\n\n'
        time.sleep(30)

    with hostile({"/v1/info": INFO, SESSION + "/messages": _json({"items": [], "next_cursor": None}),
                  SESSION + "/stream": _stream(nan)}) as (url, _):
        proc = cli(tmp_path, url, "session", "watch", "S1", "--from-start", "--for", "3", "--json", timeout=100)
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        assert [json.loads(line)["id"] for line in proc.stdout.splitlines()] == ["m2"]


def test_session_watch_for_ends_while_the_server_sends_only_comments(tmp_path: Path) -> None:
    def comments() -> Iterator[bytes]:
        for _ in range(240):  # a keep-alive comment every 0.25 s for a minute: no read ever times out
            yield b":\n"
            time.sleep(0.25)

    with hostile({"/v1/info": INFO, SESSION + "/messages": _json({"items": [], "next_cursor": None}),
                  SESSION + "/stream": _stream(comments)}) as (url, _):
        began = time.monotonic()
        proc = cli(tmp_path, url, "session", "watch", "S1", "--from-start", "--for", "2", "--json", timeout=100)
        assert proc.returncode == 0 and proc.stdout == "", (proc.stdout, proc.stderr)
        assert time.monotonic() - began < 40  # smoke bound: --for 2 must not wait for the stream to end (60 s)


def test_loop_send_refuses_a_payload_nested_too_deep_before_any_request(tmp_path: Path) -> None:
    payload = tmp_path / "deep.json"
    payload.write_text("[" * 100_000 + "]" * 100_000)
    with hostile({"/v1/info": INFO}) as (url, seen):
        proc = cli(tmp_path, url, "loop", "send", "L1", "--topic", "t", "--payload", str(payload), "--json")
        assert refused(proc, 2)["error"] == "invalid_request"
        assert not any("/events" in path for path, _ in seen)
