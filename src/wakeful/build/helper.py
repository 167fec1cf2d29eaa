"""The long-lived build-helper process (build.md §5.2) and the runtime-side client that talks to it.

The helper (``python -m wakeful.build.helper``) restricts itself with Landlock, then forks one confined,
rate-limited process group per compiler step and reports its exit; the client never forks the runtime's heap.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import itertools
import json
import os
import resource
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from wakeful.build import sandbox
from wakeful.errors import WakefulError

CAPTURE_BYTES = 65_536  # build.md §5.2: 64 KiB kept per stream
MiB = 1 << 20
STAGING_PREFIX = "s"


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-step resource limits (build.md §5.2); tests lower ``cpu_seconds`` through a Builder hook."""

    cpu_seconds: int = 10
    memory_bytes: int = 1 << 30
    file_bytes: int = 4 * MiB
    open_files: int = 256


# =========================================================================== the helper process


@dataclass
class _Job:
    ident: int
    pid: int
    deadline: float
    started: float
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    open_pipes: int = 2
    killed: bool = False


class HelperServer:
    """The helper's select loop: requests on stdin, one JSON line per answer on stdout."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.zig_dir: str = config["zig_dir"]
        self.build_root: str = config["build_root"]
        self.landlock: bool = config["landlock"]
        self.devnull = os.open(os.devnull, os.O_RDONLY)  # opened before the restriction (§5.2)
        self.nproc = _user_process_count() + 16
        self.abi = 0
        self.level = "scan"
        self.reason: str | None = "Landlock switched off by a test hook"
        self.jobs: dict[int, _Job] = {}
        self.by_fd: dict[int, tuple[_Job, bool]] = {}
        self.sel = selectors.DefaultSelector()
        self.inbuf = b""

    # build.md §5.3: prove Landlock with a canary before claiming it, then restrict the helper itself
    def start(self) -> None:
        remove_leftovers(self.build_root)
        if self.landlock:
            self._start_landlock()
        self._send({"ready": True, "sandbox_level": self.level, "sandbox_reason": self.reason, "abi": self.abi})

    def _start_landlock(self) -> None:
        try:
            self.abi = sandbox.abi_version()
            canary_proved = landlock_self_test(self.zig_dir, self.build_root, self.abi)
            if not canary_proved:
                self.reason = "Landlock self-test: the canary file outside the build tree was readable"
                return
            sandbox.restrict(sandbox.helper_rules(self.zig_dir, self.build_root), self.abi)
        except OSError as exc:
            self.reason = f"Landlock unavailable: {exc}"
            return
        self.level, self.reason = "landlock", None

    def serve(self) -> None:
        os.set_blocking(0, False)
        self.sel.register(0, selectors.EVENT_READ, None)
        while True:
            timeout = self._next_timeout()
            for key, _ in self.sel.select(timeout):
                if key.fd == 0:
                    if not self._read_requests():
                        self._shutdown()
                        return
                else:
                    self._read_pipe(key.fd)
            self._enforce_deadlines()

    def _next_timeout(self) -> float | None:
        if not self.jobs:
            return None
        return max(0.0, min(j.deadline for j in self.jobs.values()) - time.monotonic())

    def _read_requests(self) -> bool:
        try:
            chunk = os.read(0, 65536)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        self.inbuf += chunk
        while b"\n" in self.inbuf:
            line, self.inbuf = self.inbuf.split(b"\n", 1)
            self._handle(json.loads(line))
        return True

    def _handle(self, req: dict[str, Any]) -> None:
        if "kill" in req:
            job = self.jobs.get(req["kill"])
            if job is not None:
                _killpg(job.pid)
                job.killed = True
            return
        try:
            self._spawn(req)
        except OSError as exc:
            self._send({"id": req["id"], "status": "error", "message": f"could not start the compiler: {exc}"})

    # build.md §5.2: fork per step; the child calls setsid, sets limits, adds its Landlock domain and execs
    def _spawn(self, req: dict[str, Any]) -> None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        limits = Limits(**req.get("limits", {}))
        staging = req["staging"]
        env = compiler_env(staging)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child until exec
            self._child(req["argv"], staging, env, limits, out_w, err_w)
        os.close(out_w)
        os.close(err_w)
        now = time.monotonic()
        job = _Job(req["id"], pid, now + float(req["timeout"]), now)
        self.jobs[job.ident] = job
        for fd, is_err in ((out_r, False), (err_r, True)):
            os.set_blocking(fd, False)
            self.by_fd[fd] = (job, is_err)
            self.sel.register(fd, selectors.EVENT_READ, None)

    def _child(
        self, argv: list[str], staging: str, env: dict[str, str], limits: Limits, out_w: int, err_w: int
    ) -> None:  # pragma: no cover - runs in the forked child
        try:
            os.setsid()
            os.chdir(staging)
            os.dup2(self.devnull, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.closerange(3, 65536)
            sandbox.die_with_parent()
            for sig in (signal.SIGXFSZ, signal.SIGPIPE):  # Python ignores these; exec would inherit that
                signal.signal(sig, signal.SIG_DFL)
            _set_limits(limits, self.nproc)
            if self.level == "landlock":
                sandbox.restrict(sandbox.step_rules(self.zig_dir, staging), self.abi)
            os.execve(argv[0], argv, env)
        except BaseException as exc:  # noqa: BLE001 - nothing may escape a forked child
            with contextlib.suppress(Exception):
                os.write(2, f"wakeful build helper: could not start the compiler: {exc}\n".encode())
        os._exit(127)

    def _read_pipe(self, fd: int) -> None:
        job, is_err = self.by_fd[fd]
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        if chunk:
            buf = job.err if is_err else job.out
            room = CAPTURE_BYTES - len(buf)
            buf += chunk[: max(room, 0)]
            job.truncated = job.truncated or len(chunk) > room
            return
        self.sel.unregister(fd)
        os.close(fd)
        del self.by_fd[fd]
        job.open_pipes -= 1
        if job.open_pipes == 0:
            self._finish(job)

    # build.md §5.2: the wall deadline kills the whole process group
    def _enforce_deadlines(self) -> None:
        now = time.monotonic()
        for job in list(self.jobs.values()):
            if now >= job.deadline and not job.killed:
                job.killed = True
                _killpg(job.pid)

    def _finish(self, job: _Job) -> None:
        _killpg(job.pid)  # stragglers of the group, while the leader's zombie still holds the group id
        _, status = os.waitpid(job.pid, 0)
        del self.jobs[job.ident]
        answer: dict[str, Any] = {
            "id": job.ident,
            "stdout": job.out.decode("utf-8", "replace"),
            "stderr": job.err.decode("utf-8", "replace"),
            "truncated": job.truncated,
            "elapsed": time.monotonic() - job.started,
        }
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            deadline = sig == signal.SIGKILL and time.monotonic() >= job.deadline
            answer.update(status="deadline" if deadline else "signal", signal=sig)
        else:
            answer.update(status="exit", code=os.WEXITSTATUS(status))
        self._send(answer)

    def _shutdown(self) -> None:
        for job in self.jobs.values():
            _killpg(job.pid)
        for job in self.jobs.values():
            with contextlib.suppress(ChildProcessError):
                os.waitpid(job.pid, 0)

    def _send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            try:
                data = data[os.write(1, data) :]
            except BlockingIOError:
                time.sleep(0.001)


def compiler_env(staging: str) -> dict[str, str]:
    """build.md §5.2: the environment rebuilt from nothing, caches and temp files inside the staging tree."""
    tmp = os.path.join(staging, "tmp")
    return {
        "PATH": "",
        "HOME": tmp,
        "TMPDIR": tmp,
        "LANG": "C",
        "LC_ALL": "C",
        "SOURCE_DATE_EPOCH": "0",
        "ZIG_GLOBAL_CACHE_DIR": os.path.join(tmp, "zig-global-cache"),
        "ZIG_LOCAL_CACHE_DIR": os.path.join(tmp, "zig-local-cache"),
    }


# build.md §5.2 limits table
def _set_limits(limits: Limits, nproc: int) -> None:  # pragma: no cover - runs in the forked child
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 2))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _user_process_count() -> int:
    uid = os.getuid()
    count = 0
    with contextlib.suppress(OSError), os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    count += entry.stat().st_uid == uid
    return count


def remove_leftovers(build_root: str) -> None:
    """build.md §5.1: remove staging directories whose owning process is gone (crashed builders)."""
    tmp = os.path.join(build_root, "tmp")
    with contextlib.suppress(FileNotFoundError), os.scandir(tmp) as entries:
        for entry in entries:
            owner = entry.name[len(STAGING_PREFIX) :].split("-", 1)[0]
            if entry.name.startswith(STAGING_PREFIX) and owner.isdigit() and not _alive(int(owner)):
                shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def landlock_self_test(zig_dir: str, build_root: str, abi: int) -> bool:
    """build.md §5.3: a forked child under the step rules must fail to read a canary outside the tree."""
    canary_dir = tempfile.mkdtemp(prefix="wakeful-canary-", dir=os.path.dirname(build_root))
    probe_tree = ""
    try:
        canary = os.path.join(canary_dir, "canary")
        with open(canary, "w") as f:
            f.write(secrets.token_hex(16))
        probe_tree = tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-probe", dir=os.path.join(build_root, "tmp"))
        for sub in ("out", "tmp"):
            os.mkdir(os.path.join(probe_tree, sub))
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            code = 3
            with contextlib.suppress(BaseException):
                sandbox.restrict(sandbox.step_rules(zig_dir, probe_tree), abi)
                try:
                    os.close(os.open(canary, os.O_RDONLY))
                    code = 1
                except PermissionError:
                    code = 0
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    finally:
        shutil.rmtree(canary_dir, ignore_errors=True)
        if probe_tree:
            shutil.rmtree(probe_tree, ignore_errors=True)


def main() -> None:
    """Entry point of the helper process: the JSON config is argv[1]."""
    server = HelperServer(json.loads(sys.argv[1]))
    server.start()
    server.serve()


# =========================================================================== the client (runtime side)


class HelperDied(WakefulError):
    """The build helper exited while a step was in flight (build.md §5.2: ``internal``)."""


class HelperClient:
    """Spawns the helper plainly (no ``preexec_fn``) and multiplexes steps over its pipes from any thread."""

    def __init__(self, zig_dir: str, build_root: Path, *, landlock: bool) -> None:
        self.zig_dir = zig_dir
        self.build_root = build_root
        self.landlock = landlock
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._pending: dict[int, concurrent.futures.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self.ready: dict[str, Any] = {}

    def start(self) -> None:
        """Start the helper if it is not running (also after it died) and wait for its ready line."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            self._spawn()

    def _spawn(self) -> None:
        config = {"zig_dir": self.zig_dir, "build_root": str(self.build_root), "landlock": self.landlock}
        package_root = str(Path(__file__).resolve().parents[2])
        env = {"PYTHONPATH": package_root, "LANG": "C", "LC_ALL": "C", "PATH": ""}
        log_path = self.build_root / "helper.log"
        with open(log_path, "wb") as log:  # the helper's own errors, for `wakeful doctor` and bug reports
            proc = subprocess.Popen(
                [sys.executable, "-m", "wakeful.build.helper", json.dumps(config)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                cwd=str(self.build_root), close_fds=True,
            )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            proc.wait()
            proc.stdout.close()
            if proc.stdin is not None:
                proc.stdin.close()
            last = (log_path.read_text(errors="replace").strip().splitlines() or [""])[-1][:200]
            raise HelperDied(f"the build helper did not start (exit status {proc.returncode}) {last}".strip())
        self.ready = json.loads(line)
        self._proc = proc
        threading.Thread(target=self._reader, args=(proc, proc.stdout), daemon=True).start()

    def _reader(self, proc: subprocess.Popen[bytes], stream: BinaryIO) -> None:
        with contextlib.suppress(ValueError, OSError):
            for line in stream:
                answer = json.loads(line)
                with self._lock:
                    fut = self._pending.pop(answer["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(answer)
        stream.close()
        proc.wait()
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        with self._lock:
            pending, self._pending = self._pending, {}
            if self._proc is proc:
                self._proc = None
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(HelperDied("the build helper died during the build"))

    def submit(
        self, argv: list[str], staging: Path, timeout: float, limits: Limits
    ) -> tuple[int, concurrent.futures.Future[dict[str, Any]]]:
        """Send one step; returns its id and a future of the helper's answer."""
        self.start()
        fut: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        limit_fields = {"cpu_seconds": limits.cpu_seconds, "memory_bytes": limits.memory_bytes,
                        "file_bytes": limits.file_bytes, "open_files": limits.open_files}
        with self._lock:
            ident = next(self._ids)
            proc = self._proc
            if proc is None or proc.stdin is None:
                raise HelperDied("the build helper is not running")
            self._pending[ident] = fut
            request = {"id": ident, "argv": argv, "staging": str(staging), "timeout": timeout,
                       "limits": limit_fields}
            self._write(proc, request, ident)
        return ident, fut

    def _write(self, proc: subprocess.Popen[bytes], message: dict[str, Any], ident: int) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            fut = self._pending.pop(ident, None)
            if fut is not None:
                fut.set_exception(HelperDied("the build helper died"))

    def kill(self, ident: int) -> None:
        """Kill a running step's process group (cancellation)."""
        with self._lock:
            proc = self._proc
            if proc is not None and proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.write((json.dumps({"kill": ident}) + "\n").encode())
                    proc.stdin.flush()

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None else None

    def close(self) -> None:
        """Stop the helper: closing its stdin makes it kill every running group and exit."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _errno_name(code: int) -> str:
    return errno.errorcode.get(code, str(code))


if __name__ == "__main__":
    main()
