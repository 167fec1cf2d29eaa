"""A fake decide provider that is a real HTTP server on loopback (harness.md §21: the provider is an outside
service): it speaks the Jev-compatible or the OpenAI-compatible protocol and can be told to misbehave.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Raw = dict[str, Any]


def valid_raw(request: dict[str, Any], model: str = "fake-1") -> Raw:
    """A correct raw answer (§16.3) for ``request``: first option wins, scores expect level 1."""
    answers: dict[str, Any] = {}
    for key, q in request["questions"].items():
        if q["type"] == "noul":
            answers[key] = {"noul": 0.83}
        elif q["type"] == "choice":
            keys = list(q["criteria"])
            probs = {k: (0.7 if i == 0 else 0.3 / (len(keys) - 1)) for i, k in enumerate(keys)}
            answers[key] = {"choice": keys[0], "probabilities": probs, "confidence": 0.9}
        else:
            n = len(q["criteria"])
            probs = {str(i): 0.0 for i in range(n)}
            probs["0"], probs["1"], probs["2" if n > 2 else "1"] = 0.25, 0.5, 0.25 if n > 2 else 0.75
            score = sum(i * p for i, p in enumerate(probs[str(i)] for i in range(n)))
            answers[key] = {"score": score, "probabilities": probs, "confidence": 0.6}
    return {"model": model, "answers": answers, "usage": {"input_tokens": 12, "output_tokens": 5}}


class FakeProvider:
    """``kind`` is ``jev`` or ``openai``. ``answer(request) -> raw`` shapes the answer; ``status``, ``delay_s``,
    ``body`` (raw bytes) and ``headers`` (added to the reply) override the exchange. ``seen`` holds every
    request: (path, headers, json)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.answer: Callable[[dict[str, Any]], Any] = valid_raw
        self.status = 200
        self.delay_s = 0.0
        self.body: bytes | None = None
        self.headers: dict[str, str] = {}  # extra response headers
        self.seen: list[tuple[str, dict[str, str], Any]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.server.block_on_close = False  # closing does not wait out a delayed answer its client gave up on

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}" + ("/v1/systemone" if self.kind == "jev" else "/v1")

    def _reply(self, path: str, payload: Any) -> tuple[int, bytes]:
        if self.body is not None:
            return self.status, self.body
        if self.kind == "jev":
            request = {"state": payload["state"], "questions": payload["questions"]}
            return self.status, json.dumps(self.answer(request)).encode()
        request = json.loads(payload["messages"][1]["content"])
        raw = self.answer(request)
        usage = raw.pop("usage", None) if isinstance(raw, dict) else None
        if isinstance(raw, dict) and raw.get("model") == "fake-1":
            del raw["model"]  # the model names itself in the reply, not in the content
        reply: dict[str, Any] = {
            "id": "chatcmpl-1", "object": "chat.completion", "model": payload["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(raw)},
                         "finish_reason": "stop"}],
        }
        if usage:
            reply["usage"] = {"prompt_tokens": usage["input_tokens"], "completion_tokens": usage["output_tokens"]}
        return self.status, json.dumps(reply).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                payload = json.loads(self.rfile.read(length) or b"null")
                with fake.lock:
                    fake.seen.append((self.path, dict(self.headers), payload))
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                status, body = fake._reply(self.path, payload)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for name, value in fake.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@contextmanager
def serving(kind: str) -> Iterator[FakeProvider]:
    fake = FakeProvider(kind)
    thread = threading.Thread(target=fake.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
