"""The HTTP face's error rendering: the JSON body ``{error, message, …details}`` every refusal gets, with
``Retry-After`` from ``retry_after_s``, at the status of the one table, ``wakeful.errors.ERROR_CODES``
(interfaces.md §2.1, spec README "Error codes"). A new code is a row of that table, not a registration here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from wakeful.errors import ERROR_CODES, WakefulError, status_for
from wakeful.harness.errors import Forbidden, HarnessError, Unauthorized

__all__ = [
    "ApiError",
    "CsrfRequired",
    "Forbidden",
    "STATUS",
    "Unauthorized",
    "error_response",
    "register_status",
    "send_json",
    "status_for",
    "wakeful_error_response",
]

log = logging.getLogger("wakeful.api")

# code -> HTTP status of the codes a face answers: a read-only view of the one table (wakeful.errors.ERROR_CODES)
STATUS: dict[str, int] = {row.code: row.http for row in ERROR_CODES.values() if row.http is not None}


def register_status(code: str, status: int) -> None:
    """Confirm that ``code`` answers ``status``: codes and statuses are rows of ``wakeful.errors.ERROR_CODES``."""
    row = ERROR_CODES.get(code)
    if row is None or row.http != status:
        known = "is not in wakeful.errors.ERROR_CODES" if row is None else f"already maps to {row.http}"
        raise ValueError(f"code {code!r} {known}")


class ApiError(HarnessError):
    """A refusal raised by the face itself with any registered code (``ApiError("forbidden", "…")``)."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message, **details)
        self.code = code


class CsrfRequired(HarnessError):
    code = "csrf_required"


def request_id_of(request: Request) -> str:
    return str(getattr(request.state, "request_id", "") or "")


def error_response(code: str, message: str, *, status: int | None = None, details: dict[str, Any] | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """The ``{error, message, …details}`` body; ``Retry-After`` from ``details["retry_after_s"]``."""
    body: dict[str, Any] = {"error": code, "message": message}
    for key, value in (details or {}).items():
        if key not in ("error", "message"):
            body[key] = value
    out = dict(headers or {})
    retry = body.get("retry_after_s")
    if isinstance(retry, int | float) and not isinstance(retry, bool):
        seconds = max(1, -int(-retry // 1))
        body["retry_after_s"] = seconds
        out["Retry-After"] = str(seconds)
    return JSONResponse(body, status_code=status or status_for(code), headers=out)


def _wakeful_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, WakefulError)
    return wakeful_error_response(exc, request)


def wakeful_error_response(exc: WakefulError, request: Request | None = None) -> JSONResponse:
    """The answer to a ``WakefulError``: its code's status and body (a 500 code is logged, its stack kept)."""
    status = status_for(exc.code)
    if status == 500:
        return internal_response(request, exc)
    return error_response(exc.code, exc.message, status=status, details=exc.details)


_JSON_HEADERS = [(b"content-type", b"application/json")]


async def send_json(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, body: Any) -> None:
    """A JSON answer sent straight to ASGI ``send``: the bytes and headers ``JSONResponse`` would send
    (compact, UTF-8, no NaN), without building a ``Response``."""
    data = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(data)).encode()), *_JSON_HEADERS]})
    await send({"type": "http.response.body", "body": data})


def internal_response(request: Request | None, exc: BaseException | None, request_id: str = "") -> JSONResponse:
    """A bug: logged with its stack here, answered with the request id and never the stack."""
    rid = request_id or (request_id_of(request) if request is not None else "")
    if exc is not None:
        log.error("internal error in request %s", rid, exc_info=(type(exc), exc, exc.__traceback__))
    return error_response("internal", "internal error; quote the request id when reporting it",
                          status=500, details={"request_id": rid})


_HTTP_CODES = {400: "invalid_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 413: "payload_too_large", 415: "json_required", 503: "unavailable"}


def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "internal" if exc.status_code >= 500 else "invalid_request")
    message = exc.detail if isinstance(exc.detail, str) else code
    if exc.status_code == 404:
        message = "no such route or resource"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:  # RFC 9110 §15.5.6: every method of the path, not only the first route's
        headers = {k: v for k, v in headers.items() if k.lower() != "allow"}
        headers["Allow"] = ", ".join(allowed_methods(request))
    return error_response(code, message, status=exc.status_code, headers=headers)


def allowed_methods(request: Request) -> list[str]:
    """The methods of every route whose path matches the request's (Starlette names only the first route's)."""
    from fastapi.routing import iter_route_contexts
    from starlette.routing import Route

    path = request.scope.get("path", "")
    methods: set[str] = set()
    for context in iter_route_contexts(request.app.routes):
        route = context.original_route
        if isinstance(route, Route) and route.methods and route.path_regex.match(path):
            methods |= route.methods
    return sorted(methods)


def _validation_error(request: Request, exc: Exception) -> Response:
    """FastAPI's 422 becomes ``400 invalid_request`` with the dotted ``field`` (interfaces.md §2.1)."""
    errors: list[dict[str, Any]] = list(getattr(exc, "errors", lambda: [])())
    first = errors[0] if errors else {}
    loc = [str(part) for part in first.get("loc", ())]
    if loc and loc[0] in ("body", "query", "path", "header", "cookie"):
        where, loc = loc[0], loc[1:]
    else:
        where = "body"
    field = ".".join(loc) or where
    if first.get("type") == "json_invalid":
        return error_response("invalid_json", "the body is not valid JSON", details={"field": "body"})
    if where == "body" and not loc and first.get("type") in ("model_attributes_type", "dict_type", "missing"):
        return error_response("json_object_required", "the body must be a JSON object", status=400,
                              details={"field": "body"})
    msg = str(first.get("msg", "invalid request"))
    return error_response("invalid_request", f"{where} {field}: {msg}", details={"field": field})


def install(app: Any) -> None:
    """Register the handlers on a FastAPI app."""
    from fastapi.exceptions import RequestValidationError

    app.add_exception_handler(WakefulError, _wakeful_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
