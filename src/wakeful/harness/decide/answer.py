"""Checking a provider's raw answer (harness.md §16.3) and converting it to the integer answer (§16.2).

Any failure fails the whole call as ``invalid_response`` — there is never a default answer.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from wakeful.harness.decide.errors import DecideFailure
from wakeful.runtime import jsonval

__all__ = ["MAX_MODEL_BYTES", "MAX_RESULT_BYTES", "convert", "options_of"]

MAX_MODEL_BYTES = 128
MAX_RESULT_BYTES = 15_360  # §16.2
SCORE_TOLERANCE = 0.01


def _bad(message: str) -> DecideFailure:
    return DecideFailure("invalid_response", message[:256])


def options_of(question: dict[str, Any]) -> list[str]:
    """The probability keys a question's answer must carry (choice: criteria keys; score: "0" … "n−1")."""
    if question["type"] == "choice":
        return list(question["criteria"])
    if question["type"] == "score":
        return [str(i) for i in range(len(question["criteria"]))]
    return []


# §16.3 then §16.2: validate everything first, then convert; the result must fit 15,360 bytes
def convert(request: dict[str, Any], raw: Any) -> dict[str, Any]:
    """``{model, answers}`` with integer encodings, or raise ``DecideFailure``."""
    if not isinstance(raw, dict):
        raise _bad("the answer is not a JSON object")
    model = raw.get("model")
    if not isinstance(model, str) or not model.strip() or len(model.encode("utf-8", "replace")) > MAX_MODEL_BYTES:
        raise _bad(f"model must be a non-blank string of at most {MAX_MODEL_BYTES} bytes")
    _usage(raw.get("usage"))
    answers = raw.get("answers")
    questions: dict[str, Any] = request["questions"]
    if not isinstance(answers, dict) or set(answers) != set(questions):
        raise _bad("answers must have exactly the question keys")
    out = {key: _answer(key, question, answers[key]) for key, question in questions.items()}
    result = {"model": model, "answers": out}
    size = jsonval.from_python(result, limits=False).size
    if size > MAX_RESULT_BYTES:
        raise DecideFailure("result_too_large", f"{size} bytes; at most {MAX_RESULT_BYTES}", bytes=size)
    return result


def _usage(usage: Any) -> None:
    if usage is None:
        return
    if not isinstance(usage, dict) or not set(usage) <= {"input_tokens", "output_tokens"}:
        raise _bad("usage must be {input_tokens, output_tokens}")
    for name, count in usage.items():
        if type(count) is not int or count < 0:
            raise _bad(f"usage.{name} must be an integer ≥ 0")


def _answer(key: str, question: dict[str, Any], raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _bad(f"answers.{key} is not an object")
    kind = question["type"]
    if kind == "noul":
        p = _unit(raw.get("noul"), f"answers.{key}.noul")
        return {"type": "noul", "probability_bp": _bp(p)}
    options = options_of(question)
    probs = _distribution(key, options, raw.get("probabilities"))
    confidence = _unit(raw.get("confidence"), f"answers.{key}.confidence")
    if kind == "choice":
        choice = raw.get("choice")
        if not isinstance(choice, str) or choice not in probs:
            raise _bad(f"answers.{key}.choice is not one of the options")
        if probs[choice] < max(probs.values()):
            raise _bad(f"answers.{key}.choice does not have the maximal probability")
        return {"type": "choice", "choice": choice, "confidence_bp": _bp(confidence),
                "probabilities_bp": {k: _bp(p) for k, p in probs.items()}}
    score = _number(raw.get("score"), f"answers.{key}.score", 0.0, float(len(options) - 1))
    expected = sum(i * probs[str(i)] for i in range(len(options)))
    if abs(expected - score) > SCORE_TOLERANCE:
        raise _bad(f"answers.{key}.score is not the expectation of its probabilities")
    return {"type": "score", "score_milli": _scaled(score, 1000), "confidence_bp": _bp(confidence),
            "probabilities_bp": {k: _bp(probs[k]) for k in options}}


# §16.3: probabilities with exactly the option keys, each in [0, 1], |Σp − 1| ≤ 0.005·n + 1e−9
def _distribution(key: str, options: list[str], raw: Any) -> dict[str, float]:
    where = f"answers.{key}.probabilities"
    if not isinstance(raw, dict) or set(raw) != set(options):
        raise _bad(f"{where} must have exactly the option keys")
    probs = {k: _unit(raw[k], f"{where}.{k}") for k in options}
    if abs(math.fsum(probs.values()) - 1.0) > 0.005 * len(options) + 1e-9:
        raise _bad(f"{where} do not sum to 1")
    return probs


def _unit(value: Any, where: str) -> float:
    return _number(value, where, 0.0, 1.0)


def _number(value: Any, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(f"{where} must be a number")
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise _bad(f"{where} must be a finite number in [{low:g}, {high:g}]")
    return number


def _bp(value: float) -> int:
    return _scaled(value, 10_000)


# §16.2: floor(value × scale), on the decimal value the provider wrote (0.29 → 2900, not 2899 from binary FP)
def _scaled(value: float, scale: int) -> int:
    return int((Decimal(repr(value)) * scale).to_integral_value(rounding="ROUND_FLOOR"))
