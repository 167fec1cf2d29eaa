"""The guide's code compiles (issue 18): every block fenced ```` ```c compile ```` is real C against the
shipped wakeful.h, and every `wf_` name the header defines is documented with its results.

The compilable blocks of one guide section form one program, in order (later blocks may use earlier
ones); the test adds `#include <wakeful.h>` and an empty `SF_MAIN` and compiles it with the build flags
plus `-Werror`, so a fragment that calls a misspelled helper, passes the wrong types or drifts from the
header fails here instead of in an agent's first build.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from support.guest_run import run_guest

from wakeful import sdk
from wakeful.harness.decide.answer import convert
from wakeful.harness.decide.errors import DecideFailure
from wakeful.harness.decide.request import validate_request
from wakeful.runtime import HostCall

Compile = Callable[..., bytes]

BLOCK = re.compile(r"^```c compile\n(.*?)^```$", re.M | re.S)
STRICT = ("-Werror", "-Wno-unused-function")
# sections that must show compilable code (the decide worked examples and each pattern)
REQUIRED = {"`decide`": 3, "Text and numbers": 1, "Patterns": 4}


def _sections() -> dict[str, str]:
    parts = re.split(r"^## \d+\. (.+)$", sdk.guide_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _compilable_sections() -> dict[str, list[str]]:
    found = {title: BLOCK.findall(body) for title, body in _sections().items()}
    return {title: blocks for title, blocks in found.items() if blocks}


def program(blocks: list[str]) -> str:
    """The translation unit the guide's blocks of one section make."""
    return "#include <wakeful.h>\n" + "\n".join(blocks) + "\n"


def with_empty_main(blocks: list[str]) -> str:
    return program(blocks) + "SF_MAIN sf_i64 main(void) { return 0; }\n"


def test_the_required_sections_have_compilable_code() -> None:
    counts = {title: len(blocks) for title, blocks in _compilable_sections().items()}
    for title, least in REQUIRED.items():
        assert counts.get(title, 0) >= least, (title, counts)


@pytest.mark.parametrize("title", sorted(_compilable_sections()))
def test_guide_section_code_compiles(compile_c: Compile, title: str) -> None:
    source = with_empty_main(_compilable_sections()[title])
    assert compile_c(source, extra_flags=STRICT)[:4] == b"\x7fELF"


def test_a_broken_block_fails(compile_c: Compile) -> None:
    # the check can fail: a misspelled helper in a pattern block is a compile error under -Werror
    blocks = [b.replace("wf_notify(", "wf_notfy(") for b in _compilable_sections()["Patterns"]]
    with pytest.raises(AssertionError, match="wf_notfy"):
        compile_c(with_empty_main(blocks), extra_flags=STRICT)


def _header_wf_names() -> set[str]:
    text = sdk.header_text()
    functions = set(re.findall(r"^SF_INLINE [\w ]+?\*?\b(wf_\w+)\(", text, re.M))
    macros = set(re.findall(r"^#define (WF_\w+)", text, re.M))
    return functions | macros


def test_every_extension_is_in_the_guide_reference() -> None:
    table = _sections()["Text and numbers"]
    names = _header_wf_names()
    assert {"wf_str_find", "wf_notify", "wf_ack", "wf_cat_hex", "WF_CALL_TIMEOUT_MS"} <= names
    missing = sorted(
        n for n in names if f"{n}(" not in table and f"`{n}" not in table and f", {n}" not in table
    )
    assert missing == []


# ---- the decide worked examples, run against the harness's own request validation and answer conversion

DECIDE_MAIN = r"""
SF_MAIN sf_i64 main(void) {
    static const char *texts[] = {"checkout fails for every customer", "please resend my March invoice",
                                  "hmm", "anything (no model configured)"};
    static const char *keys[] = {"m1", "m2", "m3", "m4"};
    sf_i64 out = 0;
    for (int i = 0; i < 4; i++) {
        sf_handle t = sf_json_string(texts[i]);
        if (route_message(t, keys[i]) != 0)
            out |= 1 << i;
        sf_drop(t);
    }
    sf_handle alert = sf_json_string("db-1 disk 97% full");
    sf_handle calm = sf_json_string("nightly report is late");
    out |= (is_urgent(alert) == 1 ? 0 : 1 << 4) | (is_urgent(calm) == 0 ? 0 : 1 << 5);
    sf_drop(calm);
    sf_drop(alert);
    return out;
}
"""

# what the model "says" per state text, in the raw provider form that harness.md §16.3 validates
RAW: dict[str, dict[str, Any]] = {
    "checkout fails for every customer": {
        "choice": "outage", "confidence": 0.8,
        "probabilities": {"billing": 0.05, "outage": 0.9, "none": 0.03, "defer": 0.02},
    },
    "please resend my March invoice": {
        "choice": "billing", "confidence": 0.9,
        "probabilities": {"billing": 0.85, "outage": 0.05, "none": 0.05, "defer": 0.05},
    },
    "hmm": {
        "choice": "defer", "confidence": 0.5,
        "probabilities": {"billing": 0.1, "outage": 0.1, "none": 0.2, "defer": 0.6},
    },
    "db-1 disk 97% full": {
        "score": 2.6, "confidence": 0.7, "probabilities": {"0": 0.05, "1": 0.05, "2": 0.15, "3": 0.75},
    },
    "nightly report is late": {
        "score": 0.6, "confidence": 0.7, "probabilities": {"0": 0.5, "1": 0.4, "2": 0.1, "3": 0.0},
    },
}  # fmt: skip


class DecideHost:
    """decide answered through wakeful.harness.decide's validate_request and convert; notify recorded."""

    def __init__(self) -> None:
        self.notified: list[str] = []

    def __call__(self, call: HostCall) -> Any:
        if call.capability == "agent.notify":
            self.notified.append(call.arguments["dedup_key"])
            return {"status": "queued", "message_id": "m"}
        try:
            request = validate_request(call.arguments)
            state = request["state"]
            if state.startswith("anything"):
                raise DecideFailure("not_configured", "no provider")
            (key,) = request["questions"]
            return convert(request, {"model": "test-model", "answers": {key: RAW[state]}})
        except DecideFailure as failure:
            return failure.as_result()


@pytest.mark.parametrize("engine", ["translate", "interp"])
def test_decide_worked_examples_act_on_real_answers(compile_c: Compile, engine: str) -> None:
    elf = compile_c(program(_compilable_sections()["`decide`"]) + DECIDE_MAIN, extra_flags=STRICT)
    host = DecideHost()
    caps = [{"name": "decide"}, {"name": "agent.notify"}]
    assert run_guest(elf, engine, host=host, capabilities=caps) == ("exited", {"exit_code": 0})
    # outage wakes, billing does not, defer wakes, no model falls back to the agent
    assert host.notified == ["m1", "m3", "m4"]
