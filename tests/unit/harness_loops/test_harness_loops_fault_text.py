"""Issue 18: lifecycle messages spell out SDK statuses, and identical faults are counted on one failure line."""

from __future__ import annotations

from wakeful.harness import lifecycle as lc
from wakeful.harness import notices


def test_an_exit_status_is_spelled_out() -> None:
    text = notices.exited("watch", "lp_x", -2)
    assert "exit code -2 SF_LIMIT: a bound was hit" in text and "handle leak" in text and "paused" in text
    assert notices.exit_code_text(-5).startswith("-5 SF_HOST_ERROR: ")
    assert notices.exit_code_text(3) == "3" and notices.exit_code_text(-7) == "-7"  # not a status: the number


def test_identical_faults_are_shown_once_with_a_count() -> None:
    failure = None
    for _ in range(4):
        failure = lc.appended_failure(failure, "main.c:7: memory fault (in wf_u64_to_dec)")
    assert failure == "main.c:7: memory fault (in wf_u64_to_dec) (4 times)"
    failure = lc.appended_failure(failure, "other fault")
    assert failure.split("\n") == ["main.c:7: memory fault (in wf_u64_to_dec) (4 times)", "other fault"]
    assert lc.appended_failure("a\nb", "a") == "a\nb\na"  # only a repeat of the last line is counted
