"""A real compiled Loop calls decide and thresholds probability_bp in C (harness.md §16, sdk.md decide):
answers over HTTP from a fake Jev provider, an embedder provider object, and failures as data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from decide_provider_server import serving, valid_raw
from support.loops_harness import guest_lines, send, started, tenant, until

from wakeful.harness.decide import DecideSettings
from wakeful.harness.store import loops

GATE_C = (Path(__file__).parent / "decide_gate.c").read_text()


async def _gate(h: Any, compile_c: Any, threshold_bp: int = 7000) -> tuple[str, str, str]:
    group, agent, session = await tenant(h)
    out = await h.upload(agent, compile_c(GATE_C, name="decide_gate.c"), path="/loops/gate.elf")
    loop = await h.create_loop(agent_id=agent, session_id=session, artifact=out["artifact"],
                               config={"threshold_bp": threshold_bp})
    return group, session, str(loop["id"])


async def _verdict(h: Any, loop_id: str, event_id: str, payload: Any) -> str:
    before = len(await guest_lines(h, loop_id))
    h.clock.advance(s=1)
    await send(h, loop_id, event_id, "mail", payload)
    lines: list[str] = []

    async def logged() -> bool:
        nonlocal lines
        await h.node.flush_logs()
        lines = await guest_lines(h, loop_id)
        return len(lines) > before

    await until(logged)
    return lines[-1]


async def test_loop_thresholds_decide_over_http(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    with serving("jev") as fake:
        urgent = {"on": True}

        def answer(request: dict[str, Any]) -> Any:
            raw = valid_raw(request)
            raw["answers"]["urgent"]["noul"] = 0.9123 if urgent["on"] else 0.2
            return raw

        fake.answer = answer
        settings = DecideSettings(provider="jev", endpoint=fake.url, api_key="sk-loop", timeout_ms=8000,
                                  per_second=100)  # on PostgreSQL the buckets refill in real time
        h = await started(store_url, store_clock, tmp_path / "data", decide=settings)
        try:
            group, session, loop_id = await _gate(h, compile_c)
            assert await _verdict(h, loop_id, "m1", {"subject": "server on fire"}) == "urgent 9123"
            urgent["on"] = False
            assert await _verdict(h, loop_id, "m2", {"subject": "newsletter"}) == "calm 2000"
            assert [s[2]["state"] for s in fake.seen] == [{"subject": "server on fire"}, {"subject": "newsletter"}]
            assert all(s[2]["model"] == "jev-1.13.0" for s in fake.seen)
            fake.answer = lambda r: {"model": "m", "answers": {}}  # missing answer: the call fails as data
            assert await _verdict(h, loop_id, "m3", {"subject": "?"}) == "decide error invalid_response"
            fake.status, fake.body = 500, b"{}"
            assert await _verdict(h, loop_id, "m4", {"subject": "?"}) == "decide error provider_error"
            await h.settle()
            messages = await h.messages(session, kinds=("loop",))
            assert len(messages) == 1  # one wake, for m1 only
            async with h.store.tx(readonly=True) as tx:
                logs = [ln.text for ln in await loops.list_logs(tx, loop_id) if ln.source == "harness"]
            assert any(t.startswith("invalid_response:") for t in logs)  # §9.4: domain failures are logged
            assert any(t.startswith("provider_error:") for t in logs)
            direct = await h.decide(group, {"state": "x", "questions": {"q": {"type": "noul", "instructions": "?"}}})
            assert direct["error"]["code"] == "provider_error"  # the embedding/HTTP path: same provider, same rules
            fake.status, fake.body = 200, None
            fake.answer = valid_raw
            direct = await h.decide(group, {"state": "x", "questions": {"q": {"type": "noul", "instructions": "?"}}})
            assert direct["answers"]["q"] == {"type": "noul", "probability_bp": 8300}
        finally:
            await h.stop()


async def test_loop_with_provider_object_and_not_configured(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group, _, loop_id = await _gate(h, compile_c, threshold_bp=5000)
        assert await _verdict(h, loop_id, "n1", {"subject": "x"}) == "decide error not_configured"
        seen: list[tuple[Any, float]] = []

        async def local_model(request: dict[str, Any], deadline: float) -> Any:
            seen.append((request, deadline))
            return {"model": "local-7b", "answers": {"urgent": {"noul": 0.5}}}

        h.set_decide_provider(local_model)
        assert await _verdict(h, loop_id, "n2", {"subject": "y"}) == "urgent 5000"
        (request, deadline), = seen
        assert request["state"] == {"subject": "y"} and 0 < deadline <= 2.0

        async def broken(request: dict[str, Any], deadline: float) -> Any:
            return {"model": "local-7b", "answers": {"urgent": {"noul": 1.7}}}

        h.set_decide_provider(broken)  # validated exactly like an HTTP provider's answer
        assert await _verdict(h, loop_id, "n3", {"subject": "z"}) == "decide error invalid_response"
        assert (await h.decide(group, {"state": "s", "questions": {"urgent": {"type": "noul", "instructions": "?"}}})
                )["error"]["code"] == "invalid_response"
        assert (await h.decide(group, {"state": "s", "questions": {}}))["error"]["code"] == "invalid_request"
        h.set_decide_provider(None)
        assert await _verdict(h, loop_id, "n4", {"subject": "w"}) == "decide error not_configured"
    finally:
        await h.stop()
