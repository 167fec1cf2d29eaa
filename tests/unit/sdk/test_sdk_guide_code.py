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

import pytest

from wakeful import sdk

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
    return "#include <wakeful.h>\n" + "\n".join(blocks) + "\nSF_MAIN sf_i64 main(void) { return 0; }\n"


def test_the_required_sections_have_compilable_code() -> None:
    counts = {title: len(blocks) for title, blocks in _compilable_sections().items()}
    for title, least in REQUIRED.items():
        assert counts.get(title, 0) >= least, (title, counts)


@pytest.mark.parametrize("title", sorted(_compilable_sections()))
def test_guide_section_code_compiles(compile_c: Compile, title: str) -> None:
    source = program(_compilable_sections()[title])
    assert compile_c(source, extra_flags=STRICT)[:4] == b"\x7fELF"


def test_a_broken_block_fails(compile_c: Compile) -> None:
    # the check can fail: a misspelled helper in a pattern block is a compile error under -Werror
    blocks = [b.replace("wf_notify(", "wf_notfy(") for b in _compilable_sections()["Patterns"]]
    with pytest.raises(AssertionError, match="wf_notfy"):
        compile_c(program(blocks), extra_flags=STRICT)


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
