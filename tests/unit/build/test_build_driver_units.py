"""build.md §2.1 command lines exactly, and §5.2's mapping from a step's end to a failure kind."""

from __future__ import annotations

import signal

import pytest

from wakeful.build.driver import COMPILE, PREPROCESS, command_line, step_failure


def test_driver_command_lines_are_the_spec_text() -> None:
    pre = command_line(PREPROCESS, "/z/zig", "nested/main.c", "/b/tmp/s1-x")
    expected_pre = (
        "/z/zig clang --target=bpfel -x c -std=gnu17 -O2 -mcpu=v4 -ffreestanding -fno-raw-string-literals -nostdinc "
        "--no-default-config -I src -I sdk -Wall -fno-color-diagnostics -ferror-limit=20 -fmacro-backtrace-limit=4 "
        "-fno-crash-diagnostics -ffile-prefix-map=/b/tmp/s1-x/= -E src/nested/main.c -o out/pp.i"
    )
    assert pre == expected_pre.split(" ")
    comp = command_line(COMPILE, "/z/zig", "nested/main.c", "/b/tmp/s1-x")
    expected_comp = (
        "/z/zig clang --target=bpfel -x cpp-output -std=gnu17 -O2 -mcpu=v4 -ffreestanding -fno-raw-string-literals "
        "-nostdinc --no-default-config -mllvm -bpf-stack-size=4096 -fno-builtin -fno-common -fno-jump-tables "
        "-fno-unwind-tables -fno-asynchronous-unwind-tables -Wall -fno-color-diagnostics -ferror-limit=20 "
        "-fno-crash-diagnostics -ffile-prefix-map=/b/tmp/s1-x/= -c out/main.i -o out/main.o"
    )
    assert comp == expected_comp.split(" ")
    assert "src/" not in " ".join(comp) and "<" not in " ".join(pre + comp)


@pytest.mark.parametrize(
    ("answer", "failure"),
    [
        ({"status": "exit", "code": 0}, None),
        ({"status": "exit", "code": 1, "stderr": "main.c:1:1: error: x"}, "compiler_error"),
        ({"status": "exit", "code": 1, "stderr": "LLVM ERROR: out of memory"}, "memory"),
        ({"status": "exit", "code": 1, "stderr": "libc++abi: terminating due to uncaught exception of type "
          "std::bad_alloc: std::bad_alloc\nzig: error: clang frontend command failed with exit code 134"}, "memory"),
        ({"status": "exit", "code": 1, "stderr": "zig: error: clang frontend command failed with exit code 134 "
          "(use -v to see invocation)"}, "compiler_crashed"),
        ({"status": "exit", "code": 1, "stderr": "zig: error: clang frontend command failed due to signal"},
         "compiler_crashed"),
        ({"status": "exit", "code": 1, "stderr": "zig: error: clang frontend command failed with exit code 1"},
         "compiler_error"),
        ({"status": "exit", "code": 70, "stderr": "fatal error: error in backend"}, "compiler_crashed"),
        ({"status": "exit", "code": 3}, "compiler_crashed"),
        ({"status": "signal", "signal": signal.SIGXCPU}, "cpu_limit"),
        ({"status": "signal", "signal": signal.SIGXFSZ}, "too_large"),
        ({"status": "signal", "signal": signal.SIGSEGV}, "compiler_crashed"),
        ({"status": "signal", "signal": signal.SIGABRT, "stderr": "out of memory"}, "memory"),
        ({"status": "deadline", "signal": signal.SIGKILL}, "deadline"),
        ({"status": "error", "message": "fork failed"}, "internal"),
    ],
)
def test_driver_step_failure_mapping(answer: dict[str, object], failure: str | None) -> None:
    assert step_failure(answer) == failure
