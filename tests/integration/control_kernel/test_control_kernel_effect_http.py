"""An effect whose outcome is unknown is read back by its request key and never re-sent blindly (control-plane.md
§6, issue 8 "Must show"). The external system is a real HTTP server on loopback that can apply a request and then
drop the connection, refuse reads, or be down; the client is httpx; the ledger is the kernel on both stores."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import httpx
from support.control_kernel import make_kit

from wakeful.control.effects import EffectFailed, EffectOutcomeUnknown, perform_effect


class PullRequests:
    """A tiny HTTP service: ``POST /prs`` with ``Idempotency-Key`` creates (idempotently), ``GET /prs/<key>`` reads.

    ``drop_after_apply``: the next POST is applied, then the connection is cut before any reply.
    ``reads_fail``: GET answers 503 (the readback is ``unreadable``).
    """

    def __init__(self) -> None:
        self.created: dict[str, str] = {}
        self.posts: Counter[str] = Counter()
        self.drop_after_apply = False
        self.reads_fail = False
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            lines = head.split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
            if int(headers.get("content-length", "0")):
                await reader.readexactly(int(headers["content-length"]))
            if method == "POST" and path == "/prs":
                key = headers["idempotency-key"]
                self.posts[key] += 1
                status = 200 if key in self.created else 201
                self.created.setdefault(key, f"pr-{len(self.created) + 1}")
                if self.drop_after_apply:
                    self.drop_after_apply = False
                    writer.transport.abort()  # applied, then the connection is lost before the reply
                    return
                self._reply(writer, status, {"id": self.created[key]})
            elif method == "GET" and path.startswith("/prs/"):
                key = path[len("/prs/"):]
                if self.reads_fail:
                    self._reply(writer, 503, {"error": "unavailable"})
                elif key in self.created:
                    self._reply(writer, 200, {"id": self.created[key]})
                else:
                    self._reply(writer, 404, {"error": "not found"})
            else:
                self._reply(writer, 404, {})
            await writer.drain()
            writer.close()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.transport.abort()

    @staticmethod
    def _reply(writer: asyncio.StreamWriter, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + data)


def _client_for(service: PullRequests) -> tuple[Any, Any]:
    async def send(request_key: str, attempt: int) -> str | None:
        try:
            async with httpx.AsyncClient(timeout=5) as client:
                r = await client.post(f"{service.url}/prs", json={"title": "fix"},
                                      headers={"Idempotency-Key": request_key})
        except httpx.ConnectError as exc:  # never reached the service
            raise EffectFailed(f"connect: {exc}") from exc
        except httpx.TransportError as exc:  # sent, reply lost: it may have been applied
            raise EffectOutcomeUnknown(f"{type(exc).__name__}: {exc}") from exc
        if r.status_code >= 400:
            raise EffectFailed(f"HTTP {r.status_code}")
        return str(r.json()["id"])

    async def read_back(request_key: str) -> tuple[str, str | None]:
        try:
            async with httpx.AsyncClient(timeout=5) as client:
                r = await client.get(f"{service.url}/prs/{request_key}")
        except httpx.TransportError:
            return "unreadable", None
        if r.status_code == 200:
            return "present", str(r.json()["id"])
        return ("absent", None) if r.status_code == 404 else ("unreadable", None)

    return send, read_back


async def test_connection_lost_after_submit_is_read_back_not_resent(store) -> None:
    kit = await make_kit(store)
    service = PullRequests()
    await service.start()
    try:
        send, read_back = _client_for(service)
        agent = kit.agents[0]
        args = {"request_key": "pr:fix-1", "kind": "github.pr.create", "target": "repo/x",
                "payload_digest": "sha256:aa", "send": send, "read_back": read_back}
        service.drop_after_apply = True
        service.reads_fail = True  # first the service cannot say: hold, send nothing
        held = await perform_effect(kit.control, agent, kit.goal_id, **args)
        assert (held["state"], held["attempt"]) == ("unknown", 1)
        assert held["readback"]["observed"] == "unreadable"
        assert service.posts["pr:fix-1"] == 1
        held_again = await perform_effect(kit.control, agent, kit.goal_id, **args)
        assert held_again["state"] == "unknown" and service.posts["pr:fix-1"] == 1  # never re-sent blindly
        service.reads_fail = False
        done = await perform_effect(kit.control, agent, kit.goal_id, **args)
        assert (done["state"], done["attempt"]) == ("succeeded", 1)
        assert done["readback"]["observed"] == "present" and done["outcome"]["external_ref"] == "pr-1"
        assert service.posts["pr:fix-1"] == 1  # applied once, read back, never sent twice
        again = await perform_effect(kit.control, agent, kit.goal_id, **args)
        assert again["state"] == "succeeded" and service.posts["pr:fix-1"] == 1
        states = [c["receipt"].get("effect", {}).get("state") for c in await kit.control.commits(kit.goal_id,
                                                                                                  limit=200)]
        assert [s for s in states if s] == ["intended", "unknown", "unknown", "succeeded"]
    finally:
        await service.stop()


async def test_crash_after_intend_reads_back_after_the_grace(store, store_clock) -> None:
    kit = await make_kit(store, intent_grace_s=60)
    service = PullRequests()
    await service.start()
    try:
        send, read_back = _client_for(service)
        agent = kit.agents[0]
        # an earlier run recorded the intent and crashed before (or while) calling the service
        await kit.run(agent, {"type": "effect.intend", "request_key": "pr:fix-2", "kind": "github.pr.create",
                              "target": "repo/x", "payload_digest": "sha256:bb"}, op="effect:pr:fix-2:intend:1")
        args = {"request_key": "pr:fix-2", "kind": "github.pr.create", "target": "repo/x",
                "payload_digest": "sha256:bb", "send": send, "read_back": read_back}
        early = await perform_effect(kit.control, agent, kit.goal_id, **args)
        assert (early["state"], service.posts["pr:fix-2"]) == ("intended", 0)  # inside the grace: hold
        store_clock.advance(s=61)
        done = await perform_effect(kit.control, agent, kit.goal_id, **args)
        # proven absent, so attempt 2 was sent exactly once
        assert (done["state"], done["attempt"], service.posts["pr:fix-2"]) == ("succeeded", 2, 1)
    finally:
        await service.stop()


async def test_service_down_is_a_definite_failure_and_retried(store) -> None:
    kit = await make_kit(store)
    service = PullRequests()
    await service.start()
    await service.stop()  # the port is closed: connections are refused, nothing can be applied
    send, read_back = _client_for(service)
    failed = await perform_effect(kit.control, kit.agents[0], kit.goal_id, request_key="pr:fix-3", kind="k",
                                  target="t", payload_digest="sha256:cc", send=send, read_back=read_back,
                                  max_attempts=2)
    assert (failed["state"], failed["attempt"]) == ("failed", 2)
    await service.start()  # same port, back up
    try:
        kit_send, kit_read = _client_for(service)
        ok = await perform_effect(kit.control, kit.agents[0], kit.goal_id, request_key="pr:fix-3", kind="k",
                                  target="t", payload_digest="sha256:cc", send=kit_send, read_back=kit_read,
                                  max_attempts=3)
        assert (ok["state"], ok["attempt"], service.posts["pr:fix-3"]) == ("succeeded", 3, 1)
    finally:
        await service.stop()
