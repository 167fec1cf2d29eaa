"""The level-2 `wf_` extensions (sdk.md §11, issue 18) run for real in both engines: text search and
comparison, bounded formatting into a buffer, array length, and the one-call notify / ack / call helpers.

Each clang-built guest checks its rules and returns a bitmask of the failed checks; the in-process runtime
runs it batch by batch, answering host calls from a recording Python handler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.guest_run import failed_checks, run_guest

from wakeful.errors import HostCallError
from wakeful.runtime import HostCall

Compile = Callable[..., bytes]
ENGINES = ["translate", "interp"]

TEXT = r"""
#include <wakeful.h>
static char buf[32];
static char tiny[8];
static char big[20000];
static sf_u64 fails;
#define CHECK(bit, cond) do { if (!(cond)) fails |= 1ULL << (bit); } while (0)

SF_MAIN sf_i64 main(void) {
    /* search */
    CHECK(0, wf_str_find("cpu above threshold", "above") == 4);
    CHECK(1, wf_str_find("cpu", "gpu") == SF_INVALID && wf_str_find("ab", "abc") == SF_INVALID);
    CHECK(2, wf_str_find("abc", "") == 0 && wf_str_find("", "") == 0 && wf_str_find("", "a") == -1);
    CHECK(3, wf_str_find("aaab", "aab") == 1 && wf_str_find("xyzxyz", "z") == 2);
    CHECK(4, wf_mem_find("a\0b\0c", 5, "b\0c", 3) == 2 && wf_mem_find("abc", 2, "c", 1) == SF_INVALID);
    /* prefix, suffix */
    CHECK(5, wf_str_starts_with("https://x", "https://") && !wf_str_starts_with("http", "https"));
    CHECK(6, wf_str_starts_with("x", "") && wf_str_starts_with("", "") && !wf_str_starts_with("", "a"));
    CHECK(7, wf_str_ends_with("report.json", ".json") && !wf_str_ends_with("json", ".json"));
    CHECK(8, wf_str_ends_with("x", "") && wf_str_ends_with("abc", "abc") && !wf_str_ends_with("abc", "xbc"));
    /* case-insensitive equality: ASCII letters only */
    CHECK(9, wf_str_ieq("ERROR", "error") && wf_str_ieq("Mixed-Case_1", "mIXED-cASE_1") && wf_str_ieq("", ""));
    CHECK(10, !wf_str_ieq("abc", "abd") && !wf_str_ieq("ab", "abc") && !wf_str_ieq("abc", "ab"));
    CHECK(11, !wf_str_ieq("\xc3\x89", "\xc3\xa9") && !wf_str_ieq("@", "`") && !wf_str_ieq("[", "{"));
    CHECK(12, wf_ascii_lower('Q') == 'q' && wf_ascii_lower('q') == 'q' && wf_ascii_lower(0xC9) == 0xC9);
    /* hexadecimal */
    CHECK(13, wf_u64_to_hex(0, buf, sizeof buf) == 1 && wf_str_eq(buf, "0"));
    CHECK(14, wf_u64_to_hex(0xDEADbeefULL, buf, sizeof buf) == 8 && wf_str_eq(buf, "deadbeef"));
    CHECK(15, wf_u64_to_hex(18446744073709551615ULL, buf, sizeof buf) == 16
              && wf_str_eq(buf, "ffffffffffffffff"));
    CHECK(16, wf_u64_to_hex(0x1234, buf, 4) == 0 && wf_u64_to_hex(0x1234, buf, 5) == 4);
    /* building text: chained appends, checked once */
    sf_u64 n = wf_cat(buf, sizeof buf, 0, "cpu is ");
    n = wf_cat_i64(buf, sizeof buf, n, -95);
    n = wf_cat(buf, sizeof buf, n, ", 0x");
    n = wf_cat_hex(buf, sizeof buf, n, 255);
    n = wf_cat_u64(buf, sizeof buf, n, 7);
    CHECK(17, n == 17 && wf_str_eq(buf, "cpu is -95, 0xff7"));
    /* text that does not fit keeps its prefix; the result is cap and stays cap */
    n = wf_cat(tiny, sizeof tiny, 0, "abcdefghij");
    CHECK(18, n == sizeof tiny && wf_str_eq(tiny, "abcdefg"));
    n = wf_cat(tiny, sizeof tiny, n, "x");
    CHECK(19, n == sizeof tiny && wf_str_eq(tiny, "abcdefg"));
    /* a number that does not fit writes nothing */
    n = wf_cat(tiny, sizeof tiny, 0, "n=");
    n = wf_cat_i64(tiny, sizeof tiny, n, 123456);
    CHECK(20, n == sizeof tiny && wf_str_eq(tiny, "n="));
    n = wf_cat_u64(tiny, sizeof tiny, 2, 12345);
    CHECK(21, n == 7 && wf_str_eq(tiny, "n=12345"));
    CHECK(22, wf_cat_hex(tiny, sizeof tiny, 7, 1) == sizeof tiny && wf_str_eq(tiny, "n=12345"));
    CHECK(23, wf_cat(tiny, 0, 0, "a") == 0 && wf_cat(tiny, sizeof tiny, 7, "") == 7);
    /* explicit lengths, appending from inside the buffer itself, beyond memmove's 16 KiB slice */
    n = wf_cat_raw(buf, sizeof buf, 0, "abcdef", 3);
    n = wf_cat_raw(buf, sizeof buf, n, buf, n);
    CHECK(24, n == 6 && wf_str_eq(buf, "abcabc"));
    memset(big, 'z', 16000);
    memset(big + 16000, 'z', 1000);
    big[16999] = 'y';
    n = wf_cat_raw(big, sizeof big, 17000, big, 17000);
    CHECK(25, n == sizeof big && big[19998] == 'z' && big[19999] == 0 && big[16999] == 'y');
    CHECK(26, wf_mem_eq(big, big + 1, 16500) && !wf_mem_eq(big, big + 1, 17000) && wf_mem_eq(big, "q", 0));
    CHECK(27, wf_mem_find(big, 17000, "zy", 2) == 16998);
    /* arrays */
    sf_handle c = sf_config();
    sf_handle items = sf_json_get(c, "items");
    sf_handle empty = sf_json_get(c, "empty");
    sf_handle obj = sf_json_get(c, "obj");
    CHECK(28, wf_json_array_len(items) == 3 && wf_json_array_len(empty) == 0);
    CHECK(29, wf_json_array_len(obj) == SF_INVALID && wf_json_array_len(c) == SF_INVALID);
    sf_handle s = sf_json_string("abc");
    CHECK(30, wf_json_array_len(s) == SF_INVALID && wf_json_array_len(9999) == SF_INVALID);
    sf_handle bytes = sf_bytes("ab", 2);
    CHECK(31, wf_json_array_len(bytes) == SF_INVALID);
    /* sf_json_string_equals returns 1, 0 or SF_INVALID (the guide says so) */
    CHECK(32, sf_json_string_equals(obj, "k", "v") == 1 && sf_json_string_equals(obj, "k", "w") == 0);
    CHECK(33, sf_json_string_equals(obj, "n", "1") == SF_INVALID
              && sf_json_string_equals(obj, "missing", "v") == SF_INVALID
              && sf_json_string_equals(items, "k", "v") == SF_INVALID);
    /* set-and-drop: the value is dropped, statuses pass through */
    sf_handle o = sf_json_object();
    sf_handle v = sf_json_number(5);
    CHECK(34, wf_json_set_owned(o, "n", v) == 0 && sf_drop(v) == SF_INVALID);
    sf_i64 got = 0;
    CHECK(35, wf_json_get_i64(o, "n", &got) == 0 && got == 5);
    CHECK(36, wf_json_set_owned(o, "x", SF_LIMIT) == SF_LIMIT && wf_json_set_owned(items, "x", sf_json_null()) == SF_INVALID);
    /* every helper dropped its temporaries: 500 rounds stay far below the 128-handle table */
    int ok = 1;
    for (int i = 0; i < 500; i++)
        if (wf_json_array_len(items) != 3 || wf_json_set_owned(o, "n", sf_json_number(i)) != 0)
            ok = 0;
    CHECK(37, ok);
    sf_drop(o);
    sf_drop(bytes);
    sf_drop(s);
    sf_drop(obj);
    sf_drop(empty);
    sf_drop(items);
    sf_drop(c);
    return (sf_i64)fails;
}
"""

TEXT_CONFIG = {"items": [1, "two", {"three": 3}], "empty": [], "obj": {"k": "v", "n": 1}}

CALLS = r"""
#include <wakeful.h>
static sf_u64 fails;
#define CHECK(bit, cond) do { if (!(cond)) fails |= 1ULL << (bit); } while (0)

SF_MAIN sf_i64 main(void) {
    CHECK(0, wf_notify("cpu is 95, above 90", "above:e1") == 0);
    CHECK(1, wf_notify("cpu is 95, above 90", "above:e1") == 0);          /* duplicate: success too */
    CHECK(2, wf_notify("refused", "refuse") == SF_HOST_ERROR);            /* e.g. rate_limited */
    sf_handle content = sf_json_parse("{\"cpu\":95}", 10);
    CHECK(3, wf_notify_value(content, "obj:1") == 0 && sf_json_kind(content) == SF_OBJECT);
    CHECK(4, wf_notify_value(SF_LIMIT, "obj:2") == SF_LIMIT && wf_notify_value(99999, "obj:3") == SF_INVALID);
    sf_drop(content);
    sf_handle e1 = sf_event_next(0);
    sf_handle e2 = sf_event_next(0);
    CHECK(5, e1 > 0 && e2 > 0);
    CHECK(6, wf_ack(e1) == 0 && wf_ack(e1) == 0 && sf_json_kind(e1) == SF_OBJECT);  /* acked again: 0 */
    CHECK(7, wf_ack(e2) == SF_HOST_ERROR);                                /* the harness refused */
    sf_handle bare = sf_json_object();
    CHECK(8, wf_ack(bare) == SF_INVALID && wf_ack(SF_TIMEOUT) == SF_INVALID);
    CHECK(9, wf_call("loop.ack", bare, 10000) == 0);
    CHECK(10, wf_call("service.other", bare, 10000) == SF_DENIED);       /* not granted */
    CHECK(11, wf_call("loop.ack", bare, 0) == SF_TIMEOUT);
    /* nothing leaks: 200 notify/ack/call rounds with 6 handles each stay below the table */
    int ok = 1;
    for (int i = 0; i < 200; i++)
        if (wf_notify("again", "above:e1") != 0 || wf_ack(e1) != 0 || wf_notify("x", "refuse") != SF_HOST_ERROR)
            ok = 0;
    CHECK(12, ok);
    CHECK(13, wf_notify_member("content", SF_LIMIT, "x") == SF_LIMIT);  /* passed through, no call */
    sf_handle list = sf_json_parse("[1,2]", 5);
    CHECK(14, wf_notify_member("content", list, "list:1") == 0 && wf_json_array_len(list) == 2);
    sf_drop(list);
    sf_drop(bare);
    sf_drop(e2);
    sf_drop(e1);
    return (sf_i64)fails;
}
"""

CAPABILITIES = [{"name": "agent.notify"}, {"name": "loop.ack"}]


class Host:
    """Answers agent.notify and loop.ack like the harness (queued / duplicate, acked) and records them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, int]] = []
        self.keys: set[str] = set()

    def __call__(self, call: HostCall) -> Any:
        assert call.timeout_ms > 0, "a zero timeout never reaches the host"
        self.calls.append((call.capability, call.arguments, call.timeout_ms))
        args = call.arguments
        if call.capability == "agent.notify":
            if args["dedup_key"] == "refuse":
                raise HostCallError("rate_limited", "6 wakes per 10 minutes")
            status = "duplicate" if args["dedup_key"] in self.keys else "queued"
            self.keys.add(args["dedup_key"])
            return {"status": status, "message_id": f"msg:{args['dedup_key']}"}
        if args.get("event_id") == "e2":
            raise HostCallError("stale_incarnation", "refused")
        return {"status": "acked", "event_id": args.get("event_id"), "duplicate": False}


def _run(
    elf: bytes, engine: str, *, host: Host | None = None, config: Any = None, events: tuple[str, ...] = ()
) -> tuple[str, dict[str, Any] | None]:
    if host is None:
        return run_guest(elf, engine, config=config, events=events)
    return run_guest(elf, engine, host=host, config=config, capabilities=CAPABILITIES, events=events)


@pytest.mark.parametrize("engine", ENGINES)
def test_text_array_and_set_helpers_behave_as_documented(compile_c: Compile, engine: str) -> None:
    assert failed_checks(*_run(compile_c(TEXT), engine, config=TEXT_CONFIG)) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_notify_ack_and_call_helpers_send_what_the_harness_expects(compile_c: Compile, engine: str) -> None:
    host = Host()
    elf = compile_c(CALLS)
    assert failed_checks(*_run(elf, engine, host=host, events=("e1", "e2"))) == []
    first = host.calls[:6]
    assert first[0] == ("agent.notify", {"text": "cpu is 95, above 90", "dedup_key": "above:e1"}, 10000)
    assert first[1] == first[0]
    assert first[3] == ("agent.notify", {"content": {"cpu": 95}, "dedup_key": "obj:1"}, 10000)
    assert first[4] == first[5] == ("loop.ack", {"event_id": "e1"}, 10000)
    assert host.calls[6] == ("loop.ack", {"event_id": "e2"}, 10000)
    assert host.calls[7] == ("loop.ack", {}, 10000)  # wf_call passes args through as they are
    assert host.calls[-1] == ("agent.notify", {"content": [1, 2], "dedup_key": "list:1"}, 10000)
    # SF_DENIED, SF_TIMEOUT (0 ms) and SF_INVALID never reach the host
    assert len(host.calls) == 8 + 200 * 3 + 1


def test_the_checks_can_fail(compile_c: Compile) -> None:
    # the same guests with one expectation inverted each report exactly that bit
    broken = TEXT.replace(
        'wf_str_find("cpu above threshold", "above") == 4', 'wf_str_find("cpu above threshold", "above") == 5'
    )
    assert failed_checks(*_run(compile_c(broken), "interp", config=TEXT_CONFIG)) == [0]
    broken = CALLS.replace(
        'wf_notify("refused", "refuse") == SF_HOST_ERROR', 'wf_notify("refused", "refuse") == 0'
    )
    assert failed_checks(*_run(compile_c(broken), "interp", host=Host(), events=("e1", "e2"))) == [2]
