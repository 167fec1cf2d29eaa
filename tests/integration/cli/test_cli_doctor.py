"""``wakeful doctor [--probe-decide]`` (interfaces.md §4.2) against real parts: the zig compiler, SQLite in a tmp
data directory, PostgreSQL in a throwaway schema, real listening sockets and a loopback HTTP provider. Each
failure is induced for real and must fail its check and exit 1; ``--json`` is exactly one document."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from wakeful.cli.main import main

pytestmark = pytest.mark.integration
SRC = Path(__file__).resolve().parents[3] / "src"
NAMES = ["python", "compiler", "sandbox", "vm", "data_dir", "config", "secret_files", "store", "schema",
         "sqlite_wal", "pg_notify", "pg_advisory_locks", "pg_clock", "port", "decide", "web_egress"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data directory with mode 0700, a clean environment and a free port (8470 may be another node's)."""
    data = tmp_path / "home"
    data.mkdir(mode=0o700)
    for name in [k for k in os.environ if k.startswith(("WAKEFUL_DECIDE__", "WAKEFUL_WEB__", "WAKEFUL_SERVER"))]:
        monkeypatch.delenv(name)
    for name in ("WAKEFUL_DB_URL", "WAKEFUL_CONFIG", "WAKEFUL_API_KEY"):
        monkeypatch.delenv(name, raising=False)  # recorded, so what a run sets is undone afterwards
    monkeypatch.setenv("WAKEFUL_HOME", str(data))
    monkeypatch.setenv("WAKEFUL_SERVER__PORT", str(_free_port()))
    return data


def _upgrade(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "upgrade", "--json"]) == 0
    capsys.readouterr()


def _doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
    code = main(["doctor", "--json", *args])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)  # exactly one document: json.loads refuses anything after it
    assert doc["schema"] == "wakeful.doctor/1" and [c["name"] for c in doc["checks"]] == NAMES
    assert doc["ok"] is (code == 0)
    return code, doc, {c["name"]: c for c in doc["checks"]}


def _statuses(by_name: dict[str, Any]) -> dict[str, str]:
    return {name: c["status"] for name, c in by_name.items()}


def test_healthy_setup_on_sqlite_and_postgresql(home: Path, store_url: str, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WAKEFUL_DB_URL", store_url)
    _upgrade(capsys)
    code, _, by_name = _doctor(capsys)
    assert code == 0 and set(_statuses(by_name).values()) == {"ok"}, by_name
    sqlite = store_url.startswith("sqlite")
    assert by_name["sqlite_wal"]["detail"] == ("journal_mode=wal, synchronous=FULL" if sqlite
                                               else "skipped: only on SQLite")
    assert by_name["pg_notify"]["detail"].startswith("skipped: only on PostgreSQL" if sqlite else "a NOTIFY")
    assert ("skipped" in by_name["pg_clock"]["detail"]) is sqlite
    assert "passed the verifier" in by_name["compiler"]["detail"] and by_name["sandbox"]["status"] == "ok"
    assert by_name["schema"]["detail"].startswith("version ")


def test_a_real_process_prints_one_document_and_a_table_for_people(home: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _upgrade(capsys)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "wakeful.cli.main", "doctor", "--json"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert time.monotonic() - began < 60  # smoke bound only: a healthy run takes about a second
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ok"] is True and proc.stderr == ""  # no progress bar without a terminal
    people = subprocess.run([sys.executable, "-m", "wakeful.cli.main", "--no-color", "doctor"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert people.returncode == 0 and "web_egress" in people.stdout and "all checks passed" in people.stdout


def test_data_directory_mode_0755_fails(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _upgrade(capsys)
    home.chmod(0o755)
    code, _, by_name = _doctor(capsys)
    assert code == 1 and by_name["data_dir"]["status"] == "fail"
    assert "mode 0755, not 0700" in by_name["data_dir"]["detail"] and "chmod 700" in by_name["data_dir"]["hint"]
    assert [n for n, s in _statuses(by_name).items() if s != "ok"] == ["data_dir"]


@pytest.mark.parametrize("mode", [0o500, 0o600, 0o000], ids=["read-only", "not-searchable", "closed"])
def test_a_data_directory_this_user_cannot_use_fails_without_crashing(home: Path, mode: int,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _upgrade(capsys)
    (home / "wakeful.toml").write_text("[server]\n")
    before = sorted(p.name for p in home.iterdir())
    home.chmod(mode)
    # as root the permission bits would not apply: run without the capabilities that bypass them
    prefix = []
    if os.geteuid() == 0:
        setpriv = "/usr/bin/setpriv"
        if not Path(setpriv).exists():
            pytest.skip("running as root without setpriv: the mode cannot be enforced")
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    elsewhere = home.parent / "elsewhere.toml"  # a readable configuration: the store checks then run too
    elsewhere.write_text("[server]\n")
    try:
        for extra in ({}, {"WAKEFUL_CONFIG": str(elsewhere)}):
            proc = subprocess.run([*prefix, sys.executable, "-m", "wakeful.cli.main", "doctor", "--json"],
                                  env={**os.environ, "PYTHONPATH": str(SRC), **extra}, capture_output=True,
                                  text=True, timeout=120)
            assert proc.returncode == 1, (extra, proc.stdout, proc.stderr)
            doc = json.loads(proc.stdout)
            by_name = {c["name"]: c for c in doc["checks"]}
            assert list(by_name) == NAMES and doc["ok"] is False, doc
            assert by_name["data_dir"]["status"] == "fail" and by_name["compiler"]["status"] == "ok", doc
    finally:
        home.chmod(0o700)
    assert sorted(p.name for p in home.iterdir()) == before  # nothing written


def test_a_build_root_that_is_a_file_fails_the_compiler_check(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _upgrade(capsys)
    (home / "build").write_text("not a directory")  # the node's build root (build.md §5.1) cannot be made
    code, _, by_name = _doctor(capsys)
    assert code == 1 and by_name["compiler"]["status"] == "fail", by_name["compiler"]
    assert str(home / "build") in by_name["compiler"]["detail"] and by_name["sandbox"]["status"] == "warn"


def test_a_configuration_that_is_a_fifo_fails_instead_of_hanging(home: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    os.mkfifo(home / "wakeful.toml")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for args, extra in ((["doctor", "--json"], {}), (["doctor", "--json"], {"WAKEFUL_CONFIG": str(fifo)}),
                        (["doctor", "--config", str(fifo), "--json"], {})):
        proc = subprocess.run([sys.executable, "-m", "wakeful.cli.main", *args], env={**env, **extra},
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1, (args, extra, proc.stdout, proc.stderr)
        by_name = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
        assert by_name["config"]["status"] == "fail" and "not a regular file" in by_name["config"]["detail"]


def test_a_missing_data_directory_fails_and_is_not_created(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    missing = home / "absent"
    monkeypatch.setenv("WAKEFUL_HOME", str(missing))
    code, _, by_name = _doctor(capsys)
    assert code == 1 and "does not exist" in by_name["data_dir"]["detail"]
    assert "does not exist" in by_name["store"]["detail"] and by_name["compiler"]["status"] == "ok"
    assert not missing.exists()  # the doctor diagnoses; it never creates the data directory or the database


def test_world_readable_secret_files_fail(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _upgrade(capsys)
    config = home / "wakeful.toml"
    config.write_text('[decide]\nprovider = "jev"\napi_key = "sk-secret"\n')
    credentials = home / "demo" / "credentials.json"
    credentials.parent.mkdir()
    credentials.write_text('{"key": "wk_secret"}')
    for path in (config, credentials):
        path.chmod(0o644)
    code, _, by_name = _doctor(capsys)
    check = by_name["secret_files"]
    assert code == 1 and check["status"] == "fail"
    assert str(config) in check["detail"] and str(credentials) in check["detail"] and "chmod 600" in check["hint"]
    assert "sk-secret" not in json.dumps(by_name)
    for path in (config, credentials):
        path.chmod(0o600)
    code, _, by_name = _doctor(capsys)
    assert code == 0 and by_name["secret_files"]["detail"].startswith("not world-readable: ")
    config.write_text("[web]\nallow_private = false\n")  # no secret in it: its mode does not matter
    config.chmod(0o644)
    code, _, by_name = _doctor(capsys)
    assert code == 0 and by_name["secret_files"]["detail"] == f"not world-readable: {credentials}"


def test_config_that_does_not_parse_fails_and_dependent_checks_say_why(home: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    _upgrade(capsys)
    (home / "wakeful.toml").write_text("[store]\nflavour = 1\n")
    code, _, by_name = _doctor(capsys)
    assert code == 1 and by_name["config"]["status"] == "fail"
    assert "store.flavour" in by_name["config"]["detail"]
    for name in ("store", "port", "decide", "web_egress"):
        assert by_name[name]["status"] == "warn" and by_name[name]["detail"].startswith("not checked: ")


def test_port_taken_by_a_listening_socket_fails(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _upgrade(capsys)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        monkeypatch.setenv("WAKEFUL_SERVER__PORT", str(port))
        code, _, by_name = _doctor(capsys)
    assert code == 1 and by_name["port"]["status"] == "fail"
    assert f"127.0.0.1:{port} is in use" in by_name["port"]["detail"]
    code, _, by_name = _doctor(capsys)  # released: free again
    assert code == 0 and by_name["port"]["detail"] == f"127.0.0.1:{port} is free"


def test_unreachable_postgresql_fails_quickly(home: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        url = f"postgresql://wakeful:hunter2@127.0.0.1:{closed.getsockname()[1]}/test"
        monkeypatch.setenv("WAKEFUL_DB_URL", url)
        began = time.monotonic()
        code, _, by_name = _doctor(capsys)
    assert time.monotonic() - began < 60  # smoke bound: each store step is bounded
    assert code == 1 and by_name["store"]["status"] == "fail" and "hunter2" not in by_name["store"]["detail"]
    assert ":***@127.0.0.1" in by_name["store"]["detail"]
    assert {by_name[n]["status"] for n in ("schema", "pg_notify", "pg_advisory_locks", "pg_clock")} == {"warn"}
    assert by_name["sqlite_wal"]["status"] == "ok"  # does not apply to PostgreSQL


def test_schema_behind_fails(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "wakeful.db").touch()  # a new, empty SQLite file nobody upgraded
    code, _, by_name = _doctor(capsys)
    assert code == 1 and by_name["store"]["status"] == "ok" and by_name["schema"]["status"] == "fail"
    assert "the store is empty" in by_name["schema"]["detail"] and "wakeful db upgrade" in by_name["schema"]["hint"]


def test_invalid_decide_settings_fail_with_the_reason(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _upgrade(capsys)
    monkeypatch.setenv("WAKEFUL_DECIDE__PROVIDER", "openai")
    code, _, by_name = _doctor(capsys)
    assert code == 1 and by_name["decide"] == {
        "name": "decide", "status": "fail", "detail": "decide.endpoint is required for the openai provider",
        "hint": "set decide.* in the config or WAKEFUL_DECIDE__* (harness.md §16.4)"}
    monkeypatch.setenv("WAKEFUL_DECIDE__PROVIDER", "jev")  # jev without a key
    code, _, by_name = _doctor(capsys)
    assert code == 1 and "decide.api_key" in by_name["decide"]["detail"]
    monkeypatch.delenv("WAKEFUL_DECIDE__PROVIDER")
    code, _, by_name = _doctor(capsys, "--probe-decide")  # asked to probe, nothing to ask
    assert code == 1 and by_name["decide"]["detail"] == "decide.provider is not set"


class _Provider:
    """A Jev-compatible provider on loopback: answers every question, or ``status`` with an error body."""

    def __init__(self) -> None:
        self.status = 200
        self.calls = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                provider.calls += 1
                answer = {"model": "fake-jev", "answers": {k: {"noul": 0.9} for k in body["questions"]}}
                reply = json.dumps(answer if provider.status == 200 else {"error": "boom"}).encode()
                self.send_response(provider.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/systemone"


@pytest.fixture
def provider() -> Iterator[_Provider]:
    fake = _Provider()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def test_probe_decide_against_a_loopback_provider(home: Path, provider: _Provider, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _upgrade(capsys)
    for key, value in (("PROVIDER", "jev"), ("ENDPOINT", provider.url), ("API_KEY", "k-1")):
        monkeypatch.setenv(f"WAKEFUL_DECIDE__{key}", value)
    code, _, by_name = _doctor(capsys)
    assert code == 0 and by_name["decide"]["detail"].startswith("valid: jev at ") and provider.calls == 0
    code, _, by_name = _doctor(capsys, "--probe-decide")
    assert code == 0 and by_name["decide"]["detail"].startswith("answered by fake-jev") and provider.calls == 1
    provider.status = 500
    code, _, by_name = _doctor(capsys, "--probe-decide")
    assert code == 1 and by_name["decide"]["status"] == "fail" and provider.calls == 2
    assert "provider_error" in by_name["decide"]["detail"] and "k-1" not in json.dumps(by_name)


def test_the_bundled_self_test_elf_is_its_source_built_with_the_pinned_toolchain(tmp_path: Path) -> None:
    from importlib import resources

    from wakeful.build import compile_sync

    source = resources.files("wakeful.bench").joinpath("kernels", "fnv.c").read_text(encoding="utf-8")
    result = compile_sync({"fnv.c": source}, "fnv.c", cache=False, build_root=tmp_path / "build")
    assert result.state == "succeeded", result.error
    bundled = resources.files("wakeful.cli").joinpath("selftest", "fnv.o").read_bytes()
    assert result.elf == bundled, "rebuild: wakeful build src/wakeful/bench/kernels/fnv.c -o " \
                                  "src/wakeful/cli/selftest/fnv.o"
