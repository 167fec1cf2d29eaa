"""Issue 18 leftover: the Loop guide an agent reads names the node's own read tools — in ``loop.sdk`` and in the
``wakeful://sdk/guide.md`` resource, over ``/mcp`` and through the thin stdio client (which asks the node,
``GET G/sdk``); and the thin client's ``loop.test`` runs on the node (``POST G/loops/test``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.mcp_flow import fake_provider, live_node, mcp_http, mcp_stdio, structured, tenant

from wakeful.harness import Harness
from wakeful.sdk import guide_text

pytestmark = pytest.mark.integration

TOOL = "tickets.lookup"
DESCRIPTION = "Look up one ticket by its number."
EXITS_3 = "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { sf_log(\"tried\"); return 3; }\n"
FLOODS = ("#include <wakeful.h>\nSF_MAIN sf_i64 main(void) {\n  for (int i = 0; i < 13; i++) sf_log(\"flood\");\n"
          "  sf_log_raw(\"far too long\", 2000);\n  return 0;\n}\n")


def _with_tools(h: Harness) -> None:
    h.register_tool(TOOL, lambda args, ctx: {"ticket": args.get("ticket")}, description=DESCRIPTION)
    h.register_tool("tickets.close", lambda args, ctx: {}, description="Close a ticket.", safety="write")


async def _guides(client: Any, sdk_name: str) -> tuple[str, str, int]:
    sdk = structured(await client.call_tool(sdk_name, {}))
    listed = {str(r.uri): r for r in (await client.list_resources()).resources}
    read = (await client.read_resource("wakeful://sdk/guide.md")).contents[0].text
    return sdk["guide"], read, int(listed["wakeful://sdk/guide.md"].size or 0)


async def test_the_guide_names_the_node_tools_over_every_mcp_face(harness_runner: Any, tmp_path: Path) -> None:
    with fake_provider() as provider:
        async with live_node(tmp_path / "data", provider.settings, setup=_with_tools) as live:
            t = await tenant(live.harness)
            async with mcp_http(f"{live.url}/mcp/", t.agent_key, t.session_id) as client:
                over_http = await _guides(client, "loop.sdk")
            env = {"WAKEFUL_API_KEY": t.agent_key, "WAKEFUL_HOME": str(tmp_path / "client-home")}
            async with mcp_stdio(["--server", live.url, "--session", t.session_id], env) as client:
                over_stdio = await _guides(client, "loop.sdk")
                built = structured(await client.call_tool("loop.build", {"source": EXITS_3}))
                ran = structured(await client.call_tool("loop.test", {"artifact": built["artifact"]}))
                await client.call_tool("loop.build", {"source": FLOODS, "path": "/loops/floods.elf"})
                flooded = structured(await client.call_tool("loop.test", {"artifact": "/loops/floods.elf"}))
    for face, (sdk_guide, resource, size) in (("/mcp", over_http), ("stdio", over_stdio)):
        assert f"`{TOOL}`: {DESCRIPTION}" in sdk_guide, face
        assert resource == sdk_guide and size == len(resource.encode()), face  # the resource is loop.sdk's guide
        assert "tickets.close" not in resource and resource != guide_text(), face  # write tools are not offered
    assert ran["artifact"] == built["artifact"] and ran["state"] == "exited" and ran["exit_code"] == 3, ran
    assert "tried" in str(ran["logs"])
    # the lines the runtime refused (its rate of 10 a second, its 1,024 bytes) are counted, not silently lost
    assert flooded["logs"] == ["flood"] * 10 and flooded["logs_refused"] == {"rate": 3, "length": 1}, flooded
