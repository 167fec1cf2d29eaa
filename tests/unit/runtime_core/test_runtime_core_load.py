"""Load validation, ids, object limit, list, stats, inspect and verify (runtime-protocol.md §6.3, §6.8,
§6.11, §13)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import rtcore_guests as g

from wakeful.errors import BuildUnavailable, Busy, InvalidObject, InvalidParams, ObjectNotFound
from wakeful.runtime import ManualClock


@pytest.fixture(scope="module")
def exit_elf(compile_c: Any) -> bytes:
    return bytes(compile_c(g.EXIT_CODE))


def test_load_param_checks(exit_elf: bytes) -> None:
    rt = g.make_runtime()
    with pytest.raises(InvalidParams, match="config exceeds JSON limits"):
        rt.load_nowait(exit_elf, config={"a": "x" * 16_400})
    with pytest.raises(InvalidParams, match="config"):
        rt.load_nowait(exit_elf, config={"nan": float("nan")})
    bad_caps: list[Any] = [
        [{"name": "c"}] * 1025,
        [{"name": ""}],
        [{"name": "n" * 129}],
        [{"name": "c", "extra": 1}],
        [{"name": "c", "arguments": [1]}],
        [{"name": "c", "arguments": {"a": "x" * 16_400}}],
        [{"arguments": {}}],
        "cap",
    ]
    for caps in bad_caps:
        with pytest.raises(InvalidParams, match="invalid capabilities"):
            rt.load_nowait(exit_elf, capabilities=caps)
    with pytest.raises(InvalidParams, match="cpu_limit_ms"):
        rt.load_nowait(exit_elf, cpu_limit_ms=0)
    with pytest.raises(InvalidParams, match="label"):
        rt.load_nowait(exit_elf, label="l" * 129)
    with pytest.raises(InvalidParams):
        rt.load_nowait("not bytes")  # type: ignore[arg-type]
    ok = rt.load_nowait(exit_elf, capabilities=[{"name": "c"}] * 1024 + [], config={"k": [1, 2]},
                        cpu_limit_ms=86_400_000, label="l" * 128)
    assert ok.state == "loaded" and ok.object_id == "o1"  # param failures take no id


def test_ids_advance_after_loader_failures(exit_elf: bytes) -> None:
    rt = g.make_runtime()
    assert rt.load_nowait(exit_elf).object_id == "o1"
    with pytest.raises(InvalidObject):
        rt.load_nowait(b"\x7fELF" + b"\0" * 100)
    with pytest.raises(InvalidParams, match="spinfoam.main"):
        rt.load_nowait(exit_elf.replace(b"spinfoam.main", b"spinfoam.mair"))
    assert rt.load_nowait(exit_elf).object_id == "o4"


def test_object_limit(exit_elf: bytes) -> None:
    rt = g.make_runtime(max_objects=3)
    ids = [rt.load_nowait(exit_elf).object_id for _ in range(3)]
    with pytest.raises(Busy, match="object limit"):
        rt.load_nowait(exit_elf)
    rt.start_nowait(ids[0])
    rt.run_batch()
    assert rt.get_nowait(ids[0]).state == "exited"
    with pytest.raises(Busy):  # terminal but not unloaded still counts
        rt.load_nowait(exit_elf)
    rt.unload_nowait(ids[0])
    assert rt.load_nowait(exit_elf).object_id == "o4"  # the limit is checked before an id is taken


def test_list_string_order_and_paging(exit_elf: bytes) -> None:
    rt = g.make_runtime()
    for _ in range(12):
        rt.load_nowait(exit_elf)
    page, nxt = rt.list_nowait(limit=5)
    assert [s.object_id for s in page] == ["o1", "o10", "o11", "o12", "o2"] and nxt == "o2"
    page, nxt = rt.list_nowait(after=nxt, limit=5)
    assert [s.object_id for s in page] == ["o3", "o4", "o5", "o6", "o7"] and nxt == "o7"
    page, nxt = rt.list_nowait(after=nxt)
    assert [s.object_id for s in page] == ["o8", "o9"] and nxt is None
    for bad in (0, 257, True, "5"):
        with pytest.raises(InvalidParams):
            rt.list_nowait(limit=bad)  # type: ignore[arg-type]


def test_unknown_ids(exit_elf: bytes) -> None:
    rt = g.make_runtime()
    for call in (rt.get_nowait, rt.start_nowait, rt.stop_nowait, rt.inspect_nowait):
        with pytest.raises(ObjectNotFound):
            call("o1")
    rt.unload_nowait("o1")


def test_stats_inspect_and_verify(exit_elf: bytes) -> None:
    clock = ManualClock()
    rt = g.make_runtime(clock)
    oid = rt.load_nowait(exit_elf, label="mine").object_id
    info = rt.inspect_nowait(oid)
    assert info["label"] == "mine" and info["program"]["sha256"] == info["sha256"]
    assert info["memory"]["stack_bytes"] > 0 and info["cpu"]["slices"] == 0
    rt.start_nowait(oid)
    rt.run_batch()
    info = rt.inspect_nowait(oid)
    assert info["state"] == "exited" and info["cpu"]["slices"] == 1 and info["times"]["ended_ms"] is not None
    clock.advance(ms=1500)
    stats = rt.stats_nowait()
    assert stats["objects"] == 1 and stats["execution_threads"] == 1 and stats["uptime_ms"] == 1500
    assert stats["host"] == {"pending_host_calls": 0, "ignored_host_responses": 0}
    report = rt.verify_nowait(exit_elf)
    assert report.sha256 == info["sha256"]
    assert info["program"]["instructions"] == report.instructions
    assert info["program"]["helpers"] == sorted(report.helpers) and "sf_config" in report.helpers
    with pytest.raises(InvalidObject):
        rt.verify_nowait(b"junk")


def test_compile_validates_the_bundle_before_availability() -> None:
    rt = g.make_runtime()  # builds are off by default

    async def main() -> None:
        with pytest.raises(InvalidParams):
            await rt.compile({"sdk_version": 2, "entry": "main.c", "files": {"main.c": "int x;"}})
        with pytest.raises(BuildUnavailable):
            await rt.compile({"sdk_version": 1, "entry": "main.c", "files": {"main.c": "int x;"}})

    asyncio.run(main())


def test_close_stops_everything(exit_elf: bytes, compile_c: Any) -> None:
    spin = compile_c(g.SPIN)

    async def main() -> None:
        rt = g.make_runtime()
        a = g.load_started(rt, spin)
        b = rt.load_nowait(exit_elf).object_id
        rt.run_batch()
        await rt.close()
        assert rt.get_nowait(a).state == "stopped" and rt.get_nowait(b).state == "stopped"

    asyncio.run(main())


def test_memory_hygiene_after_a_load_burst(exit_elf: bytes) -> None:
    """vm.md §7: ≥ 1,000 loads then 100 ms (scheduler clock) without a load → gc.collect + gc.freeze once."""
    import gc

    clock = ManualClock()
    rt = g.make_runtime(clock, max_objects=2_000)
    try:
        for _ in range(1_000):
            rt.load_nowait(exit_elf)
        clock.advance(ms=60)
        rt.load_nowait(exit_elf)  # the burst goes on: the quiet period restarts
        clock.advance(ms=60)
        rt.run_batch()
        assert rt.scheduler.gc_freezes == 0
        clock.advance(ms=40)
        rt.run_batch()
        assert rt.scheduler.gc_freezes == 1 and gc.get_freeze_count() > 0
        # issue 16: and the C heap's free pages go back to the system with it (glibc; this suite runs on Linux)
        assert rt.scheduler.heap_trims == 1
        clock.advance(ms=1_000)
        rt.run_batch()
        assert rt.scheduler.gc_freezes == 1 and rt.scheduler.heap_trims == 1  # once per burst
    finally:
        gc.unfreeze()


class _Cycle:
    """Garbage only the cyclic collector frees."""

    def __init__(self) -> None:
        self.me = self


def test_a_load_burst_frees_its_young_cyclic_garbage_before_each_interim_freeze(exit_elf: bytes) -> None:
    """issue 16: each 1,000 loads of a burst are frozen (vm.md §10 load path); the young generation is collected
    first, so the cyclic garbage of those loads is freed then, not frozen among the loaded guests until the
    burst's hygiene (with a node's raised young threshold, serve_cmd.NODE_GC_YOUNG, up to 10,000 containers of it
    each time: at N = 10,000 created, PSS per Loop 5,9xx → 6,1xx–6,5xx B)."""
    import gc
    import weakref

    clock = ManualClock()
    rt = g.make_runtime(clock, max_objects=2_000)
    thresholds = gc.get_threshold()
    gc.set_threshold(1_000_000, *thresholds[1:])  # no automatic young collection during the test (a node's is 10,000)
    alive: weakref.WeakSet[_Cycle] = weakref.WeakSet()
    try:
        for _ in range(999):
            rt.load_nowait(exit_elf)
        for _ in range(500):
            alive.add(_Cycle())
        assert len(alive) == 500
        rt.load_nowait(exit_elf)  # the 1,000th load: the interim freeze
        assert gc.get_freeze_count() > 0
        assert len(alive) == 0  # previously all 500 frozen with the guests
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def test_memory_hygiene_collects_once_after_a_held_burst(exit_elf: bytes) -> None:
    """issue 16: a node loading its Loops batch by batch waits for its store between batches; with the burst held
    (``hold_hygiene``) those pauses are not the quiet that ends it — at N = 10,000 each ended burst cost a
    collection of the whole heap, ten of them — and the one collection comes 100 ms after the release."""
    import gc

    clock = ManualClock()
    rt = g.make_runtime(clock, max_objects=3_000)
    try:
        rt.scheduler.hold_hygiene()
        for _ in range(2):  # two batches of 1,000 loads, a long store wait after each
            for _ in range(1_000):
                rt.load_nowait(exit_elf)
            clock.advance(ms=500)
            rt.run_batch()
            assert rt.scheduler.gc_freezes == 0
        rt.scheduler.release_hygiene()
        clock.advance(ms=60)
        rt.run_batch()
        assert rt.scheduler.gc_freezes == 0  # the quiet counts from the release
        clock.advance(ms=60)
        rt.run_batch()
        assert rt.scheduler.gc_freezes == 1
        clock.advance(ms=1_000)
        rt.run_batch()
        assert rt.scheduler.gc_freezes == 1
    finally:
        gc.unfreeze()


def test_a_held_burst_of_many_loads_runs_without_the_collector(exit_elf: bytes) -> None:
    """issue 16 (a restart at N = 10,000: ~480 young, ~36 middle and one full automatic collection, ~0.2 s of the
    load's ~1.1 s of CPU): a held burst announced with at least ``HYGIENE_LOADS`` loads turns the collector off
    until its release, and the hygiene's one collection after it still runs; a smaller burst leaves it on, and a
    collector the embedder had turned off stays off."""
    import gc

    from wakeful.runtime.scheduler import HYGIENE_LOADS

    collections: list[int] = []

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    clock = ManualClock()
    rt = g.make_runtime(clock, max_objects=3_000)
    gc.callbacks.append(counted)
    try:
        rt.scheduler.hold_hygiene(10)  # a small burst: the collector stays on
        assert gc.isenabled()
        rt.scheduler.release_hygiene(10)
        rt.scheduler.hold_hygiene(2 * HYGIENE_LOADS)
        assert not gc.isenabled()
        collections.clear()
        for _ in range(2 * HYGIENE_LOADS):
            rt.load_nowait(exit_elf)
        rt.run_batch()
        assert collections == []  # previously: young and middle collections during the loads
        rt.scheduler.release_hygiene(2 * HYGIENE_LOADS)
        assert gc.isenabled()
        clock.advance(ms=120)
        rt.run_batch()
        assert rt.scheduler.gc_freezes == 1 and 2 in collections  # the one full collection after the burst
        gc.disable()  # the embedder's own choice survives a held burst
        rt.scheduler.hold_hygiene(HYGIENE_LOADS)
        rt.scheduler.release_hygiene(HYGIENE_LOADS)
        assert not gc.isenabled()
    finally:
        gc.callbacks.remove(counted)
        gc.enable()
        gc.unfreeze()


def test_memory_hygiene_waits_for_the_started_guests(exit_elf: bytes) -> None:
    """vm.md §7 "so idle instances are not rescanned": at the quiet point the burst's started guests have not
    run yet, so the collect + freeze waits (10 ms steps) until the run queue has drained."""
    import gc

    clock = ManualClock()
    rt = g.make_runtime(clock, max_objects=2_000)
    try:
        ids = [rt.load_nowait(exit_elf).object_id for _ in range(1_000)]
        for object_id in ids:
            rt.start_nowait(object_id)
        clock.advance(ms=100)
        rt.run_batch()  # the hygiene timer fires first: 1,000 first slices are still queued
        assert rt.scheduler.gc_freezes == 0
        while rt.scheduler.has_work():
            rt.run_batch()
        assert all(rt.get_nowait(i).state == "exited" for i in ids)
        clock.advance(ms=10)
        rt.run_batch()
        assert rt.scheduler.gc_freezes == 1
    finally:
        gc.unfreeze()


def test_memory_hygiene_waits_at_most_one_second(exit_elf: bytes, compile_c: Any) -> None:
    """Guests that keep the run queue busy (200 spinners, preempted and throttled in turn) delay the
    hygiene by at most 1 s past the quiet point."""
    import gc

    clock = ManualClock()
    rt = g.make_runtime(clock, max_objects=2_000, slice_insns=256)
    try:
        for _ in range(1_000):
            rt.load_nowait(exit_elf)
        spin = bytes(compile_c(g.SPIN))
        for _ in range(200):
            g.load_started(rt, spin)  # loads too: the quiet point is 100 ms after this one
        for step in range(109):  # 1.09 s in 10 ms steps: something is runnable at every hygiene retry
            clock.advance(ms=10)
            rt.run_batch()
            assert rt.scheduler.has_work(), step
        assert rt.scheduler.gc_freezes == 0
        clock.advance(ms=20)
        rt.run_batch()
        assert rt.scheduler.gc_freezes == 1
    finally:
        gc.unfreeze()


def test_loads_of_one_elf_object_make_its_program_once(exit_elf: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 16: a node's start loads thousands of objects from the one ``bytes`` it read and verified; the
    runtime makes (and hashes, for the program cache's key) the program once for them, not once per object.
    Equal bytes in another object still load (the VM's cache by digest), and the objects stay apart."""
    import wakeful.vm

    made: list[int] = []
    real = wakeful.vm.load

    def counted(data: bytes, **options: Any) -> Any:
        made.append(len(data))
        return real(data, **options)

    monkeypatch.setattr(wakeful.vm, "load", counted)
    rt = g.make_runtime()
    ids = [rt.load_nowait(exit_elf, config={"n": n}).object_id for n in range(10)]
    assert len(made) == 1, made
    copy = bytes(bytearray(exit_elf))
    assert rt.load_nowait(copy).state == "loaded" and len(made) == 2  # another object: hashed, same program
    objects = [rt._objects[i] for i in ids]
    assert len({id(o.inst.mem) for o in objects}) == 10 and len({id(o.ctx) for o in objects}) == 10
    assert len({o.program for o in objects}) == 1


def test_a_parsed_capability_policy_is_loaded_as_it_is(exit_elf: bytes) -> None:
    """issue 16: a node parses the capability list its Loops share once and loads every object with that policy."""
    from wakeful.runtime.policy import parse_capabilities

    policy = parse_capabilities([{"name": "c", "arguments": {"k": 1}}, {"name": "d"}])
    rt = g.make_runtime()
    one, two = (rt.load_nowait(exit_elf, capabilities=policy).object_id for _ in range(2))
    assert rt._objects[one].capabilities is policy and rt._objects[two].capabilities is policy
    assert policy.allows("c", {"k": 1}) and not policy.allows("c", {"k": 2}) and policy.allows("d", None)


def test_objects_of_one_program_bind_their_helpers_once(compile_c: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 16 (a restart at N = 10,000): the objects of one program share its translation and the helper set
    bound into it; the helpers are looked up once for the env class (``GuestContext``'s own methods), not once per
    object — 10 objects cost the lookups of one. The objects still run apart (each its own memory and config)."""
    from wakeful.runtime.helpers import GuestContext

    # a program of its own (the VM keeps programs by digest across tests): its first object binds the helpers
    exit_elf = bytes(compile_c(g.EXIT_CODE.replace('cfg("code", 7)', 'cfg("code", 1601)')))

    asked: list[str] = []
    real = GuestContext.helper

    def counted(self: GuestContext, name: str) -> Any:
        asked.append(name)
        return real(self, name)

    monkeypatch.setattr(GuestContext, "helper", counted)
    rt = g.make_runtime()
    first = rt.load_nowait(exit_elf, config={"code": 1}).object_id
    one = len(asked)
    assert one > 0, "the guest calls synchronous helpers"
    ids = [first, *(rt.load_nowait(exit_elf, config={"code": n}).object_id for n in range(2, 11))]
    assert len(asked) == one, f"1 object: {one} helper lookups, 10 objects: {len(asked)}"
    for object_id in ids:
        rt.start_nowait(object_id)
    rt.run_batch()
    assert [rt.get_nowait(i).outcome for i in ids] == [{"exit_code": n} for n in range(1, 11)]


def test_load_many_answers_each_item_as_load_would(exit_elf: bytes) -> None:
    """``load_many`` runs §6.3 for each item in order: the same ids, the same refusals (a config over the limits,
    a label too long, the object limit), and a program the loader refuses refuses every item, ids advancing."""
    items: list[tuple[Any, str | None]] = [({"code": 1}, "a"), ({"a": "x" * 16_400}, "b"), ({"code": 2}, "l" * 129),
                                            ({"code": 3}, None), ({"code": 4}, "e"), ({"code": 5}, "f")]
    one, many = g.make_runtime(max_objects=3), g.make_runtime(max_objects=3)
    expected: list[Any] = []
    for config, label in items:
        try:
            expected.append(one.load_nowait(exit_elf, config=config, label=label).object_id)
        except (InvalidParams, Busy) as exc:
            expected.append((type(exc), exc.message))
    got = many.load_many_nowait(exit_elf, items)
    assert [o if isinstance(o, str) else (type(o), o.message) for o in got] == expected
    assert expected[:5] == ["o1", (InvalidParams, expected[1][1]), (InvalidParams, expected[2][1]), "o2", "o3"]
    assert [many.get_nowait(i).state for i in ("o1", "o2", "o3")] == ["loaded"] * 3
    assert many._objects["o3"].label == "e" and many._objects["o1"].config.value == {"code": 1}

    rt = g.make_runtime()
    refused = rt.load_many_nowait(b"\x7fELF" + b"\0" * 100, [({}, "a"), ({}, "b")])
    assert all(isinstance(o, InvalidObject) for o in refused) and len(refused) == 2
    assert rt.load_many_nowait(exit_elf, [({}, "c")]) == ["o3"]
    with pytest.raises(InvalidParams, match="invalid capabilities"):
        rt.load_many_nowait(exit_elf, [({}, "d")], capabilities="cap")


def test_state_of_answers_the_status_state_and_wait(exit_elf: bytes, compile_c: Any) -> None:
    """``state_of`` (a listing's per-Loop read, issue 16) gives what ``get`` would give, without the status."""
    rt = g.make_runtime()
    waiting = g.load_started(rt, bytes(compile_c(g.EVENT_SINK)))
    loaded = rt.load_nowait(exit_elf).object_id
    exited = g.load_started(rt, exit_elf)
    rt.run_batch()
    for object_id in (waiting, loaded, exited):
        status = rt.get_nowait(object_id)
        assert rt.state_of(object_id) == (status.state, status.wait)
    assert [rt.state_of(i)[0] for i in (waiting, loaded, exited)] == ["running", "loaded", "exited"]
    assert rt.state_of(waiting)[1] != "none"
    with pytest.raises(ObjectNotFound):
        rt.state_of("o99")
