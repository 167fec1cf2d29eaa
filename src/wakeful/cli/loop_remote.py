"""`wakeful loop send` in remote mode: the HTTP API of interfaces.md §2.2 with the key (the other `loop`,
`session`, `agent`, `group` and `key` commands run one code path over the harness operations in both modes:
`wakeful.cli.backend`).

Each function answers what the local command prints, in the local `--json` shape where the API returns the same
data (pages are followed into one list); the differences are written down in docs/decisions-cli-remote.md.
"""

from __future__ import annotations

import json
from typing import Any

from wakeful.cli.output import UsageError
from wakeful.cli.remote import Remote, segment

__all__ = ["send"]


def _loop(r: Remote, loop_id: str, tail: str = "") -> str:
    return f"{r.prefix()}/loops/{segment(loop_id, 'Loop')}{tail}"




def send(r: Remote, loop_id: str, *, topic: str, payload: bytes, event_id: str | None) -> dict[str, Any]:
    """Intake route 1 (``POST G/loops/{id}/events``): ``{status, event_id, duplicate, payload_mismatch?}``.

    The payload's own text is sent as it is, so the server applies the strict event rules (harness.md §10.1) to
    exactly what the file holds; it is checked to be one JSON value first, so it cannot add fields to the body.
    """
    head = {"topic": topic, **({"event_id": event_id} if event_id is not None else {})}
    body = json.dumps(head, ensure_ascii=False).encode()
    if payload.strip():
        try:
            text = payload.decode("utf-8")
            json.loads(text)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; nesting too deep
            raise UsageError(f"--payload is not one JSON value: {exc}") from None
        body = body[:-1] + b',"payload":' + text.strip().encode() + b"}"
    return dict(r.request("POST", _loop(r, loop_id, "/events"), content=body,
                          headers={"Content-Type": "application/json"}))
