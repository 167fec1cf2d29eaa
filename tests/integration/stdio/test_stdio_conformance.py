"""The stdio conformance list (runtime-protocol.md §16, items 1-15) against the drop-in `wakeful-spinfoam`
(issue 21): every scenario runs over real pipes with the drop-in as the child process.

The scenarios are the suite's own tests (tests/integration/stdio), collected here a second time under
``test_sNN_…`` names while ``stdio_guests.ENTRY`` points every child at the drop-in entry point — the installed
console script when it is on PATH, else ``python -m wakeful.cli.spinfoam`` (what the script runs). Gaps of the
list that no other module covers, and the drop-in's own promises (argv, ``--dump-sdk``), are tests below.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import stdio_guests as g

from wakeful.runtime.client import RuntimeClient

# §16 item → (module under tests/integration/stdio, its tests that make up the scenario)
SCENARIOS: dict[int, list[tuple[str, str]]] = {
    1: [("dispatch", "test_early_errors_have_id_null"), ("dispatch", "test_id_of_exactly_128_bytes_is_accepted"),
        ("dispatch", "test_notifications_are_ignored_and_absent_params_are_empty"),
        ("dispatch", "test_not_initialized_comes_before_method_not_found"),
        ("dispatch", "test_params_are_decoded_strictly"),
        ("dispatch", "test_second_initialize_is_busy_and_bad_version_is_invalid"),
        ("dispatch", "test_replies_with_unknown_ids_are_counted_not_answered"),
        ("dispatch", "test_a_pipelined_burst_larger_than_the_control_queue_is_answered")],
    2: [("framing", "test_line_of_exactly_the_frame_limit_is_accepted"),
        ("framing", "test_over_long_line_is_fatal_exit_1"), ("framing", "test_eof_inside_a_line_is_fatal_exit_1"),
        ("framing", "test_eof_while_a_guest_spins_exits_0"),
        ("dispatch", "test_deep_nesting_is_a_parse_error_and_session_survives"),
        ("hostile_frames", "test_random_frames_never_break_the_session")],
    3: [("extensions", "test_oversized_response_becomes_response_too_large")],
    4: [("dispatch", "test_duplicate_outstanding_id_and_busy_slots_but_compile_is_exempt")],
    5: [("objects", "test_load_errors_in_order_and_ids_keep_advancing"),
        ("objects", "test_null_capabilities_are_invalid_params_at_their_step")],
    6: [("objects", "test_objects_from_one_elf_are_independent_and_start_once"),
        ("objects", "test_objects_of_one_elf_have_their_own_memory"), ("smoke", "test_load_start_exit")],
    7: [("events", "test_checks_in_order_and_mailbox_bounds"),
        ("events", "test_fifo_queued_before_start_and_dedup_after_consumption"),
        ("events", "test_waiting_guest_is_woken_by_delivery")],
    8: [("hostcalls", "test_request_params_are_exact"), ("hostcalls", "test_capability_matching_is_exact"),
        ("hostcalls", "test_result_bounds_and_error_replies"), ("hostcalls", "test_depth_limit"),
        ("hostcalls", "test_raw_replies_error_both_late_duplicate_unknown")],
    9: [("hostcalls", "test_timeout_sends_host_cancel_and_late_reply_is_ignored"),
        ("hostcalls", "test_unload_with_a_pending_call_sends_host_cancel"),
        ("hostcalls", "test_shutdown_cancels_pending_calls")],
    10: [("isolation", "test_control_replies_wait_at_most_one_batch_next_to_hostile_guests"),
         ("isolation", "test_shutdown_with_1000_live_objects_does_not_wait_for_them"),
         ("objects", "test_concurrent_stops_all_succeed"), ("objects", "test_states_wait_reasons_and_notifications")],
    11: [("output", "test_stalled_reader_drops_logs_keeps_control_priority_and_alternates"),
         ("output", "test_requests_while_stalled_close_the_session_with_bounded_memory")],
    12: [("objects", "test_list_string_order_paging_and_limit_bounds")],
    13: [("builds", "test_validation_comes_before_availability"),
          ("builds", "test_compile_identical_sha_failure_and_load"),
          ("dispatch", "test_retired_build_methods_are_not_found")],
    14: [("framing", "test_shutdown_response_comes_first_then_exit_0"), ("framing", "test_signals_exit_0"),
         ("builds", "test_shutdown_answers_running_compiles_cancelled"),
         ("stalled_exit", "test_stalled_reader_and_flood_exit_0_within_the_bound")],
    15: [("extensions", "test_detail_is_absent_unless_requested"),
         ("extensions", "test_initialize_advertises_extensions"),
         ("extensions", "test_inspect_stats_verify_and_load_options"),
         ("hostcalls", "test_label_only_with_detail")],
}
# §2 (process rules) is not a numbered item of §16 but is part of what an embedder swaps in
PROCESS = [("framing", "test_stdio_must_be_pipes"), ("framing", "test_usage_error_exits_2"),
           ("framing", "test_fd_flags_restored_on_exit"), ("framing", "test_broken_stdout_exits_1")]
FIXTURES = {"objects": ["elfs"], "events": ["sink"], "hostcalls": ["caller"]}


def _collect() -> None:
    """Bind each scenario's tests (and the module fixtures they use) into this module under ``test_sNN_…``."""
    here = globals()
    for module, names in FIXTURES.items():
        for name in names:
            here[name] = getattr(importlib.import_module(f"test_stdio_{module}"), name)
    groups = [(f"s{n:02d}", tests) for n, tests in SCENARIOS.items()] + [("process", PROCESS)]
    for tag, tests in groups:
        for module, name in tests:
            here[f"test_{tag}_{name.removeprefix('test_')}"] = getattr(importlib.import_module(f"test_stdio_{module}"),
                                                                        name)


_collect()


@pytest.fixture(autouse=True)
def _drop_in() -> Iterator[None]:
    """Every child this module starts is the drop-in entry point."""
    before = g.ENTRY["name"]
    g.ENTRY["name"] = "spinfoam"
    try:
        yield
    finally:
        g.ENTRY["name"] = before


def test_the_list_has_fifteen_scenarios_each_with_a_test() -> None:
    assert sorted(SCENARIOS) == list(range(1, 16)) and all(SCENARIOS.values())
    assert g.entry_argv() == g.spinfoam_argv()  # and every child here is the drop-in


# ---------------------------------------------------------------------- gaps of the list


def test_s15_extension_methods_take_slots_and_ids_like_any_request() -> None:
    # §13 "extension methods follow every rule of §4": 60 wakeful.stats in one atomic write — 48 slots, the
    # rest BUSY; an id still outstanding is DUPLICATE_ID
    async def body() -> None:
        async with g.session() as c:
            lines = [{"jsonrpc": "2.0", "id": f"w{i}", "method": "wakeful.stats"} for i in range(59)]
            lines.insert(5, {"jsonrpc": "2.0", "id": "w1", "method": "wakeful.object.inspect",
                             "params": {"object_id": "o1"}})
            data = "\n".join(json.dumps(line, separators=(",", ":")) for line in lines).encode() + b"\n"
            assert len(data) < 4096  # one write the runtime reads as one chunk
            await c.write_raw(data)
            frames = [await g.next_unmatched(c) for _ in range(60)]
            kinds = [f.get("error", {}).get("data", {}).get("kind") for f in frames]
            assert kinds.count("DUPLICATE_ID") == 1 and kinds.count("BUSY") == 11
            assert sum(1 for f in frames if "result" in f) == 48

    g.run(body)


# ---------------------------------------------------------------------- the drop-in's own promises


def _script_target() -> str:
    """``[project.scripts] wakeful-spinfoam`` of pyproject.toml."""
    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    return str(tomllib.loads(pyproject.read_text())["project"]["scripts"]["wakeful-spinfoam"])


def _as_console_script(*args: str) -> list[str]:
    """What pip's generated `wakeful-spinfoam` runs, from the pyproject entry (module:function)."""
    module, func = _script_target().split(":")
    importlib.import_module(module)  # the target exists in this tree
    return [sys.executable, "-c", f"import sys; from {module} import {func}; sys.exit({func}())", *args]


SPINFOAM_PROGRAM = r"""
#include "spinfoam.h"
void *memmove(void *dest, const void *source, unsigned long n) {
    char *d = dest;
    const char *s = source;
    for (unsigned long i = n; i > 0; i--) d[i - 1] = s[i - 1];
    return dest;
}
static int wf_str_eq(const char *a, const char *b) { return *a == *b; }
static char text[8] = "abc";
SF_MAIN sf_i64 main(void) { memmove(text + 1, text, 2); return wf_str_eq(text, "a") ? 3 : 4; }
"""


def test_dump_sdk_prints_a_spinfoam_h_that_spinfoam_programs_compile_and_run_against(
        compile_c: Any, tmp_path: Path) -> None:
    # issue 21 items 1-2: `<exe> --dump-sdk` → a header saved as spinfoam.h; a program defining memmove and
    # wf_str_eq compiles against it (real clang) and runs in the drop-in
    for argv in ([*g.spinfoam_argv(), "--dump-sdk"], _as_console_script("--dump-sdk")):
        dumped = subprocess.run(argv, capture_output=True, env=g.child_env(), timeout=60)
        assert dumped.returncode == 0, dumped.stderr
        assert b"#ifndef SPINFOAM_H" in dumped.stdout and b"wf_str_eq" not in dumped.stdout.split(b"*/", 1)[1]
    (tmp_path / "spinfoam.h").write_bytes(dumped.stdout)
    elf = compile_c(SPINFOAM_PROGRAM, extra_flags=("-I", str(tmp_path)))

    async def body() -> None:
        async with g.session() as c:
            st = await c.load(elf)
            await c.start(st.object_id)
            assert (await g.wait_state(c, st.object_id, "exited")).outcome == {"exit_code": 3}

    g.run(body)


def test_spinfoam_argv_with_enable_builds_last(tmp_path: Path) -> None:
    # `<exe> [args] --enable-builds`: options first, --enable-builds last, builds then allowed
    async def body() -> None:
        argv = [*g.spinfoam_argv(), "--max-objects", "5", "--enable-builds"]
        client = await RuntimeClient.spawn(argv, env=g.child_env(WAKEFUL_HOME=str(tmp_path)))
        try:
            info = await client.initialize()
            assert info["protocol_version"] == 1 and info["wakeful"]["builds"]["cache"] == "off"  # nothing kept
            if not info["compiler"]["available"]:
                pytest.skip(f"toolchain unusable here: {info['compiler']['reason']}")
            done = await client.compile({"sdk_version": 1, "entry": "main.c", "files": {
                "main.c": '#include "spinfoam.h"\nSF_MAIN sf_i64 main(void) { return 9; }\n'}})
            assert done.state == "succeeded", done
        finally:
            assert await client.shutdown() == 0

    g.run(body)


def test_the_console_script_when_installed_is_this_entry_point() -> None:
    # the real `wakeful-spinfoam` (when pip installed it) prints what the pyproject target prints
    script = shutil.which("wakeful-spinfoam")
    if script is None:
        pytest.skip("wakeful-spinfoam is not installed on PATH (the module form is tested instead)")
    real = subprocess.run([script, "--dump-sdk"], capture_output=True, env=g.child_env(), timeout=60)
    emulated = subprocess.run(_as_console_script("--dump-sdk"), capture_output=True, env=g.child_env(), timeout=60)
    assert real.returncode == emulated.returncode == 0 and real.stdout == emulated.stdout
