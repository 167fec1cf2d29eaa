"""`wakeful db version | upgrade` in real subprocesses (interfaces.md §4.2, harness.md §3): empty → head, equal,
newer refused (exit 1), a running node's SQLite file refused, an unreachable store exits 3."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from wakeful.harness.store.engine import NodeLock
from wakeful.harness.store.migrations import HEAD

pytestmark = pytest.mark.integration
SRC = Path(__file__).resolve().parents[3] / "src"


def wakeful(*args: str, home: Path) -> tuple[int, Any, str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "WAKEFUL_HOME": str(home)}
    env.pop("WAKEFUL_DB_URL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "wakeful.cli.main", *args], capture_output=True, text=True, env=env, timeout=60
    )
    doc = json.loads(proc.stdout) if "--json" in args else None
    return proc.returncode, doc, proc.stdout + proc.stderr


def test_db_version_and_upgrade(store_url: str, tmp_path: Path) -> None:
    db = ["--db", store_url]
    code, doc, _ = wakeful(*db, "db", "version", "--json", home=tmp_path)
    assert code == 0 and (doc["stored"], doc["code"], doc["status"]) == (None, HEAD, "empty")
    code, doc, _ = wakeful(*db, "db", "upgrade", "--json", home=tmp_path)
    assert code == 0 and (doc["from"], doc["to"], doc["backup"]) == (None, HEAD, None)
    code, doc, _ = wakeful(*db, "db", "upgrade", "--json", home=tmp_path)
    assert code == 0 and doc["from"] == doc["to"] == HEAD
    code, doc, _ = wakeful(*db, "db", "version", "--json", home=tmp_path)
    assert code == 0 and (doc["stored"], doc["status"]) == (HEAD, "equal")


def test_default_store_is_the_data_directory_file(tmp_path: Path) -> None:
    code, _, text = wakeful("db", "upgrade", home=tmp_path)
    assert code == 0 and f"schema upgraded from empty to {HEAD}" in text
    with sqlite3.connect(tmp_path / "wakeful.db") as conn:
        assert conn.execute("SELECT max(version) FROM schema_meta").fetchone() == (HEAD,)
        conn.execute("INSERT INTO schema_meta VALUES (?, '9.9', 1)", (HEAD + 1,))
    code, doc, _ = wakeful("db", "version", "--json", home=tmp_path)
    assert code == 0 and doc["status"] == "newer"
    code, doc, _ = wakeful("db", "upgrade", "--json", home=tmp_path)
    assert code == 1 and doc["error"] == "schema_too_new"


def test_upgrade_refuses_a_file_a_node_is_running_on(tmp_path: Path) -> None:
    lock = NodeLock(tmp_path / "wakeful.db")
    lock.acquire()
    try:
        code, doc, _ = wakeful("db", "upgrade", "--json", home=tmp_path)
    finally:
        lock.release()
    assert code == 1 and doc["error"] == "node_locked"
    code, _, _ = wakeful("db", "upgrade", home=tmp_path)
    assert code == 0


def test_unreachable_store_exits_3(tmp_path: Path) -> None:
    code, doc, _ = wakeful(
        "--db", "postgresql://postgres@127.0.0.1:1/test", "db", "version", "--json", home=tmp_path
    )
    assert code == 3 and doc["error"] == "unavailable"
    code, doc, _ = wakeful("--db", "mysql://x/y", "db", "upgrade", "--json", home=tmp_path)
    assert code == 1 and doc["error"] == "invalid_request"


def test_db_prune(tmp_path: Path) -> None:
    code, doc, _ = wakeful("db", "prune", "--json", home=tmp_path)
    assert code == 0 and doc["removed"] == {"events": 0, "rate_buckets": 0, "artifacts": 0, "messages": 0}
    with sqlite3.connect(tmp_path / "wakeful.db") as conn:
        conn.execute("INSERT INTO rate_bucket VALUES ('web:x', 1.0, 0)")
    code, doc, _ = wakeful("db", "prune", "--messages-older-than-days", "1", "--json", home=tmp_path)
    assert code == 0 and doc["removed"]["rate_buckets"] == 1
    code, _, text = wakeful("db", "prune", "--retention-s", "-1", home=tmp_path)
    assert code == 2 and "retention" in text
    assert doc["retention_s"] == 86_400  # the default of events.dedup_retention_s
    (tmp_path / "wakeful.toml").write_text("[events]\ndedup_retention_s = 3600\n")
    code, doc, _ = wakeful("db", "prune", "--json", home=tmp_path)
    assert code == 0 and doc["retention_s"] == 3600  # the window the node prunes with, not a CLI constant
    code, doc, _ = wakeful("db", "prune", "--retention-s", "60", "--json", home=tmp_path)
    assert code == 0 and doc["retention_s"] == 60  # the flag wins


def test_db_backup(tmp_path: Path) -> None:
    assert wakeful("db", "upgrade", home=tmp_path)[0] == 0
    copy = tmp_path / "copy.db"
    code, doc, _ = wakeful("db", "backup", str(copy), "--json", home=tmp_path)
    assert code == 0 and doc == {"backup": str(copy)}
    with sqlite3.connect(copy) as conn:
        assert conn.execute("SELECT max(version) FROM schema_meta").fetchone() == (HEAD,)
    code, doc, _ = wakeful("db", "backup", str(copy), "--json", home=tmp_path)
    assert code == 1 and doc["error"] == "invalid_request"  # never overwrites


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_db_backup_of_postgresql_is_refused(store_url: str, tmp_path: Path) -> None:
    code, doc, _ = wakeful("--db", store_url, "db", "backup", str(tmp_path / "x"), "--json", home=tmp_path)
    assert code == 1 and "pg_dump" in doc["message"]
