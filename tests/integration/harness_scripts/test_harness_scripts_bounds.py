"""Script rules of harness.md §18 not covered in test_harness_scripts.py: the console's 64 KiB total, the
``{text}`` form of script.log, wall time that runs out inside a tool call, loop.get/loop.list seeing only the
calling agent's Loops, and malformed capability calls answered without ending the script."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from test_harness_scripts import OUTCOME, _until, node, script

from wakeful.sdk import example


async def test_the_console_holds_64_kib_in_total(harness_runner: Any, tmp_path: Path) -> None:
    kilo_lines = script(r"""
        static char line[1100];
        for (int i = 0; i < 1099; i++) line[i] = 'c';
        for (int i = 0; i < 80; i++) {
            if (console(line) < 0) return 9;  /* cut to 1,024 chars: the 65th line is past 64 KiB */
        }
        return 0;""")
    async with node(tmp_path) as (h, agent):
        out = await h.run_script(agent, kilo_lines)
    assert out["state"] == "failed", out
    assert out["error"]["kind"] == "console_budget_exhausted"
    assert out["console"] == ["c" * 1024] * 64  # 65,536 bytes kept, nothing beyond


async def test_script_log_takes_text_or_message(harness_runner: Any, tmp_path: Path) -> None:
    src = script(r"""
        sf_handle a = lit("{\"text\":\"from text\"}");
        sf_handle r1 = sf_host_call("script.log", a, 10000);
        sf_drop(a);
        sf_handle b = lit("{\"message\":\"from message\"}");
        sf_handle r2 = sf_host_call("script.log", b, 10000);
        sf_drop(b);
        sf_handle c = lit("{\"message\":5}");
        sf_handle r3 = sf_host_call("script.log", c, 10000);  /* not a string: refused, the script goes on */
        sf_drop(c);
        if (r1 < 0 || r2 < 0) return 2;
        if (r3 >= 0) return 3;
        return 0;""")
    async with node(tmp_path) as (h, agent):
        out = await h.run_script(agent, src)
    assert out["state"] == "succeeded", out
    assert out["console"] == ["from text", "from message"]


async def test_wall_time_runs_out_inside_a_tool_call(harness_runner: Any, tmp_path: Path) -> None:
    from support.harness_fixtures import TestClock

    clock = TestClock()
    src = script(r"""
        sf_handle first = tool("math.square", "{\"n\":5}");
        if (first > 0) sf_drop(first);
        sf_handle res = tool("gate.wait", "{}");  /* blocks until the test opens the gate */
        if (res > 0) sf_drop(res);
        return 0;""")
    async with node(tmp_path, clock=clock) as (h, agent):
        task = asyncio.ensure_future(h.run_script(agent, src))
        await _until(lambda: bool(h.scripts._runs) and next(iter(h.scripts._runs.values())).calls_made == 2)
        clock.advance(s=59)
        await asyncio.sleep(0.2)
        assert not task.done()  # 59 s: still within the 60 s of wall time (tool calls included)
        clock.advance(s=2)
        out = await asyncio.wait_for(task, 10)
        h.gate.set()  # type: ignore[attr-defined]
        assert h.scripts.resident == 0  # the slot came back
    assert out["state"] == "failed" and out["error"]["kind"] == "wall_time_exceeded", out
    assert out["tool_calls"] == [{"tool": "math.square", "ok": True}]  # the completed call is kept
    assert out["wall_ms"] >= 60_000 and out["guest_ms"] < 1000  # waiting for a tool is not guest time


async def test_loop_reads_see_only_the_calling_agents_loops(harness_runner: Any, tmp_path: Path) -> None:
    async with node(tmp_path) as (h, agent):
        mine_session = await h.create_session(agent, "inbox")
        other = await h.create_agent((await h.create_group("g-other")).id, "b")
        other_session = await h.create_session(other.id, "inbox")
        source = example("classify_decide").source
        for who in (agent, other.id):
            built = await h.build(who, {"sdk_version": 1, "entry": "main.c", "files": {"main.c": source}})
            assert built["state"] == "succeeded", built
        mine = (await h.create_loop(agent_id=agent, session_id=mine_session.id, artifact="/loops/main.elf"))["id"]
        theirs = (await h.create_loop(agent_id=other.id, session_id=other_session.id,
                                      artifact="/loops/main.elf"))["id"]
        src = script(r"""
            sf_handle codes = sf_json_array();
            sf_handle own = tool("loop.get", "{\"loop_id\":\"MINE\"}");
            sf_handle v = sf_json_get(own, "value");
            sf_handle id = sf_json_get(v, "id");
            sf_json_push(codes, id);
            if (outcome(codes, "loop.list")) return 2;
            sf_handle listed = tool("loop.list", "{}");
            sf_handle lv = sf_json_get(listed, "value");
            sf_handle loops = sf_json_get(lv, "loops");
            sf_i64 n = 0;
            while (sf_json_at(loops, n) > 0) n++;
            sf_handle count = sf_json_number(n);
            sf_json_push(codes, count);
            sf_handle foreign = tool("loop.get", "{\"loop_id\":\"THEIRS\"}");
            sf_handle err = sf_json_get(foreign, "error");
            sf_handle code = sf_json_get(err, "code");
            sf_json_push(codes, code);
            result(codes);
            return 0;""".replace("MINE", mine).replace("THEIRS", theirs), extra=OUTCOME)
        out = await h.run_script(agent, src)
    assert out["state"] == "succeeded", out
    assert out["result"] == [mine, "ok", 1, "not_found"]  # another agent's Loop is not found, not listed
    assert [c["ok"] for c in out["tool_calls"]] == [True, True, True, False]


async def test_malformed_capability_calls_do_not_end_the_script(harness_runner: Any, tmp_path: Path) -> None:
    src = script(r"""
        sf_handle bad1 = lit("{\"args\":{}}");  /* no tool */
        sf_handle r1 = sf_host_call("tool.call", bad1, 10000);
        sf_drop(bad1);
        sf_handle bad2 = lit("{\"tool\":\"math.square\",\"args\":{},\"extra\":1}");
        sf_handle r2 = sf_host_call("tool.call", bad2, 10000);
        sf_drop(bad2);
        sf_handle bad3 = lit("{\"val\":1}");  /* script.result without value */
        sf_handle r3 = sf_host_call("script.result", bad3, 10000);
        sf_drop(bad3);
        if (r1 >= 0 || r2 >= 0 || r3 >= 0) return 2;
        sf_handle ok = sf_json_string("still running");
        result(ok);
        return 0;""")
    async with node(tmp_path) as (h, agent):
        out = await h.run_script(agent, src)
    assert out["state"] == "succeeded", out
    assert out["result"] == "still running" and out["tool_calls"] == []  # refused calls ran no tool


async def test_decide_from_a_script_fails_fast_when_the_group_buckets_are_empty(
    harness_runner: Any, tmp_path: Path,
) -> None:
    from wakeful.harness.decide import DecideSettings

    asked: list[Any] = []

    async def provider(request: Any, deadline: float) -> Any:  # an embedder's provider object (interfaces.md §5)
        asked.append(request)
        return {"model": "local-1", "answers": {"q": {"noul": 0.75}}}

    src = script(r"""
        sf_handle both = sf_json_array();
        for (int i = 0; i < 2; i++) {
            sf_handle d = tool("decide", "{\"state\":\"x\",\"questions\":{\"q\":{\"type\":\"noul\","
                                         "\"instructions\":\"Is it?\"}}}");
            if (d < 0) return 2;
            sf_handle v = sf_json_get(d, "value");
            sf_json_push(both, v);
        }
        result(both);
        return 0;""")
    async with node(tmp_path, decide=DecideSettings(per_minute=1)) as (h, agent):  # one token a minute
        h.set_decide_provider(provider)
        out = await h.run_script(agent, src)
    assert out["state"] == "succeeded", out
    first, second = out["result"]
    assert first == {"model": "local-1", "answers": {"q": {"type": "noul", "probability_bp": 7500}}}
    assert second["error"]["code"] == "rate_limited" and second["error"]["retry_after_s"] >= 1
    assert len(asked) == 1  # the refused call never reached the provider
