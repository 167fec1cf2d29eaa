"""The checks of ``wakeful doctor`` (interfaces.md §4.2): each a small function returning a ``Check`` record
``{name, status: ok|warn|fail, detail, hint}``; ``run_checks`` runs them all in order (no typer here).

Choices the spec leaves open (which files carry secrets, skipped checks, clock skew) are in docs/decisions-doctor.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import os
import socket
import stat
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from wakeful.checks import FAIL, NOT_CHECKED, OK, SKIPPED, WARN, Check

if TYPE_CHECKING:  # the build layer, the harness and SQLAlchemy load when the checks run
    from wakeful.build import CompilerInfo
    from wakeful.harness.config import Config, DecideSettings, WebSettings

__all__ = ["Check", "DoctorSetup", "check_data_dir", "check_port", "check_secret_files", "run_checks"]

MIN_PYTHON = (3, 11)
PINNED = "zig 0.17.1 / clang 22.1.8"  # build.md §2
SELFTEST_ELF = ("selftest", "fnv.o")  # wakeful/bench/kernels/fnv.c built with the pinned toolchain
METADATA_ADDRESS = "169.254.169.254"  # cloud metadata services: the address an egress policy must never open
PROBE_QUESTION = {"ok": {"type": "noul", "instructions": "Is this a connectivity check from wakeful doctor?"}}


@dataclass
class DoctorSetup:
    """What the checks look at: the environment, the config file given with ``--config``, the parsed config."""

    config_path: Path | None = None
    probe_decide: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    config: Config | None = None
    config_error: str | None = None

    def load(self) -> None:
        """Parse the configuration once (interfaces.md §7); a refusal is kept as ``config_error``."""
        from wakeful.errors import WakefulError
        from wakeful.harness.config import load_config

        if not _regular_or_absent(self.config_file):  # a FIFO or a device would block the reader forever
            self.config_error = f"config file {self.config_file} is not a regular file"
            return
        try:
            self.config = load_config(self.config_path, env=self.env)
        except (WakefulError, ValueError) as exc:
            self.config_error = str(getattr(exc, "message", exc))

    @property
    def data_dir(self) -> Path:
        from wakeful.harness.config import default_data_dir

        home = self.env.get("WAKEFUL_HOME")
        return self.config.data_dir if self.config else Path(home) if home else default_data_dir()

    # interfaces.md §7: --config, else $WAKEFUL_CONFIG, else <data>/wakeful.toml (as load_config reads it)
    @property
    def config_file(self) -> Path:
        named = self.config_path or self.env.get("WAKEFUL_CONFIG")
        return Path(named) if named else self.data_dir / "wakeful.toml"


Progress = Callable[[str], None]


def run_checks(setup: DoctorSetup, progress: Progress | None = None) -> list[Check]:
    """Every check of interfaces.md §4.2, in the order the spec lists them."""
    step = progress or (lambda label: None)
    step("configuration")
    setup.load()
    checks = [check_python()]
    step("compiler probe")
    checks += check_build(setup.data_dir)
    step("VM self-test")
    checks.append(check_vm())
    checks.append(check_data_dir(setup.data_dir))
    checks.append(check_config(setup))
    checks.append(check_secret_files(setup))
    step("store")
    checks += store_checks(setup)
    checks.append(_needs_config(setup, "port", lambda c: check_node_or_port(setup.data_dir, c)))
    step("decide")
    checks.append(_needs_config(setup, "decide", lambda c: check_decide(c.decide, probe=setup.probe_decide,
                                                                        env=setup.env)))
    checks.append(_needs_config(setup, "web_egress", lambda c: check_web(c.web)))
    return checks


def _needs_config(setup: DoctorSetup, name: str, check: Callable[[Config], Check]) -> Check:
    if setup.config is None:
        return Check(name, WARN, NOT_CHECKED + "the configuration does not parse", "fix the config check first")
    return check(setup.config)


# ---- the interpreter, the compiler, the sandbox, the VM ----


def check_python(version: tuple[int, ...] | None = None) -> Check:
    found = version or tuple(sys.version_info[:3])
    text = ".".join(str(n) for n in found)
    if found[:2] >= MIN_PYTHON:
        return Check("python", OK, f"Python {text}")
    return Check("python", FAIL, f"Python {text} is older than 3.11", "install Python 3.11 or newer")


def check_build(data_dir: Path) -> list[Check]:
    """build.md §2 and §5.3: the toolchain probe (versions, header search list, a trivial compile through the
    real helper and sandbox, verified by the loader) and the sandbox level it found."""
    try:
        info = _probe(data_dir)
    except OSError as exc:  # e.g. <data>/build is a file: the node's builds would fail the same way
        return [Check("compiler", FAIL, f"the build root {data_dir / 'build'} cannot be used: "
                      f"{exc.strerror or exc}", "make <data>/build a directory this user can write, or remove it"),
                Check("sandbox", WARN, NOT_CHECKED + "the compiler probe did not run", "fix the compiler check first")]
    return [check_compiler(info), check_sandbox(info)]


def _probe(data_dir: Path) -> CompilerInfo:
    from wakeful.build import Builder, BuildOptions

    with _build_root(data_dir) as root, Builder(BuildOptions(build_root=root, cache=False, workers=1)) as builder:
        return builder.info()


@contextlib.contextmanager
def _build_root(data_dir: Path) -> Iterator[Path]:
    """The node's build root when the data directory exists and is ours to write (build.md §5.1), else a throwaway
    one: the doctor never creates the data directory, and an unusable one is the data_dir check's failure."""
    if data_dir.is_dir() and os.access(data_dir, os.W_OK | os.X_OK):
        yield data_dir / "build"
        return
    with tempfile.TemporaryDirectory(prefix="wakeful-doctor-") as tmp:
        yield Path(tmp) / "build"


def check_compiler(info: CompilerInfo) -> Check:
    if not info.available:
        return Check("compiler", FAIL, f"builds are unavailable: {info.reason}",
                     "reinstall wakeful's compiler: pip install 'ziglang~=0.17.1'")
    if not info.pinned:
        return Check("compiler", WARN, f"{info.revision} is not the pinned {PINNED}; diagnostics and code "
                     "generation may differ (build.md §2)", "pip install 'ziglang~=0.17.1'")
    return Check("compiler", OK, f"{info.revision}, target {info.target}: a trivial program compiled and "
                 "passed the verifier")


def check_sandbox(info: CompilerInfo) -> Check:
    if info.sandbox_level in ("landlock", "namespace"):
        return Check("sandbox", OK, f"builds run under {info.sandbox_level}")
    return Check("sandbox", WARN, f"Landlock is not in force (level {info.sandbox_level}): "
                 f"{info.sandbox_reason or 'no reason reported'}",
                 "run on Linux ≥ 5.13 with Landlock enabled (lsm=…,landlock); builds rely on the scans only")


def check_vm() -> Check:
    """Load the bundled ELF, run it on the interpreter and the translator, and compare with the answer
    computed here in Python (FNV-1a over the kernel's buffer)."""
    from wakeful.bench.cpu import run_kernel
    from wakeful.errors import WakefulError

    try:
        elf = resources.files("wakeful.cli").joinpath(*SELFTEST_ELF).read_bytes()
        got = {engine: run_kernel(elf, 1, engine)[0] for engine in ("interp", "translate")}
    except (OSError, WakefulError) as exc:
        return Check("vm", FAIL, f"the bundled ELF did not run: {getattr(exc, 'message', exc)}",
                     "reinstall wakeful (the package is damaged)")
    expected = _fnv_expected()
    if set(got.values()) != {expected}:
        return Check("vm", FAIL, f"the bundled ELF returned {got}, expected {expected}",
                     "reinstall wakeful; if it persists, report a VM bug")
    return Check("vm", OK, f"bundled ELF ({'/'.join(SELFTEST_ELF)}) loaded, verified and ran on the interpreter "
                 "and the translator with the expected result")


def _fnv_expected() -> int:
    h = 0xCBF29CE484222325
    for i in range(4096):
        h = ((h ^ ((i * 31 + 7) & 0xFF)) * 0x100000001B3) & (2**64 - 1)
    return h & 0x7FFFFFFF


# ---- the data directory, the configuration, secret-bearing files ----


def check_data_dir(data_dir: Path) -> Check:
    """interfaces.md §7: the data directory exists, is ours to write, and has mode 0700."""
    try:
        st = data_dir.stat()
    except FileNotFoundError:
        return Check("data_dir", FAIL, f"{data_dir} does not exist",
                     f"mkdir -m 700 -p {data_dir} (or start `wakeful serve`, which creates it)")
    except OSError as exc:
        return Check("data_dir", FAIL, f"{data_dir}: {exc.strerror or exc}", "check the path and its parents")
    if not stat.S_ISDIR(st.st_mode):
        return Check("data_dir", FAIL, f"{data_dir} is not a directory", "point WAKEFUL_HOME at a directory")
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o700:
        return Check("data_dir", FAIL, f"{data_dir} has mode {mode:04o}, not 0700", f"chmod 700 {data_dir}")
    if not os.access(data_dir, os.W_OK | os.X_OK):
        return Check("data_dir", FAIL, f"{data_dir} is not writable by this user", f"chown {data_dir} to this user")
    return Check("data_dir", OK, f"{data_dir} (mode 0700)")


def check_config(setup: DoctorSetup) -> Check:
    if setup.config is None:
        return Check("config", FAIL, setup.config_error or "the configuration does not parse",
                     "fix the file or the WAKEFUL_* variable named (interfaces.md §7)")
    file = setup.config_file
    where = f"{file}" if file.is_file() else f"no file ({file} absent): defaults and the environment"
    return Check("config", OK, f"parsed: {where}")


def check_secret_files(setup: DoctorSetup) -> Check:
    """The config file when it holds a secret, and the demo credentials, must not be world-readable."""
    candidates = [setup.config_file] if _holds_secret(setup.config_file) else []
    candidates.append(setup.data_dir / "demo" / "credentials.json")
    present: list[Path] = []
    exposed: list[Path] = []
    unknown: list[Path] = []  # in a directory this user cannot search: neither there nor absent
    for p in candidates:
        try:
            st = p.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            unknown.append(p)
            continue
        if stat.S_ISREG(st.st_mode):
            present.append(p)
            if st.st_mode & stat.S_IROTH:
                exposed.append(p)
    if exposed:
        names = " ".join(str(p) for p in exposed)
        return Check("secret_files", FAIL, f"world-readable: {names}", f"chmod 600 {names}")
    if unknown:
        return Check("secret_files", WARN, NOT_CHECKED + "cannot be read: " + ", ".join(str(p) for p in unknown),
                     "fix the data_dir check first")
    if not present:
        return Check("secret_files", OK, SKIPPED + "no secret-bearing file found")
    return Check("secret_files", OK, "not world-readable: " + ", ".join(str(p) for p in present))


def _regular_or_absent(file: Path) -> bool:
    """False for a path that exists and is not a regular file (a FIFO, a device, a directory)."""
    try:
        return stat.S_ISREG(file.stat().st_mode)
    except OSError:  # absent, or not reachable: the reader reports it
        return True


def _holds_secret(file: Path) -> bool:
    """``decide.api_key`` or a store URL with a password; a file that is not readable TOML counts as secret."""
    try:
        if not _regular_or_absent(file):
            return False  # never opened (a FIFO would block): the config check fails it
        doc = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True
    decide, store = doc.get("decide"), doc.get("store")
    key = decide.get("api_key") if isinstance(decide, dict) else None
    url = store.get("url") if isinstance(store, dict) else None
    try:
        password = urlsplit(url).password if isinstance(url, str) else None
    except ValueError:
        password = None
    return bool(key) or bool(password)


# ---- the store ----


def store_checks(setup: DoctorSetup) -> list[Check]:
    from wakeful.harness.ops import STORE_CHECKS, check_store

    if setup.config is None:
        return [Check(name, WARN, NOT_CHECKED + "the configuration does not parse", "fix the config check first")
                for name in STORE_CHECKS]
    return asyncio.run(check_store(setup.config.effective_store_url))


# ---- the port, decide, the web egress policy ----


def check_node_or_port(data_dir: Path, config: Config) -> Check:
    """issue 19: a node running on this data directory (its ``node.json``) is reported whatever its port."""
    from wakeful.cli.nodefile import live_node

    node = live_node(data_dir)
    if node is not None:
        return Check("port", OK, f"a node of this data directory runs at {node['url']} (pid {node['pid']})")
    return check_port(config.server_host, config.server_port)


def check_port(host: str, port: int) -> Check:
    """server.host / server.port: bound and released as ``wakeful serve`` binds it (SO_REUSEADDR)."""
    if port == 0:
        return Check("port", OK, SKIPPED + f"server.port is 0 (any free port on {host})")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return Check("port", FAIL, f"{host}:{port} is in use by another process (a running node?)",
                         "stop it, or set server.port / `wakeful serve --port`")
        return Check("port", FAIL, f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                     "set server.host / server.port to an address of this machine")
    return Check("port", OK, f"{host}:{port} is free")


def check_decide(settings: DecideSettings, *, probe: bool, env: Mapping[str, str]) -> Check:
    """harness.md §16.4: why calls would answer ``not_configured``; with ``probe``, one real question."""
    problem = settings.problem(env)
    if settings.provider is None and not probe:
        return Check("decide", OK, SKIPPED + "decide.provider is not set (decide calls answer not_configured)")
    if problem is not None:
        return Check("decide", FAIL, problem, "set decide.* in the config or WAKEFUL_DECIDE__* (harness.md §16.4)")
    where = f"{settings.provider} at {settings.effective_endpoint()}, model {settings.effective_model()}"
    if not probe:
        return Check("decide", OK, f"valid: {where} (not called; --probe-decide asks one question)")
    return asyncio.run(_probe_decide(settings, where))


async def _probe_decide(settings: DecideSettings, where: str) -> Check:
    from wakeful.harness.ops import local

    began = time.monotonic()
    result = await local.decide(settings, "doctor", {"state": "wakeful doctor", "questions": PROBE_QUESTION})
    ms = round((time.monotonic() - began) * 1000)
    error = result.get("error")
    if isinstance(error, dict):
        return Check("decide", FAIL, f"{where} answered {error.get('code')}: {error.get('message', '')}",
                     "check the endpoint, the key and the model with `wakeful decide`")
    return Check("decide", OK, f"answered by {result.get('model')} ({where}) in {ms} ms")


def check_web(settings: WebSettings) -> Check:
    """harness.md §17.3: which address classes ``web.http_request`` may reach under the policy in force."""
    from wakeful.harness.ops import local

    networks = ", ".join(settings.allow_networks) or "none"
    if settings.allow_private:
        return Check("web_egress", WARN, "web.allow_private is true: Loops may reach private, loopback and "
                     f"link-local addresses (cloud metadata {METADATA_ADDRESS}); allowed networks: {networks}",
                     "set web.allow_private = false and list only the networks Loops need in web.allow_networks")
    if local.blocked_reason(ipaddress.ip_address(METADATA_ADDRESS), settings) is None:
        return Check("web_egress", WARN, f"web.allow_networks ({networks}) opens the cloud metadata address "
                     f"{METADATA_ADDRESS}", "narrow web.allow_networks")
    return Check("web_egress", OK, "private, loopback, link-local and reserved addresses blocked; allowed "
                 f"networks: {networks}; at most {settings.max_in_flight} requests in flight")


def failed(checks: list[Check]) -> bool:
    """interfaces.md §4.2: the doctor exits 1 when any check failed."""
    return any(c.status == FAIL for c in checks)


def report(checks: list[Check]) -> dict[str, Any]:
    """The ``--json`` document."""
    return {"schema": "wakeful.doctor/1", "checks": [c.to_json() for c in checks], "ok": not failed(checks)}
