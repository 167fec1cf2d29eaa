"""Scripts (harness.md §18, §21 "scripts"): real builds through the confined compiler, a real runtime, the
outcome shapes, the tool.call rules, guest and wall time, console and concurrency limits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from wakeful.harness.config import Config, ScriptLimits
from wakeful.harness.embed import Harness
from wakeful.harness.errors import InvalidRequest

PRELUDE = r"""
#include <wakeful.h>
static sf_handle lit(const char *json) { return sf_json_parse(json, sf_strlen(json)); }
/* tool.call {tool, args} with args given as JSON text; returns the reply handle or a status */
static sf_handle tool(const char *name, const char *args_json) {
    sf_handle args = sf_json_object();
    sf_handle t = sf_json_string(name);
    sf_json_set(args, "tool", t);
    sf_drop(t);
    sf_handle inner = lit(args_json);
    sf_json_set(args, "args", inner);
    sf_drop(inner);
    sf_handle res = sf_host_call("tool.call", args, 30000);
    sf_drop(args);
    return res;
}
static sf_i64 result(sf_handle value) {
    sf_handle args = sf_json_object();
    sf_json_set(args, "value", value);
    sf_handle r = sf_host_call("script.result", args, 10000);
    sf_drop(args);
    if (r > 0) { sf_drop(r); return 0; }
    return r;
}
static sf_i64 console(const char *text) {
    sf_handle args = sf_json_object();
    sf_handle s = sf_json_string(text);
    sf_json_set(args, "message", s);
    sf_drop(s);
    sf_handle r = sf_host_call("script.log", args, 10000);
    sf_drop(args);
    if (r > 0) { sf_drop(r); return 0; }
    return r;
}
"""

TWENTY_CALLS = PRELUDE + r"""
static char buf[64];
SF_MAIN sf_i64 main(void) {
    sf_i64 total = 0;
    for (int i = 0; i < 20; i++) {
        char *p = buf;
        const char *head = "{\"n\":";
        while (*head) *p++ = *head++;
        p += wf_i64_to_dec(i, p, 20);
        *p++ = '}';
        *p = 0;
        sf_handle res = tool("math.square", buf);
        if (res < 0) return 2;
        sf_handle value = sf_json_get(res, "value");
        sf_i64 sq = 0;
        if (value > 0 && wf_json_get_i64(value, "sq", &sq) == 0) total += sq;
        if (value > 0) sf_drop(value);
        sf_drop(res);
    }
    sf_handle v = sf_json_number(total);
    sf_i64 r = result(v);
    sf_drop(v);
    console("twenty calls done");
    return r < 0 ? 3 : 0;
}
"""

SPIN_AFTER_CALLS = PRELUDE + r"""
SF_MAIN sf_i64 main(void) {
    for (int i = 0; i < 3; i++) {
        sf_handle res = tool("math.square", "{\"n\":2}");
        if (res > 0) sf_drop(res);
    }
    sf_handle v = sf_json_string("before the spin");
    result(v);
    sf_drop(v);
    volatile sf_u64 x = 0;
    for (;;) x++;
    return 0;
}
"""


def script(body: str, extra: str = "") -> str:
    return PRELUDE + extra + "\nSF_MAIN sf_i64 main(void) {\n" + body + "\n}\n"


@asynccontextmanager
async def node(tmp_path: Path, *, clock: Any = None, decide: Any = None, store_url: str | None = None,
               **limits: Any) -> AsyncIterator[tuple[Harness, str]]:
    """A started harness (SQLite, no sweeps) with a write tool, a read tool and a blocking tool; yields
    (harness, agent_id)."""
    extra: dict[str, Any] = {"decide": decide} if decide is not None else {}
    if store_url is not None:
        extra["store_url"] = store_url
    h = Harness(Config(data_dir=tmp_path / "data", scripts=ScriptLimits(**limits), **extra), clock=clock,
                sweeps=False)
    h.register_tool("math.square", lambda a, ctx: {"sq": a["n"] ** 2, "principal": ctx.principal},
                    description="square n", safety="write")
    h.register_tool("blob.big", lambda a, ctx: {"text": "x" * 20_000}, description="a big value")
    h.register_tool("tool.broken", _broken, description="always raises")
    h.register_tool("tool.odd", lambda a, ctx: {1, 2}, description="answers a set, not JSON")
    gate: asyncio.Event = asyncio.Event()
    h.gate = gate  # type: ignore[attr-defined]

    async def wait_gate(args: Any, ctx: Any) -> Any:
        await gate.wait()
        return {"opened": True}

    h.register_tool("gate.wait", wait_gate, description="blocks until the test opens the gate", timeout_s=60)
    async with h:
        group = await h.create_group("g")
        agent = await h.create_agent(group.id, "a")
        yield h, agent.id


def _broken(args: Any, ctx: Any) -> Any:
    raise RuntimeError("the tool broke")


async def test_twenty_tool_calls_in_one_run_return_their_combined_result(harness_runner: Any, tmp_path: Path) -> None:
    import sqlalchemy as sa

    from wakeful.harness.store import schema

    async with node(tmp_path) as (h, agent):  # math.square is a write tool: scripts may call it (§18)
        out = await h.run_script(agent, TWENTY_CALLS)
        async with h.store.tx(readonly=True) as tx:  # §18: a script is not a Loop and leaves no artifact
            for table in (schema.artifact, schema.loop, schema.message):
                assert (await tx.execute(sa.select(sa.func.count()).select_from(table))).scalar() == 0
    assert out["state"] == "succeeded", out
    assert out["exit_code"] == 0
    assert out["result"] == sum(i * i for i in range(20))  # 2470: every call's value arrived
    assert out["tool_calls"] == [{"tool": "math.square", "ok": True}] * 20
    assert out["console"] == ["twenty calls done"]
    assert set(out) == {"state", "exit_code", "result", "console", "tool_calls", "guest_ms", "wall_ms"}


async def test_tools_run_as_the_calling_agent(harness_runner: Any, tmp_path: Path) -> None:
    src = script(r"""
        sf_handle res = tool("math.square", "{\"n\":7}");
        if (res < 0) return 2;
        sf_handle value = sf_json_get(res, "value");
        result(value);
        return 0;""")
    async with node(tmp_path) as (h, agent):
        out = await h.run_script(agent, {"source": src})
    assert out["state"] == "succeeded", out
    assert out["result"] == {"sq": 49, "principal": f"agent:{agent}"}


async def test_a_spinning_script_is_stopped_at_five_seconds_and_keeps_its_tool_observations(
    harness_runner: Any, tmp_path: Path,
) -> None:
    async with node(tmp_path) as (h, agent):
        assert h.config.scripts.guest_time_ms == 5000  # the default of §18
        started = time.monotonic()
        out = await h.run_script(agent, SPIN_AFTER_CALLS)
        elapsed = time.monotonic() - started
    assert out["state"] == "failed", out
    assert out["error"]["kind"] == "guest_time_exceeded"
    assert out["tool_calls"] == [{"tool": "math.square", "ok": True}] * 3  # completed calls are kept
    assert out["result"] == "before the spin"
    assert 5000 <= out["guest_ms"] < 6500  # measured by the runtime, stopped within a slice or so
    assert elapsed < 40  # generous smoke bound: the throttle costs some wall time, never unbounded


async def test_guest_time_limit_is_configurable(harness_runner: Any, tmp_path: Path) -> None:
    async with node(tmp_path, guest_time_ms=200) as (h, agent):
        out = await h.run_script(agent, SPIN_AFTER_CALLS)
    assert out["error"]["kind"] == "guest_time_exceeded"
    assert 200 <= out["guest_ms"] < 1500
    assert len(out["tool_calls"]) == 3


async def test_wall_time_counts_sleep_on_the_injected_clock(harness_runner: Any, tmp_path: Path) -> None:
    from support.harness_fixtures import TestClock

    clock = TestClock()
    src = script(r"""
        sf_handle res = tool("math.square", "{\"n\":3}");
        if (res > 0) sf_drop(res);
        sf_sleep_ms(70000);
        return 0;""")
    async with node(tmp_path, clock=clock) as (h, agent):
        task = asyncio.ensure_future(h.run_script(agent, src))
        await _until(lambda: len(_first_run(h).tool_calls) == 1 if h.scripts._runs else False)
        await asyncio.sleep(0.1)
        assert not task.done()  # asleep on the test clock: 70 s have not passed
        clock.advance(s=61)
        out = await asyncio.wait_for(task, 10)
    assert out["state"] == "failed"
    assert out["error"]["kind"] == "wall_time_exceeded"
    assert out["tool_calls"] == [{"tool": "math.square", "ok": True}]
    assert out["wall_ms"] >= 60_000
    assert out["guest_ms"] < 1000  # sleeping is not guest time


async def test_build_failure_is_an_outcome_with_diagnostics(harness_runner: Any, tmp_path: Path) -> None:
    async with node(tmp_path) as (h, agent):
        out = await h.run_script(agent, "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { return undefined_name; }\n")
    assert out["state"] == "failed"
    assert out["error"]["kind"] == "build_failed"
    assert "undefined_name" in out["error"]["diagnostics"]
    assert out["tool_calls"] == [] and out["console"] == []


async def test_a_bundle_reaching_outside_is_invalid(harness_runner: Any, tmp_path: Path) -> None:
    request = {"files": {"main.c": '#include "../x.h"\n', "../x.h": "int x;\n"}, "entry": "main.c"}
    async with node(tmp_path) as (h, agent):
        out = await h.run_script(agent, request)
        assert out["state"] == "failed" and out["error"]["kind"] == "invalid_bundle", out
        out = await h.run_script(agent, {"files": {"main.c": '#include "../x.h"\nint main;\n'}, "entry": "main.c"})
    assert out["state"] == "failed" and out["error"]["kind"] in ("invalid_bundle", "build_failed")


async def test_fault_and_nonzero_exit(harness_runner: Any, tmp_path: Path) -> None:
    fault = script(r"""
        console("about to fault");
        volatile sf_u64 *p = (volatile sf_u64 *)0x10;
        return (sf_i64)*p;""")
    async with node(tmp_path) as (h, agent):
        out = await h.run_script(agent, fault)
        assert out["state"] == "failed" and out["error"]["kind"] == "fault", out
        assert out["console"] == ["about to fault"]
        out = await h.run_script(agent, script("return 3;"))
    assert out["state"] == "failed"
    assert out["error"]["kind"] == "exit_nonzero" and out["error"]["exit_code"] == 3 and out["exit_code"] == 3


async def test_oversized_result_is_refused_and_big_tool_values_are_truncated(harness_runner: Any, tmp_path: Path) -> None:
    src = script(r"""
        sf_handle small = sf_json_string("small");
        result(small);
        sf_drop(small);
        static char big[16384];
        for (int i = 0; i < 16383; i++) big[i] = 'a';  /* 16,385 bytes encoded: over every value limit */
        sf_handle s = sf_json_string(big);
        if (s >= 0) return 4;  /* the runtime refuses to build it, so no result can exceed 16 KiB */
        big[16370] = 0;  /* 16,372 bytes encoded: fits */
        s = sf_json_string(big);
        if (s < 0) return 5;
        sf_handle holder = sf_json_object();
        sf_json_set(holder, "v", s);
        sf_drop(s);
        sf_handle near = sf_json_get(holder, "v");
        sf_drop(holder);
        if (result(near) != 0) return 10;
        sf_drop(near);
        sf_handle res = tool("blob.big", "{}");
        if (res < 0) return 6;
        if (wf_json_get_bool(res, "truncated") != 1) return 7;
        sf_i64 bytes = 0;
        wf_json_get_i64(res, "bytes", &bytes);
        if (bytes < 20000) return 8;
        return 0;""")
    async with node(tmp_path) as (h, agent):
        out = await h.run_script(agent, src)
    assert out["state"] == "succeeded", out
    assert out["result"] == "a" * 16_370  # last call wins; near the limit it is stored whole
    assert out["tool_calls"] == [{"tool": "blob.big", "ok": True}]


async def test_console_lines_are_cut_and_bounded(harness_runner: Any, tmp_path: Path) -> None:
    long_line = script(r"""
        static char line[3000];
        for (int i = 0; i < 2999; i++) line[i] = 'b';
        console(line);
        sf_log("from sf_log");
        return 0;""")
    flood = script(r"""
        for (int i = 0; i < 257; i++) {
            if (console("line") < 0) return 9;
        }
        return 0;""")
    async with node(tmp_path) as (h, agent):
        out = await h.run_script(agent, long_line)
        assert out["state"] == "succeeded", out
        assert out["console"] == ["b" * 1024, "from sf_log"]
        out = await h.run_script(agent, flood)
    assert out["state"] == "failed"
    assert out["error"]["kind"] == "console_budget_exhausted"
    assert len(out["console"]) == 256


OUTCOME = r"""
/* push the reply's error code (or "ok") for one tool.call onto codes */
static int outcome(sf_handle codes, const char *name) {
    sf_handle res = tool(name, "{}");
    if (res < 0) return 1;
    sf_handle err = sf_json_get(res, "error");
    sf_handle code = err > 0 ? sf_json_get(err, "code") : sf_json_string("ok");
    sf_json_push(codes, code);
    sf_drop(code);
    if (err > 0) sf_drop(err);
    sf_drop(res);
    return 0;
}
"""


async def test_tool_call_rules(store_url: str, tmp_path: Path) -> None:
    """On SQLite and PostgreSQL: loop.list reads the store as the calling agent."""
    src = script(r"""
        sf_handle codes = sf_json_array();
        if (outcome(codes, "script.run") || outcome(codes, "loop.create") || outcome(codes, "no.such.tool")
            || outcome(codes, "tool.broken") || outcome(codes, "loop.list") || outcome(codes, "tool.odd"))
            return 2;
        sf_handle notify = lit("{\"content\":\"x\",\"dedup_key\":\"k\"}");
        sf_i64 denied = sf_host_call("agent.notify", notify, 1000);
        sf_drop(notify);
        if (denied != SF_DENIED) return 3;
        result(codes);
        return 0;""", extra=OUTCOME)
    async with node(tmp_path, store_url=store_url) as (h, agent):
        out = await h.run_script(agent, src)
    assert out["state"] == "succeeded", out
    assert out["result"] == ["not_allowed", "not_allowed", "unknown_tool", "tool_failed", "ok", "invalid_result"]
    assert [c["ok"] for c in out["tool_calls"]] == [False, False, False, False, True, False]


async def test_decide_and_web_from_a_script(harness_runner: Any, tmp_path: Path) -> None:
    from support.mcp_flow import fake_provider

    src = script(r"""
        sf_handle both = sf_json_array();
        sf_handle d = tool("decide", "{\"state\":\"the database is down\",\"questions\":{\"q\":"
                                     "{\"type\":\"noul\",\"instructions\":\"Is it urgent?\"}}}");
        if (d < 0) return 2;
        sf_handle dv = sf_json_get(d, "value");
        sf_json_push(both, dv);
        sf_handle w = tool("web.http_request", "{\"url\":\"http://127.0.0.1:9/\"}");
        if (w < 0) return 3;
        sf_handle wv = sf_json_get(w, "value");
        sf_json_push(both, wv);
        result(both);
        return 0;""")
    with fake_provider() as provider:
        async with node(tmp_path, decide=provider.settings) as (h, agent):
            out = await h.run_script(agent, src)
    assert out["state"] == "succeeded", out
    decided, fetched = out["result"]
    assert decided == {"model": "fake-1", "answers": {"q": {"type": "noul", "probability_bp": 9200}}}
    assert fetched["error"]["code"] == "blocked_destination"  # the SSRF rules hold for scripts too
    assert out["tool_calls"] == [{"tool": "decide", "ok": True}, {"tool": "web.http_request", "ok": True}]


async def test_control_reads_from_a_script(harness_runner: Any, tmp_path: Path) -> None:
    from wakeful.control import Actor
    from wakeful.control.embed import Harness as ControlHarness

    src = script(r"""
        sf_handle codes = sf_json_array();
        if (outcome(codes, "goal.status") || outcome(codes, "work.next") || outcome(codes, "goal.create"))
            return 2;
        result(codes);
        return 0;""", extra=OUTCOME)
    async with ControlHarness(Config(data_dir=tmp_path / "data"), sweeps=False) as h:
        group = await h.create_group("g")
        agent = (await h.create_agent(group.id, "a")).id
        other = await h.create_group("other")
        receipt = await h.control.submit(Actor("person", "key_p", other.id), {
            "operation_id": "op-1", "command": {"type": "goal.create", "title": "t", "objective": "o"}})
        foreign_goal = receipt["goal_id"]
        out = await h.run_script(agent, src.replace("{}", "{\\\"goal_id\\\":\\\"" + foreign_goal + "\\\"}"))
        assert out["state"] == "succeeded", out
        assert out["result"] == ["not_found", "not_found", "not_allowed"]  # another group's goal is not visible
        mine = await h.control.submit(Actor("person", "key_p", group.id), {
            "operation_id": "op-2", "command": {"type": "goal.create", "title": "t", "objective": "o"}})
        status_src = script(r"""
            sf_handle res = tool("goal.status", "{\"goal_id\":\"GOAL\"}");
            if (res < 0) return 2;
            sf_handle ok = sf_json_get(res, "ok");
            result(ok);
            return 0;""".replace("GOAL", mine["goal_id"]))
        out = await h.run_script(agent, status_src)
        assert out["state"] == "succeeded" and out["result"] is True, out
    async with node(tmp_path / "plain") as (plain, agent):
        out = await plain.run_script(agent, script(r"""
            sf_handle codes = sf_json_array();
            if (outcome(codes, "goal.board")) return 2;
            result(codes);
            return 0;""", extra=OUTCOME))
        assert out["result"] == ["unavailable"]  # a node without the control plane


async def test_at_most_256_tool_calls_per_script(harness_runner: Any, tmp_path: Path) -> None:
    src = script(r"""
        sf_i64 busy = 0;
        for (int i = 0; i < 260; i++) {
            sf_handle res = tool("math.square", "{\"n\":1}");
            if (res < 0) return 2;
            if (wf_json_get_bool(res, "ok") != 1) busy++;
            sf_drop(res);
        }
        sf_handle v = sf_json_number(busy);
        result(v);
        return 0;""")
    async with node(tmp_path) as (h, agent):
        out = await h.run_script(agent, src)
    assert out["state"] == "succeeded", out
    assert out["result"] == 4  # calls 257..260 answered busy without running
    assert len(out["tool_calls"]) == 256


async def test_env_reaches_the_guest_config(harness_runner: Any, tmp_path: Path) -> None:
    src = script(r"""
        sf_handle cfg = sf_config();
        result(cfg);
        return 0;""")
    async with node(tmp_path) as (h, agent):
        out = await h.run_script(agent, src, env={"SERVICES": "api,db"})
        assert out["result"] == {"kind": "script", "env": {"SERVICES": "api,db"}}
        for bad in ({"A": 1}, ["x"], {"A": "x" * 16_000}):
            with pytest.raises(InvalidRequest):
                await h.run_script(agent, src, env=bad)


async def test_concurrency_per_agent_and_per_node(harness_runner: Any, tmp_path: Path) -> None:
    blocked = script(r"""
        sf_handle res = tool("gate.wait", "{}");
        if (res < 0) return 2;
        sf_drop(res);
        return 0;""")
    async with node(tmp_path, max_resident=6) as (h, agent):
        other = (await h.create_agent((await h.create_group("g2")).id, "b")).id
        third = (await h.create_agent((await h.create_group("g3")).id, "c")).id
        first = [asyncio.ensure_future(h.run_script(agent, blocked)) for _ in range(4)]
        await _until(lambda: h.scripts.resident == 4 and len(h.scripts._runs) == 4)
        out = await h.run_script(agent, blocked)  # 5th for one agent
        assert out["state"] == "failed" and out["error"]["kind"] == "busy", out
        assert "agent" in out["error"]["message"]
        second = [asyncio.ensure_future(h.run_script(other, blocked)) for _ in range(2)]
        await _until(lambda: h.scripts.resident == 6)
        out = await h.run_script(third, blocked)  # 7th on a node of 6
        assert out["error"]["kind"] == "busy" and "node" in out["error"]["message"]
        h.gate.set()  # type: ignore[attr-defined]
        outs = await asyncio.gather(*first, *second)
        assert [o["state"] for o in outs] == ["succeeded"] * 6
        assert h.scripts.resident == 0
        out = await h.run_script(third, blocked)  # slots come back
        assert out["state"] == "succeeded"


async def test_stopping_the_node_ends_a_running_script_as_runtime_lost(harness_runner: Any, tmp_path: Path) -> None:
    blocked = script(r"""
        sf_handle res = tool("gate.wait", "{}");
        if (res > 0) sf_drop(res);
        return 0;""")
    h = Harness(Config(data_dir=tmp_path / "data"), sweeps=False)
    h.register_tool("gate.wait", lambda a, c: asyncio.Event().wait(), description="never returns", timeout_s=60)
    await h.start()
    group = await h.create_group("g")
    agent = (await h.create_agent(group.id, "a")).id
    task = asyncio.ensure_future(h.run_script(agent, blocked))
    await _until(lambda: len(h.scripts._runs) == 1)
    await h.stop()
    out = await asyncio.wait_for(task, 10)
    assert out["state"] == "failed" and out["error"]["kind"] == "runtime_lost", out


async def test_script_sdk(harness_runner: Any, tmp_path: Path) -> None:
    async with node(tmp_path) as (h, _):
        sdk = h.script_sdk()
    assert "tool.call" in sdk["guide"] and "SF_MAIN" in sdk["header"]
    assert sdk["limits"]["guest_time_ms"] == 5000 and sdk["limits"]["scripts_per_agent"] == 4


def _first_run(h: Harness) -> Any:
    return next(iter(h.scripts._runs.values()))


async def _until(predicate: Any, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)
