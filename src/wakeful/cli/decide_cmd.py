"""``wakeful decide --state FILE --questions FILE`` (interfaces.md §4.2, harness.md §16): one decision through the
configured provider — in this process from the ``decide.*`` settings (local mode, no store), or ``POST G/decide``
with a group key (remote mode, ``--server`` / ``$WAKEFUL_SERVER``).

Exit 0 answered; 2 the files make an invalid request; 3 the provider or server is unreachable; 1 any other failure
(``not_configured``, ``rate_limited``, ``timeout``, ``provider_error``, ``invalid_response``, …).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from wakeful.cli import remote
from wakeful.cli.output import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CliExit,
    Out,
    UsageError,
    escape,
    out_for,
)
from wakeful.errors import WakefulError

__all__ = ["register"]

LOCAL_GROUP = "local"  # the bucket key of local mode: the operator's own calls from this process
EXIT_FOR = {"invalid_request": EXIT_USAGE, "unavailable": EXIT_UNAVAILABLE}


def register(app: typer.Typer) -> None:
    app.command("decide")(decide)


def decide(
    ctx: typer.Context,
    state: Annotated[Path, typer.Option("--state", help="The state: a JSON object, array or string, or plain text "
                                                        "(taken as a string); - reads stdin.")],
    questions: Annotated[Path, typer.Option("--questions", help="JSON object of 1–8 named questions.")],
    server: Annotated[str | None, typer.Option("--server", help="Server URL (remote mode; $WAKEFUL_SERVER).")] = None,
    key: Annotated[str | None, typer.Option("--key", help="Group key (remote mode; $WAKEFUL_API_KEY).")] = None,
    json_: Annotated[bool, typer.Option("--json", help="The answer (or error) as one JSON document.")] = False,
) -> None:
    """Ask the configured decision model typed questions; answers are integers (basis points, milli)."""
    out = out_for(ctx, json_)
    request = {"state": _state(_read(state, "--state")), "questions": _questions(_read(questions, "--questions"))}
    try:
        if remote.server_url(server):
            client = remote.connect(server, key, what="a group key")
            result = dict(client.request("POST", f"{client.prefix()}/decide", json=request))
        else:
            result = asyncio.run(_local(request))
    except UsageError:
        raise
    except WakefulError as exc:
        out.error(exc)
        raise CliExit(EXIT_UNAVAILABLE if exc.code == "unavailable" else EXIT_FAILED) from None
    _print(out, result)
    error = result.get("error")
    raise CliExit(EXIT_OK if not isinstance(error, dict) else EXIT_FOR.get(str(error.get("code")), EXIT_FAILED))


def _read(path: Path, option: str) -> str:
    try:
        data = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{option}: cannot read {path}: {exc}") from None


# a JSON object, array or string is used as it is; any other text (or JSON scalar) is the state as a string
def _state(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict | list | str) else text


def _questions(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--questions is not JSON: {exc}") from None
    return value


def _print(out: Out, result: dict[str, Any]) -> None:
    if out.json:
        out.document(result)
        return
    error = result.get("error")
    if isinstance(error, dict):
        where = f" ({error['field']})" if error.get("field") else ""
        out.err.print(f"[bold red]error[/] [red]{escape(str(error.get('code')))}[/]{escape(where)}: "
                      f"{escape(str(error.get('message', '')))}")
        return
    out.note(f"[dim]model[/] {escape(str(result.get('model')))}")
    for name, answer in (result.get("answers") or {}).items():
        out.text(f"[bold]{escape(name)}[/] {escape(_render(answer))}")


def _render(answer: dict[str, Any]) -> str:
    kind = answer.get("type")
    if kind == "noul":
        return f"noul {_pct(answer['probability_bp'])}"
    spread = " ".join(f"{k}={_pct(v)}" for k, v in answer.get("probabilities_bp", {}).items())
    head = f"choice {answer['choice']}" if kind == "choice" else f"score {answer['score_milli'] / 1000:.3f}"
    return f"{head} (confidence {_pct(answer['confidence_bp'])}) {spread}"


def _pct(bp: int) -> str:
    return f"{bp / 100:.2f}%"


async def _local(request: dict[str, Any]) -> dict[str, Any]:
    from wakeful.harness.config import load_config
    from wakeful.harness.ops import local

    return await local.decide(load_config().decide, LOCAL_GROUP, request)
