"""Transport and process end (runtime-protocol.md §2, §3, §12; §16 items 2 and 14)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
import stdio_guests as g

from wakeful.runtime.client import RuntimeClosed


def test_line_of_exactly_the_frame_limit_is_accepted() -> None:
    async def body() -> None:
        async with g.session() as c:
            head = b'{"jsonrpc":"2.0","id":"big","method":"sf.stats","params":{}}'
            line = head + b" " * (262_144 - 1 - len(head)) + b"\n"
            assert len(line) == 262_144
            frame = await g.raw(c, line)
            assert frame["id"] == "big" and frame["result"]["objects"] == 0

    g.run(body)


def test_over_long_line_is_fatal_exit_1() -> None:
    async def body() -> None:
        c = await g.spawn()
        await c.initialize()
        with pytest.raises(RuntimeClosed):  # the line never ends: the runtime must not wait for it
            await c.write_raw(b'{"jsonrpc":"2.0","id":"x","method":"sf.stats","params":{"p":"' + b"a" * 262_144)
            await c.stats()
        assert await c.wait(5) == 1

    g.run(body)


def test_eof_inside_a_line_is_fatal_exit_1() -> None:
    async def body() -> None:
        c = await g.spawn()
        await c.initialize()
        await c.write_raw(b'{"jsonrpc":"2.0","id":"x","meth')
        assert c.proc.stdin is not None
        c.proc.stdin.close()
        assert await c.wait(5) == 1

    g.run(body)


def test_eof_while_a_guest_spins_exits_0(compile_c: Any) -> None:
    spin = compile_c(g.SPIN)

    async def body() -> None:
        c = await g.spawn()
        await c.initialize()
        st = await c.load(spin)
        await c.start(st.object_id)
        await g.wait_state(c, st.object_id, "running")
        assert c.proc.stdin is not None
        c.proc.stdin.close()
        t0 = time.monotonic()
        assert await c.wait(5) == 0
        assert time.monotonic() - t0 < 5

    g.run(body)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_exit_0(compile_c: Any, sig: int) -> None:
    spin = compile_c(g.SPIN)

    async def body() -> None:
        c = await g.spawn()
        await c.initialize()
        st = await c.load(spin)
        await c.start(st.object_id)
        c.proc.send_signal(sig)
        assert await c.wait(5) == 0

    g.run(body)


def test_shutdown_response_comes_first_then_exit_0(compile_c: Any) -> None:
    sleeper = compile_c(g.SLEEPER)

    async def body() -> None:
        c = await g.spawn()
        await c.initialize()
        for _ in range(3):
            st = await c.load(sleeper)
            await c.start(st.object_id)
        await c.write_raw(b'{"jsonrpc":"2.0","id":"bye","method":"sf.shutdown"}\n')
        first = await asyncio.wait_for(c.unmatched.get(), 5)
        assert first == {"jsonrpc": "2.0", "id": "bye", "result": {"shutdown": True}}
        assert await c.wait(5) == 0

    g.run(body)


def test_broken_stdout_exits_1(compile_c: Any) -> None:
    # §12: a broken stdout ends the process with exit 1 (the guest logs so the runtime writes)
    logger = compile_c(g.LOGGER)
    env = g.child_env()
    proc = subprocess.Popen(g.entry_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    init = {"jsonrpc": "2.0", "id": "1", "method": "sf.initialize", "params": {"protocol_version": 1}}
    proc.stdin.write(json.dumps(init).encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == "1"
    proc.stdout.close()  # the reader goes away
    import base64

    load = {"jsonrpc": "2.0", "id": "2", "method": "sf.object.load",
            "params": {"elf": base64.b64encode(logger).decode(), "config": {"count": 1000000, "size": 10}}}
    start = {"jsonrpc": "2.0", "id": "3", "method": "sf.object.start", "params": {"object_id": "o1"}}
    try:
        proc.stdin.write(json.dumps(load).encode() + b"\n" + json.dumps(start).encode() + b"\n")
        proc.stdin.flush()
    except BrokenPipeError:
        pass
    try:
        assert proc.wait(10) == 1
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()


def test_stdio_must_be_pipes(tmp_path: Any) -> None:
    # §2: stdin/stdout that are not pipes, FIFOs or sockets → exit 2 (unless --allow-any-stdio)
    regular = tmp_path / "in.txt"
    regular.write_text("")
    with open(regular, "rb") as stdin:
        proc = subprocess.run(g.entry_argv(), stdin=stdin, capture_output=True, env=g.child_env(), timeout=30)
    assert proc.returncode == 2 and b"pipes" in proc.stderr
    with open(regular, "rb") as stdin:  # with the escape hatch: EOF at once → exit 0
        proc = subprocess.run([*g.entry_argv(), "--allow-any-stdio"], stdin=stdin, capture_output=True,
                              env=g.child_env(), timeout=30)
    assert proc.returncode == 0


@pytest.mark.parametrize("args", [["--max-objects", "zero"], ["--max-elf-bytes", "1048577"],
                                  ["--max-instructions", "0"], ["--no-such-option"],
                                  ["--poll-us", "-1"], ["--poll-us", "10001"]])
def test_usage_error_exits_2(args: list[str]) -> None:
    proc = subprocess.run([*g.entry_argv(), *args], stdin=subprocess.PIPE,
                          capture_output=True, env=g.child_env(), timeout=30)
    assert proc.returncode == 2, proc.stderr


def test_fd_flags_restored_on_exit() -> None:
    # §2: stdin/stdout are switched to non-blocking and their original flags restored on exit
    read_fd, write_fd = os.pipe()
    out_r, out_w = os.pipe()
    try:
        proc = subprocess.Popen(g.entry_argv(), stdin=read_fd, stdout=out_w, env=g.child_env())
        os.close(write_fd)
        write_fd = -1
        assert proc.wait(30) == 0
        assert os.get_blocking(read_fd) and os.get_blocking(out_w)
    finally:
        for fd in (read_fd, write_fd, out_r, out_w):
            if fd >= 0:
                os.close(fd)


def test_dump_sdk_prints_the_header() -> None:
    from wakeful.runtime import stdio

    code = subprocess.run([sys.executable, "-c", "import sys; from wakeful.runtime import stdio; "
                           "sys.exit(stdio.main(['--dump-sdk']))"], capture_output=True, env=g.child_env(),
                          timeout=30)
    assert code.returncode == 0 and b"WAKEFUL_SDK_ABI" in code.stdout
    assert stdio.EXIT_USAGE == 2
