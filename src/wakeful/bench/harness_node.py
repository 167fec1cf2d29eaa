"""The node under test of ``wakeful bench harness`` (benchmarks.md §2.1 step 1): a fresh store, a tenant, and
``wakeful serve`` as a child process on loopback (kill -9, SIGTERM and restart it), plus the store's commit
counter and the machine's load average.

PostgreSQL runs get a database of their own (``wkbench_<hex>``, dropped afterwards) so that
``pg_stat_database.xact_commit`` counts the node's commits only, even on a shared server.
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from wakeful.bench.variants import BenchError

__all__ = ["CpuWindow", "NodeProcess", "Tenant", "TestStore", "cpu_seconds", "load_average"]

START_TIMEOUT_S = 120.0
BIG = 1_000_000_000
# §2.1 measures cost, not policy: the node's rate limits and wake windows are opened so they never answer 429
NODE_ENV = {
    "WAKEFUL_LIMITS__INGRESS_PER_LOOP_PER_MIN": str(BIG),
    "WAKEFUL_LIMITS__INGRESS_GLOBAL_PER_MIN": str(BIG),
    "WAKEFUL_LIMITS__NOTIFY_PER_WINDOW": str(BIG),
    "WAKEFUL_LOG__LEVEL": "warning",
}


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (benchmarks.md §2.1: every step reports them)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return [0.0, 0.0, 0.0]


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (/proc/<pid>/stat)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuWindow:
    """Where the machine's CPU went over a step (issue 16: later rounds of a ``--repeat`` run were slower, nodes and
    peer alike, with nothing in the figures to say whether the bench client, another process or the hypervisor
    took the time): the machine's busy CPU seconds (all cores, /proc/stat less idle and iowait), the part of it
    the hypervisor stole, and the bench process's own CPU (its client)."""

    def __init__(self) -> None:
        self._machine0, self._steal0 = _machine_cpu()
        self._bench0 = _own_cpu()

    def finish(self, node_cpu_s: float | None = None) -> dict[str, float | None]:
        """The figures since the window opened; ``other_s`` is what neither the node (``node_cpu_s``, when
        counted) nor the bench took: the store's server processes, the peer, anything else on the machine."""
        machine1, steal1 = _machine_cpu()
        busy, bench = machine1 - self._machine0, _own_cpu() - self._bench0
        other = None if node_cpu_s is None else busy - node_cpu_s - bench
        return {"machine_busy_s": round(busy, 2), "steal_s": round(steal1 - self._steal0, 2),
                "bench_s": round(bench, 2), "other_s": None if other is None else round(other, 2)}


def _machine_cpu() -> tuple[float, float]:
    """Busy and stolen CPU seconds of all cores since boot (0, 0 where /proc/stat is not readable)."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return 0.0, 0.0
    ticks = [int(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal
    tck = os.sysconf("SC_CLK_TCK")
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / tck, ticks[7] / tck


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class TestStore:
    """A fresh store for one run: a SQLite file in a temporary data directory, or a fresh PostgreSQL database."""

    __test__ = False
    kind: str
    pg_url: str
    data_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="wkbench-")))
    database: str | None = None

    @property
    def url(self) -> str:
        if self.kind == "sqlite":
            return f"sqlite:///{self.data_dir / 'wakeful.db'}"
        assert self.database is not None
        return _with_database(self.pg_url, self.database)

    def open(self) -> TestStore:
        if self.kind == "postgresql":
            self.database = "wkbench_" + secrets.token_hex(5)
            asyncio.run(_pg_admin(self.pg_url, f'CREATE DATABASE "{self.database}"'))
        return self

    def close(self) -> None:
        if self.database is not None:
            asyncio.run(_pg_admin(self.pg_url, f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)'))
            self.database = None
        shutil.rmtree(self.data_dir, ignore_errors=True)

    async def commits(self) -> int | None:
        """Committed transactions so far (PostgreSQL: ``xact_commit`` of the run's database); None on SQLite."""
        if self.kind != "postgresql" or self.database is None:
            return None
        return await _pg_commits(self.pg_url, self.database)


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


async def _pg_admin(url: str, statement: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _pg_commits(url: str, database: str) -> int:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(url, timeout=10)  # the admin database: the count is not disturbed by this read
    try:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        value = await conn.fetchval("SELECT xact_commit FROM pg_stat_database WHERE datname = $1", database)
    finally:
        await conn.close()
    return int(value or 0)


@dataclass
class Tenant:
    """The group of the run, its admin and group keys (created in the store before the node starts)."""

    group: str
    admin_key: str
    group_key: str


def make_tenant(store_url: str, data_dir: Path, count: int, per_agent: int) -> Tenant:
    """§2.1 step 1: one group whose quotas allow N Loops; keys to drive it over HTTP."""
    return asyncio.run(_make_tenant(store_url, data_dir, count, per_agent))


async def _make_tenant(store_url: str, data_dir: Path, count: int, per_agent: int) -> Tenant:
    from wakeful.control import Harness
    from wakeful.harness.config import Config

    async with Harness(Config(data_dir=data_dir, store_url=store_url), sweeps=False) as h:
        group = await h.create_group("bench", limits={"loops_per_group": count, "loops_per_agent": per_agent})
        _, admin = await h.create_key("admin")
        _, gkey = await h.create_key("group", group_id=group.id)
    return Tenant(group=group.id, admin_key=admin, group_key=gkey)


class NodeProcess:
    """``wakeful serve`` in a child process; ``start`` returns once it listens (its URL in ``url``)."""

    def __init__(self, store: TestStore, node_name: str = "bench-node", env: dict[str, str] | None = None) -> None:
        self.store, self.node_name = store, node_name
        self.env = {**NODE_ENV, **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.log_path = store.data_dir / f"{node_name}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> float:
        """Start the node; returns the seconds until it listened."""
        began = time.monotonic()
        env = {**os.environ, "WAKEFUL_HOME": str(self.store.data_dir), "PYTHONUNBUFFERED": "1", **self.env}
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "wakeful.cli.main", "serve", "--port", str(self.port), "--db-url",
                 self.store.url, "--node-name", self.node_name, "--no-mcp", "--no-docs"],
                stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        assert self.proc.stdout is not None
        while time.monotonic() - began < START_TIMEOUT_S:
            line = self.proc.stdout.readline()
            if not line:
                raise BenchError(f"wakeful serve ended early: {self.log_tail()}")
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                return time.monotonic() - began
        raise BenchError("wakeful serve did not start listening")

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text()[-2000:]
        except OSError:
            return ""

    def kill9(self) -> None:
        self._signal(signal.SIGKILL)

    def terminate(self) -> int:
        """SIGTERM and wait: the node's exit code (0 after a clean drain)."""
        return self._signal(signal.SIGTERM)

    def _signal(self, sig: int) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return code

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self._signal(signal.SIGKILL)

