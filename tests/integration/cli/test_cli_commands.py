"""The real `wakeful` command in subprocesses: build, build --check, run, vm dump (interfaces.md §4).

Exit codes 0/1/2/3 come from real conditions: good and bad programs, faults, bad files, a broken compiler.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

SRC = Path(__file__).resolve().parents[3] / "src"
Compile = Callable[..., bytes]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wakeful-home")


def wakeful(
    home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(SRC), "WAKEFUL_HOME": str(home), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "wakeful.cli.main", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def final(out: str) -> dict[str, Any]:
    records = lines(out)
    assert records and records[-1]["type"] == "final", out
    return records[-1]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


EXIT_WITH = '#include <wakeful.h>\nSF_MAIN sf_i64 main(void) {{ sf_log("bye"); return {code}; }}\n'
FAULT = "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { return *(volatile sf_i64 *)8; }\n"
SLEEPER = (
    "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { for (;;) if (sf_sleep_ms(60000) < 0) return 0; }\n"
)
RECURSE = """#include <wakeful.h>
static sf_i64 g(sf_i64 n);
__attribute__((noinline)) static sf_i64 f(sf_i64 n) {
    if (n <= 0) return 0;
    sf_log("f");
    sf_i64 r = g(n - 1);
    sf_log("x");
    return r * 3 + 1;
}
__attribute__((noinline)) static sf_i64 g(sf_i64 n) {
    if (n <= 0) return 1;
    sf_log("g");
    sf_i64 r = f(n - 1);
    sf_log("y");
    return r * 5 + 2;
}
SF_MAIN sf_i64 main(void) { return f(sf_now_mono_ms() & 7); }
"""
CALLS = """#include <wakeful.h>
__attribute__((noinline)) static sf_i64 twice(sf_i64 n) { sf_log("t"); return n * 2; }
SF_MAIN sf_i64 main(void) { return twice(sf_now_mono_ms() & 7); }
"""
ECHO = r"""#include <wakeful.h>
/* logs each event id and topic, asks the host, logs the status */
static char buf[200];
SF_MAIN sf_i64 main(void) {
    for (int i = 0; i < 3; i++) {
        sf_handle ev = sf_event_next(0);
        if (ev < 0) break;
        sf_i64 n = wf_json_get_str(ev, "event_id", buf, 100);
        buf[n] = ':';
        wf_json_get_str(ev, "topic", buf + n + 1, 90);
        sf_log(buf);
        sf_drop(ev);
    }
    sf_handle args = sf_json_parse("{\"q\":1}", 7);
    sf_handle r1 = sf_host_call("tool.x", args, 10000);
    sf_handle r2 = sf_host_call("tool.x", args, 10000);
    sf_handle r3 = sf_host_call("tool.x", args, 10000);
    sf_handle r4 = sf_host_call("unlisted", args, 10000);
    sf_handle r5 = sf_host_call("agent.notify", args, 10000);
    wf_i64_to_dec(r2, buf, sizeof buf);
    sf_log(buf);
    return (r1 > 0) * 10000 + (r3 > 0) * 1000 + (r4 == SF_DENIED) * 100 + (r5 == SF_HOST_ERROR) * 10;
}
"""


# ---- wakeful build / build --check (build.md §1, §10) ----


def test_build_succeeds_and_writes_the_elf(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path, "ok.c", EXIT_WITH.format(code=0))
    out = tmp_path / "ok.o"
    proc = wakeful(home, "build", str(src), "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["state"] == "succeeded" and doc["elf_bytes"] == out.stat().st_size
    import hashlib

    assert doc["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert doc["report"]["entry"] == "main" and "sf_log_raw" in doc["report"]["helpers"]


def test_build_human_output(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path, "ok.c", EXIT_WITH.format(code=0))
    proc = wakeful(home, "build", str(src))
    assert proc.returncode == 0 and "built sha256:" in proc.stdout and "call chain: main" in proc.stdout


def test_build_compiler_error_exits_1(home: Path, tmp_path: Path) -> None:
    src = write(
        tmp_path, "bad.c", "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { return undefined_name; }\n"
    )
    proc = wakeful(home, "build", str(src), "--json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["state"] == "failed" and doc["kind"] == "build_failed" and doc["failure"] == "compiler_error"
    assert "undefined_name" in doc["diagnostics"]
    human = wakeful(home, "build", str(src))
    assert human.returncode == 1 and "build failed" in human.stderr and "Traceback" not in human.stderr


def test_build_recursion_is_a_verifier_failure(home: Path, tmp_path: Path) -> None:
    proc = wakeful(home, "build", str(write(tmp_path, "rec.c", RECURSE)), "--json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["failure"] == "verifier" and "RECURSION" in (doc["error"] or "") + doc["diagnostics"]


def test_build_bad_bundle_path_exits_2(home: Path, tmp_path: Path) -> None:
    proc = wakeful(home, "build", str(write(tmp_path, "has space.c", EXIT_WITH.format(code=0))), "--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"] == "invalid_request"


def test_build_multi_file_bundle_with_entry(home: Path, tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    hdr = write(tmp_path, "lib/value.h", "#define VALUE 0\n")
    src = write(
        tmp_path,
        "main.c",
        '#include <wakeful.h>\n#include "lib/value.h"\nSF_MAIN sf_i64 main(void) { return VALUE; }\n',
    )
    proc = wakeful(home, "build", str(hdr), str(src), "--entry", "main.c", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert wakeful(home, "build", str(src), "--entry", "other.c").returncode == 2


def test_build_without_a_compiler_exits_3(home: Path, tmp_path: Path) -> None:
    # a broken toolchain: a `ziglang` package without its zig binary shadows the real one
    shadow = tmp_path / "shadow"
    (shadow / "ziglang").mkdir(parents=True)
    (shadow / "ziglang" / "__init__.py").write_text("")
    src = write(tmp_path, "ok.c", EXIT_WITH.format(code=0))
    env = {"PYTHONPATH": f"{shadow}{os.pathsep}{SRC}", "WAKEFUL_HOME": str(tmp_path / "fresh")}
    proc = wakeful(home, "build", str(src), "--json", env=env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["error"] == "compiler_unavailable"
    run = wakeful(home, "run", str(src), env=env)
    assert run.returncode == 3 and "Traceback" not in run.stderr


def test_check_good_and_bad_elf(home: Path, tmp_path: Path, compile_c: Compile) -> None:
    good = tmp_path / "good.o"
    good.write_bytes(compile_c(EXIT_WITH.format(code=0)))
    proc = wakeful(home, "build", "--check", str(good), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (
        doc["ok"] is True
        and doc["report"]["entry"] == "main"
        and doc["report"]["elf_bytes"] == good.stat().st_size
    )

    bad = tmp_path / "bad.o"
    bad.write_bytes(b"\x7fELF" + b"\x00" * 60)
    proc = wakeful(home, "build", "--check", str(bad), "--json")
    assert proc.returncode == 1
    err = json.loads(proc.stdout)
    assert err["error"] == "invalid_artifact" and err["rule"].startswith("ELF")
    human = wakeful(home, "build", "--check", str(bad))
    assert human.returncode == 1 and "invalid_artifact" in human.stderr and "Traceback" not in human.stderr


def test_check_refuses_jump_tables(home: Path, tmp_path: Path, compile_c: Compile) -> None:
    values = [17, 4, 99, 23, 8, 61, 5, 42, 77, 13, 90, 31, 2, 58, 11, 66]
    cases = "".join(f'case {i}: sf_log("c{i}"); return {v};' for i, v in enumerate(values))
    src = f"#include <wakeful.h>\nSF_MAIN sf_i64 main(void) {{ switch (sf_now_mono_ms() & 15) {{ {cases} }} return 0; }}\n"
    elf = tmp_path / "jt.o"
    elf.write_bytes(compile_c(src, extra_flags=("-fjump-tables",)))
    proc = wakeful(home, "build", "--check", str(elf), "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["rule"] == "JUMP_TABLE"


# ---- wakeful run (interfaces.md §4.2) ----


@pytest.mark.parametrize("engine", ["translate", "interp"])
def test_run_exit_codes(home: Path, tmp_path: Path, compile_c: Compile, engine: str) -> None:
    zero = tmp_path / "zero.o"
    zero.write_bytes(compile_c(EXIT_WITH.format(code=0)))
    proc = wakeful(home, "run", str(zero), "--engine", engine, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = lines(proc.stdout)
    assert {"type": "log", "message": "bye"}.items() <= next(r for r in records if r["type"] == "log").items()
    assert final(proc.stdout)["state"] == "exited" and final(proc.stdout)["exit_code"] == 0

    seven = tmp_path / "seven.o"
    seven.write_bytes(compile_c(EXIT_WITH.format(code=-7)))
    proc = wakeful(home, "run", str(seven), "--engine", engine, "--json")
    assert proc.returncode == 1 and final(proc.stdout)["exit_code"] == -7


@pytest.mark.parametrize("engine", ["translate", "interp"])
def test_run_fault_exits_1_with_the_fault_message(
    home: Path, tmp_path: Path, compile_c: Compile, engine: str
) -> None:
    elf = tmp_path / "fault.o"
    elf.write_bytes(compile_c(FAULT))
    proc = wakeful(home, "run", str(elf), "--engine", engine, "--json")
    assert proc.returncode == 1
    end = final(proc.stdout)
    assert end["state"] == "failed" and "memory fault" in end["fault"] and "0x8" in end["fault"]
    human = wakeful(home, "run", str(elf), "--engine", engine)
    assert human.returncode == 1 and "failed: memory fault" in human.stdout


DEC_FAULT = """#include <wakeful.h>
SF_MAIN sf_i64 main(void) {
  sf_i64 at = 0;
  wf_json_get_i64(sf_config(), "at", &at);
  return (sf_i64)wf_u64_to_dec(12345, (char *)at, 8);
}
"""


def test_run_fault_of_a_built_source_names_the_line(home: Path, tmp_path: Path) -> None:
    """Issue 18: `wakeful run x.c` keeps the build's line table, so the fault names the source line."""
    src = write(tmp_path, "dec.c", DEC_FAULT)
    proc = wakeful(home, "run", str(src), "--config", '{"at": 16}', "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fault = final(proc.stdout)["fault"]
    assert fault.startswith("dec.c:5: ") and fault.endswith(" (in wf_u64_to_dec)"), fault


def test_run_timeout_stops_and_exits_0(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path, "sleeper.c", SLEEPER)
    start = time.monotonic()
    proc = wakeful(home, "run", str(src), "--timeout", "0.5", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    end = final(proc.stdout)
    assert end["state"] == "stopped" and end["stopped_by"] == "timeout"
    assert time.monotonic() - start < 30
    states = [r for r in lines(proc.stdout) if r["type"] == "state"]
    assert any(s["state"] == "running" and s["wait"] == "timer" for s in states)


def test_run_sigint_stops_and_exits_0(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path, "sleeper.c", SLEEPER)
    env = {**os.environ, "PYTHONPATH": str(SRC), "WAKEFUL_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "wakeful.cli.main", "run", str(src), "--json", "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if json.loads(line).get("wait") == "timer":
            break
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(rest.splitlines()[-1])["stopped_by"] == "sigint"


def test_run_events_replies_and_capabilities(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path, "echo.c", ECHO)
    replies = write(
        tmp_path,
        "r.json",
        json.dumps(
            {
                "tool.x": [
                    {"result": {"n": 1}},
                    {"error": {"code": "nope", "message": "refused"}},
                    {"result": {"n": 3}},
                ]
            }
        ),
    )
    proc = wakeful(
        home,
        "run",
        str(src),
        "--host-replies",
        str(replies),
        "--json",
        "--event",
        'alpha={"a": 1}',
        "--event",
        "beta=[]",
    )
    assert proc.returncode == 1, proc.stderr  # exits non-zero on purpose: its code encodes what it saw
    records = lines(proc.stdout)
    logs = [r["message"] for r in records if r["type"] == "log"]
    assert logs == ["e1:alpha", "e2:beta", str(-5)]  # the error reply reached the guest as SF_HOST_ERROR
    calls = [(r["capability"], r["arguments"], r["reply"]) for r in records if r["type"] == "host_call"]
    assert calls == [
        ("tool.x", {"q": 1}, {"result": {"n": 1}}),
        ("tool.x", {"q": 1}, {"error": {"code": "nope", "message": "refused"}}),
        ("tool.x", {"q": 1}, {"result": {"n": 3}}),
        (
            "agent.notify",
            {"q": 1},
            {"error": {"code": "not_scripted", "message": "no reply for agent.notify"}},
        ),
    ]  # "unlisted" is not a capability: SF_DENIED, never reaches the host
    assert final(proc.stdout)["exit_code"] == 11110
    for record in records:
        assert record["type"] in {"log", "host_call", "state", "final"} and isinstance(record["t_ms"], int)


def test_run_config_is_injected(home: Path, tmp_path: Path) -> None:
    src = write(
        tmp_path,
        "cfg.c",
        r"""#include <wakeful.h>
static char buf[300];
SF_MAIN sf_i64 main(void) {
    sf_handle cfg = sf_config();
    sf_handle text = sf_json_dump(cfg);
    sf_i64 n = sf_bytes_read(text, 0, buf, sizeof buf);
    sf_log_raw(buf, n);
    return 0;
}
""",
    )
    proc = wakeful(home, "run", str(src), "--config", '{"threshold": 5}', "--json")
    assert proc.returncode == 0, proc.stderr
    logged = json.loads(next(r["message"] for r in lines(proc.stdout) if r["type"] == "log"))
    assert logged == {"loop_id": "lp_local", "incarnation": 1, "state": None, "threshold": 5}


def test_run_build_failure_exits_1(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path, "broken.c", "SF_MAIN int main(void) { return }\n")
    proc = wakeful(home, "run", str(src), "--json")
    assert proc.returncode == 1
    end = final(proc.stdout)
    assert end["kind"] == "build_failed" and end["state"] == "failed"
    human = wakeful(home, "run", str(src))
    assert human.returncode == 1 and "build failed" in human.stderr and "error:" in human.stderr


def test_run_refused_elf_exits_1(home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "junk.o"
    bad.write_bytes(b"not an elf at all")
    proc = wakeful(home, "run", str(bad), "--json")
    assert proc.returncode == 1
    end = final(proc.stdout)
    assert end["state"] == "refused" and end["error"] == "invalid_artifact"


def test_run_bad_event_payload_exits_2(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path, "sleeper.c", SLEEPER)
    deep = "[" * 40 + "]" * 40
    proc = wakeful(home, "run", str(src), "--event", f"t={deep}", "--json")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["error"] == "invalid_request"


# ---- wakeful vm dump (vm.md §4.2-4.3) ----


def test_vm_dump(home: Path, tmp_path: Path, compile_c: Compile) -> None:
    elf = tmp_path / "p.o"
    elf.write_bytes(compile_c(CALLS))
    proc = wakeful(home, "vm", "dump", str(elf), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["report"]["entry"] == "main" and set(doc["disassembly"]) == {"main", "twice"}
    assert any("call sf_now_mono_ms" in line for line in doc["disassembly"]["main"])
    assert any("call twice" in line for line in doc["disassembly"]["main"])
    assert doc["disassembly"]["main"][0].lstrip().startswith("0:")
    assert "def " in doc["translation"]
    only = json.loads(wakeful(home, "vm", "dump", str(elf), "--function", "main", "--json").stdout)
    assert list(only["disassembly"]) == ["main"]
    assert wakeful(home, "vm", "dump", str(elf), "--function", "nope").returncode == 2
    human = wakeful(home, "vm", "dump", str(elf))
    assert "verifier report" in human.stdout and "generated Python" in human.stdout


def test_vm_dump_refuses_bad_elf(home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.o"
    bad.write_bytes(b"\x7fELF" + b"\x01" * 100)
    proc = wakeful(home, "vm", "dump", str(bad), "--json")
    assert proc.returncode == 1 and json.loads(proc.stdout)["error"] == "invalid_artifact"


def test_run_quiet_prints_only_the_final_line(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path, "ok.c", EXIT_WITH.format(code=0))
    proc = wakeful(home, "--quiet", "run", str(src))
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout.strip().splitlines() == [proc.stdout.strip()] and "exited with exit code 0" in proc.stdout
    )


def test_build_failure_shows_the_explanation_once(home: Path, tmp_path: Path) -> None:
    src = write(
        tmp_path,
        "float.c",
        "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { return (sf_i64)(sf_now_mono_ms() * 1.5); }\n",
    )
    proc = wakeful(home, "build", str(src))
    assert proc.returncode == 1
    assert proc.stderr.count("wakeful: floating point is not available") == 1
    assert proc.stderr.rstrip().endswith("build failed (compiler_error)")


TERMINAL_ATTACK = r"""
#include <wakeful.h>
SF_MAIN sf_i64 main(void) {
    /* clear screen, an OSC 52 clipboard write, and a C1 CSI: none may reach the operator's terminal raw */
    sf_log("\x1b[2J\x1b]52;c;cHduZWQ=\x07 \xc2\x9b" "31m done");
    return 0;
}
"""


def test_run_never_prints_control_characters_from_the_guest(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path, "attack.c", TERMINAL_ATTACK)
    proc = wakeful(home, "run", str(src), "--timeout", "10")
    assert proc.returncode == 0, proc.stderr
    assert "done" in proc.stdout
    for raw in ("\x1b", "\x07", "\x9b"):
        assert raw not in proc.stdout and raw not in proc.stderr
    assert "\\x1b[2J" in proc.stdout  # shown, made visible
    # machines get the exact text: JSON escapes it
    proc = wakeful(home, "--json", "run", str(src), "--timeout", "10")
    messages = [r["message"] for r in lines(proc.stdout) if r["type"] == "log"]
    assert messages == ["\x1b[2J\x1b]52;c;cHduZWQ=\x07 \x9b31m done"]
