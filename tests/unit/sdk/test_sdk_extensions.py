"""The header's inline code run for real: sdk.md §10 wrappers and §11 `wf_` extensions in both engines.

A clang-built guest checks each rule and returns a bitmask of the failed checks; the in-process runtime
runs it batch by batch.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.guest_run import failed_checks, run_guest

Compile = Callable[..., bytes]

CHECKS = r"""
#include <wakeful.h>
static char buf[64];
static char small[6];
static sf_u64 fails;
#define CHECK(bit, cond) do { if (!(cond)) fails |= 1ULL << (bit); } while (0)

SF_MAIN sf_i64 main(void) {
    sf_handle c = sf_config();
    sf_i64 v = -1;
    CHECK(0, wf_json_get_i64(c, "n", &v) == 0 && v == 42);
    CHECK(1, wf_json_get_i64(c, "f", &v) == SF_INVALID && v == 42);      /* float: nothing written */
    CHECK(2, wf_json_get_i64(c, "missing", &v) == SF_INVALID);
    CHECK(3, wf_json_get_bool(c, "b") == 1);
    CHECK(4, wf_json_get_bool(c, "n") == SF_INVALID);
    CHECK(5, wf_json_get_str(c, "s", buf, sizeof buf) == 11 && wf_str_eq(buf, "hello world"));
    CHECK(6, wf_json_get_str(c, "s", small, sizeof small) == SF_LIMIT && wf_str_eq(small, "hello"));
    CHECK(7, wf_json_get_str(c, "n", buf, sizeof buf) == SF_INVALID && buf[0] == 0);
    CHECK(8, wf_json_get_str(c, "s", buf, 0) == SF_LIMIT);
    CHECK(9, wf_u64_to_dec(0, buf, sizeof buf) == 1 && wf_str_eq(buf, "0"));
    CHECK(10, wf_u64_to_dec(18446744073709551615ULL, buf, sizeof buf) == 20
              && wf_str_eq(buf, "18446744073709551615"));
    CHECK(11, wf_u64_to_dec(12345, buf, 5) == 0);                       /* needs 6 with the NUL */
    CHECK(12, wf_u64_to_dec(12345, buf, 6) == 5 && wf_str_eq(buf, "12345"));
    CHECK(13, wf_i64_to_dec(-9223372036854775807LL - 1, buf, sizeof buf) == 20
              && wf_str_eq(buf, "-9223372036854775808"));
    CHECK(14, wf_i64_to_dec(-7, buf, 3) == 2 && wf_str_eq(buf, "-7"));
    CHECK(15, wf_i64_to_dec(-7, buf, 2) == 0);
    CHECK(16, wf_str_eq("", "") && !wf_str_eq("a", "ab") && !wf_str_eq("ab", "a") && wf_str_eq(buf, "-7"));
    CHECK(17, WF_OK(0) && WF_OK(5) && !WF_OK(SF_LIMIT));
    CHECK(18, sf_strlen("") == 0 && sf_strlen(buf) == 2);
    CHECK(19, sf_json_string_equals(c, "s", "hello world") == 1 && sf_json_string_equals(c, "s", "hello") == 0);
    sf_handle u = sf_json_get(c, "u");
    CHECK(20, wf_json_get_str(u, "k", buf, sizeof buf) == 5 && wf_str_eq(buf, "\xc3\xa9t\xc3\xa9"));
    sf_drop(u);
    /* every wf_ getter drops its temporary handle: 600 calls stay far below the 128-handle table */
    int ok = 1;
    for (int i = 0; i < 200; i++)
        if (wf_json_get_i64(c, "n", &v) != 0 || wf_json_get_bool(c, "b") != 1
            || wf_json_get_str(c, "s", buf, sizeof buf) != 11)
            ok = 0;
    CHECK(21, ok);
    sf_handle s = sf_json_string("x\"y");
    CHECK(22, s > 0 && sf_bytes_len(s) == 3);
    sf_handle o = sf_json_object();
    CHECK(23, sf_json_set(o, "k", s) == 0 && sf_json_string_equals(o, "k", "x\"y") == 1);
    sf_drop(s);
    sf_drop(o);
    sf_drop(c);
    return (sf_i64)fails;
}
"""

CONFIG = {"n": 42, "f": 1.5, "b": True, "s": "hello world", "u": {"k": "été"}}


def _run(elf: bytes, engine: str) -> tuple[str, dict[str, object] | None]:
    return run_guest(elf, engine, config=CONFIG)


@pytest.mark.parametrize("engine", ["translate", "interp"])
def test_wrappers_and_extensions_behave_as_specified(compile_c: Compile, engine: str) -> None:
    assert failed_checks(*_run(compile_c(CHECKS), engine)) == []


def test_the_check_can_fail(compile_c: Compile) -> None:
    # the same guest with one expectation inverted reports exactly that bit
    broken = CHECKS.replace("wf_u64_to_dec(12345, buf, 5) == 0", "wf_u64_to_dec(12345, buf, 5) == 5")
    state, outcome = _run(compile_c(broken), "interp")
    assert state == "exited" and outcome == {"exit_code": 1 << 11}
