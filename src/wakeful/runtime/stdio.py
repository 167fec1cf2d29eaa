"""`wakeful runtime`: the stdio JSON-RPC server (spinfoam protocol v1) around one in-process ``Runtime``.

runtime-protocol.md §2-§4 and §10-§12: process checks, framing, dispatch order, request slots, the writer
over the bounded outbox, and shutdown. Methods live in ``stdio_methods.py``, host calls in ``stdio_hostcalls.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Coroutine, Sequence
from typing import Any

from wakeful.errors import RPC_CODES, WakefulError
from wakeful.runtime import jsonval
from wakeful.runtime.core import ObjectStatus, Runtime, RuntimeOptions
from wakeful.runtime.framing import (
    MAX_ID_BYTES,
    FrameTooLong,
    LineSplitter,
    encode_frame,
    encode_response,
    error_frame,
    notification,
    parse_frame,
    response,
    utf8_len,
)
from wakeful.runtime.outbox import DataFrame, Outbox
from wakeful.runtime.stdio_hostcalls import OutgoingCalls
from wakeful.runtime.stdio_methods import Methods
from wakeful.sdk.rules import SLICE_INSNS

__all__ = ["EXIT_FATAL", "EXIT_OK", "EXIT_USAGE", "Session", "main"]

log = logging.getLogger("wakeful.runtime.stdio")

EXIT_OK, EXIT_FATAL, EXIT_USAGE = 0, 1, 2  # §2
REQUEST_SLOTS = 48  # §4 step 9
MAX_COMPILES = 64  # decisions-stdio.md: outstanding sf.build.compile requests (they take no slot)
FLUSH_SECONDS = 2.0  # §12
READ_BYTES = 65_536
WRITES_PER_TURN = 4  # writes per writer callback before the loop runs other work
POLL_US = 200  # decisions-stdio.md: stdin polled this long after a chunk before sleeping in epoll (0: off)
POLL_SESSION_NS = 2_000_000  # one polling session never keeps the loop from its timers longer than this
STDIN, STDOUT = 0, 1


_ABSENT: Any = object()


class _Fatal(WakefulError):
    """The session must close: an early error of §4 that cannot be queued (a stalled reader)."""


class Session:
    """One protocol session over the process's stdin and stdout (§3-§12)."""

    def __init__(self, options: RuntimeOptions, *, stdin: int = STDIN, stdout: int = STDOUT,
                 poll_us: int = POLL_US) -> None:
        self.options = options
        self.stdin, self.stdout = stdin, stdout
        self.poll_ns = max(0, poll_us) * 1000
        self.outbox = Outbox(self._frames_ready)
        self.calls = OutgoingCalls(self.outbox, detail=lambda: self.detail)
        self.rt = Runtime(options, host_handler=self.calls, on_state=self._on_state, on_log=self._on_log)
        self.methods = Methods(self)
        self.splitter = LineSplitter()
        self.initialized = False
        self.detail = False
        self.shutdown_requested = False
        self._outstanding: dict[str, asyncio.Task[None]] = {}
        self._answered: set[str] = set()  # answered inline in this chunk: slot and id held until its end
        self._slots = 0
        self._compiles: dict[str, asyncio.Task[None]] = {}
        self._pending_write = b""
        self._flush_soon = False
        self._feeding = False  # a chunk is being dispatched: its frames go out in one write at its end
        self._ready: Any = None  # the loop's ready callbacks (a deque), when the loop exposes them
        self._writer_armed = False
        self._drained: asyncio.Event | None = None
        self._stopping: asyncio.Future[int] | None = None
        self._flush_on_exit = True
        self._broken = False
        # request waits in scheduler terms (§16.10): batches and slices between arrival and queued reply
        self.handled = 0
        self.busy = 0
        self.max_batches_waited = 0
        self.max_slices_waited = 0

    # ------------------------------------------------------------------ run

    async def run(self) -> int:
        """Serve until shutdown; returns the process exit code (§2)."""
        loop = asyncio.get_running_loop()
        self._stopping = loop.create_future()
        self._drained = asyncio.Event()
        try:
            await self.rt.open()
        except Exception as exc:  # e.g. the build root cannot be created
            log.error("runtime could not start: %s", exc)
            return EXIT_USAGE
        self._ready = getattr(loop, "_ready", None)
        try:
            loop.add_reader(self.stdin, self._readable)
        except PermissionError:  # --allow-any-stdio with a regular file: epoll refuses it
            threading.Thread(target=self._read_blocking, args=(loop,), daemon=True).start()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stop, EXIT_OK, True)
        code = await self._stopping
        await self._shut_down()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        return code

    # ------------------------------------------------------------------ driven in process (bench/server_cpu.py)

    def begin_in_process(self) -> None:
        """Serve without ``run``: from now on each chunk passed to ``feed`` is dispatched (a benchmark drives
        the session over pipes it owns and times the dispatch alone)."""
        self._stopping = asyncio.get_running_loop().create_future()

    def feed(self, data: bytes) -> None:
        """Dispatch ``data`` as one chunk read from stdin."""
        self._feed(data)

    def end_in_process(self) -> None:
        """Write nothing more: the caller closes the pipes next."""
        self._broken = True

    def _stop(self, code: int, flush: bool) -> None:
        """Begin the shutdown of §12 (idempotent): stop reading stdin first."""
        if self._stopping is None or self._stopping.done():
            return
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self.stdin)
        self._flush_on_exit = flush
        self._stopping.set_result(code)

    # §12: cancel handlers; cancel and stop every object; compiles answer cancelled; close queues; flush ≤ 2 s
    async def _shut_down(self) -> None:
        for task in list(self._outstanding.values()):
            if task not in self._compiles.values():
                task.cancel()
        for request_id, task in list(self._compiles.items()):
            task.cancel()
            self._force(response(request_id, {"state": "cancelled", "result": None}))
        await self.rt.close()  # each object's terminal cleanup offers its host.cancel frames (§7.1)
        self.calls.close()
        self.outbox.close()
        if self._flush_on_exit:
            self._frames_ready()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wait_drained(), FLUSH_SECONDS)
        loop = asyncio.get_running_loop()
        if self._writer_armed:
            loop.remove_writer(self.stdout)

    async def _wait_drained(self) -> None:
        assert self._drained is not None
        while (self.outbox.has_frames() or self._pending_write) and not self._broken:
            self._drained.clear()
            await self._drained.wait()

    def _force(self, message: dict[str, Any]) -> None:
        frame = encode_frame(message)
        if frame is not None:
            self.outbox.force_control(frame)

    # ------------------------------------------------------------------ reading (§3)

    def _readable(self) -> None:
        try:
            data = os.read(self.stdin, min(READ_BYTES, self.splitter.room))  # never buffer past a frame
        except BlockingIOError:
            return
        except OSError as exc:
            log.error("stdin failed: %s", exc)
            self._stop(EXIT_FATAL, True)
            return
        self._feed(data)
        if self.poll_ns and data:
            self._poll()

    # decisions-stdio.md: a pipe write that wakes a reader sleeping in epoll costs the writer 15-30 µs on a
    # virtual machine (an inter-processor interrupt) and the reader as much again before it runs. After a
    # chunk, while nothing else is ready to run (no runnable guest, no ready callback, nothing left to
    # write), stdin is read without blocking for up to ``poll_ns``; each chunk that arrives restarts the
    # wait, and one polling session ends after POLL_SESSION_NS so timers are never held back longer.
    # Each empty read yields the core (``sched_yield``): a client on the same core is not starved.
    def _poll(self) -> None:
        ready = self._ready
        if ready is None:
            return
        sched = self.rt.scheduler
        now = time.monotonic_ns()
        deadline, end = now + self.poll_ns, now + POLL_SESSION_NS
        while not ready and not sched.has_work() and not self._writer_armed and not self._flush_soon:
            if self._stopping is None or self._stopping.done():
                return
            try:
                data = os.read(self.stdin, min(READ_BYTES, self.splitter.room))
            except BlockingIOError:
                now = time.monotonic_ns()
                if now >= deadline:
                    return
                os.sched_yield()  # a client sharing this core runs now, not at the next tick
                continue
            except OSError:
                return  # the loop's reader reports it
            self._feed(data)
            if not data:
                return
            now = time.monotonic_ns()
            if now >= end:
                return
            deadline = now + self.poll_ns

    def _read_blocking(self, loop: asyncio.AbstractEventLoop) -> None:
        """Reader thread for a stdin that cannot be polled (a regular file, only with --allow-any-stdio)."""
        while True:
            try:
                data = os.read(self.stdin, READ_BYTES)
            except OSError:
                data = b""
            with contextlib.suppress(RuntimeError):  # the loop is gone
                loop.call_soon_threadsafe(self._feed, data)
            if not data:
                return

    def _feed(self, data: bytes) -> None:
        if self._stopping is None or self._stopping.done():
            return
        if not data:  # §3: EOF inside a line is fatal; EOF between frames is a clean end (§12)
            self._stop(EXIT_FATAL if self.splitter.partial else EXIT_OK, True)
            return
        self._feeding = True
        try:
            for line in self.splitter.feed(data):
                self._dispatch(line)
                if self._stopping is not None and self._stopping.done():
                    return
        except FrameTooLong as exc:
            log.error("fatal framing error: %s", exc)
            self._stop(EXIT_FATAL, True)
        except _Fatal as exc:
            # §4: the session closes. Not a framing error nor a broken stdout (§2), so the exit code is 0, as
            # spinfoam's (docs/spinfoam-compat.md, issue 21): the reader stalled, the process did nothing wrong
            log.error("closing the session: %s", exc)
            self._stop(EXIT_OK, True)
        finally:
            self._feeding = False
            self._slots -= len(self._answered)
            self._answered.clear()
        self._write_now()

    def _write_now(self) -> None:
        """One coalesced write of what the chunk queued (inline answers first), before the guests run (§10)."""
        if not self._writer_armed and not self._broken and self.outbox.has_frames():
            self._flush()

    # ------------------------------------------------------------------ dispatch (§4)

    def _dispatch(self, line: bytes) -> None:
        """Steps 1-9 of §4 here; steps 10-12 and the method run in the request's task."""
        try:
            msg = parse_frame(line)  # step 1 (RecursionError, NaN, surrogates, bad UTF-8 included)
        except jsonval.JsonError as exc:
            self._early(None, "PARSE_ERROR", f"parse error: {exc.message}")
            return
        if type(msg) is not dict or msg.get("jsonrpc") != "2.0":  # step 2
            self._early(None, "INVALID_REQUEST", "not a JSON-RPC 2.0 object")
            return
        if "method" not in msg and "id" in msg and ("result" in msg or "error" in msg):  # step 3
            self.calls.reply(msg)
            return
        method = msg.get("method")
        if type(method) is not str:  # step 4
            self._early(None, "INVALID_REQUEST", "method missing or not a string")
            return
        request_id = msg.get("id", _ABSENT)
        # step 5 (an ASCII id's length is its UTF-8 length: ``isascii`` is O(1), no encoding)
        if request_id is not _ABSENT and (type(request_id) is not str or (
                (len(request_id) > MAX_ID_BYTES or not request_id.isascii()) and utf8_len(request_id) > MAX_ID_BYTES)):
            self._early(None, "INVALID_REQUEST", "id must be a string of at most 128 bytes")
            return
        params = msg.get("params", {})  # step 6
        if request_id is _ABSENT:  # step 7: notifications are ignored
            return
        self._admit(request_id, method, params)

    def _admit(self, request_id: str, method: str, params: Any) -> None:
        if request_id in self._outstanding or request_id in self._answered:  # step 8
            self._early(request_id, "DUPLICATE_ID", f"request id {request_id!r} is still outstanding")
            return
        compile_ = method == "sf.build.compile"
        if (self._slots >= REQUEST_SLOTS and not compile_) or (compile_ and len(self._compiles) >= MAX_COMPILES):
            self.busy += 1  # step 9
            self._early(request_id, "BUSY", "too many requests")
            return
        if self.initialized and not self._outstanding and method in self.methods.inline:
            self._inline(request_id, method, params)
            return
        sched = self.rt.scheduler
        arrival = (sched.batches, sched.total_slices)
        self._track(request_id, self._request(request_id, method, params, arrival), compile_)

    def _track(self, request_id: str, work: Coroutine[Any, Any, None], compile_: bool) -> None:
        """Run ``work`` as the request's task; it holds a slot (or a compile place) until it ends (§4 step 9)."""
        task = asyncio.get_running_loop().create_task(work)
        self._outstanding[request_id] = task
        if compile_:
            self._compiles[request_id] = task
        else:
            self._slots += 1
        task.add_done_callback(lambda _t: self._release(request_id, compile_))

    def _release(self, request_id: str, compile_: bool) -> None:
        if self._outstanding.pop(request_id, None) is not None and not compile_:
            self._slots -= 1
        self._compiles.pop(request_id, None)

    def _early(self, request_id: str | None, kind: str, message: str) -> None:
        """An error of steps 1-9: queued now, or the session closes (§4)."""
        frame = encode_frame(error_frame(request_id, kind, message))
        assert frame is not None  # ids ≤ 128 bytes and short messages
        if self.outbox.offer_control(frame):
            return
        if not self._writer_armed and not self._broken:
            self._flush()  # the pipe may still take bytes: make room before giving up
        if not self.outbox.offer_control(frame):
            raise _Fatal(f"control queue full: cannot answer {kind}")

    # §4 steps 10-12 for a method that never waits, while no other request is outstanding (so no request
    # that arrived earlier can observe it out of order): answered now, no task. Its slot and id are held
    # until the chunk it came in is dispatched, as a task's were (a pipelined burst sees the same BUSY and
    # DUPLICATE_ID answers); a response that finds the control queue full waits in a task (§10)
    def _inline(self, request_id: str, method: str, params: Any) -> None:
        try:
            decoded = self.methods.decode(method, params)  # step 12
            frame = encode_response(request_id, self.methods.inline[method](decoded))
        except Exception as exc:  # answered as _answer does
            frame = _encode(request_id, self._failure(method, exc))
        if frame is None:
            frame = _encode(request_id, None)
        if self.outbox.offer_control(frame):
            self.handled += 1
            self._answered.add(request_id)
            self._slots += 1
        else:
            self._track(request_id, self._queue(frame), False)

    async def _queue(self, frame: bytes) -> None:
        await self.outbox.put_control(frame)
        self.handled += 1

    async def _request(self, request_id: str, method: str, params: Any, arrival: tuple[int, int]) -> None:
        message = await self._answer(method, params)
        if message is None:
            return
        self._note_wait(arrival)
        frame = _encode(request_id, message)
        if method == "sf.build.compile" and self._stopping is not None and self._stopping.done():
            return  # §12: the shutdown answers it ``cancelled``
        await self.outbox.put_control(frame)
        self.handled += 1
        if method == "sf.shutdown" and self.shutdown_requested:
            self._release(request_id, False)
            self._stop(EXIT_OK, True)

    async def _answer(self, method: str, params: Any) -> dict[str, Any] | None:
        """Steps 10-12 and the method: a response (id filled in later) or an error response."""
        try:
            if not self.initialized and method != "sf.initialize":  # step 10
                return error_frame(None, "NOT_INITIALIZED", "not initialized")
            if method not in self.methods.table:  # step 11
                return error_frame(None, "METHOD_NOT_FOUND", f"method not found: {method}")
            decoded = self.methods.decode(method, params)  # step 12
            return {"result": await self.methods.table[method](decoded)}
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._failure(method, exc)

    @staticmethod
    def _failure(method: str, exc: Exception) -> dict[str, Any]:
        """The error response (id filled in later) for a method that raised (§5)."""
        if isinstance(exc, WakefulError) and exc.code != "internal":
            kind = exc.wire_code  # the §5 kind of the error's code (wakeful.errors)
            return error_frame(None, kind if kind is not None and kind in RPC_CODES else "INTERNAL", str(exc))
        log.error("internal error in %s", method, exc_info=exc)  # a wakeful bug: answered, never a dead session
        return error_frame(None, "INTERNAL", f"internal error: {type(exc).__name__}")

    def _note_wait(self, arrival: tuple[int, int]) -> None:
        sched = self.rt.scheduler
        self.max_batches_waited = max(self.max_batches_waited, sched.batches - arrival[0])
        self.max_slices_waited = max(self.max_slices_waited, sched.total_slices - arrival[1])

    def server_stats(self) -> dict[str, Any]:
        """Counters of ``wakeful.stats`` ``server`` (decisions-stdio.md)."""
        return {
            "requests_handled": self.handled, "busy": self.busy, "outstanding": len(self._outstanding),
            "max_batches_waited": self.max_batches_waited, "max_slices_waited": self.max_slices_waited,
            "host_calls_sent": self.calls.sent,
        }

    # ------------------------------------------------------------------ runtime callbacks (§7.1, §10, §11)

    def _on_state(self, status: ObjectStatus) -> None:
        self.calls.object_ended(status.object_id)
        self.outbox.purge(status.object_id)
        frame = encode_frame(notification("sf.object.state", status.to_json(detail=self.detail)))
        if frame is None:
            self.outbox.dropped += 1
        else:
            self.outbox.offer_control(frame)

    def _on_log(self, object_id: str, message: str) -> bool:
        frame = encode_frame(notification("sf.log", {"object_id": object_id, "message": message}))
        if frame is None:
            self.outbox.dropped += 1
            return False
        return self.outbox.offer_data(DataFrame(object_id, frame))

    # ------------------------------------------------------------------ writing (§10)

    def _frames_ready(self) -> None:
        if self._flush_soon or self._writer_armed or self._broken or self._feeding:
            return  # while feeding: the chunk's end writes (``_write_now``)
        self._flush_soon = True
        asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_soon = False
        for _ in range(WRITES_PER_TURN):
            if not self._pending_write:
                self._pending_write = self.outbox.take()
                if not self._pending_write:
                    self._disarm_writer()
                    if self._drained is not None:
                        self._drained.set()
                    return
            try:
                written = os.write(self.stdout, self._pending_write)
            except BlockingIOError:
                self._arm_writer()
                return
            except OSError as exc:  # §12: a broken stdout ends the session with exit 1
                log.error("stdout failed: %s", exc)
                self._pending_write = b""
                self._broken = True
                self._disarm_writer()
                self._stop(EXIT_FATAL, False)
                if self._drained is not None:  # a flush in progress stops waiting
                    self._drained.set()
                return
            self._pending_write = self._pending_write[written:]
        self._disarm_writer()
        self._frames_ready()

    def _arm_writer(self) -> None:
        if not self._writer_armed:
            asyncio.get_running_loop().add_writer(self.stdout, self._writable)
            self._writer_armed = True

    def _disarm_writer(self) -> None:
        if self._writer_armed:
            asyncio.get_running_loop().remove_writer(self.stdout)
            self._writer_armed = False

    def _writable(self) -> None:
        self._disarm_writer()
        self._flush()


def _encode(request_id: str, message: dict[str, Any] | None) -> bytes:
    """The response frame for ``message`` (``{"result": …}`` or an error frame; ``None``: too large) (§3)."""
    if message is not None and "result" in message:
        frame = encode_response(request_id, message["result"])
    elif message is not None:
        message["id"] = request_id
        frame = encode_frame(message)
    else:
        frame = None
    if frame is None:  # §3: a response over the frame limit becomes -32003 with the same id
        frame = encode_frame(error_frame(request_id, "RESPONSE_TOO_LARGE", "response too large"))
    assert frame is not None  # ids ≤ 128 bytes and a short message
    return frame


# ---------------------------------------------------------------------- process (§2)


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, exit_on_error=False,
                                description="stdio JSON-RPC runtime (spinfoam protocol v1)")
    p.add_argument("--enable-builds", action="store_true")
    p.add_argument("--dump-sdk", action="store_true")
    p.add_argument("--max-objects", type=int, default=10_000)
    p.add_argument("--max-elf-bytes", type=int, default=65_536)
    p.add_argument("--max-instructions", type=int, default=8_192)
    p.add_argument("--max-image-bytes", type=int, default=65_536)
    p.add_argument("--slice-insns", type=int, default=SLICE_INSNS)
    p.add_argument("--engine", choices=("translate", "interp"), default="translate")
    p.add_argument("--poll-us", type=int, default=POLL_US)
    p.add_argument("--build-workers", type=int, default=2)
    # decisions-stdio.md (issue 21): no build state across processes unless asked for — DIR, `on`
    # (<build root>/cache/) or `off` (the default)
    p.add_argument("--build-cache", default="off")
    p.add_argument("--allow-any-stdio", action="store_true")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error", "critical"))
    return p


# vm.md §1 option bounds (None: no upper bound)
_BOUNDS: dict[str, int | None] = {
    "max_objects": None, "max_elf_bytes": 1 << 20, "max_instructions": 65_536, "max_image_bytes": 1 << 20,
    "slice_insns": None, "build_workers": None,
}


def _options(args: argparse.Namespace) -> RuntimeOptions:
    for name, upper in _BOUNDS.items():
        value = getattr(args, name)
        if value < 1 or (upper is not None and value > upper):
            bound = f"1..{upper}" if upper is not None else "at least 1"
            raise ValueError(f"--{name.replace('_', '-')} must be {bound}")
    return RuntimeOptions(
        max_objects=args.max_objects, max_elf_bytes=args.max_elf_bytes,
        max_instructions=args.max_instructions, max_image_bytes=args.max_image_bytes,
        slice_insns=args.slice_insns, engine=args.engine, enable_builds=args.enable_builds,
        build_workers=args.build_workers, build_cache=None if args.build_cache == "on" else args.build_cache,
    )


# §2: stdin and stdout must be pipes, FIFOs or Unix sockets
def _stdio_ok(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def main(argv: Sequence[str] | None = None, *, prog: str = "wakeful runtime", spinfoam: bool = False) -> int:
    """Run the stdio runtime; returns the exit code of §2 (0, 1 fatal, 2 usage/startup).

    ``spinfoam``: the drop-in entry point `wakeful-spinfoam` (docs/spinfoam-compat.md): the same server and
    options, but ``--dump-sdk`` prints spinfoam.h (spinfoam's ABI 1 only) instead of wakeful.h.
    """
    try:
        args = _parser(prog).parse_args(list(sys.argv[1:] if argv is None else argv))
        options = _options(args)
    except (argparse.ArgumentError, ValueError) as exc:
        sys.stderr.write(f"{prog}: {exc}\n")
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    if args.dump_sdk:
        from wakeful import sdk

        sys.stdout.write(sdk.spinfoam_header_text() if spinfoam else sdk.header_text())
        sys.stdout.flush()
        return EXIT_OK
    if not args.allow_any_stdio and not (_stdio_ok(STDIN) and _stdio_ok(STDOUT)):
        sys.stderr.write(f"{prog}: stdin and stdout must be pipes, FIFOs or sockets\n")
        return EXIT_USAGE
    if not 0 <= args.poll_us <= 10_000:
        sys.stderr.write(f"{prog}: --poll-us must be 0..10000\n")
        return EXIT_USAGE
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    return _serve(options, args.poll_us)


def _serve(options: RuntimeOptions, poll_us: int = POLL_US) -> int:
    """Switch stdin/stdout to non-blocking, run a session, restore their flags (§2)."""
    flags = {fd: fcntl.fcntl(fd, fcntl.F_GETFL) for fd in (STDIN, STDOUT)}
    try:
        for fd in flags:
            os.set_blocking(fd, False)
        return asyncio.run(Session(options, poll_us=poll_us).run())
    finally:
        for fd, value in flags.items():
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETFL, value)


if __name__ == "__main__":
    sys.exit(main())
