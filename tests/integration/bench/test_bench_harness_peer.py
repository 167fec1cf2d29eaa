"""The bench's DBOS peer (benchmarks.md §2.1 step 8) keeps its threads bounded: DBOS's executor, which runs the
async workflows' blocking database calls, is unbounded by default, and at N = 10,000 the peer grew to about
10,000 threads and stalled the machine. Real DBOS child, real PostgreSQL; skipped without the ``peers`` extra."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from wakeful.bench.harness_bench import PG_URL
from wakeful.bench.harness_node import TestStore
from wakeful.bench.harness_peer import PEER_THREADS, _Peer

pytestmark = pytest.mark.integration
N, SENDERS, SENDS = 200, 64, 1_600
OWN_THREADS = 16  # the peer's main thread, DBOS's listener, queue and flush threads, the stdin reader


def test_the_peer_runs_its_workflows_on_a_bounded_pool() -> None:
    dbos = pytest.importorskip("dbos")
    from support.harness_fixtures import _pg_unavailable_reason

    if (reason := _pg_unavailable_reason()) is not None:
        pytest.skip(reason)
    store = TestStore("postgresql", PG_URL).open()
    peer = _Peer(store.url, str(store.data_dir / "dbos.log"))
    client = None
    try:
        peer.start()
        assert peer.ask(f"create {N}")["create_s"] >= 0 and peer.ask(f"waiting {N}")["waiting"] == N
        consumed0 = peer.ask("consumed")["consumed"]
        client = dbos.DBOSClient(system_database_url=store.url)
        peak, sending = [0], threading.Event()

        def watch() -> None:  # the child's thread count while messages wake its waiters
            while not sending.is_set():
                peak[0] = max(peak[0], len(os.listdir(f"/proc/{peer.pid}/task")))
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        with ThreadPoolExecutor(SENDERS) as pool:
            list(pool.map(lambda k: client.send(f"w{k % N}", {"value": 1, "id": f"e{k}"}, "metric"), range(SENDS)))
        deadline = time.monotonic() + 120  # a generous bound on the drain, not a timing assertion
        while peer.ask("consumed")["consumed"] - consumed0 < SENDS and time.monotonic() < deadline:
            time.sleep(0.1)
        sending.set()
        watcher.join()
        assert peer.ask("consumed")["consumed"] - consumed0 == SENDS
        assert peak[0] <= PEER_THREADS + OWN_THREADS, peak[0]  # unbounded: 150+ threads for 64 senders
    finally:
        if client is not None:
            client.destroy()
        if peer.proc is not None and peer.proc.poll() is None:
            peer.stop(kill=True)
        store.close()
