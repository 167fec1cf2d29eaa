"""build.md §7, issue 18: undeclared names are checked against the names the SDK headers declare."""

from __future__ import annotations

from wakeful.build import hints as h
from wakeful.build.driver import sdk_headers

HEADER = b"""/* sf_commented(void) is not a declaration */
#define MY_GUARD_H
#define SF_FROB 3
#define WF_PICK(x) ((x) + 1)
typedef long sf_thing;
extern sf_thing sf_frobnicate(const char *text,
                              long length);
SF_INLINE long wf_twiddle(long v) {
    return v;
}
static inline long sf_inline_helper(void) { return 0; }
static inline long _sf_private(void) { return 0; }
"""


def test_hints_names_come_from_the_header_text() -> None:
    names = h.sdk_names({"x.h": HEADER})
    assert names == {"SF_FROB", "WF_PICK", "sf_thing", "sf_frobnicate", "wf_twiddle", "sf_inline_helper"}
    assert h.suggest("sf_frobnicat", names) == ["sf_frobnicate"]
    assert h.suggest("sf_frob", names) == ["SF_FROB"]  # case slips count as no edit
    assert h.suggest("sf_xyzzy", names) == []  # too far from every name


def test_hints_the_shipped_sdk_declares_the_names_agents_use() -> None:
    names = h.sdk_names(sdk_headers())
    assert {"sf_json_dump", "sf_log", "sf_strlen", "wf_json_get_str", "SF_MAIN", "SF_LIMIT", "sf_handle"} <= names
    assert "WAKEFUL_H" not in names


def test_hints_edit_distance() -> None:
    assert h.edit_distance("sf_json_drop", "sf_json_dump") == 2
    assert h.edit_distance("SF_MIAN", "SF_MAIN") == 1  # a swap of neighbours is one edit
    assert h.edit_distance("", "abc") == 3 and h.edit_distance("abc", "abc") == 0


def test_hints_for_each_kind_of_unknown_name() -> None:
    names = frozenset({"sf_log", "sf_strlen", "sf_sleep_ms", "wf_str_find", "SF_MAIN"})
    text = ("main.c:1:1: error: call to undeclared function 'sf_lgo'\n"
            "main.c:2:1: error: call to undeclared function 'strlen'\n"
            "main.c:3:1: error: call to undeclared function 'strstr'\n"
            "main.c:4:1: error: call to undeclared function 'helper'\n"
            "main.c:5:1: error: unknown type name 'SF_MAIN'\n"
            "main.c:6:1: error: use of undeclared identifier 'counter'\n"
            "main.c:7:1: error: call to undeclared function 'sf_lgo'\n")
    assert [hint for _, hint in h.name_hints(text, names)] == [
        "sf_lgo is not an SDK name; did you mean sf_log? (names from wakeful.h)",
        "strlen is from the C library, which wakeful does not have; use sf_strlen",
        "strstr is from the C library, which wakeful does not have; use wf_str_find",
        "helper is not declared: define or declare it above its first use (there is no C library; the SDK is "
        "wakeful.h)",
        "SF_MAIN is declared by the SDK header: add #include <wakeful.h> at the top of the file",
    ]
    assert h.name_hints("unknown helper 'malloc'", frozenset()) == [
        (0, "malloc is from the C library, which wakeful does not have, and the SDK has no equivalent; there is no "
            "heap: use static arrays (static globals for big buffers)")]
