"""The SDK texts as MCP resources and the "set up a watch" flow as an MCP prompt (interfaces.md §3.3).

Resources: the Loop guide, ``wakeful.h`` and the script guide, read from the package data (the same texts
``loop.sdk`` and ``script.sdk`` answer). Prompt ``watch.setup``: the six steps of §3.3 for one watch an agent
describes, naming the tools in the server's published style.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mcp_types as types
from mcp.shared.exceptions import MCPError

__all__ = ["GUIDE_URI", "PROMPT_NAME", "RESOURCES", "get_prompt", "list_prompts", "list_resources", "read_resource"]

PROMPT_NAME = "watch.setup"


@dataclass(frozen=True)
class _Resource:
    uri: str
    name: str
    description: str
    mime_type: str
    text: Callable[[], str]


def _guide() -> str:
    from wakeful.sdk import guide_text

    return guide_text()


def _header() -> str:
    from wakeful.sdk import header_text

    return header_text()


def _script_guide() -> str:
    from wakeful.sdk import script_guide_text

    return script_guide_text()


RESOURCES = (
    _Resource("wakeful://sdk/guide.md", "Loop programming guide", "How to write a Loop: the wait/check/wake shape, "
              "limits, dedup keys, ack, checkpoints, decide, examples (the guide loop.sdk answers).",
              "text/markdown", _guide),
    _Resource("wakeful://sdk/wakeful.h", "wakeful.h", "The SDK header every Loop and script includes.",
              "text/x-c", _header),
    _Resource("wakeful://sdk/script-guide.md", "Script guide", "How to write a script for script.run.",
              "text/markdown", _script_guide),
)


GUIDE_URI = "wakeful://sdk/guide.md"


def _text(r: _Resource, guide: str | None) -> str:
    return guide if guide is not None and r.uri == GUIDE_URI else r.text()


def list_resources(guide: str | None = None) -> types.ListResourcesResult:
    """``guide``: the node's guide (with its configured tools, ``sdk.get``); None: the SDK's own text."""
    return types.ListResourcesResult(resources=[
        types.Resource(uri=r.uri, name=r.name, description=r.description, mime_type=r.mime_type,
                       size=len(_text(r, guide).encode())) for r in RESOURCES])


def read_resource(uri: str, guide: str | None = None) -> types.ReadResourceResult:
    for r in RESOURCES:
        if r.uri == uri:
            return types.ReadResourceResult(contents=[types.TextResourceContents(uri=r.uri, mime_type=r.mime_type,
                                                                                 text=_text(r, guide))])
    raise MCPError(types.INVALID_PARAMS, f"no resource {uri[:200]!r}")


def list_prompts() -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(
        name=PROMPT_NAME, title="Set up a watch",
        description="Write, try and start a Loop that watches for something and wakes you only when it matters.",
        arguments=[types.PromptArgument(name="goal", required=True,
                                        description="what to watch and when to be woken, in plain words"),
                   types.PromptArgument(name="sources", required=False,
                                        description="where the signal comes from (a tool, a webhook, a URL)")])])


# interfaces.md §3.3: how an agent sets up a watch
def get_prompt(name: str, arguments: dict[str, str] | None, tool: Callable[[str], str]) -> types.GetPromptResult:
    if name != PROMPT_NAME:
        raise MCPError(types.INVALID_PARAMS, f"no prompt {name[:100]!r}")
    args = arguments or {}
    goal = args.get("goal", "").strip()
    if not goal:
        raise MCPError(types.INVALID_PARAMS, "argument goal is required")
    sources = args.get("sources", "").strip()
    steps = [
        f"Set up a wakeful watch for this: {goal}",
        *([f"The signal comes from: {sources}"] if sources else []),
        "",
        f"1. Call {tool('loop.sdk')} once and read the guide (also the resource wakeful://sdk/guide.md): the "
        "wait/check/wake shape, limits, dedup keys, ack, checkpoints, examples.",
        "2. Write the C program. Optionally try its check once with " + tool("script.run") + ".",
        f"3. {tool('loop.build')} {{source}} — on state failed, read the one-line `wakeful:` explanations in "
        "diagnostics, fix the source and build again.",
        f"4. {tool('loop.test')} {{events, host_replies}} — run the built artifact against the events it will get "
        "and the answers its host calls will get; check the notifications, logs and exit code.",
        f"5. {tool('loop.create')} {{config, capabilities}} — pass what the program reads from sf_config(); narrow "
        "capabilities with exact-argument constraints where the program only needs fixed targets.",
        f"6. If outside systems must reach it: {tool('loop.webhook')} {{action: \"enable\"}} and hand the URL to "
        "the sender once.",
        f"7. End the turn. Wakes arrive as loop/lifecycle messages in your session; read them with "
        f"{tool('session.messages')} and mark them handled. {tool('loop.get')} and {tool('loop.events')} explain "
        "state, pending events and logs when something looks wrong.",
    ]
    text = "\n".join(steps)
    return types.GetPromptResult(description=f"Set up a watch: {goal[:80]}", messages=[
        types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))])
