"""The log of ``wakeful serve`` on stderr (interfaces.md §7 ``log.level``, ``log.format``): ``text`` lines or one
JSON object per line, with webhook paths, API key secrets and URL passwords redacted in every record.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import IO, Any

__all__ = ["LEVELS", "JsonFormatter", "TextFormatter", "configure", "redact"]

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR,
          "critical": logging.CRITICAL}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_MARKER = "/v1/loop-webhooks/"
_KEY = re.compile(r"(wk_key_[0-9a-z]+_)[A-Za-z0-9_-]+")  # wk_<key id>_<secret> (api/auth.py)
_BEARER = re.compile(r"(Bearer )[^\s\"']+", re.IGNORECASE)
# a URL password runs to the first "@" ("/" and ":" included, as SQLAlchemy reads it); asyncpg takes ?password= too
_PASSWORD = re.compile(r"([a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]+@", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#\s\"']+", re.IGNORECASE)


# interfaces.md §7, harness.md §10.4: secrets and webhook paths are always redacted
def redact(text: str) -> str:
    """``text`` without webhook secrets (each ``/v1/loop-webhooks/<secret>``), key secrets or URL passwords."""
    from wakeful.api.server import _redact  # the access-log redaction of one webhook path, reused per path

    if _MARKER in text:
        head, *rest = text.split(_MARKER)
        text = head + "".join(_redact(_MARKER + part) for part in rest)
    text = _KEY.sub(r"\1<redacted>", text)
    text = _BEARER.sub(r"\1<redacted>", text)
    return _QUERY_PASSWORD.sub(r"\1***", _PASSWORD.sub(r"\1***@", text))


class TextFormatter(logging.Formatter):
    """``log.format = text``: ``time LEVEL logger: message``, redacted."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class JsonFormatter(logging.Formatter):
    """``log.format = json``: one object per line — ``ts``, ``level``, ``logger``, ``message`` (and ``exc``)."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(),
                               "logger": record.name, "message": redact(record.getMessage())}
        if record.exc_info:
            doc["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(doc, ensure_ascii=False, default=str)


def configure(level: str = "info", fmt: str = "text", stream: IO[str] | None = None) -> None:
    """Replace the root logger's handlers with one on ``stream`` (stderr) at ``level`` in ``fmt``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logging.basicConfig(level=LEVELS[level], handlers=[handler], force=True)
