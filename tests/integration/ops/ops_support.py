"""What the backend tests share: an async ``ApiCaller`` over a real HTTP connection with one key, and the
principals an operation runs as in process."""

from __future__ import annotations

from typing import Any

import httpx
from live_api import auth

from wakeful.harness.ops import Principal, Refused

__all__ = ["Caller", "agent_of", "person_of"]


class Caller:
    """An async ``ApiCaller`` with one key; a refusal is the server's ``{error, message, …}`` as ``Refused``."""

    def __init__(self, url: str, key: str, *, timeout: float = 60) -> None:
        self.http = httpx.AsyncClient(base_url=url, headers=auth(key), timeout=timeout)

    async def request(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Any:
        response = await self.http.request(method, path, json=json, params=params)
        if response.status_code == 204:
            return None
        body = response.json()
        if response.status_code >= 400:
            details = {k: v for k, v in body.items() if k not in ("error", "message")}
            raise Refused(body["error"], body["message"], status=response.status_code, **details)
        return body


def agent_of(t: dict[str, str]) -> Principal:
    """The tenant's agent as an agent principal."""
    return Principal("agent", "k", t["group"], t["agent"], t["group"])


def person_of(t: dict[str, str]) -> Principal:
    """A group key of the tenant's group (a person principal)."""
    return Principal("group", "gk", t["group"], None)
