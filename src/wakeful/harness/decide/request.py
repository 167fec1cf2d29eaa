"""Validation of a ``decide`` request (harness.md §16.1): state plus 1–8 typed, named questions.

Any violation is ``invalid_request`` naming the offending ``field``; no provider is contacted.
"""

from __future__ import annotations

import re
from typing import Any

from wakeful.harness.decide.errors import DecideFailure
from wakeful.runtime import jsonval

__all__ = ["KEY", "MAX_ARGUMENT_BYTES", "validate_request"]

KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_ARGUMENT_BYTES = 12_288  # §16.1 / §20
MAX_QUESTIONS = 8
CHOICE_OPTIONS = (2, 32)
SCORE_LEVELS = (2, 10)
QUESTION_KEYS = frozenset({"type", "instructions", "criteria"})


def _refuse(field: str, message: str) -> DecideFailure:
    field = field[:200]  # a hostile key never makes a long error
    return DecideFailure("invalid_request", f"{field}: {message}", field=field)


# §16.1 size: the compact encoding of the arguments ≤ 12,288 bytes (checked first: nothing large is walked)
def validate_request(arguments: Any) -> dict[str, Any]:
    """Return the request as a plain JSON object, or raise ``DecideFailure('invalid_request')``."""
    try:
        box = jsonval.from_python(arguments, limits=False)
    except jsonval.JsonError as exc:
        raise _refuse("arguments", f"not a JSON value ({exc.message})") from None
    if box.size > MAX_ARGUMENT_BYTES:
        raise _refuse("arguments", f"{box.size} bytes encoded; at most {MAX_ARGUMENT_BYTES}")
    request = box.value
    if not isinstance(request, dict) or set(request) != {"state", "questions"}:
        raise _refuse("arguments", "must be an object with exactly the keys state and questions")
    if not isinstance(request["state"], str | dict | list):
        raise _refuse("state", "must be a string, object or array")
    questions = request["questions"]
    if not isinstance(questions, dict) or not 1 <= len(questions) <= MAX_QUESTIONS:
        raise _refuse("questions", f"must be an object with 1–{MAX_QUESTIONS} entries")
    for key, question in questions.items():
        _question(key, question)
    return request


def _question(key: str, question: Any) -> None:
    where = f"questions.{key}"
    if KEY.fullmatch(key) is None:
        raise _refuse(where, "question keys match ^[A-Za-z0-9_-]{1,64}$")
    if not isinstance(question, dict) or not set(question) <= QUESTION_KEYS or "type" not in question:
        raise _refuse(where, "a question has only type, instructions and criteria")
    if not _text(question.get("instructions")):
        raise _refuse(f"{where}.instructions", "must be a non-blank string")
    kind = question["type"]
    criteria = question.get("criteria")
    if kind == "choice":
        _choice(f"{where}.criteria", criteria)
    elif kind == "noul":
        _noul(f"{where}.criteria", criteria, "criteria" in question)
    elif kind == "score":
        _score(f"{where}.criteria", criteria)
    else:
        raise _refuse(f"{where}.type", "must be choice, noul or score")


# §16.1 choice: criteria is an object of 2–32 entries, keys match the key pattern, values non-blank strings
def _choice(where: str, criteria: Any) -> None:
    low, high = CHOICE_OPTIONS
    if not isinstance(criteria, dict) or not low <= len(criteria) <= high:
        raise _refuse(where, f"must be an object of {low}–{high} options")
    for option, text in criteria.items():
        if KEY.fullmatch(option) is None:
            raise _refuse(f"{where}.{option}", "option keys match ^[A-Za-z0-9_-]{1,64}$")
        if not _text(text):
            raise _refuse(f"{where}.{option}", "must be a non-blank string")


# §16.1 noul: criteria absent, or exactly {"true": text, "false": text}, both non-blank
def _noul(where: str, criteria: Any, present: bool) -> None:
    if not present:
        return
    if not isinstance(criteria, dict) or set(criteria) != {"true", "false"}:
        raise _refuse(where, 'must be absent or exactly {"true": text, "false": text}')
    for side in ("true", "false"):
        if not _text(criteria[side]):
            raise _refuse(f"{where}.{side}", "must be a non-blank string")


# §16.1 score: criteria is an array of 2–10 non-blank strings, the ordered levels 0 … n−1
def _score(where: str, criteria: Any) -> None:
    low, high = SCORE_LEVELS
    if not isinstance(criteria, list) or not low <= len(criteria) <= high:
        raise _refuse(where, f"must be an array of {low}–{high} levels")
    for i, text in enumerate(criteria):
        if not _text(text):
            raise _refuse(f"{where}[{i}]", "must be a non-blank string")


def _text(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""
