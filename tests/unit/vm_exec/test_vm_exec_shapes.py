"""The shape cache (vm.md §6.4), Program/Instance caching and per-instance cost (vm.md §1, §10)."""

from __future__ import annotations

import linecache
from typing import Any

import pytest
from vmexec_kit import Env, build, run

from wakeful.vm import BASE, Program, load, shape_stats
from wakeful.vm import translate as translate_mod
from wakeful.vm.asm import Func, elf
from wakeful.vm.shapes import Shape, ShapeCache, shape_key

TEMPLATE = """
r0 = {a}
r0 += {b}
r1 = 0x{c:x} ll
r0 ^= r1
if r0 > 0x{d:x} goto big
*(u32 *)(r10 - 4) = {e}
r2 = *(u32 *)(r10 - 4)
r0 += r2
exit
big:
r0 <<= {f}
exit
"""


def variant(seed: int, **override: int) -> str:
    values = {"a": seed, "b": -seed, "c": seed * 0x10001, "d": seed * 7, "e": seed + 3, "f": seed % 63}
    values.update(override)
    return TEMPLATE.format(**values)


def test_programs_differing_only_in_lifted_constants_share_one_shape() -> None:
    before = shape_stats()
    keys, results = set(), []
    for seed in range(1, 6):
        program = build([("main", variant(seed + 1000))], engine="translate")
        keys.add(program.shape_key)
        results.append(run(program).r0)
        oracle = run(build([("main", variant(seed + 1000))], engine="interp")).r0
        assert results[-1] == oracle
    after = shape_stats()
    assert len(keys) == 1
    assert after["translated"] - before["translated"] <= 1
    assert after["hits"] - before["hits"] >= 4
    assert len(set(results)) == 5  # each program still sees its own constants


@pytest.mark.parametrize(("line", "other"), [
    ("r0 /= 3", "r0 /= 5"),  # DIV/MOD immediates stay in the shape (zero and -1 decided at generation)
    ("r0 s%= -1", "r0 s%= 2"),
    ("r0 = be16 r0", "r0 = be32 r0"),  # END widths
    ("r0 += r1", "r0 += r2"),  # registers
    ("*(u32 *)(r10 - 4) = 1", "*(u32 *)(r10 - 8) = 1"),  # offsets
])
def test_shape_includes_what_translation_depends_on(line: str, other: str) -> None:
    a = build([("main", f"r0 = 7\n{line}\nexit")], engine="translate")
    b = build([("main", f"r0 = 7\n{other}\nexit")], engine="translate")
    assert a.shape_key != b.shape_key


def test_shape_hit_does_no_code_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    build([("main", variant(77))], engine="translate")  # make sure the shape exists

    def no_compile(*args: Any, **kw: Any) -> Any:
        raise AssertionError("compile() on a shape hit")

    def no_translate(*args: Any, **kw: Any) -> Any:
        raise AssertionError("translate() on a shape hit")

    monkeypatch.setattr(translate_mod, "compile", no_compile, raising=False)
    monkeypatch.setattr("wakeful.vm.program.translate", no_translate)
    program = build([("main", variant(78))], engine="translate")
    assert run(program).r0 == run(build([("main", variant(78))], engine="interp")).r0


def test_data_variants_share_the_shape_and_see_their_own_data() -> None:
    text = "r1 = data + 0 ll\nr0 = *(u64 *)(r1 + 0)\nexit"
    programs = [build([("main", text)], engine="translate", data=n.to_bytes(8, "little")) for n in (5, 6, 7)]
    assert len({p.shape_key for p in programs}) == 1
    assert [run(p).r0 for p in programs] == [5, 6, 7]


def test_load_caches_programs_by_bytes_and_options() -> None:
    data = elf([Func("main", "r0 = 3\nexit")])
    a, b = load(data), load(data)
    assert a is b
    assert load(data, engine="interp") is not a
    assert load(data, slice_insns=100) is not a
    env = Env()
    i1, i2 = a.instantiate(env), a.instantiate(env)
    assert i1.mem is not i2.mem and i1.gen is not i2.gen


def test_translation_is_registered_with_linecache_and_dumpable() -> None:
    program = build([("main", variant(5))], engine="translate")
    source = program.translation()
    assert "def shape(" in source and "main+0: r0 = " in source
    shape = program._shape
    assert shape is not None and shape.filename.startswith("<wakeful:")
    assert linecache.getline(shape.filename, 2).strip().startswith("def shape(")
    # the registered source is the listing without its comments, line for line
    listing = source.splitlines()
    for n, line in enumerate(linecache.getlines(shape.filename), 1):
        assert listing[n - 1].startswith(line.rstrip("\n")) and line.strip()
    # the interpreter engine can still show the translation
    assert build([("main", variant(5))], engine="interp").translation() == source


def test_shape_key_is_computed_from_linked_code() -> None:
    program = build([("main", variant(9))], engine="translate")
    key, recipe = shape_key(program.code)
    assert key == program.shape_key and recipe


def test_shape_cache_is_an_lru() -> None:
    cache = ShapeCache(capacity=2)

    def make(name: str) -> Shape:
        linecache.cache[f"<wakeful:{name}>"] = (1, None, ["x\n"], f"<wakeful:{name}>")
        return Shape(name, f"<wakeful:{name}>", lambda: None, [], True, 0)

    a = cache.get("a", lambda: make("a"))
    cache.get("b", lambda: make("b"))
    assert cache.get("a", lambda: make("a2")) is a  # a is now the most recent
    cache.get("c", lambda: make("c"))  # evicts b
    assert "b" not in cache and "a" in cache and "c" in cache
    assert "<wakeful:b>" not in linecache.cache
    assert cache.stats() == {"translated": 3, "hits": 1, "misses": 3, "fallbacks": 0}


def test_instance_memory_is_image_plus_zero_stack() -> None:
    program = build([("main", "*(u64 *)(r10 - 16) = 1\nexit")], engine="translate", rodata=b"ro", data=b"dd")
    inst = program.instantiate(Env())
    layout = program.layout
    assert isinstance(inst.mem, bytearray) and len(inst.mem) == layout.size
    assert bytes(inst.mem[: len(layout.image)]) == layout.image
    assert not any(inst.mem[len(layout.image) :])
    assert layout.end == BASE + layout.size


def test_program_rejects_bad_options() -> None:
    from wakeful.errors import InvalidParams

    data = elf([Func("main", "r0 = 3\nexit")])
    with pytest.raises(InvalidParams):
        load(data, engine="jit")
    with pytest.raises(InvalidParams):
        load(data, slice_insns=0)
    with pytest.raises(InvalidParams):
        load(data, max_instructions=70000)
    with pytest.raises(InvalidParams):
        load("not bytes")  # type: ignore[arg-type]
    assert isinstance(load(data, max_elf_bytes=1 << 20), Program)
    assert load(bytearray(data)) is load(memoryview(data))


def _suspended_bytes(constants: int, copies: int = 50) -> float:
    """Traced bytes per instance of a program with ``constants`` lifted immediates, each suspended at its
    first ``sf_yield`` (the generator and its frame live, as a waiting object's are)."""
    import gc
    import tracemalloc

    body = "".join(f"r0 += {n + 1000}\n" for n in range(constants))
    program = build([("main", body + "call sf_yield\nexit")], engine="translate")
    assert program.fallback is None
    env = Env()
    program.instantiate(env).gen.close()  # the program's shared parts (its globals) are made once, not per instance
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        kept = []
        for _ in range(copies):
            inst = program.instantiate(env)
            assert inst.gen.send(None)[0] == "sf_yield"
            kept.append(inst)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return grown / copies


def test_lifted_constants_cost_a_suspended_instance_nothing() -> None:
    """vm.md §10: an instance's closure and its live generator frames hold no slot per lifted constant (the
    constants are the shape's globals, one dict per constant vector): 300 constants more cost an instance
    under 100 bytes (as cells they cost ~16 bytes each, ~4.8 KB)."""
    few, many = _suspended_bytes(4), _suspended_bytes(304)
    assert many - few < 100, (few, many)


class _MethodEnv:
    """A GuestEnv whose sync helpers are its methods, as the runtime's GuestContext's are."""

    def __init__(self, now: int) -> None:
        self.debt = self.retired = self.fuel_left = 0
        self.now = now

    def helper(self, name: str) -> Any:
        return getattr(self, name)

    def sf_now_mono_ms(self) -> int:
        self.debt += 8
        return self.now


def test_instances_share_their_helper_functions_and_each_calls_its_own_env() -> None:
    """vm.md §10: an instance binds no helper of its own: the translated code calls the env class's function
    with the instance's env (one globals dict per program and env class), and each answer is its own env's."""
    program = build([("main", "call sf_now_mono_ms\nr6 = r0\ncall sf_yield\nr0 = r6\nexit")], engine="translate")
    envs = [_MethodEnv(now) for now in (11, 22)]
    insts = [program.instantiate(env) for env in envs]
    for inst in insts:
        assert inst.gen.send(None)[0] == "sf_yield"
    frames = [inst.gen.gi_yieldfrom.gi_frame for inst in insts]  # the translated entry, suspended
    assert frames[0].f_globals is frames[1].f_globals
    assert frames[0].f_globals["h0"] is _MethodEnv.sf_now_mono_ms
    assert all("H" not in frame.f_locals and "h0" not in frame.f_locals for frame in frames)
    results = []
    for inst in insts:
        try:
            inst.gen.send((0, 100))
        except StopIteration as stop:
            results.append(stop.value)
    assert results == [11, 22]
    assert [env.debt for env in envs] == [0, 0]  # each helper's charge went to its own env and was collected
