"""The compiler driver (build.md §1, §2, §5, §9): ``Builder.compile(request) → BuildResult`` and the probe.

Validates, scans, stages, runs both compiler steps through the build helper, checks and rewrites the
preprocessed text, collects and verifies the object, shapes diagnostics and uses the cache.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import importlib.resources
import importlib.util
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import wakeful
from wakeful.build import diagnostics
from wakeful.build.bundle import Bundle, validate
from wakeful.build.cache import BuildCache, cache_key
from wakeful.build.helper import STAGING_PREFIX, HelperClient, HelperDied, Limits
from wakeful.build.hints import sdk_names
from wakeful.build.lines import MAX_DEBUG_OBJECT_BYTES, LineTable, build_line_table
from wakeful.build.scan import check_preprocessed, forbidden_predefined, scan_bundle
from wakeful.errors import BuildBusy, BuildUnavailable, InvalidObject, WakefulError
from wakeful.vm.linked import VerifyReport

# build.md §2 fingerprint: 2 since the error text puts the wakeful: rules first (issue 18), so a cached failure
# with the old text is never served
BUILD_FORMAT = 2
MAX_OBJECT_BYTES = 65_536
MAX_PREPROCESSED_BYTES = 4 << 20
QUEUE_DEPTH = 32
PINNED = ("0.17.1", "22.1.8")
# build.md §8, tightened by issue 21 (docs/decisions-build.md): only failures that depend on the source alone
# are cached. Limit failures (deadline, cpu_limit, memory, too_large: output size) depend on the load and the
# limits of the moment and are never cached, nor are crashes, internal failures and cancellations
CACHED_FAILURES = frozenset({"scan", "compiler_error", "verifier"})

# build.md §2.1, exactly in this order; <zig>, <entry> and <staging> are placeholders
PREPROCESS = (
    "<zig> clang --target=bpfel -x c -std=gnu17 -O2 -mcpu=v4 -ffreestanding -fno-raw-string-literals -nostdinc "
    "--no-default-config -I src -I sdk -Wall -fno-color-diagnostics -ferror-limit=20 -fmacro-backtrace-limit=4 "
    "-fno-crash-diagnostics -ffile-prefix-map=<staging>/= -E src/<entry> -o out/pp.i"
)
COMPILE = (
    "<zig> clang --target=bpfel -x cpp-output -std=gnu17 -O2 -mcpu=v4 -ffreestanding -fno-raw-string-literals "
    "-nostdinc --no-default-config -mllvm -bpf-stack-size=4096 -fno-builtin -fno-common -fno-jump-tables "
    "-fno-unwind-tables -fno-asynchronous-unwind-tables -Wall -fno-color-diagnostics -ferror-limit=20 "
    "-fno-crash-diagnostics -ffile-prefix-map=<staging>/= -c out/main.i -o out/main.o"
)
# issue 18: the compile step again with debug line information, for the line table only (build/lines.py); the
# returned ELF stays the plain compile's, byte for byte
LINES = COMPILE.replace(" -c out/main.i -o out/main.o", " -g -gdwarf-4 -c out/main.i -o out/lines.o")
FAILURE_TEXT = {
    "deadline": "compiler exceeded 15 second deadline",
    "cpu_limit": "compiler exceeded its CPU limit",
    "memory": "compiler ran out of memory",
    "too_large": "compiler output too large",
}


def command_line(template: str, zig: str, entry: str, staging: str) -> list[str]:
    """Fill a §2.1 template; every placeholder sits inside one argument."""
    return [a.replace("<zig>", zig).replace("<entry>", entry).replace("<staging>", staging)
            for a in template.split(" ")]


@dataclass(frozen=True)
class BuildOptions:
    """Builder settings (interfaces.md §7 ``build.*``) and the test suite's hooks (build.md §6)."""

    data_dir: Path | None = None  # build root = <data>/build (interfaces.md §7 when None)
    build_root: Path | None = None  # overrides data_dir
    enabled: bool = True
    workers: int = 2
    cache: bool = True
    cache_dir: Path | None = None
    cache_max_bytes: int = 256 << 20
    cache_max_entries: int = 50_000
    zig_path: str | None = None
    # test hooks: never set by a request or a config file
    scans: bool = True
    landlock: bool = True
    cpu_seconds: int = 10
    deadline_seconds: float = 15.0
    before_collect: Callable[[Path], None] | None = None
    keep_staging: Callable[[Path], None] | None = None  # called with the staging root before removal


@dataclass
class CompilerInfo:
    """The probe's outcome (build.md §2), reported by ``sf.initialize`` and ``wakeful doctor``."""

    available: bool
    reason: str | None
    fingerprint: str | None
    zig_version: str | None = None
    clang_version: str | None = None
    sandbox_level: str = "scan"
    sandbox_reason: str | None = None
    workers: int = 2
    cache: bool = True
    name: str = "zig-clang-bpf"
    target: str = "bpfel"
    embedded: bool = False
    predefined_forbidden: frozenset[str] = field(default_factory=frozenset, repr=False)

    @property
    def revision(self) -> str:
        return f"zig {self.zig_version} / clang {self.clang_version}"

    @property
    def pinned(self) -> bool:
        return (self.zig_version, self.clang_version) == PINNED

    def to_json(self) -> dict[str, Any]:
        return {"available": self.available, "reason": self.reason, "fingerprint": self.fingerprint,
                "name": self.name, "revision": self.revision, "target": self.target, "embedded": self.embedded}


BUILDS_DISABLED = "builds are disabled"


def disabled_info(reason: str = BUILDS_DISABLED, *, workers: int = 2, cache: bool = True,
                  zig_version: str | None = None, clang_version: str | None = None) -> CompilerInfo:
    """The probe's answer when builds are switched off. build.md §5.3 / runtime-protocol.md §13 know only the
    levels ``scan | landlock | namespace``: no OS layer is in force, so the level is ``scan`` and
    ``sandbox_reason`` says why (builds are disabled)."""
    return CompilerInfo(False, reason, None, zig_version=zig_version, clang_version=clang_version,
                        sandbox_level="scan", sandbox_reason=BUILDS_DISABLED, workers=workers, cache=cache)


@dataclass
class BuildResult:
    """build.md §1: the outcome of one build."""

    state: str
    elf: bytes | None = None
    sha256: str | None = None
    diagnostics: str = ""
    diagnostics_truncated: bool = False
    error: str | None = None
    failure: str | None = None
    toolchain: str | None = None
    cached: bool = False
    duration_ms: int = 0
    report: VerifyReport | None = None
    lines: LineTable | None = None  # issue 18: source lines of the ELF's instructions, bound to ``sha256``

    def to_record(self) -> dict[str, Any]:
        """The cached JSON form (without ``cached``, ``duration_ms`` and the ELF bytes)."""
        return {"state": self.state, "sha256": self.sha256, "diagnostics": self.diagnostics,
                "diagnostics_truncated": self.diagnostics_truncated, "error": self.error,
                "failure": self.failure, "toolchain": self.toolchain,
                "report": self.report.to_json() if self.report is not None else None,
                "lines": self.lines.to_json() if self.lines is not None else None}


class _Failed(WakefulError):
    """Internal: ends the pipeline with a failure kind and text."""

    def __init__(self, failure: str, text: str, truncated: bool = False) -> None:
        super().__init__(text)
        self.failure = failure
        self.text = text
        self.truncated = truncated


@dataclass
class _Run:
    """One build in progress."""

    bundle: Bundle
    staging: Path
    deadline: float
    stderr: list[str] = field(default_factory=list)
    truncated: bool = False
    cancel: Cancel = field(default_factory=lambda: Cancel())


class Cancel:
    """Shared between a waiting caller and its pipeline thread: a cancel request and the running step."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requested = False
        self.step_id: int | None = None


def default_data_dir() -> Path:
    """interfaces.md §7: ``$WAKEFUL_HOME``, else ``$XDG_DATA_HOME/wakeful``, else ``~/.local/share/wakeful``."""
    if os.environ.get("WAKEFUL_HOME"):
        return Path(os.environ["WAKEFUL_HOME"])
    if os.environ.get("XDG_DATA_HOME"):
        return Path(os.environ["XDG_DATA_HOME"]) / "wakeful"
    return Path.home() / ".local" / "share" / "wakeful"


def find_zig(explicit: str | None) -> str | None:
    """build.md §2: the ``zig`` inside the installed ``ziglang`` package, unless an operator set a path."""
    if explicit:
        return explicit
    spec = importlib.util.find_spec("ziglang")
    if spec is None or not spec.origin:
        return None
    return str(Path(spec.origin).parent / "zig")


def sdk_headers() -> dict[str, bytes]:
    """The SDK headers shipped as ``wakeful.sdk`` package data."""
    root = importlib.resources.files("wakeful.sdk") / "include"
    headers: dict[str, bytes] = {}
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for item in root.iterdir():
            if item.name.endswith(".h") and item.is_file():
                headers[item.name] = item.read_bytes()
    return dict(sorted(headers.items()))


def _verifier() -> Callable[[bytes], VerifyReport]:
    """The VM's ``verify_elf`` (vm.md §4.3); a missing VM is reported, not crashed on."""
    try:
        from wakeful.vm import verify_elf
    except ImportError as exc:
        raise BuildUnavailable(f"the VM verifier (wakeful.vm.verify_elf) is not available: {exc}") from None
    return verify_elf


class Builder:
    """C bundle → verified BPF ELF (build.md). One event loop at a time; thread-safe probe."""

    def __init__(self, options: BuildOptions | None = None) -> None:
        self.options = options or BuildOptions()
        self.build_root = self._make_build_root()
        self.zig = find_zig(self.options.zig_path)
        self.helper: HelperClient | None = None
        self._info: CompilerInfo | None = None
        self._probe_lock = threading.Lock()
        self._probing = False
        self._closing = False
        self._sdk: dict[str, bytes] = {}  # read once by the probe: the fingerprint covers exactly these bytes
        self._sdk_names: frozenset[str] = frozenset()  # the names they declare, for misspelling hints (§7)
        self.cache: BuildCache | None = None
        if self.options.cache:
            cache_dir = self.options.cache_dir or self.build_root / "cache"
            self.cache = BuildCache(cache_dir, max_bytes=self.options.cache_max_bytes,
                                    max_entries=self.options.cache_max_entries)
        self._inflight: dict[tuple[int, str], asyncio.Future[BuildResult]] = {}
        self._workers = concurrent.futures.ThreadPoolExecutor(self.options.workers, "wakeful-build")
        self._count_lock = threading.Lock()
        self._outstanding = 0  # running + waiting builds
        self.compiles = 0  # fresh pipelines run (tests: concurrent identical requests compile once)
        if self.options.enabled and self.zig is not None:
            self.helper = HelperClient(str(Path(self.zig).parent), self.build_root, landlock=self.options.landlock)
            with contextlib.suppress(Exception):
                self.helper.start()

    # build.md §5.1: <data>/build with tmp/ and cache/, mode 0700
    def _make_build_root(self) -> Path:
        root = self.options.build_root or (self.options.data_dir or default_data_dir()) / "build"
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(root, 0o700)
        for sub in ("tmp", "cache"):
            (root / sub).mkdir(mode=0o700, exist_ok=True)
        return root.resolve()

    def close(self) -> None:
        """Stop the build helper; running steps are killed with their process groups and end ``cancelled``."""
        self._closing = True
        if self.helper is not None:
            self.helper.close()
        self._workers.shutdown(wait=False, cancel_futures=True)

    def stats(self) -> dict[str, int]:
        """Counters for ``wakeful.stats`` (runtime-protocol.md §13): running, queued, cache hits/misses/bytes."""
        with self._count_lock:
            outstanding = self._outstanding
        workers = self.options.workers
        cache = self.cache.stats() if self.cache is not None else {"hits": 0, "misses": 0, "bytes": 0, "entries": 0}
        return {"running": min(outstanding, workers), "queued": max(0, outstanding - workers),
                "cache_hits": cache["hits"], "cache_misses": cache["misses"], "cache_bytes": cache["bytes"],
                "cache_entries": cache["entries"]}

    def __enter__(self) -> Builder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ probe (§2)

    def info(self) -> CompilerInfo:
        """The toolchain probe, run once per Builder (blocking) and cached."""
        with self._probe_lock:
            if self._info is None:
                self._info = self._probe()
            return self._info

    def _probe(self) -> CompilerInfo:
        opts = self.options
        if not opts.enabled:
            return disabled_info(workers=opts.workers, cache=opts.cache)
        info = CompilerInfo(False, None, None, workers=opts.workers, cache=opts.cache)
        try:
            self._probe_into(info)
        except (_ProbeError, HelperDied, OSError, BuildUnavailable) as exc:
            info.available = False
            info.reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            # build.md §5.3: a reason whenever Landlock is not in force
            if info.sandbox_level != "landlock" and info.sandbox_reason is None:
                info.sandbox_reason = f"builds are unavailable: {info.reason}"
        return info

    def _probe_into(self, info: CompilerInfo) -> None:
        if self.zig is None or not os.access(self.zig, os.X_OK):
            raise _ProbeError(f"zig compiler not found (ziglang package missing or {self.zig!r} not executable)")
        assert self.helper is not None
        self.helper.start()
        info.sandbox_level = self.helper.ready.get("sandbox_level", "scan")
        info.sandbox_reason = self.helper.ready.get("sandbox_reason")
        _verifier()
        with self._probe_staging() as staging:
            info.zig_version = self._probe_run([self.zig, "version"], staging).strip()
            clang = self._probe_run([self.zig, "clang", "--version"], staging)
            m = re.search(r"clang version (\S+)", clang)
            if not m:
                raise _ProbeError("could not read the clang version from 'zig clang --version'")
            info.clang_version = m.group(1)
            self._probe_search_dirs(staging)
            macros = self._probe_macros(staging)
        info.predefined_forbidden = forbidden_predefined(macros)
        self._sdk = sdk_headers()
        self._sdk_names = sdk_names(self._sdk)
        info.fingerprint = self._fingerprint(info)
        info.available = True
        self._info = info
        self._probing = True
        try:
            result = self._probe_compile({"sdk_version": 1, "entry": "probe.c",
                                          "files": {"probe.c": PROBE_SOURCE}})
        finally:
            self._probing = False
        if result.state != "succeeded":
            self._info = None
            raise _ProbeError(f"trivial probe compile failed ({result.failure}): {(result.error or '').strip()}")

    @contextlib.contextmanager
    def _probe_staging(self) -> Any:
        staging = self._stage(Bundle("empty.c", {"empty.c": ""}, {}), {})
        try:
            yield staging
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _probe_run(self, argv: list[str], staging: Path) -> str:
        assert self.helper is not None
        _, fut = self.helper.submit(argv, staging, 15.0, Limits())
        answer = fut.result(timeout=30)
        if answer.get("status") != "exit" or answer.get("code") != 0:
            raise _ProbeError(f"'{' '.join(argv[1:3])}' failed: {answer.get('stderr', '')[:200]!s}")
        return str(answer["stdout"]) + str(answer["stderr"])

    # build.md §2: the header search list must be exactly src then sdk
    def _probe_search_dirs(self, staging: Path) -> None:
        assert self.zig is not None
        argv = command_line(PREPROCESS, self.zig, "empty.c", str(staging))
        text = self._probe_run(argv[:2] + ["-v"] + argv[2:], staging)
        m = re.search(r"search starts here:\n(.*?)End of search list", text, re.S)
        dirs = [ln.strip() for ln in (m.group(1) if m else "").splitlines()
                if ln.startswith(" ")]
        if dirs != ["src", "sdk"]:
            raise _ProbeError(f"header search list is {dirs!r}, expected ['src', 'sdk']")

    # build.md §4.1: predefined macros count as source
    def _probe_macros(self, staging: Path) -> dict[str, str]:
        assert self.zig is not None
        argv = command_line(PREPROCESS, self.zig, "empty.c", str(staging))
        argv = [a for a in argv if a not in ("-o", "out/pp.i")]
        text = self._probe_run(argv[:2] + ["-dM"] + argv[2:], staging)
        macros: dict[str, str] = {}
        for line in text.splitlines():
            m = re.match(r"#define (\w+)(?:\([^)]*\))? ?(.*)", line)
            if m:
                macros[m.group(1)] = m.group(2)
        if not macros:
            raise _ProbeError("the predefined macro list (-dM -E) is empty")
        return macros

    # build.md §2 fingerprint
    def _fingerprint(self, info: CompilerInfo) -> str:
        assert self.zig is not None
        h = hashlib.sha256()
        parts = [f"build-format:{BUILD_FORMAT}", f"wakeful:{wakeful.__version__}", f"zig:{info.zig_version}",
                 f"clang:{info.clang_version}", f"zig-sha256:{self._zig_digest()}", PREPROCESS, COMPILE, LINES]
        for part in parts:
            h.update(part.encode() + b"\0")
        for name, data in self._sdk.items():
            h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        return h.hexdigest()

    def _zig_digest(self) -> str:
        assert self.zig is not None
        st = os.stat(self.zig)
        stamp = [self.zig, st.st_size, st.st_mtime_ns, st.st_ino]
        memo = self.build_root / "zig-sha256.json"
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            saved = json.loads(memo.read_text())
            if saved["stamp"] == stamp:
                return str(saved["sha256"])
        digest = hashlib.sha256(Path(self.zig).read_bytes()).hexdigest()
        tmp = memo.with_name(f".zig-sha256.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"stamp": stamp, "sha256": digest}))
        os.replace(tmp, memo)
        return digest

    # ------------------------------------------------------------------ compile (§1)

    async def compile(self, request: Mapping[str, Any]) -> BuildResult:
        """Run the pipeline of build.md §1; raises ``BundleError``, ``BuildUnavailable`` or ``BuildBusy``."""
        bundle = validate(request)
        info = self._info if self._info is not None else await asyncio.to_thread(self.info)
        if not info.available or info.fingerprint is None:
            raise BuildUnavailable(info.reason or "builds are unavailable")
        key = self._cache_key(info, bundle)
        flight = (id(asyncio.get_running_loop()), key)
        shared = self._inflight.get(flight)
        if shared is not None:
            result = await asyncio.shield(shared)
            return replace(result, cached=True)
        started = time.monotonic()
        hit = self._cache_get(key) if self.cache is not None else None
        if hit is not None:
            hit.duration_ms = int((time.monotonic() - started) * 1000)
            return hit
        future: asyncio.Future[BuildResult] = asyncio.get_running_loop().create_future()
        self._inflight[flight] = future
        try:
            result = await self._queued(bundle, info, key)
            future.set_result(result)
            return result
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # retrieved here; sharers re-raise it
            raise
        finally:
            del self._inflight[flight]

    # build.md §5.2: `build.workers` concurrent builds, 32 waiting, then BUSY; loop-independent
    async def _queued(self, bundle: Bundle, info: CompilerInfo, key: str) -> BuildResult:
        with self._count_lock:
            if self._outstanding >= self.options.workers + QUEUE_DEPTH:
                raise BuildBusy("build queue full")
            self._outstanding += 1
        try:
            loop = asyncio.get_running_loop()
            cancel = Cancel()
            work = loop.run_in_executor(self._workers, self._pipeline, bundle, info, cancel)
            try:
                result = await work
            except asyncio.CancelledError:
                self._cancel(cancel)
                raise
        finally:
            with self._count_lock:
                self._outstanding -= 1
        if self.cache is not None and (result.state == "succeeded" or result.failure in CACHED_FAILURES):
            await asyncio.to_thread(self.cache.put, key, result.to_record(), result.elf or b"")
        return result

    def compile_blocking(self, request: Mapping[str, Any], *, use_cache: bool = True) -> BuildResult:
        """Synchronous pipeline without queue or single-flight (probe and ``compile_sync``)."""
        bundle = validate(request)
        info = self._info if self._info is not None else self.info()
        if not info.available or info.fingerprint is None:
            raise BuildUnavailable(info.reason or "builds are unavailable")
        key = self._cache_key(info, bundle)
        if use_cache and self.cache is not None:
            hit = self._cache_get(key)
            if hit is not None:
                return hit
        result = self._pipeline(bundle, info)
        if use_cache and self.cache is not None and (
            result.state == "succeeded" or result.failure in CACHED_FAILURES
        ):
            self.cache.put(key, result.to_record(), result.elf or b"")
        return result

    def _cache_key(self, info: CompilerInfo, bundle: Bundle) -> str:
        """build.md §8 key, covering the compiler revision and every limit a result may depend on (issue 21)."""
        assert info.fingerprint is not None
        steps = Limits(cpu_seconds=self.options.cpu_seconds)
        limits = {"deadline_seconds": self.options.deadline_seconds, "cpu_seconds": steps.cpu_seconds,
                  "memory_bytes": steps.memory_bytes, "file_bytes": steps.file_bytes,
                  "object_bytes": MAX_OBJECT_BYTES, "preprocessed_bytes": MAX_PREPROCESSED_BYTES}
        return cache_key(info.fingerprint, bundle.request, revision=info.revision, limits=limits)

    def _probe_compile(self, request: Mapping[str, Any]) -> BuildResult:
        assert self._info is not None
        return self._pipeline(validate(request), self._info)

    def _cache_get(self, key: str) -> BuildResult | None:
        assert self.cache is not None
        entry = self.cache.get(key)
        if entry is None:
            return None
        record, elf = entry
        report = report_from_json(record["report"]) if record.get("report") else None
        lines = LineTable.from_json(record["lines"]) if record.get("lines") else None
        if lines is not None and lines.elf_sha256 != record["sha256"]:
            lines = None
        return BuildResult(state=record["state"], elf=elf or None, sha256=record["sha256"],
                           diagnostics=record["diagnostics"], diagnostics_truncated=record["diagnostics_truncated"],
                           error=record["error"], failure=record["failure"], toolchain=record["toolchain"],
                           cached=True, report=report, lines=lines)

    def _cancel(self, cancel: Cancel) -> None:
        """Stop a build whose caller went away: kill its running step's process group."""
        with cancel.lock:
            cancel.requested = True
            step = cancel.step_id
        if step is not None and self.helper is not None:
            self.helper.kill(step)

    def _pipeline(self, bundle: Bundle, info: CompilerInfo, cancel: Cancel | None = None) -> BuildResult:
        self.compiles += 1
        started = time.monotonic()
        staging: Path | None = None
        run: _Run | None = None
        try:
            self._scan(bundle, info)
            staging = self._stage(bundle, self._sdk)
            run = _Run(bundle, staging, time.monotonic() + self.options.deadline_seconds, cancel=cancel or Cancel())
            result = self._run_steps(run, info)
        except _Failed as failed:
            if (self._closing and failed.failure == "internal") or (cancel is not None and cancel.requested):
                result = BuildResult(state="cancelled")
            else:
                result = self._failure(failed, run, info)
        finally:
            if staging is not None:
                if self.options.keep_staging is not None:
                    self.options.keep_staging(staging)
                shutil.rmtree(staging, ignore_errors=True)
        result.toolchain = info.fingerprint
        result.duration_ms = int((time.monotonic() - started) * 1000)
        return result

    # build.md §4.1–4.2 (test hook: scans off)
    def _scan(self, bundle: Bundle, info: CompilerInfo) -> None:
        if not self.options.scans:
            return
        findings = scan_bundle(bundle, self._sdk, info.predefined_forbidden)
        if findings:
            raise _Failed("scan", "".join(f.format() + "\n" for f in findings) + "[wakeful:scan]")

    # build.md §5.1: fresh mkdtemp, O_CREAT|O_EXCL|O_NOFOLLOW files of mode 0600
    def _stage(self, bundle: Bundle, headers: dict[str, bytes]) -> Path:
        staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=self.build_root / "tmp"))
        for sub in ("src", "sdk", "out", "tmp"):
            (staging / sub).mkdir(mode=0o700)
        for path, text in bundle.files.items():
            _write_new(staging / "src" / path, text.encode(), make_dirs=True)
        for name, data in headers.items():
            _write_new(staging / "sdk" / name, data)
        return staging

    def _run_steps(self, run: _Run, info: CompilerInfo) -> BuildResult:
        assert self.zig is not None
        staging = str(run.staging)
        self._step(run, command_line(PREPROCESS, self.zig, run.bundle.entry, staging))
        self._check_preprocessed(run, info)
        self._step(run, command_line(COMPILE, self.zig, run.bundle.entry, staging))
        if self.options.before_collect is not None and not self._probing:
            self.options.before_collect(run.staging)
        elf = collect_object(run.staging / "out" / "main.o")
        try:
            report = _verifier()(elf)
        except InvalidObject as exc:
            raise _Failed("verifier", f"{run.bundle.entry}: error: {exc.rule}: {exc.reason}\n") from None
        sha256 = hashlib.sha256(elf).hexdigest()
        lines = self._line_table(run, elf, sha256)
        text, truncated = diagnostics.cut(self._clean(run))
        return BuildResult(state="succeeded", elf=elf, sha256=sha256, diagnostics=text,
                           diagnostics_truncated=truncated or run.truncated, report=report, lines=lines)

    # issue 18: the debug twin of the compile step gives the line table; it never fails or changes the build
    def _line_table(self, run: _Run, elf: bytes, sha256: str) -> LineTable | None:
        assert self.zig is not None
        steps, truncated = len(run.stderr), run.truncated
        try:
            self._step(run, command_line(LINES, self.zig, run.bundle.entry, str(run.staging)))
            data = read_nofollow(run.staging / "out" / "lines.o", MAX_DEBUG_OBJECT_BYTES)
        except _Failed:
            if run.cancel.requested:
                raise
            return None
        finally:  # its warnings repeat the compile step's
            del run.stderr[steps:]
            run.truncated = truncated
        return build_line_table(data, elf, sha256) if data else None

    # build.md §5.2: one step through the helper, its outcome mapped to a failure kind
    def _step(self, run: _Run, argv: list[str]) -> None:
        assert self.helper is not None
        remaining = run.deadline - time.monotonic()
        if remaining <= 0:
            raise _Failed("deadline", FAILURE_TEXT["deadline"])
        limits = Limits(cpu_seconds=self.options.cpu_seconds)
        try:
            with run.cancel.lock:
                if run.cancel.requested:
                    raise _Failed("internal", "build cancelled")
                run.cancel.step_id, fut = self.helper.submit(argv, run.staging, remaining, limits)
            answer = fut.result()
        except HelperDied as exc:
            raise _Failed("internal", f"build helper failed: {exc}") from None
        run.stderr.append(answer.get("stderr", ""))
        run.truncated = run.truncated or bool(answer.get("truncated"))
        failure = step_failure(answer)
        if failure is not None and failure != "deadline" and time.monotonic() >= run.deadline:
            failure = "deadline"  # issue 21: whatever a step killed at its deadline printed, it is not cacheable
        if failure is not None:
            raise _Failed(failure, FAILURE_TEXT.get(failure, ""))

    # build.md §4.3: the driver writes out/main.i itself
    def _check_preprocessed(self, run: _Run, info: CompilerInfo) -> None:
        data = read_nofollow(run.staging / "out" / "pp.i", MAX_PREPROCESSED_BYTES)
        if data is None:
            raise _Failed("too_large", "preprocessed text exceeds 4 MiB (output too large)")
        text = data.decode("utf-8", "surrogateescape")
        if self.options.scans:
            text, findings = check_preprocessed(text, info.predefined_forbidden)
            if findings:
                raise _Failed("scan", "".join(f.format() + "\n" for f in findings) + "[wakeful:scan]")
        _write_new(run.staging / "out" / "main.i", text.encode("utf-8", "surrogateescape"))

    def _clean(self, run: _Run) -> str:
        parts = list(run.stderr)
        if len(parts) > 1:  # the compile step quotes out/main.i: show the agent's own lines (build.md §7)
            staging = str(run.staging)
            compiled = diagnostics.rewrite_paths(diagnostics.remove_crash_report(parts[1]), staging)
            parts[1] = diagnostics.restore_source(compiled, self._originals(run.bundle))
        return diagnostics.clean("".join(parts), str(run.staging))

    def _originals(self, bundle: Bundle) -> dict[str, str]:
        """Shown name (as after ``rewrite_paths``) → text, for the bundle files and the SDK headers only."""
        shown = {f"<sdk>/{name}": data.decode("utf-8", "replace") for name, data in self._sdk.items()}
        shown.update(bundle.files)
        return shown

    def _failure(self, failed: _Failed, run: _Run | None, info: CompilerInfo) -> BuildResult:
        raw = self._clean(run) if run is not None else ""
        own = diagnostics.clean(failed.text, str(run.staging) if run else "")
        tags = "[wakeful:compiler_crashed]" if failed.failure == "compiler_crashed" else ""
        body = "\n".join(part for part in (raw.rstrip("\n"), own.replace("[wakeful:scan]", "").strip("\n")) if part)
        tags += "[wakeful:scan]" if "[wakeful:scan]" in failed.text else ""
        error, truncated = diagnostics.with_explanations(body + "\n" if body else "", tags, self._sdk_names)
        diag, _ = diagnostics.cut(body)
        truncated = truncated or failed.truncated or (run.truncated if run else False)
        return BuildResult(state="failed", diagnostics=diag, diagnostics_truncated=truncated,
                           error=error, failure=failed.failure)


PROBE_SOURCE = "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { return 0; }\n"


def report_from_json(data: dict[str, Any]) -> VerifyReport:
    """Rebuild a cached ``VerifyReport`` from its ``to_json`` form."""
    return VerifyReport(
        sha256=data["sha256"], elf_bytes=data["elf_bytes"], code_key=data["code_key"], entry=data["entry"],
        instructions=data["instructions"], functions=tuple(data["functions"]),
        call_chain=tuple(data["call_chain"]), stack_bytes=data["stack_bytes"], helpers=tuple(data["helpers"]),
        image=dict(data["image"]), ignored_sections=tuple(data["ignored_sections"]),
    )


class _ProbeError(WakefulError):
    pass


# build.md §5.2 "a failure whose text says out of memory": under RLIMIT_AS clang says it as "LLVM ERROR: out of
# memory" or, from a C++ allocation (measured: nested `#pragma unroll`), "uncaught exception of type std::bad_alloc"
OUT_OF_MEMORY = re.compile(r"out of memory|std::bad_alloc")
# build.md §7 compiler_crashed: the in-process cc1 died (abort, signal); `zig clang` itself then exits 1
FRONTEND_DIED = re.compile(r"clang frontend command failed (?:with exit code (?!1\b)\d+|due to signal)")


def step_failure(answer: dict[str, Any]) -> str | None:
    """build.md §5.2: helper answer → failure kind (None for a clean exit 0)."""
    status = answer.get("status")
    text = str(answer.get("stderr", ""))
    if status == "deadline":
        return "deadline"
    if status == "error":
        return "internal"
    if status == "signal":
        sig = answer.get("signal")
        if sig == signal.SIGXCPU:
            return "cpu_limit"
        if sig == signal.SIGXFSZ:
            return "too_large"
        return "memory" if OUT_OF_MEMORY.search(text) else "compiler_crashed"
    code = answer.get("code")
    if code == 0:
        return None
    if OUT_OF_MEMORY.search(text):
        return "memory"
    if code == 70 or FRONTEND_DIED.search(text):
        return "compiler_crashed"
    if re.search(r"No space left|File too large|error: unable to open output file|write error", text):
        return "too_large"
    return "compiler_error" if code == 1 else "compiler_crashed"


def collect_object(path: Path) -> bytes:
    """build.md §5.2: O_NOFOLLOW, a regular non-empty file starting with \\x7fELF, at most 64 KiB."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise _Failed("internal", f"compiled object could not be opened: {os.strerror(exc.errno or 0)}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            raise _Failed("internal", "compiled object is not a regular non-empty file")
        if st.st_size > MAX_OBJECT_BYTES:
            raise _Failed("too_large", f"compiled object exceeds 64 KiB ({st.st_size} bytes)")
        data = f.read(MAX_OBJECT_BYTES + 1)
    if len(data) > MAX_OBJECT_BYTES:
        raise _Failed("too_large", f"compiled object exceeds 64 KiB ({len(data)} bytes)")
    if not data.startswith(b"\x7fELF"):
        raise _Failed("internal", "compiled object is not an ELF file")
    return data


def read_nofollow(path: Path, limit: int) -> bytes | None:
    """Read a staged output with O_NOFOLLOW; None when it is over ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise _Failed("internal", f"{path.name} could not be opened: {os.strerror(exc.errno or 0)}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise _Failed("internal", f"{path.name} is not a regular file")
        data = f.read(limit + 1)
    return data if len(data) <= limit else None


def _write_new(path: Path, data: bytes, *, make_dirs: bool = False) -> None:
    if make_dirs:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def compile_sync(files: dict[str, str], entry: str, **opts: Any) -> BuildResult:
    """Build once, synchronously (``wakeful build`` / ``wakeful run foo.c``); ``opts`` are ``BuildOptions``."""
    with Builder(BuildOptions(**opts)) as builder:
        return builder.compile_blocking({"sdk_version": 1, "entry": entry, "files": files})

