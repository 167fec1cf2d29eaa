"""decide's pure rules: request validation (harness.md §16.1), answer validation and integer conversion
(§16.2–16.3), settings (§16.4, interfaces.md §7) and the token buckets (§14)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wakeful.harness.config import load_config
from wakeful.harness.decide import DecideFailure, DecideSettings, convert, validate_request
from wakeful.harness.decide.limiter import BucketSet, Rate
from wakeful.harness.errors import InvalidRequest

NOUL = {"type": "noul", "instructions": "Is it urgent?"}
CHOICE = {"type": "choice", "instructions": "Which?", "criteria": {"a": "first", "b": "second"}}
SCORE = {"type": "score", "instructions": "How much?", "criteria": ["low", "mid", "high"]}


def refused(arguments: Any) -> str:
    with pytest.raises(DecideFailure) as info:
        validate_request(arguments)
    assert info.value.code == "invalid_request"
    return str(info.value.details["field"])


def test_valid_requests_pass() -> None:
    for state in ("text", {"k": 1}, [1, 2]):
        req = {"state": state, "questions": {"q": NOUL}}
        assert validate_request(req) == req
    eight = {f"q-{i}_X": NOUL for i in range(8)}
    validate_request({"state": "s", "questions": eight})
    validate_request({"state": "s", "questions": {"n": {**NOUL, "criteria": {"true": "yes", "false": "no"}}}})
    validate_request({"state": "s", "questions": {"c": {**CHOICE, "criteria": {f"o{i}": "x" for i in range(32)}}}})
    validate_request({"state": "s", "questions": {"s": {**SCORE, "criteria": ["l"] * 10}}})


@pytest.mark.parametrize(("arguments", "field"), [
    ("text", "arguments"),
    ({"state": "s"}, "arguments"),
    ({"state": "s", "questions": {"q": NOUL}, "model": "x"}, "arguments"),  # guests never choose the model
    ({"state": 3, "questions": {"q": NOUL}}, "state"),
    ({"state": None, "questions": {"q": NOUL}}, "state"),
    ({"state": "s", "questions": {}}, "questions"),
    ({"state": "s", "questions": {f"q{i}": NOUL for i in range(9)}}, "questions"),
    ({"state": "s", "questions": []}, "questions"),
    ({"state": "s", "questions": {"a b": NOUL}}, "questions.a b"),
    ({"state": "s", "questions": {"k" * 65: NOUL}}, "questions." + "k" * 65),
    ({"state": "s", "questions": {"é": NOUL}}, "questions.é"),
    ({"state": "s", "questions": {"q": {**NOUL, "extra": 1}}}, "questions.q"),
    ({"state": "s", "questions": {"q": {"instructions": "x"}}}, "questions.q"),
    ({"state": "s", "questions": {"q": {**NOUL, "type": "yesno"}}}, "questions.q.type"),
    ({"state": "s", "questions": {"q": {**NOUL, "instructions": "   "}}}, "questions.q.instructions"),
    ({"state": "s", "questions": {"q": {"type": "noul"}}}, "questions.q.instructions"),
    ({"state": "s", "questions": {"q": {**NOUL, "criteria": {"true": "y"}}}}, "questions.q.criteria"),
    ({"state": "s", "questions": {"q": {**NOUL, "criteria": {"true": "y", "false": ""}}}}, "questions.q.criteria.false"),
    ({"state": "s", "questions": {"q": {**NOUL, "criteria": None}}}, "questions.q.criteria"),
    ({"state": "s", "questions": {"q": {**CHOICE, "criteria": {"a": "x"}}}}, "questions.q.criteria"),
    ({"state": "s", "questions": {"q": {**CHOICE, "criteria": {f"o{i}": "x" for i in range(33)}}}}, "questions.q.criteria"),
    ({"state": "s", "questions": {"q": {**CHOICE, "criteria": {"a": "x", "b c": "y"}}}}, "questions.q.criteria.b c"),
    ({"state": "s", "questions": {"q": {**CHOICE, "criteria": {"a": "x", "b": " "}}}}, "questions.q.criteria.b"),
    ({"state": "s", "questions": {"q": {**CHOICE, "criteria": ["a", "b"]}}}, "questions.q.criteria"),
    ({"state": "s", "questions": {"q": {**SCORE, "criteria": ["one"]}}}, "questions.q.criteria"),
    ({"state": "s", "questions": {"q": {**SCORE, "criteria": ["l"] * 11}}}, "questions.q.criteria"),
    ({"state": "s", "questions": {"q": {**SCORE, "criteria": ["a", 2]}}}, "questions.q.criteria[1]"),
    ({"state": "s", "questions": {"q": {**SCORE, "criteria": {"0": "a", "1": "b"}}}}, "questions.q.criteria"),
    ({"state": "s", "questions": {"q": NOUL}, 1: 2}, "arguments"),  # not a JSON object key
    ({"state": float("nan"), "questions": {"q": NOUL}}, "arguments"),
])
def test_request_violations_name_the_field(arguments: Any, field: str) -> None:
    assert refused(arguments) == field


def test_the_12_kib_limit_is_on_the_compact_encoding() -> None:
    overhead = len('{"state":"","questions":{"q":{"type":"noul","instructions":"x"}}}')
    fits = {"state": "s" * (12_288 - overhead), "questions": {"q": {"type": "noul", "instructions": "x"}}}
    validate_request(fits)
    assert refused({**fits, "state": fits["state"] + "s"}) == "arguments"
    assert refused({**fits, "state": "é" * 6200}) == "arguments"  # bytes, not characters


REQ = {"state": "s", "questions": {"n": NOUL, "c": CHOICE, "s": SCORE}}


def raw(**answers: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "n": {"noul": 0.29},
        "c": {"choice": "a", "probabilities": {"a": 0.57, "b": 0.43}, "confidence": 0.99},
        "s": {"score": 1.3, "probabilities": {"0": 0.1, "1": 0.5, "2": 0.4}, "confidence": 0.5},
    }
    base.update(answers)
    return {"model": "m", "answers": base}


def test_conversion_floors_the_decimal_value() -> None:
    out = convert(REQ, raw())
    assert out["answers"]["n"] == {"type": "noul", "probability_bp": 2900}  # not 2899 (0.29 × 10000 in FP)
    assert out["answers"]["c"]["probabilities_bp"] == {"a": 5700, "b": 4300}
    assert out["answers"]["s"]["score_milli"] == 1300 and out["answers"]["s"]["probabilities_bp"]["1"] == 5000
    thirds = raw(c={"choice": "b", "probabilities": {"a": 1 / 3, "b": 2 / 3}, "confidence": 0.123456})
    c = convert(REQ, thirds)["answers"]["c"]
    assert c["probabilities_bp"] == {"a": 3333, "b": 6666} and c["confidence_bp"] == 1234
    assert sum(c["probabilities_bp"].values()) < 10_000  # quantised sums may fall short
    assert convert(REQ, raw(n={"noul": 1}, s={"score": 2, "probabilities": {"0": 0, "1": 0, "2": 1},
                                             "confidence": 0}))["answers"]["n"]["probability_bp"] == 10_000


def test_ties_and_tolerances() -> None:
    tie = raw(c={"choice": "b", "probabilities": {"a": 0.5, "b": 0.5}, "confidence": 0.5})
    assert convert(REQ, tie)["answers"]["c"]["choice"] == "b"  # a tied winner is a maximum
    near = raw(c={"choice": "a", "probabilities": {"a": 0.5, "b": 0.509}, "confidence": 0.5})
    with pytest.raises(DecideFailure):
        convert(REQ, near)
    assert convert(REQ, raw(c={"choice": "a", "probabilities": {"a": 0.6, "b": 0.409}, "confidence": 1}))
    with pytest.raises(DecideFailure):  # |Σp − 1| ≤ 0.005 · 2 + 1e-9
        convert(REQ, raw(c={"choice": "a", "probabilities": {"a": 0.6, "b": 0.411}, "confidence": 1}))
    convert(REQ, raw(s={"score": 1.309, "probabilities": {"0": 0.1, "1": 0.5, "2": 0.4}, "confidence": 0.5}))
    with pytest.raises(DecideFailure):
        convert(REQ, raw(s={"score": 1.311, "probabilities": {"0": 0.1, "1": 0.5, "2": 0.4}, "confidence": 0.5}))


@pytest.mark.parametrize("bad", [
    {"model": "m"},
    {"answers": raw()["answers"]},
    {"model": "m" * 129, "answers": raw()["answers"]},
    {"model": 5, "answers": raw()["answers"]},
    {**raw(), "usage": {"input_tokens": 1.5, "output_tokens": 0}},
    {**raw(), "usage": {"input_tokens": True, "output_tokens": 0}},
    {**raw(), "usage": {"cost": 1}},
    raw(n={"noul": True}),
    raw(n={"noul": "0.5"}),
    raw(n={"noul": float("inf")}),
    raw(n={"noul": -0.0001}),
    raw(n=0.5),
    raw(s={"score": -0.1, "probabilities": {"0": 1.0, "1": 0, "2": 0}, "confidence": 0.5}),
    raw(c={"choice": "a", "probabilities": {"a": 0.6, "b": 0.4}}),
])
def test_invalid_answers(bad: Any) -> None:
    with pytest.raises(DecideFailure) as info:
        convert(REQ, bad)
    assert info.value.code == "invalid_response"


def test_result_too_large() -> None:
    criteria = {f"option_{i:02d}_" + "k" * 50: "x" for i in range(32)}
    questions = {f"q{j}": {"type": "choice", "instructions": "i", "criteria": criteria} for j in range(8)}
    request = {"state": "s", "questions": questions}
    probs = dict.fromkeys(criteria, 1 / 32)
    first = next(iter(criteria))
    answer = {"model": "m", "answers": {k: {"choice": first, "probabilities": probs, "confidence": 1}
                                        for k in questions}}
    with pytest.raises(DecideFailure) as info:
        convert(request, answer)
    assert info.value.code == "result_too_large" and info.value.details["bytes"] > 15_360


def test_settings_parse_and_redaction(tmp_path: Path) -> None:
    cfg = tmp_path / "w.toml"
    cfg.write_text('[decide]\nprovider = "openai"\nendpoint = "http://127.0.0.1:8000/v1"\nmodel = "m"\n'
                   'api_key = "sk-secret-1"\nper_second = 2\n[web]\nallow_networks = ["127.0.0.2/32"]\n')
    config = load_config(cfg, env={"WAKEFUL_DECIDE__TIMEOUT_MS": "1500", "WAKEFUL_WEB__MAX_IN_FLIGHT": "8"})
    assert (config.decide.provider, config.decide.per_second, config.decide.timeout_ms) == ("openai", 2, 1500)
    assert config.web.allow_networks == ("127.0.0.2/32",) and config.web.max_in_flight == 8
    assert config.decide.problem() is None
    assert "sk-secret-1" not in repr(config) and "sk-secret-1" not in str(config.decide)
    for bad in ('[decide]\nprovidr = "x"\n', '[decide]\nper_minute = "many"\n', '[decide]\nper_second = 0\n',
                "[web]\nallow_networks = [\"10.0.0.0/33\"]\n", "[web]\nproxy = true\n", "[decide]\nmodel = 3\n",
                '[web]\nallow_private = "maybe"\n', "decide = 3\n"):
        cfg.write_text(bad)
        with pytest.raises(InvalidRequest):
            load_config(cfg, env={})


def test_settings_problems() -> None:
    assert DecideSettings().problem() == "decide.provider is not set"
    jev = DecideSettings(provider="jev", api_key_env="K")
    assert jev.problem(env={}) is not None and jev.problem(env={"K": "v"}) is None
    assert jev.effective_endpoint() == "https://api.typesafe.ai/v1/systemone" and jev.effective_model() == "jev-1.13.0"
    assert DecideSettings(provider="openai", model="m").problem() is not None  # endpoint required
    assert DecideSettings(provider="openai", endpoint="http://h/v1#x", model="m").problem() is not None


def test_buckets_take_from_both_or_neither() -> None:
    now = [0]
    buckets = BucketSet((Rate(60, 1.0), Rate(4, 4.0)), lambda: now[0])
    assert [buckets.take("g") for _ in range(4)] == [0.0] * 4
    wait = buckets.take("g")
    assert 0.24 < wait <= 0.25
    now[0] += 250_000_000
    assert buckets.take("g") == 0.0
    now[0] -= 10_000_000_000  # a clock that reads earlier counts as no time
    assert buckets.take("g") > 0
    assert buckets.take("other") == 0.0
