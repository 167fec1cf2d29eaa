"""On PostgreSQL the decide and web buckets are rate_bucket rows shared by every node (harness.md §2.9, §14):
the 4/s group limit and the 60/min per-Loop web limit hold across two nodes; a limiter that fails is closed."""

from __future__ import annotations

import time
from typing import Any

from decide_provider_server import serving
from support.harness_fixtures import pg_url_with_schema, require_pg

from wakeful.harness.decide import Decider, DecideSettings
from wakeful.harness.placement import PgLimiter
from wakeful.harness.store.core import Store
from wakeful.harness.web import WebClient
from wakeful.harness.web_policy import WebSettings
from wakeful.runtime import ManualClock

REQUEST = {"state": "s", "questions": {"q": {"type": "noul", "instructions": "?"}}}


async def test_buckets_hold_across_nodes(harness_runner: Any, pg_schema: str) -> None:
    require_pg()
    store = await Store.open(pg_url_with_schema(pg_schema))
    try:
        with serving("jev") as fake:
            # the rows refill on the database clock (real time): a minute bucket of 3 refills one token per
            # 20 s, so the count below does not depend on how fast this machine is
            settings = DecideSettings(provider="jev", endpoint=fake.url, api_key="k", per_minute=3, per_second=100)
            nodes = [Decider(settings, monotonic_ns=ManualClock().monotonic_ns) for _ in range(2)]
            for node in nodes:
                node.shared = PgLimiter(store).take
            try:
                results = [await nodes[i % 2].decide("grp_a", REQUEST) for i in range(6)]
            finally:
                for node in nodes:
                    await node.aclose()
            assert ["error" in r for r in results] == [False] * 3 + [True] * 3  # 3 for the group, both nodes
            assert {r["error"]["code"] for r in results[3:]} == {"rate_limited"}
            assert len(fake.seen) == 3

        webs = [WebClient(WebSettings(), monotonic_ns=ManualClock().monotonic_ns) for _ in range(2)]
        for web in webs:
            web.shared = PgLimiter(store).take
        # a blocked target: the bucket is charged (valid arguments) yet nothing is sent anywhere. web:<loop> is
        # 60 refilled at 1/s on the database clock: two nodes with their own buckets would admit all 122
        start = time.monotonic()
        codes = [(await webs[i % 2].request({"url": "http://10.0.0.1/"}, loop_id="lp_x"))["error"]["code"]
                 for i in range(122)]
        elapsed = time.monotonic() - start
        admitted = codes.count("blocked_destination")
        assert codes[:60] == ["blocked_destination"] * 60 and "rate_limited" in codes
        assert admitted <= 60 + int(elapsed) + 1
    finally:
        await store.close()


async def test_a_failing_shared_limiter_fails_closed(harness_runner: Any) -> None:
    async def broken(bucket: str, capacity: float, refill: float) -> float | None:
        raise ConnectionError("database gone")

    with serving("jev") as fake:
        d = Decider(DecideSettings(provider="jev", endpoint=fake.url, api_key="k"),
                    monotonic_ns=ManualClock().monotonic_ns)
        d.shared = broken
        try:
            assert (await d.decide("g", REQUEST))["error"]["code"] == "unavailable"
        finally:
            await d.aclose()
        assert fake.seen == []
    web = WebClient(WebSettings(), monotonic_ns=ManualClock().monotonic_ns)
    web.shared = broken
    assert (await web.request({"url": "http://example.com/"}, loop_id="lp"))["error"]["code"] == "rate_limited"
    assert web.connects == 0


async def test_a_cluster_node_hands_the_shared_web_bucket_to_its_client_when_it_makes_it(
    harness_runner: Any, pg_schema: str, tmp_path: Any,
) -> None:
    """issue 16 (a restart at N = 10,000): a PostgreSQL node's start does not make its web client (httpcore's
    imports and a TLS context, ~0.1–0.3 s of a start) only to give it the shared bucket; the client made later
    takes the bucket all the same."""
    require_pg()
    from wakeful.harness.config import Config
    from wakeful.harness.embed import Harness

    h = Harness(Config(data_dir=tmp_path / "node", store_url=pg_url_with_schema(pg_schema)), sweeps=False)
    await h.start()
    try:
        assert h.node.dispatch._web is None  # previously: made by the start
        assert h.node.dispatch.web_shared is not None
        assert h.node.dispatch.web.shared is h.node.dispatch.web_shared
    finally:
        await h.stop()
