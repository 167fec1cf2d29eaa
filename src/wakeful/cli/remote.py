"""Remote mode of the `wakeful` command (interfaces.md §4.1): `--server`/`$WAKEFUL_SERVER` with `--key`/
`$WAKEFUL_API_KEY` — the one HTTP client every remote command shares, and the refusal of store-only commands.

API errors become a ``RemoteError`` with the API's code and details (exit 1, or 3 for ``unavailable``); an
unreachable server is ``Unavailable`` (exit 3); no key or a malformed URL is a ``UsageError`` (exit 2).
"""

from __future__ import annotations

import json as jsonlib
import os
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from wakeful.cli.output import Out, Unavailable, UsageError
from wakeful.errors import WakefulError

__all__ = [
    "AGENT_HEADER", "KEY_ENV", "SERVER_ENV", "Remote", "RemoteError", "answer", "api_key", "call", "connect",
    "note_command", "read_bounded", "refuse_local", "segment", "server_url",
]

T = TypeVar("T")
SERVER_ENV = "WAKEFUL_SERVER"
KEY_ENV = "WAKEFUL_API_KEY"
AGENT_HEADER = "X-Wakeful-Agent"
_KEY_TEXT = re.compile(r"[\x21-\x7e]{1,512}")  # a bearer token: printable ASCII, no spaces (never echoed)
MAX_BODY = 64 << 20  # bytes of one answer: a full page of events with payloads is far below this
MAX_PAGES = 1000  # pages of one list: a server naming a next page forever is refused, not followed forever
DEADLINE_FACTOR = 2  # one request, answer included, ends within this many times the client's timeout
_HEADER_TEXT = re.compile(r"[\x20-\x7e]*")  # a header value this client sends: printable ASCII
_command = "wakeful"  # the top-level command being run, for the remote-mode refusal (set by the root callback)


class RemoteError(WakefulError):
    """The server refused: its ``{error, message, …details}`` body, or a description of a non-wakeful answer."""

    def __init__(self, code: str, message: str, *, status: int, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.details = details or {}


def segment(value: str, what: str) -> str:
    """An id as one path segment: percent-encoded, so any text reaches the server as an id (404), never a path."""
    if value in ("", ".", ".."):
        raise UsageError(f"not a {what} id: {value!r}")
    return quote(value[:256], safe="")


def server_url(flag: str | None = None) -> str | None:
    """The server of remote mode: the command's own ``--server``, else ``$WAKEFUL_SERVER`` (which the root
    ``--server`` sets); ``None`` is local mode."""
    value = (flag or os.environ.get(SERVER_ENV) or "").strip()
    return value or None


def api_key(flag: str | None = None) -> str | None:
    """The key of remote mode: the command's own ``--key``, else ``$WAKEFUL_API_KEY``."""
    value = (flag or os.environ.get(KEY_ENV) or "").strip()
    return value or None


def note_command(name: str | None) -> None:
    """Remember the top-level command (``goal``, ``db``, …) so a refusal can name it."""
    global _command
    _command = f"wakeful {name}" if name else "wakeful"


def refuse_local(command: str | None = None) -> None:
    """Where a command is about to open the store: in remote mode, a usage error instead of silently running
    locally as the operator (interfaces.md §4.1)."""
    if server_url() is None:
        return
    raise UsageError(f"`{command or _command}` has no remote mode yet: run it on the node, or unset --server / "
                     f"${SERVER_ENV} to use the local store")


def connect(server: str | None = None, key: str | None = None, *, timeout: float = 30.0,
            what: str = "an API key", agent: str | None = None) -> Remote:
    """A client for remote mode; a missing key or a malformed URL is a usage error (exit 2)."""
    url = server_url(server)
    if url is None:
        raise UsageError(f"remote mode needs --server or ${SERVER_ENV}")
    token = api_key(key)
    if token is None:
        raise UsageError(f"remote mode needs {what}: --key or ${KEY_ENV}")
    return Remote(url, token, timeout=timeout, agent=agent)


def call(out: Out, fn: Callable[[], T]) -> T:
    """Run one remote command body; its typed errors are printed (JSON with ``--json``) with their exit code."""
    try:
        return fn()
    except WakefulError as exc:
        out.fail(exc)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:  # an answer of the wrong shape
        out.fail(RemoteError("invalid_response", f"the server's answer is not what this command expects "
                             f"({type(exc).__name__})", status=200))


class Remote:
    """One server and key: JSON requests with ``Authorization: Bearer``, errors as typed exceptions."""

    def __init__(self, url: str, key: str, *, timeout: float = 30.0, agent: str | None = None) -> None:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - read for its ValueError (a port out of range)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--server must be an http:// or https:// URL, not {_no_password(url)[:200]!r}")
        if not _KEY_TEXT.fullmatch(key):
            raise UsageError("the API key has characters no key has (expected wk_<id>_<secret>)")
        self.url = url.rstrip("/")
        self.shown = _no_password(self.url)  # the URL in messages: a password in it is never echoed
        self.key = key
        self.timeout = timeout
        self.agent = agent  # sent as X-Wakeful-Agent: a group or admin key acting as this agent
        self._group: str | None = None

    def request(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None,
                content: bytes | None = None, headers: dict[str, str] | None = None) -> Any:
        """One API call; the decoded JSON body (``None`` for ``204``)."""
        import httpx

        sent = {"Authorization": f"Bearer {self.key}", **({AGENT_HEADER: self.agent} if self.agent else {}),
                **(headers or {})}
        if any(not _HEADER_TEXT.fullmatch(value) for value in sent.values()):  # e.g. --agent é, or a newline
            raise UsageError(f"not an id a request header can carry: {self.agent or headers!r}")
        query = {k: v for k, v in (params or {}).items() if v is not None}
        deadline = time.monotonic() + self.timeout * DEADLINE_FACTOR
        try:
            with httpx.Client(base_url=self.url, timeout=self.timeout, trust_env=False) as http, \
                    http.stream(method, path, json=json, params=query, content=content, headers=sent) as response:
                body = read_bounded(response, deadline)
        except httpx.TransportError as exc:
            raise Unavailable(f"the server {self.shown} is unreachable: {type(exc).__name__}") from None
        except httpx.HTTPError as exc:  # e.g. a redirect loop or an invalid header
            raise Unavailable(f"the server {self.shown} could not be used: {type(exc).__name__}") from None
        return answer(method, path, response, body)

    def get(self, path: str, **params: Any) -> Any:
        """``GET path?params``."""
        return self.request("GET", path, params=params)

    def info(self) -> dict[str, Any]:
        """``GET /v1/info``: versions, node and the calling principal."""
        found = self.get("/v1/info")
        return found if isinstance(found, dict) else {}

    def group(self, agent: str | None = None) -> str:
        """The key's group (``/v1/info``). An admin key names none: given the ``agent`` a command acts on, its
        group (``/v1/info`` with ``X-Wakeful-Agent``, issue 19); else the group routes refuse (forbidden)."""
        if self._group is None:
            principal = self.info().get("principal")
            group = principal.get("group_id") if isinstance(principal, dict) else None
            if (not isinstance(group, str) or not group) and agent is not None:
                group = self._agent_group(agent)
            if not isinstance(group, str) or not group:
                raise RemoteError("forbidden", "this command needs a group or agent key (an admin key names no "
                                  "group)", status=403)
            self._group = segment(group, "group")  # the server's text goes into paths as one segment too
        return self._group

    def _agent_group(self, agent: str) -> Any:
        found = self.request("GET", "/v1/info", headers={AGENT_HEADER: agent})
        principal = found.get("principal") if isinstance(found, dict) else None
        return principal.get("group_id") if isinstance(principal, dict) else None

    def prefix(self) -> str:
        """``/v1/agent-groups/{group_id}`` of the key's group."""
        return f"/v1/agent-groups/{self.group()}"

    def pages(self, path: str, *, cap: int = 10_000, headers: dict[str, str] | None = None,
              **params: Any) -> list[Any]:
        """Every item of a paged route (``{items, next_cursor}``), following cursors up to ``cap`` items."""
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = self.request("GET", path, params={"limit": 200, "cursor": cursor, **params}, headers=headers)
            if not isinstance(page, dict) or not isinstance(page.get("items"), list):
                raise RemoteError("invalid_response", f"GET {path} did not answer a page", status=200)
            items.extend(page["items"])
            following = page.get("next_cursor")
            if not following or len(items) >= cap:
                return items[:cap]
            if not isinstance(following, str) or following == cursor:
                raise RemoteError("invalid_response", f"GET {path} answered a page naming itself or no cursor as "
                                  "the next", status=200)
            cursor = following
        raise RemoteError("invalid_response", f"GET {path} named more than {MAX_PAGES} pages", status=200)


def read_bounded(response: Any, deadline: float) -> bytes:
    """Read a streamed answer's body, at most ``MAX_BODY`` bytes and before ``deadline`` (a server trickling
    bytes passes every read timeout): too big is ``invalid_response``, too slow ``Unavailable``."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_BODY:
            raise RemoteError("invalid_response", f"the answer is larger than {MAX_BODY >> 20} MiB",
                              status=int(response.status_code))
        if time.monotonic() > deadline:
            raise Unavailable("the server did not finish its answer in time")
        chunks.append(chunk)
    return b"".join(chunks)


def _no_password(url: str) -> str:
    """``url`` with the password of its user part replaced by ``***``."""
    if "@" not in url and "password=" not in url.lower():
        return url  # nothing redacted_url would replace: the configuration module need not load
    from wakeful.harness.config import redacted_url

    return redacted_url(url)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def answer(method: str, path: str, response: Any, content: bytes | None = None) -> Any:
    """An ``httpx`` response (its body read, or given as ``content``) as its JSON body (``None`` for ``204``), or
    the typed error it carries."""
    status = int(response.status_code)
    if status == 204:
        return None
    body: Any = None
    if response.headers.get("content-type", "").split(";")[0].strip() == "application/json":
        try:  # strict JSON: NaN/Infinity would break every --json document after; depth is bounded by recursion
            body = jsonlib.loads(response.content if content is None else content, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            body = None
    if 200 <= status < 300:
        if body is None:
            raise RemoteError("invalid_response", f"{method} {path} answered {status} without a JSON body",
                              status=status)
        return body
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        details = {str(k): v for k, v in body.items() if k not in ("error", "message")}
        raise RemoteError(str(body["error"]), str(body.get("message") or f"HTTP {status}"), status=status,
                          details=details)
    if status in (502, 503, 504):
        raise Unavailable(f"the server answered {method} {path} with HTTP {status}")
    raise RemoteError("invalid_response", f"{method} {path} answered HTTP {status} without a wakeful error body "
                      "(is --server a wakeful node?)", status=status)

