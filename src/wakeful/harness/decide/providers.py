"""The operator's decide providers over HTTP (harness.md §16.4–16.5): Jev-compatible and OpenAI-compatible.

One ``POST``, no retries, no redirects, no proxy from the environment, the body read up to 64 KiB. Each
provider is a coroutine ``provider(request, deadline)`` (``deadline``: seconds left) returning the raw
answer of §16.3 — the same contract as an embedder's provider object (interfaces.md §5).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from wakeful.harness.decide.answer import options_of
from wakeful.harness.decide.errors import ProviderError
from wakeful.harness.decide.settings import DecideSettings

__all__ = ["MAX_BODY_BYTES", "HttpProvider", "JevProvider", "OpenAIProvider", "answer_schema", "build_provider"]

MAX_BODY_BYTES = 65_536  # §16.5 response body read cap
USAGE_FIELDS = (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens"))  # §16.4

SYSTEM_PROMPT = (
    "You answer typed decision questions about the JSON `state` in the user message. Reply with one JSON "
    "object {\"answers\": {...}} holding exactly one answer per key of `questions`, following each question's "
    "`instructions`. For a question of type noul answer {\"noul\": p}, p the probability in [0, 1] that the "
    "statement holds (criteria.true / criteria.false describe the two sides when given). For type choice "
    "answer {\"choice\": key, \"probabilities\": {key: p for every criteria key}, \"confidence\": c}: the "
    "probabilities sum to 1 and the chosen key has the largest one. For type score answer {\"score\": s, "
    "\"probabilities\": {\"0\": p0, …, \"n-1\": pn-1}, \"confidence\": c} over the ordered criteria levels "
    "0 … n-1, with s the expected level Σ i·pi. Every number is finite; probabilities and confidence lie in "
    "[0, 1]. Answer only with the JSON object."
)


class HttpProvider:
    """Shared exchange rules of both HTTP providers; subclasses shape the body and read the reply."""

    def __init__(self, url: str, model: str, key: str) -> None:
        self.url, self.model, self._key = url, model, key
        self.requests = 0  # exchanges started (tests count them: no retries)
        self._client = httpx.AsyncClient(trust_env=False, follow_redirects=False)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r}, model={self.model!r})"  # never the key

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __call__(self, request: dict[str, Any], deadline: float) -> Any:
        return self.read(request, await self.exchange(self.body(request), deadline))

    def body(self, request: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def read(self, request: dict[str, Any], reply: Any) -> Any:
        raise NotImplementedError

    # §16.5: one request; 429 → rate_limited, other non-200 → provider_error, transport → unavailable
    async def exchange(self, body: dict[str, Any], deadline: float) -> Any:
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        self.requests += 1
        try:
            async with self._client.stream("POST", self.url, json=body, headers=headers,
                                           timeout=max(0.001, deadline)) as response:
                if response.status_code == 429:
                    raise ProviderError("rate_limited", "the provider answered 429")
                if response.status_code != 200:
                    raise ProviderError("provider_error", f"the provider answered {response.status_code}")
                raw = await _read_capped(response)
        except httpx.TimeoutException:
            raise ProviderError("timeout", "the provider did not answer within the budget") from None
        except httpx.HTTPError as exc:
            raise ProviderError("unavailable", f"transport failure: {type(exc).__name__}") from None
        return _parse(raw, "the provider's body")


class JevProvider(HttpProvider):
    """§16.4 Jev-compatible: the body is the request plus ``model``; the reply is the raw answer."""

    def body(self, request: dict[str, Any]) -> dict[str, Any]:
        return {**request, "model": self.model}

    def read(self, request: dict[str, Any], reply: Any) -> Any:
        return reply


class OpenAIProvider(HttpProvider):
    """§16.4 OpenAI-compatible chat completions with a strict ``json_schema`` made per request."""

    def __init__(self, base: str, model: str, key: str) -> None:
        super().__init__(base.rstrip("/") + "/chat/completions", model, key)

    def body(self, request: dict[str, Any]) -> dict[str, Any]:
        return {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": json.dumps(request, separators=(",", ":"), ensure_ascii=False)},
            ],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "decide_answers", "strict": True, "schema": answer_schema(request),
            }},
        }

    # the message content is the raw answer; the reply's model and usage fill in what the content lacks
    def read(self, request: dict[str, Any], reply: Any) -> Any:
        try:
            message = reply["choices"][0]["message"]
            content = message["content"]
        except (TypeError, KeyError, IndexError):
            raise ProviderError("invalid_response", "no choices[0].message.content in the reply") from None
        if not isinstance(content, str):
            raise ProviderError("invalid_response", "the message content is not a string (a refusal?)")
        raw = _parse(content.encode("utf-8", "replace"), "the message content")
        if isinstance(raw, dict):
            raw.setdefault("model", reply.get("model") or self.model)
            usage = reply.get("usage")
            if "usage" not in raw and isinstance(usage, dict):  # only the counts the reply gives (§16.3: optional)
                mapped = {ours: usage[theirs] for ours, theirs in USAGE_FIELDS if usage.get(theirs) is not None}
                if mapped:
                    raw["usage"] = mapped
        return raw


# §16.4: each question key requires the raw shape of §16.3 (strict: every property required, no extras)
def answer_schema(request: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema an OpenAI-compatible model must answer ``request`` with."""
    answers = {key: _question_schema(question) for key, question in request["questions"].items()}
    return _object({"answers": _object(answers)})


def _question_schema(question: dict[str, Any]) -> dict[str, Any]:
    number = {"type": "number"}
    if question["type"] == "noul":
        return _object({"noul": number})
    options = options_of(question)
    probabilities = _object(dict.fromkeys(options, number))
    choice = {"type": "string", "enum": options} if question["type"] == "choice" else number
    name = "choice" if question["type"] == "choice" else "score"
    return _object({name: choice, "probabilities": probabilities, "confidence": number})


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


async def _read_capped(response: httpx.Response) -> bytes:
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise ProviderError("invalid_response", f"unrequested content-encoding {encoding!r}")
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ProviderError("invalid_response", f"the body is over {MAX_BODY_BYTES} bytes")
    return bytes(body)


def _parse(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise ProviderError("invalid_response", f"{what} is not JSON") from None


def build_provider(settings: DecideSettings) -> HttpProvider:
    """The configured HTTP provider (the settings have no ``problem()``)."""
    endpoint, model = settings.effective_endpoint(), settings.effective_model()
    assert endpoint is not None and model is not None
    if settings.provider == "jev":
        return JevProvider(endpoint, model, settings.key())
    return OpenAIProvider(endpoint, model, settings.key())
