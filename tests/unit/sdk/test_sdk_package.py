"""wakeful.sdk as package data: accessors, the guides' required topics (sdk.md §15), the shipped examples."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from wakeful import sdk
from wakeful.cli.replies import HostReplies

Compile = Callable[..., bytes]

# sdk.md §15 topics 1-14 and the patterns of issue 18, as the guide's section titles
GUIDE_TOPICS = [
    "What a Loop is for",
    "Shape",
    "The dialect",
    "Handles",
    "Status handling",
    "Config and checkpoints",
    "Events",
    "Wakes",
    "Timers and retries",
    "Capabilities",
    "`decide`",
    "Text and numbers",
    "Pitfalls",
    "Patterns",
    "Limits",
    "Examples",
]

# sdk.md §15 item 15: the required examples
REQUIRED_EXAMPLES = {
    "heartbeat",
    "threshold_alert",
    "poll_changes",
    "batch_summary",
    "classify_decide",
    "paged_feed",
    "script_aggregate",
}


def _sections(text: str) -> list[tuple[str, str]]:
    parts = re.split(r"^## \d+\. (.+)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def test_header_accessors_agree_with_the_files() -> None:
    inc = sdk.include_dir()
    flat = (inc / "wakeful.h").read_text().replace('#include "spinfoam.h"\n', (inc / "spinfoam.h").read_text())
    assert flat.encode() == sdk.header_bytes()
    assert (inc / "spinfoam.h").read_text() == sdk.spinfoam_header_text()
    assert sdk.header_text().startswith("/*") and "#ifndef WAKEFUL_H" in sdk.header_text()
    assert set(sdk.headers()) == {"wakeful.h", "spinfoam.h", "stdint.h", "stddef.h", "stdbool.h"}
    assert f"#define WAKEFUL_SDK_ABI {sdk.SDK_ABI}" in sdk.header_text()
    assert f"#define WAKEFUL_SDK_EXT {sdk.SDK_EXT}" in sdk.header_text()


def test_guide_covers_every_required_topic_in_order() -> None:
    titles = [title for title, _ in _sections(sdk.guide_text())]
    assert titles == GUIDE_TOPICS


@pytest.mark.parametrize("topic", GUIDE_TOPICS[:14])
def test_each_guide_rule_section_has_a_snippet(topic: str) -> None:
    # sdk.md §15: "with one short snippet per rule"
    body = dict(_sections(sdk.guide_text()))[topic]
    assert "```c" in body, f"section {topic!r} has no C snippet"


def test_guide_status_table_names_every_status_and_reaction() -> None:
    body = dict(_sections(sdk.guide_text()))["Status handling"]
    for status in ("SF_INVALID", "SF_LIMIT", "SF_TIMEOUT", "SF_DENIED", "SF_HOST_ERROR", "SF_CLOSED"):
        assert f"`{status}`" in body
    assert "return 0" in body and "return 2" in body  # SF_CLOSED → return; SF_DENIED → exit


def test_guide_lists_every_shipped_example() -> None:
    body = dict(_sections(sdk.guide_text()))["Examples"]
    for ex in sdk.examples():
        assert f"`{ex.name}.c`" in body


def test_script_guide_covers_capabilities_limits_and_console() -> None:
    text = sdk.script_guide_text()
    for needle in ("tool.call", "script.result", "script.log", "5 s", "60 s", "bounded console"):
        assert needle in text


def test_examples_are_complete() -> None:
    names = {ex.name for ex in sdk.examples()}
    assert names >= REQUIRED_EXAMPLES
    for ex in sdk.examples():
        assert "SF_MAIN" in ex.source and "#include <wakeful.h>" in ex.source
        replies = HostReplies.parse(ex.replies, source=ex.name)  # raises on a bad FILE
        assert replies.replies, f"{ex.name} scripts no replies"


def test_example_lookup_refuses_unknown_names() -> None:
    with pytest.raises(KeyError):
        sdk.example("nope")
    with pytest.raises(KeyError):
        sdk.example("../include/wakeful")


def test_run_args_come_from_the_comment() -> None:
    ex = sdk.example("threshold_alert")
    args = ex.run_args()
    assert args[:2] == ["--config", '{"threshold": 90}']
    events = [args[i + 1] for i in range(0, len(args), 2) if args[i] == "--event"]
    assert len(events) == 5 and all(e.startswith("metric={") for e in events)
    for event in events:
        json.loads(event.partition("=")[2])


def test_write_examples(tmp_path: Path) -> None:
    written = sdk.write_examples(tmp_path / "ex")
    assert len(written) == 2 * len(sdk.examples())
    assert (tmp_path / "ex" / "heartbeat.c").read_text() == sdk.example("heartbeat").source


@pytest.mark.parametrize("name", [ex.name for ex in sdk.examples()])
def test_example_compiles_with_the_build_flags(compile_c: Compile, name: str) -> None:
    assert compile_c(sdk.example(name).source, name=f"{name}.c")[:4] == b"\x7fELF"
