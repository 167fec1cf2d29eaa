"""Examples at the end of each command's ``--help`` (issue 19): one table, attached once the commands are
registered; a command that already has an epilog keeps it. Ids are placeholders (``LOOP``, ``AGT`` …)."""

from __future__ import annotations

import typer

__all__ = ["EXAMPLES", "attach"]

EXAMPLES: dict[str, list[str]] = {
    "serve": ["wakeful serve --demo", "wakeful serve --port 8470 --db-url postgresql://localhost/wakeful"],
    "status": ["wakeful status", "wakeful status --json"],
    "doctor": ["wakeful doctor", "wakeful doctor --json"],
    "build": ["wakeful build loop.c -o loop.o", "wakeful build --check loop.o"],
    "run": ["wakeful run loop.c --event 'metric={\"value\": 95}'", "wakeful run loop.o --json"],
    "mcp": ["wakeful mcp --embedded --agent AGT", "wakeful mcp --server http://127.0.0.1:8470 --key wk_…"],
    "decide": ["wakeful decide --state state.json --questions questions.json"],
    "db init": ["wakeful db init", "wakeful --data-dir ./state db init"],
    "db version": ["wakeful db version"],
    "db upgrade": ["wakeful db upgrade"],
    "db backup": ["wakeful db backup ./wakeful-backup.db"],
    "db prune": ["wakeful db prune --retention-s 86400"],
    "loop list": ["wakeful loop list", "wakeful loop list --agent AGT --state paused --json"],
    "loop get": ["wakeful loop get LOOP"],
    "loop pause": ["wakeful loop pause LOOP"],
    "loop resume": ["wakeful loop resume LOOP"],
    "loop delete": ["wakeful loop delete LOOP"],
    "loop logs": ["wakeful loop logs LOOP"],
    "loop tail": ["wakeful loop tail LOOP", "wakeful loop tail LOOP --for 30 --json"],
    "loop webhook": ["wakeful loop webhook LOOP enable", "wakeful loop webhook LOOP rotate"],
    "loop events": ["wakeful loop events LOOP --status pending --payloads"],
    "loop retry": ["wakeful loop retry LOOP", "wakeful loop retry LOOP EVENT_ID"],
    "loop discard": ["wakeful loop discard LOOP EVENT_ID"],
    "loop send": ["echo '{\"name\": \"cpu\", \"value\": 95}' | wakeful loop send LOOP --topic metric --payload -"],
    "group create": ["wakeful group create acme"],
    "group list": ["wakeful group list", "wakeful group list --json"],
    "agent create": ["wakeful agent create --group GRP triage-bot"],
    "agent list": ["wakeful agent list --group GRP"],
    "agent archive": ["wakeful agent archive AGT"],
    "agent unarchive": ["wakeful agent unarchive AGT"],
    "session create": ["wakeful session create --agent AGT --title inbox"],
    "session list": ["wakeful session list --agent AGT"],
    "session messages": ["wakeful session messages SES"],
    "session watch": ["wakeful session watch SES", "wakeful session watch SES --from-start --json"],
    "key create": ["wakeful key create --role group --group GRP --label ci",
                   "wakeful key create --role agent --group GRP --agent AGT"],
    "key list": ["wakeful key list --group GRP"],
    "key revoke": ["wakeful key revoke KEY"],
    "capability list": ["wakeful capability list"],
    "capability test": ["wakeful capability test ci.run.read --args '{\"run_id\": 42}'"],
    "config show": ["wakeful config show", "wakeful config show --effective"],
    "goal create": ["wakeful goal create --group GRP --title 'ship the release'"],
    "goal list": ["wakeful goal list --status active"],
    "goal show": ["wakeful goal show GOAL"],
    "work list": ["wakeful work list GOAL --status open"],
    "work claim": ["wakeful work claim GOAL ITEM --agent AGT"],
    "sdk header": ["wakeful sdk header > wakeful.h"],
    "sdk guide": ["wakeful sdk guide"],
    "sdk examples": ["wakeful sdk examples"],
    "vm dump": ["wakeful vm dump loop.o"],
}


def attach(app: typer.Typer, prefix: str = "") -> None:
    """Set the examples epilog of every registered command named in ``EXAMPLES`` (recursively)."""
    for info in app.registered_commands:
        name = prefix + (info.name or (info.callback.__name__.replace("_", "-") if info.callback else ""))
        lines = EXAMPLES.get(name)
        if lines and not info.epilog:
            info.epilog = "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)  # \b: click keeps lines
    for group in app.registered_groups:
        if group.typer_instance is not None and group.name:
            attach(group.typer_instance, f"{prefix}{group.name} ")
