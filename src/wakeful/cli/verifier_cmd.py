"""`wakeful loop webhook-verifier LOOP_ID [SCHEME]`: show, set or clear a Loop webhook's signature verifier
(issue 19): the ``webhooks.*_verifier`` operations, locally on the store as the operator or over --server
(``G/loops/{id}/webhook/verifier``), one code path (``wakeful.cli.backend``).

The secret comes from a file (``-`` for standard input) or an environment variable, never from the command
line (other users of the machine can read argv), and is never printed: answers show its fingerprint.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from wakeful.cli import backend
from wakeful.cli.backend import Site
from wakeful.cli.events_cmd import JsonOpt, _show
from wakeful.cli.output import UsageError, out_for

__all__ = ["loop_webhook_verifier", "register"]

SCHEMES = ("github", "stripe", "slack", "standard-webhooks", "hmac-sha256")


def register(loop_app: typer.Typer) -> None:
    loop_app.command("webhook-verifier")(loop_webhook_verifier)


def _secret(secret_file: Path | None, secret_env: str | None) -> str:
    if (secret_file is None) == (secret_env is None):
        raise UsageError("give the signing secret with exactly one of --secret-file PATH (- for stdin) or --secret-env NAME")
    if secret_env is not None:
        value = os.environ.get(secret_env)
        if not value:
            raise UsageError(f"the environment variable {secret_env} is not set")
        return value.strip()
    assert secret_file is not None
    try:
        text = sys.stdin.read() if str(secret_file) == "-" else secret_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the secret file: {type(exc).__name__}") from None
    return text.strip()


async def _call(site: Site, loop_id: str, op: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One verifier operation on the Loop: the same code path locally and over --server (issue 15)."""
    group = await site.group(loop=loop_id)
    answer = await site.backend.call(f"webhooks.{op}", group_id=group, loop_id=loop_id, **spec)
    return {"loop_id": loop_id, "verifier": None} if answer is None else dict(answer)


def _lines(result: dict[str, Any]) -> list[str]:
    verifier = result.get("verifier")
    if not verifier:
        return ["verifier: none (the webhook takes unsigned JSON)"]
    return [f"verifier: {verifier['scheme']}"] + [f"{key}: {value}" for key, value in verifier.items()
                                                  if key != "scheme" and value not in (None, "")]


def loop_webhook_verifier(
    ctx: typer.Context, loop_id: str,
    scheme: Annotated[str | None, typer.Argument(help=f"One of {', '.join(SCHEMES)}; omit to show.")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the verifier.")] = False,
    secret_file: Annotated[Path | None, typer.Option("--secret-file", help="File holding the signing secret "
                                                     "(- reads standard input).")] = None,
    secret_env: Annotated[str | None, typer.Option("--secret-env", help="Environment variable holding it.")] = None,
    tolerance: Annotated[int | None, typer.Option("--tolerance", help="Seconds of clock skew accepted "
                                                  "(stripe, slack, standard-webhooks; default 300).")] = None,
    field: Annotated[list[str] | None, typer.Option("--field", help="Keep only this dotted path of each payload "
                                                    "(repeatable).")] = None,
    header: Annotated[str | None, typer.Option("--header", help="hmac-sha256: the signature header.")] = None,
    encoding: Annotated[str | None, typer.Option("--encoding", help="hmac-sha256: hex or base64.")] = None,
    prefix: Annotated[str | None, typer.Option("--prefix", help="hmac-sha256: text before the signature.")] = None,
    id_header: Annotated[str | None, typer.Option("--id-header", help="hmac-sha256: delivery id header.")] = None,
    topic_header: Annotated[str | None, typer.Option("--topic-header", help="hmac-sha256: event type header.")] = None,
    json_: JsonOpt = False,
) -> None:
    """Show, set or clear the signature check of the Loop's webhook.

    Example: wakeful loop webhook-verifier lp_… github --secret-file gh.secret --field action --field repository.full_name
    """
    out = out_for(ctx, json_)
    if clear and scheme is not None:
        out.fail(UsageError("--clear takes no SCHEME"))
    if clear:
        result = backend.run(out, lambda site: _call(site, loop_id, "clear_verifier", {}))
        _show(out, result, _lines(result))
        return
    if scheme is None:
        result = backend.run(out, lambda site: _call(site, loop_id, "get_verifier", {}))
        _show(out, result, _lines(result))
        return
    try:
        secret = _secret(secret_file, secret_env)
    except UsageError as exc:
        out.fail(exc)
    spec = {key: value for key, value in (
        ("scheme", scheme), ("secret", secret), ("tolerance_s", tolerance), ("fields", field or None),
        ("header", header), ("encoding", encoding), ("prefix", prefix), ("id_header", id_header),
        ("topic_header", topic_header)) if value is not None}
    result = backend.run(out, lambda site: _call(site, loop_id, "set_verifier", spec))
    _show(out, result, _lines(result))
