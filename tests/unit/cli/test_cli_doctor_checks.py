"""The ``wakeful doctor`` checks that need neither a compiler nor a store: the verdict rules for the toolchain
probe's report, the sandbox level, Python, the clock skew, the web egress policy and the VM self-test."""

from __future__ import annotations

import pytest

from wakeful.build import CompilerInfo
from wakeful.cli.doctor import (
    Check,
    check_compiler,
    check_python,
    check_sandbox,
    check_vm,
    check_web,
    failed,
    report,
)
from wakeful.harness.ops import clock_check
from wakeful.harness.web_policy import WebSettings


def _info(**changes: object) -> CompilerInfo:
    values: dict[str, object] = {"available": True, "reason": None, "fingerprint": "f" * 64,
                                 "zig_version": "0.17.1", "clang_version": "22.1.8", "sandbox_level": "landlock"}
    values.update(changes)
    return CompilerInfo(**values)  # type: ignore[arg-type]


def test_compiler_verdicts() -> None:
    assert check_compiler(_info()).status == "ok"
    other = check_compiler(_info(zig_version="0.16.0", clang_version="21.1.0"))
    assert other.status == "warn" and "zig 0.16.0 / clang 21.1.0 is not the pinned zig 0.17.1" in other.detail
    missing = check_compiler(_info(available=False, reason="zig compiler not found"))
    assert missing.status == "fail" and missing.detail == "builds are unavailable: zig compiler not found"
    assert "ziglang" in missing.hint


@pytest.mark.parametrize(("level", "status"), [("landlock", "ok"), ("namespace", "ok"), ("scan", "warn")])
def test_sandbox_warns_whenever_landlock_is_not_in_force(level: str, status: str) -> None:
    check = check_sandbox(_info(sandbox_level=level, sandbox_reason="landlock: ABI 0 (kernel without it)"))
    assert check.status == status
    if status == "warn":
        assert "Landlock is not in force" in check.detail and "kernel without it" in check.detail


def test_python_version() -> None:
    assert check_python().status == "ok"
    old = check_python((3, 10, 14))
    assert old.status == "fail" and old.detail == "Python 3.10.14 is older than 3.11"


@pytest.mark.parametrize(("skew_ms", "rtt_ms", "status"), [
    (0, 1, "ok"), (-999, 0, "ok"), (1500, 10, "fail"), (-1500, 10, "fail"), (1100, 400, "ok"), (1100, 100, "fail"),
])
def test_clock_skew_is_judged_with_the_reading_uncertainty(skew_ms: float, rtt_ms: float, status: str) -> None:
    check = clock_check(skew_ms, rtt_ms)
    assert check.status == status and check.name == "pg_clock"
    assert ("behind" if skew_ms > 0 else "ahead of") in check.detail


def test_web_egress_policy_in_force() -> None:
    assert check_web(WebSettings()).status == "ok"
    assert check_web(WebSettings(allow_networks=("10.1.0.0/16",))).status == "ok"
    opened = check_web(WebSettings(allow_private=True))
    assert opened.status == "warn" and "web.allow_private is true" in opened.detail
    metadata = check_web(WebSettings(allow_networks=("169.254.0.0/16",)))
    assert metadata.status == "warn" and "169.254.169.254" in metadata.detail


def test_vm_self_test_runs_the_bundled_elf() -> None:
    check = check_vm()
    assert check == Check("vm", "ok", check.detail) and "interpreter and the translator" in check.detail


def test_report_is_not_ok_when_any_check_failed() -> None:
    checks = [Check("a", "ok", ""), Check("b", "warn", "w", "h")]
    assert not failed(checks) and report(checks)["ok"] is True
    checks.append(Check("c", "fail", "f", "h"))
    doc = report(checks)
    assert doc["ok"] is False and doc["checks"][2] == {"name": "c", "status": "fail", "detail": "f", "hint": "h"}
