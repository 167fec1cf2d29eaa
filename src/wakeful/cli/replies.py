"""The scripted host of `wakeful run --host-replies FILE` (interfaces.md §4.2).

FILE maps a capability name to its replies, consumed in order per capability; the last one repeats.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wakeful.cli.output import UsageError

# interfaces.md §4.2: the capabilities every run grants besides the names in FILE (the Loop builtins)
LOOP_BUILTINS = (
    "agent.notify",
    "loop.state.put",
    "loop.state.get",
    "loop.ack",
    "loop.log",
    "decide",
    "web.http_request",
)


@dataclass(frozen=True)
class Reply:
    """One scripted reply: exactly one of ``result`` (any JSON) or ``error`` ({code, message})."""

    result: Any = None
    error: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"error": self.error} if self.error is not None else {"result": self.result}


@dataclass
class HostReplies:
    """Replies per capability plus the position reached in each list."""

    replies: dict[str, list[Reply]] = field(default_factory=dict)
    _next: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None) -> HostReplies:
        """Read FILE; no FILE means every call is `not_scripted`. Raises ``UsageError`` for a bad FILE."""
        if path is None:
            return cls()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read host replies {path}: {exc}") from exc
        return cls.parse(text, source=str(path))

    @classmethod
    def parse(cls, text: str, *, source: str = "host replies") -> HostReplies:
        """Validate the FILE shape of interfaces.md §4.2."""
        try:
            doc = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            raise UsageError(f"{source}: not valid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise UsageError(f"{source}: must be a JSON object mapping capability names to reply lists")
        return cls({name: _reply_list(source, name, value) for name, value in doc.items()})

    def capabilities(self) -> list[str]:
        """FILE's names plus the Loop builtins, each once, in a stable order."""
        names = list(LOOP_BUILTINS)
        names += [n for n in self.replies if n not in names]
        return names

    def answer(self, capability: str) -> Reply:
        """The next reply for ``capability`` (the last repeats), or the `not_scripted` error."""
        script = self.replies.get(capability)
        if not script:
            return Reply(error={"code": "not_scripted", "message": f"no reply for {capability}"})
        index = self._next.get(capability, 0)
        self._next[capability] = index + 1
        return script[min(index, len(script) - 1)]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _reply_list(source: str, name: str, value: Any) -> list[Reply]:
    if not name or len(name.encode()) > 128:
        raise UsageError(f"{source}: capability name must be 1..128 bytes: {name!r}")
    if not isinstance(value, list) or not value:
        raise UsageError(f"{source}: {name}: expected a non-empty list of replies")
    return [_reply(f"{source}: {name}[{i}]", item) for i, item in enumerate(value)]


def _reply(where: str, item: Any) -> Reply:
    if not isinstance(item, dict) or len(item) != 1 or not ({"result", "error"} & item.keys()):
        raise UsageError(
            f'{where}: a reply is {{"result": <any JSON>}} or {{"error": {{"code", "message"}}}}'
        )
    if "result" in item:
        return Reply(result=item["result"])
    error = item["error"]
    if (
        not isinstance(error, dict)
        or set(error) != {"code", "message"}
        or not all(isinstance(v, str) for v in error.values())
    ):
        raise UsageError(f'{where}: error must be {{"code": <string>, "message": <string>}}')
    return Reply(error={"code": error["code"], "message": error["message"]})
